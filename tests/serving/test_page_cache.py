"""The page is built once and revalidated by ETag (a reload costs a lookup, not
45 ms of Gradio's CPU), without ever serving one client a page built for another host.

On the launched app: the kept page is byte for byte the page Gradio builds, a reload with the ETag
gets 304 and no body, and a request naming another host gets that host's root URL while the
loopback page stays as it was. Unit tests on a stand-in ASGI app count what Gradio is asked to
build and check the bound."""

from __future__ import annotations

import asyncio
import gzip

import httpx
import pytest

from playground.ui.serving.page_cache import BUILDS_PER_MINUTE, BuildBudget, MAX_ENTRIES, PageCache

GZIP = {"Accept-Encoding": "gzip"}


def test_a_reload_gets_the_same_page_and_a_revalidation_gets_304(app_server):
    with httpx.Client(timeout=60) as client:
        first = client.get(app_server.url, headers=GZIP)
        second = client.get(app_server.url, headers=GZIP)
        assert first.status_code == second.status_code == 200
        assert first.headers["content-encoding"] == "gzip" and first.headers["cache-control"] == "no-cache"
        assert first.headers["etag"] == second.headers["etag"] and first.content == second.content
        assert "window.gradio_config" in first.text  # httpx undid the gzip: this is the page
        again = client.get(app_server.url, headers={**GZIP, "If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == first.headers["etag"]
        stale = client.get(app_server.url, headers={**GZIP, "If-None-Match": '"not-this-one"'})
        assert stale.status_code == 200 and stale.content == first.content
        plain = client.get(app_server.url, headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and plain.headers["etag"] != first.headers["etag"]
        assert plain.content == first.content  # the same page, sent uncompressed


def test_a_client_refusing_gzip_gets_the_page_and_its_json_uncompressed(app_server):
    with httpx.Client(timeout=60) as client:
        gzipped = client.get(app_server.url, headers=GZIP)  # kept first: it must not be served below
        for url in (app_server.url, app_server.url + "config"):
            refused = client.get(url, headers={"Accept-Encoding": "gzip;q=0, identity"})
            assert refused.status_code == 200 and "content-encoding" not in refused.headers
    assert gzipped.headers["content-encoding"] == "gzip" and refused.json()["root"].startswith("http://127.0.0.1")


def test_the_kept_page_is_the_one_gradio_builds(app_server):
    """Gradio's login cookie passes the cache (Gradio builds the page for it): the same page otherwise."""
    with httpx.Client(timeout=60) as client:
        kept = client.get(app_server.url, headers=GZIP)
        built = client.get(app_server.url, headers={**GZIP, "Cookie": "access-token=nobody"})
    assert "etag" not in built.headers
    assert built.text == kept.text


def test_a_share_link_gets_the_kept_page_which_gradio_builds_the_same_for_any_query(app_server):
    """The page is the same whatever the link's query (the page reads it once loaded): the kept
    one, with its ETag, byte for byte what Gradio builds for that query itself."""
    link = "?tab=inside&text=To+be%2C+or+not+to+be&layer=2&head=3"
    with httpx.Client(timeout=60) as client:
        kept = client.get(app_server.url, headers=GZIP)
        linked = client.get(app_server.url + link, headers=GZIP)
        built = client.get(app_server.url + link, headers={**GZIP, "Cookie": "access-token=nobody"})
        again = client.get(app_server.url + "?tab=attention&text=other", headers={**GZIP, "If-None-Match": kept.headers["etag"]})
    assert linked.status_code == 200 and linked.headers["etag"] == kept.headers["etag"] and linked.content == kept.content
    assert "etag" not in built.headers and built.text == kept.text
    assert again.status_code == 304


def test_another_host_gets_its_own_root_and_never_poisons_the_page(app_server):
    with httpx.Client(timeout=60) as client:
        loopback = client.get(app_server.url, headers=GZIP).text
        other = client.get(app_server.url, headers={**GZIP, "X-Forwarded-Host": "playground.example.org",
                                                    "X-Forwarded-Proto": "https"}).text
        after = client.get(app_server.url, headers=GZIP).text
        config = client.get(app_server.url + "config", headers=GZIP).json()
    assert '"root":"https://playground.example.org"' in other.replace(" ", "")
    assert "playground.example.org" not in loopback and after == loopback
    assert config["root"].startswith("http://127.0.0.1")


class Gradio:
    """A stand-in for Gradio's app: a page naming the host it was asked for, and how often it built one."""

    def __init__(self, status: int = 200, cookie: bool = False) -> None:
        self.status, self.cookie, self.calls = status, cookie, 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        host = dict(scope["headers"]).get(b"host", b"?")
        headers = [(b"content-type", b"text/html")] + ([(b"set-cookie", b"a=b")] if self.cookie else [])
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": b"<p>" + host, "more_body": True})
        await send({"type": "http.response.body", "body": b"</p>"})


def get(app, path: str = "/", host: str = "a", method: str = "GET", query: bytes = b"", **headers: str):
    scope = {"type": "http", "method": method, "path": path, "query_string": query, "scheme": "http", "root_path": "",
             "headers": [(b"host", host.encode())] + [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], dict(sent[0]["headers"]), body


def test_each_answer_is_built_once_per_host_and_kept_within_the_bound():
    gradio = Gradio()
    cache = PageCache(gradio, budget=BuildBudget(per_minute=10 * MAX_ENTRIES))
    assert [get(cache)[2] for _ in range(3)] == [b"<p>a</p>"] * 3 and gradio.calls == 1
    assert get(cache, host="b")[2] == b"<p>b</p>" and gradio.calls == 2
    for i in range(5 * MAX_ENTRIES):  # a client inventing hosts: memory stays bounded
        assert get(cache, host=f"h{i}")[2] == f"<p>h{i}</p>".encode()
    assert len(cache.entries) == MAX_ENTRIES
    assert get(cache, host=f"h{5 * MAX_ENTRIES - 1}")[2].endswith(b"</p>") and gradio.calls == 2 + 5 * MAX_ENTRIES


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_forged_hosts_cost_at_most_the_budgets_builds_and_kept_pages_still_serve():
    gradio, clock = Gradio(), Clock()
    cache = PageCache(gradio, budget=BuildBudget(per_minute=BUILDS_PER_MINUTE, clock=clock))
    assert get(cache, host="space")[0] == 200  # the real host: built once, kept
    answers = [get(cache, host=f"forged{i}") for i in range(BUILDS_PER_MINUTE)]
    assert [a[0] for a in answers[:-1]] == [200] * (BUILDS_PER_MINUTE - 1)  # the bucket's last build ...
    assert answers[-1][0] == 503 and b"try again in" in answers[-1][2]  # ... then refused, saying when
    assert int(answers[-1][1][b"retry-after"]) >= 1
    assert gradio.calls == BUILDS_PER_MINUTE  # n builds, not one per forged host
    assert get(cache, host="space") == (200, get(cache, host="space")[1], b"<p>space</p>")  # kept: served
    assert gradio.calls == BUILDS_PER_MINUTE
    clock.now += 60.0 / BUILDS_PER_MINUTE - 0.01  # just short of one build's refill
    assert get(cache, host="late")[0] == 503
    clock.now += 0.02
    assert get(cache, host="late")[0] == 200 and gradio.calls == BUILDS_PER_MINUTE + 1


@pytest.mark.parametrize("request_", [
    {"method": "HEAD"}, {"path": "/gradio_api/info"}, {"cookie": "access-token=u1"},
])
def test_requests_the_page_may_differ_for_pass_through(request_):
    gradio = Gradio()
    cache = PageCache(gradio)
    for _ in range(2):
        status, headers, _ = get(cache, **request_)
        assert status == 200 and b"etag" not in headers
    assert gradio.calls == 2 and not cache.entries


class QueryPage(Gradio):
    """A stand-in whose page names the query it was built for."""

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": b"<p>built for ?" + scope["query_string"]})


def test_share_links_get_one_page_built_once_without_their_query():
    """8 reloaders of unique links cost Gradio a build each (the bucket ran dry and /tokenize's p95
    went from 27 ms to nearly a second): now every query gets the page built once for none."""
    gradio = QueryPage()
    cache = PageCache(gradio, budget=BuildBudget(per_minute=1))
    links = [f"tab=inside&text=line+{i}&layer=2".encode() for i in range(50)] + [b"", b"deep_link=x", b"page=other"]
    answers = [get(cache, query=query) for query in links]
    assert all(a == (200, answers[0][1], b"<p>built for ?") for a in answers) and gradio.calls == 1
    assert len(cache.entries) == 1
    # HEAD and the login cookie still pass through, query or not
    assert get(cache, method="HEAD", query=b"tab=x")[2] == b"<p>built for ?tab=x" and gradio.calls == 2
    assert get(cache, query=b"tab=y", cookie="access-token=u1")[2] == b"<p>built for ?tab=y" and gradio.calls == 3


@pytest.mark.parametrize("gradio", [Gradio(status=500), Gradio(cookie=True)], ids=["error", "cookie"])
def test_an_error_or_a_cookie_is_sent_as_built_and_not_kept(gradio):
    cache = PageCache(gradio)
    for _ in range(2):
        status, headers, body = get(cache)
        assert status == gradio.status and body == b"<p>a</p>" and b"etag" not in headers
    assert gradio.calls == 2 and not cache.entries


def test_the_compressed_page_is_kept_as_it_went_out():
    """Outside the compression, as installed: what is kept and sent is the gzip stream itself."""
    from starlette.middleware.gzip import GZipMiddleware

    class Large(Gradio):
        async def __call__(self, scope, receive, send):
            self.calls += 1
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
            await send({"type": "http.response.body", "body": b"x" * 5000})

    gradio = Large()
    cache = PageCache(GZipMiddleware(gradio, minimum_size=1000))
    answers = [get(cache, accept_encoding="gzip") for _ in range(2)]
    assert gradio.calls == 1 and answers[0] == answers[1]
    status, headers, body = answers[0]
    assert headers[b"content-encoding"] == b"gzip" and gzip.decompress(body) == b"x" * 5000
    assert get(cache)[2] == b"x" * 5000 and gradio.calls == 2  # identity: its own entry


class RootPage(Gradio):
    """A stand-in whose page names the root URL Gradio's own ``get_root_url`` works out from the
    request, from whichever headers Gradio reads today."""

    async def __call__(self, scope, receive, send):
        from fastapi import Request
        from gradio.route_utils import get_root_url

        self.calls += 1
        root = get_root_url(Request(scope), route_path=scope["path"], root_path=scope.get("root_path"))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
        await send({"type": "http.response.body", "body": f'"root":"{root}"'.encode()})


# Each header a client can forge to change the page's root URL, ALONE (the other one of a pair
# would otherwise keep the cache's keys apart): its page must never be served to anybody else.
FORGED = {
    "x_forwarded_host": "evil.example",
    "x_forwarded_proto": "https",
    "x_gradio_server": "https://evil.example/",
}


HONEST = b'"root":"http://a"'  # the page of a client that forges nothing, at host "a"


def forge(cache: PageCache, header: str) -> bytes:
    return (get(cache, host="evil.example") if header == "host" else get(cache, **{header: FORGED[header]}))[2]


@pytest.mark.parametrize("honest_first", [True, False], ids=["honest page kept first", "forged page kept first"])
@pytest.mark.parametrize("header", [*FORGED, "host"])
def test_a_page_built_for_a_forged_header_is_never_served_to_others(header, honest_first):
    gradio = RootPage()
    cache = PageCache(gradio)
    if honest_first:
        assert get(cache)[2] == HONEST
    forged = forge(cache, header)
    assert forged != HONEST and forged.startswith(b'"root":"http')  # Gradio did build another root for it
    for _ in range(2):
        assert get(cache)[2] == HONEST
    assert forge(cache, header) == forged and gradio.calls == 2  # each kept under its own key


@pytest.mark.parametrize("accept, compressed", [
    ("gzip", True), ("gzip;q=0.5", True), ("br, GZIP ; q=1", True), ("x-gzip", True),
    ("gzip;q=0", False), ("gzip; q=0.000", False), ("br, gzip;q=0", False), ("identity", False), ("", False),
    ("gzip;q=abc", False), ("gzip;q=2", False), ("*", False), ("gzip;q=0, gzip", False),
])
def test_accept_encoding_q_values_decide_the_compression_and_the_cache_key(accept, compressed):
    from playground.ui.serving.compression import gzip_middleware, wants_gzip

    class Large(Gradio):
        async def __call__(self, scope, receive, send):
            self.calls += 1
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]})
            await send({"type": "http.response.body", "body": b"x" * 5000})

    assert wants_gzip(accept) is compressed and wants_gzip(accept.encode()) is compressed
    middleware = gzip_middleware()
    gradio = Large()
    cache = PageCache(middleware.cls(gradio, *middleware.args, **middleware.kwargs))
    status, headers, body = get(cache, accept_encoding="gzip")  # a gzip client's page is kept first
    assert headers[b"content-encoding"] == b"gzip"
    status, headers, body = get(cache, accept_encoding=accept) if accept else get(cache)
    assert status == 200 and (headers.get(b"content-encoding") == b"gzip") is compressed
    assert (gzip.decompress(body) if compressed else body) == b"x" * 5000
    assert gradio.calls == (1 if compressed else 2)  # a refusing client never gets the kept gzip page
