"""ZeroGPU (playground/ui/serving/zerogpu.py): Inside the model's and Compare's passes go through
``spaces.GPU`` with the durations asked, a spent quota is told in the app's words, and off ZeroGPU
the handlers are the functions themselves."""

from __future__ import annotations

import gradio as gr
import pytest
import spaces

from conftest import shipped_resources
from playground.ui.serving import zerogpu


def test_off_zerogpu_the_handler_is_the_function_itself():
    """spaces.GPU returns the task itself when SPACES_ZERO_GPU is unset: nothing wraps it."""
    def handler(x):
        return x + 1

    assert zerogpu.on_gpu(10)(handler) is handler


@pytest.fixture
def lent(monkeypatch) -> list[tuple[str, int]]:
    """spaces.GPU as on ZeroGPU: a wrapper, each decoration recorded (name, duration)."""
    decorated: list[tuple[str, int]] = []

    def fake_gpu(task=None, *, duration=None, size=None):
        def wrap(fn):
            decorated.append((fn.__name__, duration))

            def on_the_gpu(*args, **kwargs):
                return fn(*args, **kwargs)

            return on_the_gpu
        return wrap

    monkeypatch.setattr(spaces, "GPU", fake_gpu)
    return decorated


def test_on_zerogpu_the_call_goes_through_spaces_gpu_and_a_spent_quota_is_told_plainly(lent):
    def spent():
        raise gr.Error("You have exceeded your free ZeroGPU quota (10s requested vs. 3s left). Try again in 5:00:00.",
                       title="ZeroGPU quota exceeded")

    def wrong_input():
        raise gr.Error("text must not be empty")

    ok = zerogpu.on_gpu(7)(lambda: 42)
    assert ok() == 42 and lent == [("<lambda>", 7)]
    with pytest.raises(gr.Error) as told:
        zerogpu.on_gpu(10)(spent)()
    assert told.value.message == zerogpu.QUOTA_MESSAGE and "Run on: this browser" in told.value.message
    with pytest.raises(gr.Error) as other:  # any other refusal is left as it was
        zerogpu.on_gpu(10)(wrong_input)()
    assert other.value.message == "text must not be empty"
    assert zerogpu.is_quota_error(gr.Error("Space app has reached its GPU limit. Try again later."))
    assert not zerogpu.is_quota_error(ValueError("quota"))  # only ZeroGPU's own refusals


def test_inside_and_compare_register_their_passes_as_gpu_calls(lent):
    """Building the two tabs passes each of their pass handlers, and their API functions, through
    spaces.GPU with the tab's duration; nothing else is decorated (generation costs no quota)."""
    from playground.ui import compare, inside

    with gr.Blocks():
        with gr.Tab("Inside the model") as tab:
            inside.build(shipped_resources(), tab)
        with gr.Tab("Compare"):
            compare.build()
    got = sorted(lent)
    assert got == sorted([(name, zerogpu.INSIDE_GPU_S) for name in ("ui_run", "ui_rows", "api_inside")]
                         + [(name, zerogpu.COMPARE_GPU_S) for name in ("ui_compare_next_token", "ui_compare_neighbours",
                                                                        "ui_compare_attention", "api_compare")])
