"""What a session keeps: Gradio keeps, per session, a copy of every component's config with the
last value each input and output took (for deep links, off here), for up to 10,000 sessions, and
every raw ``/gradio_api/call/...`` request is a new session. Here a session keeps only its
``gr.State`` values and the components an event updated (:class:`LeanSessionState`); at most
:data:`MAX_SESSIONS` sessions are kept, at most :data:`MAX_SESSIONS_WITH_RESULTS` of them with
their results (:class:`BoundedStateHolder`); a session id is a short token (:data:`SESSION_HASH`)."""

from __future__ import annotations

import datetime
import re
from copy import copy
from typing import Any

import gradio as gr
from gradio.state_holder import SessionState, StateHolder

# Sessions kept (least recently used dropped first). A lean session without results costs a few
# kilobytes (a shallow copy of the app's component table), so this is a few megabytes at most.
MAX_SESSIONS = 1_000
# Sessions that keep their results: a 4 x 512-token generation's per-token candidates take about
# 5 MB, attention's stages about 1 MB; past this the least recently used session's results are
# dropped (its token and stage pickers then show nothing until the next run).
MAX_SESSIONS_WITH_RESULTS = 32


class LeanSessionState(SessionState):
    """Gradio's session state less ``config_values``: the copy of every component's config,
    with the last value each input and output took, that Gradio keeps only to serve deep links
    (off in this app). Building that copy took ~0.1 s of CPU and ~290 KB per new session; the
    values (a 5 MB text, a 1024 x 1024 table) were kept until the session was evicted.

    What stays: the session's ``gr.State`` values and the components an event updated (a slider's
    new maximum), exactly as Gradio keeps them."""

    def __init__(self, blocks: gr.Blocks):  # noqa: D107 -- no super().__init__: it builds config_values
        self.blocks_config = copy(blocks.default_config)
        self.config_values: dict[int, Any] = {}
        self.state_data: dict[int, Any] = {}
        self._state_ttl: dict[int, Any] = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 3600  # Gradio's: a closed tab's state lives an hour

    def __setitem__(self, key: int, value: Any) -> None:
        block = self.blocks_config.blocks.get(key)
        if isinstance(block, gr.State):
            self._state_ttl[key] = (block.time_to_live, datetime.datetime.now())
            self.state_data[key] = value
        else:
            self.blocks_config.blocks[key] = value

    def _update_config(self, key: int) -> None:
        pass

    def _update_value_in_config(self, key: int, value: Any) -> None:
        pass


class BoundedStateHolder(StateHolder):
    """Gradio's store of sessions with :class:`LeanSessionState` sessions, at most
    ``capacity`` of them (Gradio's least-recently-used eviction), of which at most
    ``max_with_results`` keep their ``gr.State`` values."""

    def __init__(self, capacity: int = MAX_SESSIONS, max_with_results: int = MAX_SESSIONS_WITH_RESULTS):
        super().__init__()
        self.capacity = capacity
        self.max_with_results = max_with_results

    def set_blocks(self, blocks: gr.Blocks) -> None:
        self.blocks = blocks
        blocks.state_holder = self

    def __getitem__(self, session_id: str) -> SessionState:
        if session_id not in self.session_data:
            self.session_data[session_id] = LeanSessionState(self.blocks)
        self.update(session_id)
        self.time_last_used[session_id] = datetime.datetime.now()
        return self.session_data[session_id]

    def update(self, session_id: str) -> None:
        super().update(session_id)  # most recent last; past capacity the oldest session goes
        with self.lock:
            holding = [sid for sid, session in self.session_data.items() if session.state_data]
        for sid in holding[: max(0, len(holding) - self.max_with_results)]:
            session = self.session_data.get(sid)
            if sid != session_id and session is not None:
                self._drop_results(session)

    @staticmethod
    def _drop_results(session: SessionState) -> None:
        """All of a session's ``gr.State`` values, including the copy of a default Gradio makes
        when a State is first read (``delete_state`` leaves that one: it only knows the values
        an event set)."""
        for key, value in list(session.state_data.items()):
            block = session.blocks_config.blocks.get(key)
            if isinstance(block, gr.State):
                block.delete_callback(value)
        session.state_data.clear()
        session._state_ttl.clear()


def bound_sessions(app: Any) -> BoundedStateHolder:
    """Give the launched app (``demo.app``) a :class:`BoundedStateHolder`; called at start-up,
    before the first request."""
    holder = BoundedStateHolder()
    holder.set_blocks(app.get_blocks())
    app.state_holder = holder
    return holder


# A session id is a short token: the page makes ~11 base-36 characters, gradio_client a UUID (36).
SESSION_HASH = re.compile(r"[A-Za-z0-9_-]{1,64}")


def session_problem(session: Any) -> str | None:
    """Why ``session`` cannot be a session id, or None."""
    if isinstance(session, str) and SESSION_HASH.fullmatch(session):
        return None
    shown = f"{len(session):,} characters" if isinstance(session, str) else type(session).__name__
    return (f"session_hash must be a short token: 1 to 64 letters, digits, '-' or '_' (got {shown}); "
            "the page and gradio_client make one for you.")

