"""A catalogue of bad inputs sent to every endpoint of the launched app, as a stranger on a
public Space might: each is answered with a clear error (what was wrong, what is accepted) or a
clear notice, never a stack trace or a hang, and the endpoint still serves a normal request
right after it.

Inputs that gradio_client cannot even encode (a lone surrogate, NaN) go through raw HTTP to
Gradio's ``/gradio_api/call/<endpoint>`` route, as a hand-written client would send them.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from gradio_client.exceptions import AppError

# A normal request per endpoint and what its answer must contain: sent after each bad input.
NORMAL: dict[str, tuple[tuple[Any, ...], str]] = {
    "/tokenize": (("hello everyone",), "ids"),
    "/embedding_arithmetic": (("king - man + woman", 3), "neighbours"),
    "/positional_encoding": ((4, 4, 10000), "table"),
    "/generate": (("ROMEO:", 2, 0.8, 50, 0.95, 1), "completion"),
    "/attention": (("hello everyone", 0, 0), "weights"),
    "/inside": (("hello everyone", 0, 0), "token_losses"),
}
GEN = ("ROMEO:", 2, 0.8, 50, 0.95, 1)  # prompt, max_new_tokens, temperature, top_k, top_p, seed


def gen(**changes: Any) -> tuple[Any, ...]:
    names = ["prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed"]
    args = dict(zip(names, GEN))
    args.update(changes)
    return tuple(args.values())


@dataclass(frozen=True)
class Bad:
    """A bad request and the fragments (regexes) its error message must contain: what was wrong
    (the parameter) and what is accepted (the range, the form)."""

    id: str
    endpoint: str
    args: tuple[Any, ...]
    says: tuple[str, ...]


BAD = [
    # --- text: empty, long, control characters (every text input) ---
    Bad("tokenize-long", "/tokenize", ("a" * 20_001,), ("text", "20,001 characters", "limit is 20,000")),
    Bad("tokenize-NUL", "/tokenize", ("bad\x00text",), ("control character U\\+0000", "printable text")),
    Bad("tokenize-escape", "/tokenize", ("\x1b[31mred",), ("control character U\\+001B", "printable text")),
    Bad("tokenize-not-text", "/tokenize", (12345,), ("text must be text", "int")),
    Bad("arith-empty", "/embedding_arithmetic", ("", 5), ("expression is empty", "1 to 200 characters")),
    Bad("arith-spaces", "/embedding_arithmetic", ("   \t ", 5), ("expression is empty", "1 to 200 characters")),
    Bad("generate-empty", "/generate", gen(prompt=""), ("prompt is empty", "1 to 4,000 characters")),
    Bad("generate-spaces", "/generate", gen(prompt=" \n\n "), ("prompt is empty", "1 to 4,000 characters")),
    Bad("generate-long", "/generate", gen(prompt="x" * 4_001), ("prompt is 4,001 characters", "limit is 4,000")),
    Bad("generate-NUL", "/generate", gen(prompt="ROMEO\x00:"), ("control character U\\+0000", "printable text")),
    Bad("attention-empty", "/attention", ("", 0, 0), ("text is empty", "1 to 2,000 characters")),
    Bad("attention-bell", "/attention", ("hi\x07", 0, 0), ("control character U\\+0007", "printable text")),
    Bad("attention-long", "/attention", ("a" * 2_001, 0, 0), ("2,001 characters", "limit is 2,000")),
    Bad("attention-too-many-tokens", "/attention", ("the " * 100, 0, 0), ("101 tokens", "limit here is 64 tokens")),
    # --- expressions: malformed, unbalanced, too long, unknown words, code ---
    Bad("arith-dangling", "/embedding_arithmetic", ("king - ", 5), ("ends too early", "word or number is missing")),
    Bad("arith-open-paren", "/embedding_arithmetic", ("(king - man", 5), ("missing '\\)'", "position 1")),
    Bad("arith-close-paren", "/embedding_arithmetic", ("king)", 5), ("unbalanced '\\)'", "no matching")),
    Bad("arith-too-long", "/embedding_arithmetic", ("a+" * 150, 5), ("300 characters", "limit is 200")),
    Bad("arith-too-deep", "/embedding_arithmetic", ("(" * 10 + "king" + ")" * 10, 5), ("nested too deeply", "at most 8")),
    Bad("arith-unknown-word", "/embedding_arithmetic", ("王 - 男", 5), ("unknown to the model", "try another word")),
    Bad("arith-emoji", "/embedding_arithmetic", ("😀 + king", 5), ("unexpected character", "words, numbers, \\+ - \\* /")),
    Bad("arith-import", "/embedding_arithmetic", ("__import__('os')", 5), ("calls are not supported", "\\+ - \\* / only")),
    Bad("arith-import-system", "/embedding_arithmetic", ("__import__('os').system('id')", 5), ("unexpected character '\\.'", "words, numbers")),
    Bad("arith-attribute", "/embedding_arithmetic", ("king.__class__", 5), ("unexpected character '\\.'", "words, numbers")),
    Bad("arith-call", "/embedding_arithmetic", ("print(king)", 5), ("calls are not supported", "\\+ - \\* / only")),
    Bad("arith-subscript", "/embedding_arithmetic", ("king[0]", 5), ("unexpected character '\\['", "words, numbers")),
    Bad("arith-word-times-word", "/embedding_arithmetic", ("king * queen", 5), ("cannot multiply two word vectors", "0.5\\*king")),
    Bad("arith-div-zero", "/embedding_arithmetic", ("king / 0", 5), ("division by zero",)),
    Bad("arith-huge-number", "/embedding_arithmetic", ("1e999*king", 5), ("out of range", "within ±1000")),
    Bad("arith-no-word", "/embedding_arithmetic", ("2 + 3", 5), ("has no word", "king - man \\+ woman")),
    Bad("arith-cancel", "/embedding_arithmetic", ("king - king", 5), ("cancel out", "zero vector")),
    # --- numbers out of range or not numbers ---
    Bad("arith-top_k-0", "/embedding_arithmetic", ("king", 0), ("top_k", "from 1 to 50")),
    Bad("arith-top_k-51", "/embedding_arithmetic", ("king", 51), ("top_k", "from 1 to 50")),
    Bad("arith-top_k-text", "/embedding_arithmetic", ("king", "ten"), ("top_k must be a number", "'ten'")),
    Bad("arith-top_k-fraction", "/embedding_arithmetic", ("king", 2.5), ("top_k", "whole number from 1 to 50")),
    Bad("pe-odd", "/positional_encoding", (21, 10, 10000), ("d_model must be even", "21")),
    Bad("pe-huge-d_model", "/positional_encoding", (10**6, 10, 10000), ("d_model", "from 2 to 1024")),
    Bad("pe-zero-d_model", "/positional_encoding", (0, 10, 10000), ("d_model", "from 2 to 1024")),
    Bad("pe-huge-positions", "/positional_encoding", (20, 10**9, 10000), ("number of positions", "from 1 to 1024")),
    Bad("pe-no-positions", "/positional_encoding", (20, 0, 10000), ("number of positions", "from 1 to 1024")),
    Bad("pe-base-1", "/positional_encoding", (20, 10, 1), ("base", "\\[2, 1e\\+06\\]")),
    Bad("pe-base-huge", "/positional_encoding", (20, 10, 1e300), ("base", "\\[2, 1e\\+06\\]")),
    Bad("pe-base-inf", "/positional_encoding", (20, 10, "inf"), ("base", "\\[2, 1e\\+06\\]", "inf")),
    Bad("pe-d_model-text", "/positional_encoding", ("abc", 10, 10000), ("d_model must be a number", "'abc'")),
    Bad("pe-d_model-fraction", "/positional_encoding", (20.5, 10, 10000), ("d_model", "whole number from 2 to 1024")),
    Bad("generate-temperature-negative", "/generate", gen(temperature=-1), ("temperature", "\\[0, 5\\]")),
    Bad("generate-temperature-huge", "/generate", gen(temperature=1e9), ("temperature", "\\[0, 5\\]")),
    Bad("generate-temperature-inf", "/generate", gen(temperature="inf"), ("temperature", "\\[0, 5\\]", "inf")),
    Bad("generate-temperature-nan-text", "/generate", gen(temperature="nan"), ("temperature", "\\[0, 5\\]", "nan")),
    Bad("generate-top_k-negative", "/generate", gen(top_k=-1), ("top_k", "from 0 to 50257")),
    Bad("generate-top_k-above-vocab", "/generate", gen(top_k=50_258), ("top_k", "from 0 to 50257")),
    Bad("generate-top_p-0", "/generate", gen(top_p=0), ("top_p", "\\(0, 1\\]")),
    Bad("generate-top_p-1.5", "/generate", gen(top_p=1.5), ("top_p", "\\(0, 1\\]")),
    Bad("generate-top_p-negative", "/generate", gen(top_p=-0.5), ("top_p", "\\(0, 1\\]")),
    Bad("generate-max-0", "/generate", gen(max_new_tokens=0), ("max_new_tokens", "from 1 to 512")),
    Bad("generate-max-negative", "/generate", gen(max_new_tokens=-5), ("max_new_tokens", "from 1 to 512")),
    Bad("generate-max-above-cap", "/generate", gen(max_new_tokens=513), ("max_new_tokens", "from 1 to 512")),
    Bad("generate-max-text", "/generate", gen(max_new_tokens="many"), ("max_new_tokens must be a number", "'many'")),
    Bad("generate-seed-negative", "/generate", gen(seed=-1), ("seed", "from 0 to 4294967295")),
    Bad("generate-seed-huge", "/generate", gen(seed=2**40), ("seed", "from 0 to 4294967295")),
    Bad("attention-layer-99", "/attention", ("hello", 99, 0), ("layer", "from 0 to 5")),
    Bad("attention-layer-negative", "/attention", ("hello", -1, 0), ("layer", "from 0 to 5")),
    Bad("attention-head-99", "/attention", ("hello", 0, 99), ("head", "from 0 to 7")),
    Bad("attention-layer-text", "/attention", ("hello", "x", 0), ("layer must be a number", "'x'")),
    Bad("attention-layer-fraction", "/attention", ("hello", 0.5, 0), ("layer", "whole number from 0 to 5")),
    Bad("attention-head-none", "/attention", ("hello", 0, None), ("head must be a number", "None")),
    Bad("inside-empty", "/inside", ("", 0, 0), ("text is empty", "1 to 2,000 characters")),
    Bad("inside-too-many-tokens", "/inside", ("the " * 100, 0, 0), ("101 tokens", "limit here is 64 tokens")),
    Bad("inside-layer-6", "/inside", ("hello", 6, 0), ("layer", "from 0 to 5")),
    Bad("inside-head-text", "/inside", ("hello", 0, "x"), ("head must be a number", "'x'")),
]


def _call(client, endpoint: str, args: tuple[Any, ...]) -> Any:
    return client.predict(*args, api_name=endpoint)


def _assert_normal_request_works(client, endpoint: str) -> None:
    args, key = NORMAL[endpoint]
    out = _call(client, endpoint, args)
    assert out[key], f"{endpoint} stopped answering normal requests: {out}"


def _assert_clear(message: str, says: tuple[str, ...]) -> None:
    assert "Traceback" not in message and 'File "' not in message, message
    for fragment in says:
        assert re.search(fragment, message), f"{fragment!r} not in the error {message!r}"


def test_the_catalogue_covers_every_endpoint_with_40_bad_inputs():
    assert len(BAD) + len(NOTICES) + len(RAW) >= 40
    assert {b.endpoint for b in BAD} == set(NORMAL)
    assert len({b.id for b in BAD}) == len(BAD)


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.id)
def test_bad_input_gets_a_clear_error_and_the_app_keeps_serving(client, bad: Bad):
    with pytest.raises(AppError) as info:
        _call(client, bad.endpoint, bad.args)
    _assert_clear(str(info.value), bad.says)
    _assert_normal_request_works(client, bad.endpoint)


# --- accepted with a notice: the text is legal, but the user should know what happened -----------

NOTICES = [
    ("tokenize-empty", "/tokenize", ("",), "notice", "Empty text"),
    ("tokenize-whitespace", "/tokenize", ("  \n\t ",), "notice", "only whitespace"),
    ("tokenize-emoji", "/tokenize", ("😀🎉👍🏽",), "notice", "part of a character's UTF-8 bytes"),
    ("tokenize-cjk", "/tokenize", ("你好世界",), "notice", "part of a character's UTF-8 bytes"),
    ("tokenize-rtl", "/tokenize", ("שלום עולם",), "notice", "part of a character's UTF-8 bytes"),
    ("arith-unknown-word-split", "/embedding_arithmetic", ("zzqxjv - man", 5), "notice", "the mean of their embeddings"),
    ("generate-prompt-longer-than-context", "/generate", gen(prompt="the " * 900), "notice", "only its last 255 were kept"),
]


@pytest.mark.parametrize("case", NOTICES, ids=lambda c: c[0])
def test_legal_but_surprising_input_is_answered_with_a_notice(client, case):
    _, endpoint, args, key, says = case
    out = _call(client, endpoint, args)
    assert says in out[key], out[key]
    _assert_normal_request_works(client, endpoint)


@pytest.mark.parametrize(
    "endpoint, args",
    [
        ("/generate", gen(prompt="😀 你好 שלום مرحبا")),  # emoji, CJK, right-to-left: ordinary text
        ("/attention", ("😀 你好 שלום", 0, 0)),
        ("/tokenize", ("\u202eevil.exe",)),  # a right-to-left override is text, shown escaped
    ],
    ids=["generate-unicode", "attention-unicode", "tokenize-rtl-override"],
)
def test_any_unicode_text_is_served(client, endpoint, args):
    out = _call(client, endpoint, args)
    if endpoint == "/generate":
        assert out["finished"] and out["new_tokens"] == 2
    elif endpoint == "/attention":
        assert len(out["weights"]) == len(out["ids"]) > 0
    else:
        assert out["n_characters"] == len(args[0])


# --- raw HTTP: what gradio_client cannot encode ----------------------------------------------------


def _raw_call(base_url: str, endpoint: str, body: str) -> tuple[str, Any]:
    """POST a hand-written JSON body to /gradio_api/call/<endpoint>; return the stream's last
    (event, data)."""
    api = base_url.rstrip("/") + "/gradio_api/call" + endpoint
    r = httpx.post(api, content=body.encode("utf-8"), headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 200, r.text
    event_id = r.json()["event_id"]
    text = httpx.get(f"{api}/{event_id}", timeout=60).text
    events = re.findall(r"event: (\w+)\ndata: (.*)", text)
    assert events, text
    event, data = events[-1]
    return event, json.loads(data)


RAW = [
    ("generate-nan", "/generate", '{"data": ["ROMEO:", 2, NaN, 50, 0.95, 1]}', ("temperature", "\\[0, 5\\]", "nan")),
    ("generate-infinity", "/generate", '{"data": ["ROMEO:", 2, 0.8, 50, Infinity, 1]}', ("top_p", "\\(0, 1\\]", "inf")),
    ("generate-lone-surrogate", "/generate", '{"data": ["ROMEO\\ud800", 2, 0.8, 50, 0.95, 1]}', ("lone surrogate U\\+D800", "valid Unicode")),
    ("tokenize-lone-surrogate", "/tokenize", '{"data": ["a\\udfffb"]}', ("lone surrogate U\\+DFFF", "valid Unicode")),
    ("attention-lone-surrogate", "/attention", '{"data": ["\\ud83d", 0, 0]}', ("lone surrogate U\\+D83D", "valid Unicode")),
    ("generate-prompt-list", "/generate", '{"data": [["ROMEO:"], 2, 0.8, 50, 0.95, 1]}', ("prompt must be text", "list")),
    ("arith-expression-object", "/embedding_arithmetic", '{"data": [{"a": 1}, 5]}', ("expression must be text", "dict")),
    ("pe-d_model-bool", "/positional_encoding", '{"data": [true, 10, 10000]}', ("d_model must be a number", "True")),
    ("pe-positions-1e999", "/positional_encoding", '{"data": [20, 1e999, 10000]}', ("number of positions", "from 1 to 1024")),
]


@pytest.mark.parametrize("case", RAW, ids=lambda c: c[0])
def test_raw_json_the_client_cannot_send_gets_a_clear_error(app_server, client, case):
    _, endpoint, body, says = case
    event, data = _raw_call(app_server.url, endpoint, body)
    assert event == "error", data
    assert data["title"] == "Invalid input"
    _assert_clear(data["error"], says)
    _assert_normal_request_works(client, endpoint)


def test_invalid_json_is_refused_by_the_server_not_crashed(app_server, client):
    r = httpx.post(app_server.url + "gradio_api/call/tokenize", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    _assert_normal_request_works(client, "/tokenize")


def test_errors_are_fast_not_a_hang(client):
    """A bad request is refused before any work: well under the time of a real generation."""
    t0 = time.perf_counter()
    with pytest.raises(AppError):
        _call(client, "/generate", gen(max_new_tokens=10**9))
    assert time.perf_counter() - t0 < 10  # a hang bound (10**9 tokens would take days), generous for a busy machine
