"""A generation run in the browser, read back by the tab (playground/generation/browser.py): what
the page sends becomes the state the server's own views draw (the text, the candidates chart, the
pickers), and anything else the page (or a hand-made request) could send is refused with a message
saying what was wrong. No Gradio, no browser: the page's JSON is written here as run_on.js writes it."""

from __future__ import annotations

import json

import pytest

from playground.generation import figures, streaming, views
from playground.generation.browser import BROWSER_FILE, MAX_BROWSER_CHARS, from_browser, read_result
from playground.tokens import decode, token_text
from playground.validation import InputError
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app

SETTINGS = {"prompt": "ROMEO:", "max_new_tokens": 6, "temperature": 0.8, "top_k": 50, "top_p": 0.95, "seed": 3, "num_samples": 2}


@pytest.fixture(scope="module")
def served():
    """A server generation of SETTINGS, and the same steps as the page would send them."""
    from export import ensure_onnx

    ensure_onnx()
    params = streaming.prepare(RES, *[SETTINGS[k] for k in ("prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed", "num_samples")])
    state = None
    for state in streaming.run(RES, params):
        pass
    samples = [{"steps": [[s.token.token_id, s.token.probability, s.token.sample_probability,
                           *[x for c in s.candidates for x in (c.token_id, c.probability, c.sample_probability)]] for s in steps],
                "stop": {"length": "max_new_tokens", "end of text": "eot"}[reason]}
               for steps, reason in zip(state.steps, state.stop_reasons)]
    return params, state, {"run": 1, "settings": SETTINGS, "samples": samples, "ttft_s": 0.01, "elapsed_s": 0.05, "notices": []}


def read(data: dict, params):
    return from_browser(read_result(json.dumps(data)), params, vocab_size=RES.engine().vocab_size,
                        decode=decode, decode_one=token_text)


def test_the_pages_result_is_drawn_by_the_servers_views(served):
    """The same steps give the same text, pickers and chart as the server's generation; the output
    names the browser's file."""
    params, state, data = served
    got = read(data, params)
    assert got.steps == state.steps and got.stop_reasons == state.stop_reasons and got.finished
    server_html = views.tokens_html(state)
    assert views.tokens_html(got) == server_html.replace(f'data-file="{state.model_file}"', f'data-file="{BROWSER_FILE}"')
    for sample in (0, 1):
        assert figures.step_figure(got, sample, 3)[0].to_plotly_json() == figures.step_figure(state, sample, 3)[0].to_plotly_json()
    assert got.provider.startswith("this browser") and got.model_file == BROWSER_FILE


def test_nothing_run_is_nothing_drawn():
    assert read_result("") is None and read_result(None) is None
    assert read_result(json.dumps({"run": 3, "samples": None})) is None


def _with(data: dict, path: list, value) -> dict:
    out = json.loads(json.dumps(data))
    at = out
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return out


@pytest.mark.parametrize("path, value, message", [
    (["samples"], [], "samples must be a list of 2"),
    (["samples", 0, "steps"], [[5, 0.5, 0.5]] * 7, "sample 1 has 7 steps, more than its max_new_tokens (6)"),
    (["samples", 1, "steps", 0, 0], 50257, "sample 2, step 1's token ids must be a token id from 0 to 50256, not 50257"),
    (["samples", 0, "steps", 2, 1], 1.5, "sample 1, step 3's probabilities must be a probability from 0 to 1, not 1.5"),
    (["samples", 0, "steps", 2, 2], float("nan"), "must be a probability from 0 to 1, not nan"),
    (["samples", 0, "steps", 0, 3], True, "token ids must be a token id"),
    (["samples", 0, "steps", 1], [5, 0.5], "must list the token, its two probabilities"),
    (["samples", 0, "stop"], "tired", "sample 1's stop must be one of ['eot', 'max_new_tokens', 'stopped'], not 'tired'"),
    (["elapsed_s"], -1, "elapsed_s must be seconds"),
    (["notices"], ["x" * 501], "notices must be a list of at most 8 sentences"),
])
def test_what_does_not_fit_is_refused_with_a_message(served, path, value, message):
    params, _, data = served
    with pytest.raises(InputError, match=None) as err:
        read(_with(data, path, value), params)
    assert message in str(err.value)


def test_text_that_is_not_a_result_is_refused():
    for text, message in (("{not json", "must be JSON text"), ("[1, 2]", "must be a JSON object"),
                          ("x" * (MAX_BROWSER_CHARS + 1), f"at most {MAX_BROWSER_CHARS:,} characters"), (5, "must be JSON text")):
        with pytest.raises(InputError) as err:
            read_result(text)
        assert message in str(err.value)
