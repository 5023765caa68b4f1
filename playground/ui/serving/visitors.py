"""Who a visitor is: the one answer every per-visitor limit uses (:func:`visitor_of`).

- Reached directly, a visitor is the socket's address. ``X-Forwarded-For`` is ignored: anyone can
  write it, and a client that forged a new value on each request would count as a new visitor
  each time (the server Gradio starts, uvicorn, trusts that header from loopback by default:
  :func:`distrust_forwarded_headers` turns that off, so the ASGI ``client`` is always the socket).
- Behind a trusted proxy, a visitor is the address that proxy appended: the **last**
  ``X-Forwarded-For`` entry. The entries before it are whatever the visitor sent, so they are
  never read. A proxy is trusted on a Space (``SPACE_ID`` set: the app is reached only through
  Hugging Face's proxy) and wherever ``PLAYGROUND_TRUSTED_PROXIES`` names it: addresses or
  networks separated by commas (``10.0.0.0/8,127.0.0.1``), or ``*`` for every peer. Where the
  visitor passes through more than one proxy (a CDN, then the host's balancer), each appending
  an entry, ``PLAYGROUND_PROXY_HOPS=n`` reads the n-th entry from the end instead (default 1).

Limits below HTTP (connections, :mod:`playground.ui.serving.connections`) see no headers: they ask
:func:`is_trusted_proxy` and do not count a proxy's connections as one visitor's.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TRUSTED_PROXIES_ENV", "Proxies", "trusted_proxies", "is_trusted_proxy", "visitor_of",
           "distrust_forwarded_headers"]

log = logging.getLogger("playground")

TRUSTED_PROXIES_ENV = "PLAYGROUND_TRUSTED_PROXIES"
PROXY_HOPS_ENV = "PLAYGROUND_PROXY_HOPS"
UNKNOWN = "?"
_MAX_HEADER = 4096  # a proxy's header is a few addresses; past this it is not read


@dataclass(frozen=True)
class Proxies:
    """The peers whose ``X-Forwarded-For`` is believed (its last entry only)."""

    every: bool = False
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    hops: int = 1  # proxies appending an entry each: the visitor's is the hops-th from the end

    def trusts(self, address: str | None) -> bool:
        if not address:
            return False
        if self.every:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.networks)

    @property
    def any(self) -> bool:
        return self.every or bool(self.networks)


def parse_proxies(raw: str) -> Proxies:
    """``PLAYGROUND_TRUSTED_PROXIES``'s value as :class:`Proxies`; an entry that is not an
    address or network is left out, said on the console."""
    raw = raw.strip()
    if raw == "*":
        return Proxies(every=True)
    networks = []
    for item in filter(None, (part.strip() for part in raw.split(","))):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            log.warning("%s: %r is not an address or network (e.g. 10.0.0.0/8): left out", TRUSTED_PROXIES_ENV, item)
    return Proxies(networks=tuple(networks))


def trusted_proxies(environ: Mapping[str, str] = os.environ) -> Proxies:
    """The proxies trusted here: ``PLAYGROUND_TRUSTED_PROXIES`` when set, else every peer on a
    Space (``SPACE_ID`` set), else none."""
    raw = environ.get(TRUSTED_PROXIES_ENV, "")
    proxies = parse_proxies(raw) if raw.strip() else Proxies(every=bool(environ.get("SPACE_ID", "").strip()))
    hops = environ.get(PROXY_HOPS_ENV, "").strip()
    if hops:
        if hops.isdigit() and 1 <= int(hops) <= 16:
            return Proxies(proxies.every, proxies.networks, int(hops))
        log.warning("%s=%r is not a whole number from 1 to 16: using 1", PROXY_HOPS_ENV, hops)
    return proxies


PROXIES = trusted_proxies()


def is_trusted_proxy(address: str | None, proxies: Proxies | None = None) -> bool:
    """Whether connections from ``address`` are a trusted proxy's (many visitors, not one)."""
    return (PROXIES if proxies is None else proxies).trusts(address)


def _canonical(address: str) -> str | None:
    """``address`` as one IP address's text ("1.2.3.4", "2001:db8::1"), a port or brackets
    dropped; None when it is not an address."""
    text = address.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _forwarded_for(headers: Iterable[tuple[bytes, bytes]]) -> str:
    values = [value for key, value in headers if key.lower() == b"x-forwarded-for"]
    return b",".join(values)[-_MAX_HEADER:].decode("latin-1")


def _scope_of(obj: Any, depth: int = 0) -> Mapping | None:
    """The ASGI scope of a scope, a Starlette/FastAPI request, or a ``gr.Request`` (whose own
    attribute lookup is not used: it turns values into JSON objects); None when there is none."""
    if isinstance(obj, Mapping):
        return obj
    attrs = getattr(obj, "__dict__", None) or {}
    if isinstance(attrs.get("scope"), Mapping):
        return attrs["scope"]
    inner = attrs.get("request")
    if inner is not None and inner is not obj and depth < 3:
        return _scope_of(inner, depth + 1)
    return None


def visitor_of(scope_or_request: Any, proxies: Proxies | None = None) -> str:
    """Who sent a request (an ASGI scope, a Starlette/FastAPI request, or a handler's
    ``gr.Request``): the
    socket's address, or behind a trusted proxy the last ``X-Forwarded-For`` entry (the
    ``hops``-th from the end; the proxy's own address when that entry is missing or not an
    address). "?" when unknown."""
    scope = _scope_of(scope_or_request)
    if scope is None:
        return UNKNOWN
    client = scope.get("client")
    peer = str(client[0]) if client else None
    if not peer:
        return UNKNOWN
    proxies = PROXIES if proxies is None else proxies
    if not proxies.trusts(peer):
        return peer
    entries = [e for e in _forwarded_for(scope.get("headers") or ()).split(",") if e.strip()]
    entry = _canonical(entries[-proxies.hops]) if len(entries) >= proxies.hops else None
    return entry or peer


def distrust_forwarded_headers(environ: Any = os.environ) -> None:
    """Make uvicorn leave the ASGI ``client`` as the socket's address: by default it replaces it
    with an ``X-Forwarded-For`` entry on connections from loopback (``FORWARDED_ALLOW_IPS``,
    read when Gradio makes the server's config), which any local client can forge. Call before
    ``launch``; the proxies this app trusts are :data:`TRUSTED_PROXIES_ENV`'s."""
    if environ.get("FORWARDED_ALLOW_IPS"):
        log.warning("FORWARDED_ALLOW_IPS=%r is ignored: this app reads X-Forwarded-For itself (set %s)",
                    environ["FORWARDED_ALLOW_IPS"], TRUSTED_PROXIES_ENV)
    environ["FORWARDED_ALLOW_IPS"] = ""  # uvicorn then trusts no peer (an empty name matches none)
