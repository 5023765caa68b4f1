"""A handler wired to a result store (``ResultStore.through``) is matched to its state by the
component itself, never by a position counted by hand: it gets its own session's result under
its parameter's name, keeps what it returns in the state's output, and a wiring that could mix
sessions or arguments up fails when the page is built, not silently while learners use it. The
launched-app round trip is in tests/serving/test_held_streams.py."""

from __future__ import annotations

import inspect

import gradio as gr
import pytest

from playground.ui.serving.sessions import RESULT_KEY, ResultStore, Wiring


def test_a_handler_gets_its_own_sessions_result_by_name_and_never_anothers():
    """The state first among the inputs, its value last among the handler's parameters: the
    other inputs still reach their own parameters, and each session's result its own handler."""
    store = ResultStore()
    state, prompt, seed, shown = store.state(), gr.Textbox(), gr.Number(), gr.HTML()

    def step(prompt, seed, previous):
        seen = [] if previous is None else previous
        return f"{prompt}#{seed} after {len(seen)}", [*seen, prompt]

    wired = store.through(step, inputs=[state, prompt, seed], outputs=[shown, state], state=state, read="previous")
    # What Gradio reads to place the inputs: the key where the state is, the handler's own names after it.
    assert list(inspect.signature(wired.fn).parameters) == [RESULT_KEY, "prompt", "seed"]
    ann = bob = None  # each session's state, as Gradio keeps it
    for turn in range(3):
        shown_a, ann = wired.fn(ann, f"ann{turn}", 1)
        shown_b, bob = wired.fn(bob, f"bob{turn}", 2)
        assert (shown_a, shown_b) == (f"ann{turn}#1 after {turn}", f"bob{turn}#2 after {turn}")
    assert ann != bob
    assert store.get(ann) == ["ann0", "ann1", "ann2"] and store.get(bob) == ["bob0", "bob1", "bob2"]
    assert len(store) == 2  # one entry a session, however many runs


def test_a_wiring_is_the_events_function_inputs_and_outputs_in_one():
    """``click(*wiring)``: the event gets the very lists the handler was wired for."""
    store = ResultStore()
    with gr.Blocks() as demo:
        state, box, out, button = store.state(), gr.Textbox(), gr.Textbox(), gr.Button()
        wiring = store.through(lambda text: (text.upper(), text), inputs=[box, state], outputs=[out, state], state=state)
        button.click(*wiring, api_visibility="private")
    assert isinstance(wiring, Wiring)
    (event,) = [fn for fn in demo.fns.values() if fn.fn is wiring.fn]
    assert len(event.inputs) == 2 and event.inputs[0] is box and event.inputs[1] is state  # the very components
    assert len(event.outputs) == 2 and event.outputs[0] is out and event.outputs[1] is state


def _handler(text, seed, previous, request: gr.Request | None = None):
    return text, previous


@pytest.mark.parametrize(
    "wire, says",
    [
        # The old failure: the session's key not passed in, so every run kept a new entry and read nothing.
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1]], outputs=[c[2], st], state=st, read="previous"),
         "among the inputs exactly once"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], st, st], outputs=[c[2], st], state=st, read="previous"),
         "among the inputs exactly once"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2], st, st], state=st, read="previous"),
         "among the outputs 2 times"),
        # A state of another store: its keys would find nothing here, or another session's result.
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2], st], state=ResultStore().state(),
                                    read="previous"), "made by this store"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2], st], state=gr.State(), read="previous"),
         "made by this store"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2], st], state=st, read="prev"),
         "read='prev' must name one of its parameters"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2], st], state=st, read="request"),
         "read='request' must name one of its parameters"),
        # An input added without its parameter, or one left out: each would shift the others.
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], c[3], st], outputs=[c[2], st], state=st, read="previous"),
         "must pair off"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], st], outputs=[c[2], st], state=st, read="previous"),
         "must pair off"),
        (lambda s, st, c: s.through(_handler, inputs=[c[0], c[1], st], outputs=[c[2]], state=st), "neither reads"),
    ],
    ids=["state-missing-from-inputs", "state-twice-in-inputs", "state-twice-in-outputs", "another-stores-state",
         "a-plain-state", "read-unknown-parameter", "read-what-gradio-fills", "an-input-too-many", "an-input-too-few",
         "neither-reads-nor-keeps"],
)
def test_a_miswiring_fails_when_the_page_is_built_saying_what_is_wrong(wire, says):
    store = ResultStore()
    components = [gr.Textbox(), gr.Number(), gr.HTML(), gr.Slider()]
    with pytest.raises(ValueError, match="through") as err:
        wire(store, store.state(), components)
    assert says in str(err.value)


def test_a_handler_returning_a_value_too_few_keeps_nothing_instead_of_another_output():
    """Which value is the result comes from the state's place among the outputs: a handler that
    gives fewer values than there are outputs would put another output's value in the store."""
    store = ResultStore()
    state = store.state()
    wired = store.through(lambda text: (text, text), inputs=[gr.Textbox(), state],
                          outputs=[gr.HTML(), gr.Markdown(), state], state=state)
    with pytest.raises(ValueError, match="2 values for its 3 outputs"):
        wired.fn("a run", None)
    assert len(store) == 0


def test_what_gradio_fills_itself_keeps_its_place_after_the_inputs():
    """A request or event-data parameter (typed) is not an input: the key goes before it, where
    the state is among the inputs, so Gradio still places what it fills by the signature."""
    store = ResultStore()
    state = store.state()

    def pick(state, evt: gr.EventData):
        return evt, state

    wired = store.through(pick, inputs=[state], outputs=[gr.HTML(), gr.Markdown()], state=state, read="state")
    assert list(inspect.signature(wired.fn).parameters) == [RESULT_KEY, "evt"]
    key = store.put("kept")
    assert wired.fn(key, "the click") == ("the click", "kept")
