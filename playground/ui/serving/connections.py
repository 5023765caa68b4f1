"""What one TCP connection may hold, below HTTP: the server Gradio starts (uvicorn, HTTP/1.1 by
h11) keeps an idle connection for ever until its first request, waits for ever for a request's
headers, and accepts connections until the process runs out of file descriptors (enough idle
ones take a launched app offline: every request times out, and the log grows; docs/app.md,
Limits). Here:

- a connection must send its request's headers within :data:`HEADER_TIMEOUT_S` of opening (or of
  its previous response, on a kept-alive connection), else it is closed; an idle kept-alive
  connection is closed after uvicorn's own 5 s;
- at most :data:`MAX_CONNECTIONS` connections are open at once, at most
  :data:`MAX_CONNECTIONS_PER_ADDRESS` from one client address (``PLAYGROUND_MAX_CONNECTIONS`` and
  ``PLAYGROUND_MAX_CONNECTIONS_PER_ADDRESS`` change them): past the address's cap a new
  connection is closed at once, before anything is read. A trusted proxy's address (the
  ``is_proxy`` of :func:`install`: playground.ui.serving.visitors, on a Space or where
  ``PLAYGROUND_TRUSTED_PROXIES`` names it) carries
  every visitor's connections, so it has no per-address cap: the per-visitor limits act on its
  requests instead;
- room for new visitors: as the total fills, a connection waiting for a request is closed sooner
  (:func:`idle_timeout_s`: from :data:`HEADER_TIMEOUT_S` at half full down to
  :data:`MIN_IDLE_TIMEOUT_S` when full), and at the total cap a new connection closes the one
  that has been idle longest instead of being turned away (:func:`decide`); when none is idle
  (streams held open, bodies sent a byte at a time), the oldest connection of the visitor
  holding the most gives way (:func:`busiest_oldest`); only when no visitor holds two is the
  newcomer refused. Many addresses each holding connections under their cap then cannot lock
  the rest out. A connection's visitor is its address, or on a trusted proxy's connection the
  visitor of its latest request (``visitor`` of :func:`install`: ``visitors.visitor_of``), so
  one visitor behind the proxy holding hundreds is the one that gives way;
- what a response still has to write on each connection can be read (:func:`write_backlog`:
  a result stream that is slowly going out is not one whose reader stopped);
- log lines are rate-limited: past :data:`LOG_BURST` lines of one kind in a minute the rest
  are counted and said in one line (:class:`RateLimitedLog`); a kind is a message's first line,
  so asyncio's "Task exception was never retrieved" (whose next line names each task) is one;
  the commonest of those, a result stream closed after its reader left, is not logged at all, only
  counted (:class:`LoopErrors`).

uvicorn has no setting for the first three (``limit_concurrency`` answers 503 only once a
request has been read, counting every client together). Its protocol class is the one place
where a connection is seen before its request: :class:`GuardedH11Protocol` extends the one
uvicorn uses, and :func:`install` puts it on the running server's config, which uvicorn reads
for every new connection. That reaches into uvicorn's internals (tested with
:data:`TESTED_UVICORN`), so :func:`install` checks the names it uses and, on any other
version, says so on the console and leaves the server as it is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...limits import HEADER_TIMEOUT_S, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_ADDRESS, MIN_IDLE_TIMEOUT_S
from ..gradio_internals import server_of

log = logging.getLogger("playground")

TESTED_UVICORN = "0.54.0"
LOG_BURST = 20  # lines of one kind per minute before they are only counted


def idle_timeout_s(total: int, limit: int) -> float:
    """How long a connection may wait for its next request's headers with ``total`` of at most
    ``limit`` connections open: :data:`HEADER_TIMEOUT_S` up to half full, then shorter in
    proportion, :data:`MIN_IDLE_TIMEOUT_S` when full."""
    fill = total / max(1, limit)
    if fill <= 0.5:
        return HEADER_TIMEOUT_S
    share = min(1.0, (fill - 0.5) / 0.5)
    return HEADER_TIMEOUT_S - share * (HEADER_TIMEOUT_S - MIN_IDLE_TIMEOUT_S)


def decide(total: int, from_address: int, limit: int, per_address: int | None, any_idle: bool, busiest: int = 0) -> str:
    """What a new connection meets: "admit", "evict" (admit it and close the idlest connection:
    the total is full), "make_room" (admit it and close the oldest connection of the visitor
    holding the most, ``busiest`` of them: the total is full and none is idle) or "refuse" (its
    address has ``per_address`` open already, None meaning no such cap; or the total is full,
    none is idle and no visitor holds more than one)."""
    if per_address is not None and from_address >= per_address:
        return "refuse"
    if total < limit:
        return "admit"
    if any_idle:
        return "evict"
    return "make_room" if busiest >= 2 else "refuse"


def busiest_oldest(opened: Iterable[tuple[Any, str | None]], counts: Mapping[str, int]) -> tuple[Any, int]:
    """Given the open connections ``(connection, visitor)`` oldest first (visitor None: not known
    yet) and how many each visitor holds: the oldest connection of the visitor holding the most
    (the earliest opened among visitors holding as many) and that many; ``(None, 0)`` when no
    visitor is known."""
    if not counts:
        return None, 0
    most = max(counts.values())
    return next(((c, most) for c, v in opened if v is not None and counts.get(v) == most), (None, 0))


class _Counts:
    """Open connections, in all, per client address and per visitor (oldest first), and those
    waiting for a request, idlest first."""

    def __init__(self) -> None:
        self.total = 0
        self.per_address: Counter[str] = Counter()
        self.refused = 0
        self.evicted = 0
        self.made_room = 0
        self.idle: OrderedDict[Any, float] = OrderedDict()  # connection -> since when it waits (monotonic)
        self.opened: OrderedDict[Any, str | None] = OrderedDict()  # connection -> its visitor (None: not known yet)
        self.per_visitor: Counter[str] = Counter()
        self.is_proxy: Callable[[str], bool] = lambda address: False  # set by install()
        self.visitor_of: Callable[[Any], str] | None = None  # a request's ASGI scope -> its visitor; set by install()

    def decide(self, address: str) -> str:
        cap = None if self.is_proxy(address) else MAX_CONNECTIONS_PER_ADDRESS
        full = self.total >= MAX_CONNECTIONS and not self.idle
        verdict = decide(self.total, self.per_address[address], MAX_CONNECTIONS, cap, bool(self.idle),
                         self.busiest()[1] if full else 0)
        if verdict == "refuse":
            self.refused += 1
        return verdict

    def busiest(self) -> tuple[Any, int]:
        """The oldest connection of the visitor holding the most, and how many it holds."""
        return busiest_oldest(self.opened.items(), self.per_visitor)

    def enter(self, address: str, connection: Any = None) -> None:
        self.total += 1
        self.per_address[address] += 1
        if connection is not None:  # a proxy's connection is nobody's until its first request
            self.belongs(connection, None if self.is_proxy(address) else address)

    def belongs(self, connection: Any, visitor: str | None) -> None:
        """``connection`` is ``visitor``'s now (a proxy's connection carries each visitor's requests in turn)."""
        old = self.opened.get(connection)
        if old == visitor and connection in self.opened:
            return
        self._uncount(old)
        self.opened[connection] = visitor
        if visitor is not None:
            self.per_visitor[visitor] += 1

    def disown(self, connection: Any) -> None:
        """``connection`` is closing: no longer anyone's, nor a candidate to close."""
        if connection in self.opened:
            self._uncount(self.opened.pop(connection))

    def _uncount(self, visitor: str | None) -> None:
        if visitor is not None:
            self.per_visitor[visitor] -= 1
            if self.per_visitor[visitor] <= 0:
                del self.per_visitor[visitor]

    def leave(self, address: str, connection: Any = None) -> None:
        self.total -= 1
        self.per_address[address] -= 1
        if self.per_address[address] <= 0:
            del self.per_address[address]
        if connection is not None:
            self.disown(connection)

    def waits(self, connection: Any) -> None:
        self.idle.pop(connection, None)
        self.idle[connection] = time.monotonic()

    def busy(self, connection: Any) -> None:
        self.idle.pop(connection, None)

    def idlest(self) -> Any:
        return next(iter(self.idle), None)


COUNTS = _Counts()
# The open connections' transports by the client's (address, port), as an ASGI scope's "client"
# names them: how much of what a response wrote still waits to go out (write_backlog).
TRANSPORTS: dict[tuple, Any] = {}


def _kernel_backlog(transport: Any) -> int:
    """Bytes the kernel holds to send on the transport's socket and the client has not yet
    acknowledged (Linux's SIOCOUTQ; 0 elsewhere). A client takes data only as its program reads:
    once its buffer is full this stops shrinking."""
    try:
        import fcntl
        import struct
        import termios

        sock = transport.get_extra_info("socket")
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except (ImportError, AttributeError, OSError, ValueError):
        return 0


def write_backlog(client: Any) -> int | None:
    """Bytes connection ``client`` (an ASGI scope's ``client``) still has to deliver: the
    server's buffer and the kernel's; None when unknown (the guarded protocol is not installed)."""
    transport = TRANSPORTS.get(tuple(client)) if client else None
    try:
        return None if transport is None else int(transport.get_write_buffer_size()) + _kernel_backlog(transport)
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None


def _guarded(base: type) -> type:
    """``base`` (uvicorn's H11Protocol) with the header timeout and the connection caps."""

    class GuardedH11Protocol(base):  # type: ignore[misc, valid-type]
        _address: str | None = None
        _header_timer: asyncio.TimerHandle | None = None
        _timed_scope: Any = None

        def connection_made(self, transport: Any) -> None:
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            verdict = COUNTS.decide(address)
            if verdict == "refuse":
                log.warning("refused a connection from %s: %d open in all, %d from it (limits %d, %d)", address,
                            COUNTS.total, COUNTS.per_address[address], MAX_CONNECTIONS, MAX_CONNECTIONS_PER_ADDRESS)
                transport.abort()  # before anything is read: no request, no task, no file descriptor kept
                return
            if verdict == "evict" and (idlest := COUNTS.idlest()) is not None:
                COUNTS.evicted += 1
                idlest._close_idle()
            elif verdict == "make_room" and (busiest := COUNTS.busiest()[0]) is not None:
                COUNTS.made_room += 1
                log.warning("closed a connection of %s, which holds the most (%d), for a new one from %s: %d open in all",
                            COUNTS.opened.get(busiest), COUNTS.per_visitor[COUNTS.opened.get(busiest)], address, COUNTS.total)
                busiest._close_busy()
            COUNTS.enter(address, self)
            self._address = address
            super().connection_made(transport)
            if self.client:
                TRANSPORTS[tuple(self.client)] = transport
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._address is None:
                return  # refused: uvicorn never knew of it
            COUNTS.leave(self._address, self)
            COUNTS.busy(self)
            self._address = None
            if self.client:
                TRANSPORTS.pop(tuple(self.client), None)
            self._disarm_header_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.scope is not None and self.scope is not self._timed_scope:  # a request's headers are in
                self._timed_scope = self.scope
                self._disarm_header_timer()
                COUNTS.busy(self)
                if COUNTS.visitor_of is not None and self._address is not None and COUNTS.is_proxy(self._address) \
                        and self in COUNTS.opened:
                    COUNTS.belongs(self, COUNTS.visitor_of(self.scope))

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_header_timer()  # the next request's headers have as long

        def _arm_header_timer(self) -> None:
            self._disarm_header_timer()
            COUNTS.waits(self)
            self._header_timer = self.loop.call_later(idle_timeout_s(COUNTS.total, MAX_CONNECTIONS), self._headers_too_slow)

        def _close_idle(self) -> None:
            COUNTS.busy(self)  # once: it is no longer a candidate
            self._disarm_header_timer()
            if not self.transport.is_closing():
                self.transport.abort()

        def _close_busy(self) -> None:
            COUNTS.disown(self)  # once: it is no longer a candidate (counted in all until it is lost)
            self._close_idle()  # its request, if any, sees its client gone

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            COUNTS.busy(self)
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self.transport.abort()

    return GuardedH11Protocol


class RateLimitedLog(logging.Filter):
    """At most ``burst`` records per minute of each (logger, message template); the rest are
    counted, and the next record let through says how many were left out."""

    def __init__(self, burst: int = LOG_BURST, window_s: float = 60.0) -> None:
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self.windows: dict[tuple[str, str], tuple[float, int, int]] = {}  # key -> (start, let through, left out)

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg)[:200].split("\n", 1)[0])  # a kind: the first line
        now = time.monotonic()
        start, passed, dropped = self.windows.get(key, (now, 0, 0))
        if now - start >= self.window_s:
            if dropped:
                record.msg = f"{record.msg} [{dropped} more like this in the last {self.window_s:g} s left out of the log]"
            start, passed, dropped = now, 0, 0
        if passed >= self.burst:
            self.windows[key] = (start, passed, dropped + 1)
            return False
        self.windows[key] = (start, passed + 1, dropped)
        if len(self.windows) > 10_000:  # distinct templates are few; a flood of distinct ones is cut here
            self.windows.clear()
        return True


def is_abandoned_stream(context: dict) -> bool:
    """Whether an event-loop error is Gradio's result stream closed after its reader left: its
    ``sse_stream`` generator answers the close with one more message (``yield`` in ``except
    BaseException``), so the loop's close of the abandoned generator fails with "async generator
    ignored GeneratorExit" and asyncio logs "Task exception was never retrieved" naming a new task
    each time. Nothing is lost (the reader is gone): it is counted, not logged."""
    err = context.get("exception")
    return isinstance(err, RuntimeError) and str(err) == "async generator ignored GeneratorExit"


class LoopErrors:
    """An event loop's exception handler: abandoned result streams (:func:`is_abandoned_stream`)
    counted, said once a minute at most; anything else to the loop's default handler."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.abandoned = 0
        self.said = 0
        self.every_s = every_s
        self.last = float("-inf")

    def __call__(self, loop: Any, context: dict) -> None:
        if is_abandoned_stream(context):
            self.abandoned += 1
            now = time.monotonic()
            if now - self.last >= self.every_s:
                self.last = now
                log.info("%d result stream(s) closed after their reader left, so far", self.abandoned)
            return
        loop.default_exception_handler(context)


def quiet_abandoned_streams(loop: Any | None = None) -> LoopErrors:
    """Install :class:`LoopErrors` on ``loop`` (the running one by default)."""
    handler = LoopErrors()
    (loop or asyncio.get_running_loop()).set_exception_handler(handler)
    return handler


LOGGERS = ("uvicorn.error", "uvicorn.access", "uvicorn", "playground", "gradio", "asyncio")


def rate_limit_logs(burst: int = LOG_BURST) -> RateLimitedLog:
    """Put one :class:`RateLimitedLog` on the loggers a flood of bad clients makes talk."""
    limiter = RateLimitedLog(burst)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RateLimitedLog) for f in logger.filters):
            logger.addFilter(limiter)
    return limiter


def install(server: Any, is_proxy: Callable[[str], bool] | None = None, visitor: Callable[[Any], str] | None = None) -> bool:
    """Serve new connections of ``server`` (Gradio's uvicorn server, ``demo.server``) with the
    guarded protocol; ``is_proxy``: whether an address is a trusted proxy's (no per-address cap);
    ``visitor``: who sent a request, given its ASGI scope (what a proxy's connection is counted
    as). False, said on the console, when uvicorn is not the version this was tested with or its
    protocol is not the one extended."""
    if is_proxy is not None:
        COUNTS.is_proxy = is_proxy
    if visitor is not None:
        COUNTS.visitor_of = visitor
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    config = getattr(server, "config", None)
    needed = ("connection_made", "connection_lost", "data_received", "on_response_complete")
    if (
        uvicorn.__version__ != TESTED_UVICORN
        or config is None
        or getattr(config, "http_protocol_class", None) is not H11Protocol
        or not all(hasattr(H11Protocol, name) for name in needed)
    ):
        log.warning(
            "connection limits are off: they extend uvicorn %s's HTTP protocol, and this is uvicorn %s with %s",
            TESTED_UVICORN, uvicorn.__version__, getattr(config, "http_protocol_class", None),
        )
        return False
    config.http_protocol_class = _guarded(H11Protocol)
    return True


async def install_when_started(demo: Any, timeout_s: float = 30.0, is_proxy: Callable[[str], bool] | None = None,
                               visitor: Callable[[Any], str] | None = None) -> bool:
    """:func:`install` as soon as ``demo.launch`` has made its server (run from the app's
    lifespan, which starts before Gradio keeps the server in ``demo.server``)."""
    t0 = time.monotonic()
    while server_of(demo) is None:
        if time.monotonic() - t0 > timeout_s:
            log.warning("connection limits are off: the server did not start within %g s", timeout_s)
            return False
        await asyncio.sleep(0.01)
    return install(server_of(demo), is_proxy, visitor)
