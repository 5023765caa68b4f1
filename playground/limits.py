"""Every limit of the playground, in one place (docs/app.md's "Limits" section lists them).

Inputs: each constant is the largest (or smallest) value a public function accepts; past it the
function raises :class:`playground.validation.InputError` with a message naming the limit.

Serving: what the server holds at once (queue places, per-visitor shares, streams, sessions,
connections, downloads, Watch it learn's runs). Those an operator may change name their
environment variable beside them, and are read once, at import, by :func:`env_int` or
:func:`env_float`: a value that is not a number in the accepted range keeps the default, with a
warning naming the variable. No other module reads the environment for a limit
(tests/lessons/test_limits.py holds that).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping

# A child of the app's logger: its warnings come once at start, and the rate limit the parent
# logger filters with (serving/connections.py) must not swallow them.
log = logging.getLogger("playground.limits")


def _refused(name: str, raw: str, kind: str, low: float, high: float, default: float) -> None:
    low_, high_, default_ = (f"{x:,}" if isinstance(x, int) else f"{x:g}" for x in (low, high, default))
    log.warning("%s=%r is refused: not %s from %s to %s; using the default, %s", name, raw, kind, low_, high_, default_)


def env_int(name: str, default: int, low: int, high: int, environ: Mapping[str, str] = os.environ) -> int:
    """The environment variable ``name`` as a whole number from ``low`` to ``high`` (both
    accepted); ``default`` when it is unset or blank, and, with a warning, when it is anything
    else (a fraction, a word, out of range). ``environ``: where it is read (tests pass a dict)."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    # ASCII digits only: str.isdigit() takes "²", which int() then refuses.
    if re.fullmatch(r"[+-]?[0-9]+", raw) and low <= int(raw) <= high:
        return int(raw)
    _refused(name, raw, "a whole number", low, high, default)
    return default


def env_float(name: str, default: float, low: float, high: float, environ: Mapping[str, str] = os.environ) -> float:
    """The environment variable ``name`` as a number from ``low`` to ``high`` (both accepted);
    ``default`` when it is unset or blank, and, with a warning, when it is anything else (a
    word, nan, infinity, out of range)."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if low <= value <= high:  # (nan is refused here too)
        return value
    _refused(name, raw, "a number", low, high, default)
    return default


# ============================== Inputs =========================================================

# --- Any request ------------------------------------------------------------------------------
# Bytes of one HTTP request body, refused with 413 before it is read (playground/ui/serving/middleware.py).
# The largest valid input is 50,000 characters of token ids: 50 KB as typed, 600 KB at the very
# worst (JSON-escaped characters outside the BMP, 12 bytes each); 20,000 characters of text
# are at most 240 KB however they are encoded.
MAX_REQUEST_BYTES = 1 << 20  # 1 MiB

# --- Text, any tab -----------------------------------------------------------------------------
# Characters, not tokens: the check is cheap and runs before any tokenization.
MAX_TEXT_CHARS = 20_000  # tokenization tab input
MAX_IDS_TEXT_CHARS = 50_000  # "31373, 2506, ..." typed into the ids -> text box
MAX_IDS = 5_000  # ids decoded in one call

# --- Embeddings tab ----------------------------------------------------------------------------
MAX_EXPRESSION_CHARS = 200  # "king - man + woman"
MAX_EXPRESSION_TERMS = 12  # words in one expression
MAX_EXPRESSION_DEPTH = 8  # nested parentheses / unary minus
MAX_COEFFICIENT = 1_000.0  # |number| in an expression, e.g. 0.5*a
MAX_WORD_CHARS = 40  # one word (cosine similarity, PCA list)
MAX_WORD_TOKENS = 8  # GPT-2 tokens one word may split into (averaged)
MIN_NEIGHBOURS, MAX_NEIGHBOURS = 1, 50  # nearest tokens returned
# Compare's layer and head: clamped to each model's size (a compared model may have fewer), so only
# a bound on the number itself.
MAX_COMPARE_INDEX = 1_000
MIN_PCA_WORDS, MAX_PCA_WORDS = 3, 60  # words in the projection
MAX_WORD_LIST_CHARS = 2_000  # the comma-separated word list as typed
MAX_SENTENCE_CHARS = 1_000  # static vs contextual: each sentence

# --- Positional encoding tab -------------------------------------------------------------------
MIN_D_MODEL, MAX_D_MODEL = 2, 1_024  # even only
MIN_POSITIONS, MAX_POSITIONS = 1, 1_024
MIN_BASE, MAX_BASE = 2.0, 1_000_000.0  # the paper's base is 10000
MAX_PLOT_DIMS = 16  # dimensions drawn in the line plot at once
MAX_TABLE_VALUES = 1_024 * 512  # the API's table: the Transformer tutorial's whole 1024 x 512 one; larger ones are cut to its first rows
MAX_SIMILARITY_POSITIONS = 256  # the positions x positions similarity heatmap is cut to this

# --- Attention tab -----------------------------------------------------------------------------
MAX_ATTENTION_CHARS = 2_000
MAX_ATTENTION_TOKENS = 64  # beyond this the token labels of a heatmap are unreadable

# --- Inside the model tab ----------------------------------------------------------------------
# The Attention tab's limits: the same rows of tokens, one forward pass kept per text.
MAX_INSIDE_CHARS = MAX_ATTENTION_CHARS
MAX_INSIDE_TOKENS = MAX_ATTENTION_TOKENS

# --- Text generation tab (used by the generation logic) ----------------------------------------
MAX_PROMPT_CHARS = 4_000  # prompts longer than the context (in tokens) keep their last tokens
MIN_NEW_TOKENS, MAX_NEW_TOKENS = 1, 512
# The conventions of transformers, OpenAI's API, llama.cpp and Ollama: temperature 0 is greedy
# (always the most likely token) and top-k 0 keeps every token (no cut).
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.0, 5.0  # 0 = greedy
MIN_TOP_K, MAX_TOP_K = 0, 50_257  # 0 = no cut; at most the vocabulary's size (GPT-2's tokenizer)
MIN_TOP_P, MAX_TOP_P = 0.0, 1.0  # top-p in (0, 1]
MIN_SEED, MAX_SEED = 0, 2**32 - 1
MIN_SAMPLES, MAX_SAMPLES = 1, 4
# Wall-clock budget of one generation: past it the generation stops after the current token with
# stop reason "time limit" and a notice, so no request (or abandoned job) holds a slot for long.
# The largest request (4 samples x 512 tokens) ends well within it on a 2-core CPU beside
# another generation.
GENERATION_BUDGET_S = 60.0
# Continuous batching (runtime/batching.py's Scheduler, which takes both): samples decoding
# together in one loop. Each row holds up to the context's 256 positions of cache (3 MiB for the
# shipped model), so 16 keep the batch's cache under 50 MiB; and one step of 16 rows costs a few
# single steps on a CPU, where 64 would make every user wait longer. A generation that does not
# fit waits for rows to free up (first come, first served), and past MAX_WAITING_REQUESTS waiting
# ones a new one is told to try again.
MAX_BATCH_ROWS = 16
MAX_WAITING_REQUESTS = 100


# ============================== Serving ========================================================
# What the server holds at once, whatever the traffic. Where an environment variable is named,
# it changes the bound (read once, at start; a bad value keeps the default with a warning).

# --- The queue: concurrency groups (playground/ui/common.py names the groups; app.py makes it) --
# Sized for a small Space (2 vCPUs). Generations share one decoding loop: a handler only waits for
# its tokens, so more run than the batch has rows, the others waiting in the loop's own line
# (runtime/batching.py), where visitors take turns by tokens and a running generation yields its
# rows after a slice (runtime/turns.py). In Gradio's line a learner's generation would wait for a
# whole 512-token generation of someone else's to end; in the loop's, one slice at most. So every
# generation admitted runs a handler (a group of addresses keeping 64 in flight took 64 handlers,
# and learners past them waited in Gradio's line for 47.6 s), and Gradio's own line for
# generations is only the moment between one handler's end and the next one's start. A waiting
# handler holds a thread and its request's inputs, nothing of the model's: 16 decode, 100 take
# turns (docs/space.md, "Turns in the decoding loop", measures 116 against 16).
GENERATION_CONCURRENCY = MAX_BATCH_ROWS + MAX_WAITING_REQUESTS
FORWARD_CONCURRENCY = 2  # PyTorch on the server's cores: a heavy pass or a training run each
LIGHT_CONCURRENCY = 8  # the light tabs answer in milliseconds and never wait behind the others
# Building and sending megabytes of JSON holds the interpreter for most of a second, so a few big
# answers at once would starve every other tab: one at a time, each under MAX_TABLE_VALUES.
EXPENSIVE_CONCURRENCY = 1
# Requests waiting for a slot in a slow group, past which a new one is refused at once
# (playground/ui/serving/admission.py), so that a flood of one kind can never fill the queue the
# light tabs share. A class of 100 (what one small Space serves), each asking at once, fits rather
# than being told "busy": a waiting request holds only its inputs, and the line keeps arrival order
# where retries would race. 116 generate (16 decode, 100 take turns in the loop's line) and 100
# wait in Gradio's: a handler frees at once, but a class clicking together arrives faster than
# Gradio starts handlers, and with 8 places 30 of 40 learners were told busy in that instant (past
# the 216, a learner is refused at once and offered "Run on: this browser"); heavy passes: 2 run
# and 100 wait.
MAX_WAITING_GENERATIONS = 100
MAX_WAITING_FORWARD = 100
# Watch it learn's runs waiting in Gradio's queue, behind the trainer's MAX_RUNNING + MAX_LINE.
MAX_WAITING_LEARNERS = 16
# The whole queue, past which a request is refused with "queue is full": above the slow groups'
# waiting places together, so that a full house of slow work still leaves the light tabs places.
QUEUE_MAX_SIZE = 256
MAX_UPLOAD_BYTES = 0  # no tab takes a file: Gradio's upload route refuses any content (413)

# --- Shares: one visitor's places in the queue (playground/ui/serving/admission.py) -------------
# Requests queued or running at once from one visitor: one that submits and never reads (or reads
# too slowly for its socket ever to fill) holds at most this many places. The page makes a few at
# once; the per-group shares below keep one visitor to its part of the slow work.
MAX_EVENTS_PER_ADDRESS_ENV = "PLAYGROUND_MAX_EVENTS_PER_ADDRESS"
MAX_EVENTS_PER_ADDRESS = env_int(MAX_EVENTS_PER_ADDRESS_ENV, 64, 1, 100_000)
# A few generations and heavy passes per visitor, waiting or running: one visitor then holds at
# most a quarter of the generation slots, and a class of 40 fits beside a visitor asking for
# hundreds.
GENERATIONS_PER_VISITOR = env_int("PLAYGROUND_GENERATIONS_PER_VISITOR", 4, 1, 100_000)
HEAVY_PER_VISITOR = env_int("PLAYGROUND_HEAVY_PER_VISITOR", 4, 1, 100_000)
# The trainer takes one run per visitor; two places let Stop then Start through while the stopped
# run's event is still letting go, and keep one visitor from filling the line with runs the
# trainer would refuse anyway.
RUNS_PER_VISITOR = env_int("PLAYGROUND_RUNS_PER_VISITOR", 2, 1, 100_000)

# --- Connections, below HTTP (playground/ui/serving/connections.py) -----------------------------
# uvicorn waits for ever for a request's headers: a connection that sends none is closed after
# this, and sooner as the total fills (down to MIN_IDLE_TIMEOUT_S when full), so that idle
# connections cannot lock new visitors out.
HEADER_TIMEOUT_S = 10.0
MIN_IDLE_TIMEOUT_S = 1.0
# Each connection costs a file descriptor and ~10 KB; a page holds 2-4, a script 1.
MAX_CONNECTIONS = env_int("PLAYGROUND_MAX_CONNECTIONS", 1_000, 16, 100_000)
MAX_CONNECTIONS_PER_ADDRESS = env_int("PLAYGROUND_MAX_CONNECTIONS_PER_ADDRESS", 64, 4, 100_000)

# --- Streams held open: heartbeats and result streams (playground/ui/serving/streams.py) --------
# A page holds two (its heartbeat and, while an event runs, its result stream); a script one per
# result it waits for. Half the connections at most, so that streams never take them all.
MAX_STREAMS = env_int("PLAYGROUND_MAX_STREAMS", max(8, MAX_CONNECTIONS // 2), 8, 100_000)
MAX_STREAMS_PER_VISITOR = env_int("PLAYGROUND_MAX_STREAMS_PER_VISITOR", 32, 2, 100_000)
MAX_STREAMS_PER_SESSION = env_int("PLAYGROUND_MAX_STREAMS_PER_SESSION", 4, 2, 1_000)
# How long a heartbeat for a session not yet known waits for its first join, and how many of one
# visitor's may wait at once (past them: 404 at once). A page's join follows its heartbeat by a
# second or so (docs/space.md, "Held streams and churned sessions"); a slow phone takes longer to
# lay the page out. With 0 every unknown session's heartbeat is refused at once, and pages keep
# none (Gradio then never marks a closed tab's session closed; the bounds above still hold).
HEARTBEAT_JOIN_WAIT_S = env_float("PLAYGROUND_HEARTBEAT_JOIN_WAIT_S", 5.0, 0.0, 60.0)
HEARTBEATS_WAITING_PER_VISITOR = env_int("PLAYGROUND_HEARTBEATS_WAITING_PER_VISITOR", 4, 0, 1_000)

# --- Sessions and their results (playground/ui/serving/sessions.py) -----------------------------
# Sessions kept (least recently used dropped first). A session costs a few kilobytes (a shallow
# copy of the app's component table and its results' keys), so this is a few megabytes at most.
MAX_SESSIONS = 1_000
# Results kept per kind: a 4 x 512-token generation's per-token candidates take about 5 MB,
# attention's stages about 1 MB; past this the least recently used is dropped (its session's
# token and stage pickers then show nothing until its next run).
MAX_RESULTS = 32
# One visitor's share of each: a page is one session holding one result of each kind, so these
# are a visitor's open pages (tabs, or learners sharing one address). Past its share a visitor's
# own least recently used goes, never another learner's.
SESSIONS_PER_VISITOR = env_int("PLAYGROUND_SESSIONS_PER_VISITOR", MAX_SESSIONS // 4, 1, 1_000_000)
RESULTS_PER_VISITOR = env_int("PLAYGROUND_RESULTS_PER_VISITOR", MAX_RESULTS // 2, 1, 1_000_000)

# --- Work nobody reads (playground/ui/serving/orphaned.py) --------------------------------------
# An event whose session has had no result stream open for this long since it was submitted is
# stopped: the page and gradio_client open their stream within milliseconds of the POST, a
# script's GET follows its POST, and a job nobody came for would hold a generation slot until its
# time limit, and a few such jobs make the next user wait (docs/app.md, Limits: "Abandoned work").
# A shorter grace stops abandoned work sooner, a longer one waits for slow scripts.
READER_GRACE_ENV = "PLAYGROUND_READER_GRACE_S"


def reader_grace_s(environ: Mapping[str, str] = os.environ) -> float:
    """``PLAYGROUND_READER_GRACE_S`` (seconds from 0.5 to 600), 5 when unset or not such a number."""
    return env_float(READER_GRACE_ENV, 5.0, 0.5, 600.0, environ)


READER_GRACE_S = reader_grace_s()

# --- Downloads of the browser's model (playground/ui/serving/browser_files.py) ------------------
# A page downloads the model once (then keeps it); another tab opened at the same moment downloads
# it too, and a class behind one school address is one visitor. As many at once per visitor as
# its generations: the others wait their turn (429, the page tries again), and one client cannot
# open hundreds of model-sized streams.
MODEL_STREAMS_PER_VISITOR = env_int("PLAYGROUND_MODEL_STREAMS_PER_VISITOR", 4, 1, 1_000)
# Every file under /browser/ (the model, onnxruntime-web's, the page's own modules): downloads open
# at once per visitor (a page loads its modules 6 at a time, a browser's connections to one host),
# and bytes per minute per visitor, refilled evenly (playground/ui/serving/byte_budget.py). A
# page's whole first load is about 35 MB (the 8-bit model 18.4 MB, onnxruntime's WebAssembly
# gzipped, the modules), so a minute's budget holds it twice: one address pulled 4.3 GB of the
# WebAssembly in 20 s before; now at most 64 + 21 MB. On a Space it is the Space's bandwidth.
FILE_DOWNLOADS_PER_VISITOR = env_int("PLAYGROUND_FILE_DOWNLOADS_PER_VISITOR", 8, 1, 1_000)
FILE_MB_PER_MINUTE = env_int("PLAYGROUND_FILE_MB_PER_MINUTE", 64, 20, 100_000)

# --- Watch it learn's settings (playground/learn/run.py) ----------------------------------------
# A run is a number of steps (the same settings give the same curve however loaded the server);
# seconds only cap it. How long the page's run takes: docs/training.md, "Watch it learn".
MIN_LEARN_STEPS, MAX_LEARN_STEPS = 1, 5_000
MIN_LEARN_SECONDS, MAX_LEARN_SECONDS = 5, 300
# A run's seed: 31 bits, what a JavaScript number, a link and the browser's worker hold as an
# integer alike (the generator itself takes 32: runtime.draws).
MAX_LEARN_SEED = 2**31 - 1
# The prompt a trained run's model continues: a few lines of the character vocabulary (its model's
# context is 64 or 128 characters; longer keeps the last of them).
MAX_LEARN_PROMPT_CHARS = 500

# --- Watch it learn's trainer (playground/learn/scheduler.py) -----------------------------------
# Runs holding a place at once: they share the trainer's steps, a turn stepping the STEP_RUNS
# given the least training time (new runs first), so a run arriving while 16 train takes its first
# step in the next turn or the one after, not when one of them ends (docs/training.md, "Watch it
# learn for a class"). A place holds its model and optimizer (a few MB at the page's sizes).
MAX_RUNNING = 32
STEP_RUNS = 8  # runs stepped in one turn: a turn of 8 stacked tiny steps takes 0.1-0.8 s on 2 cores
# Runs waiting in the trainer's line, told their place; past it a learner is told to try again in
# a minute. Not more: each learner in line holds one of Gradio's worker threads while it waits
# (its handler polls the trainer), beside the generations and the forward and light tabs' own;
# the learners past it wait in Gradio's queue, holding none (MAX_WAITING_LEARNERS).
MAX_LINE = 8
# A run's fair share while others wait: the page's run (500 steps) is never cut for its steps,
# and no run holds a place for more than FAIR_SECONDS of training once someone waits, which bounds
# the wait of the first in line whatever the load (docs/training.md).
FAIR_STEPS = env_int("PLAYGROUND_LEARN_FAIR_STEPS", 500, 1, 5_000)
FAIR_SECONDS = env_int("PLAYGROUND_LEARN_FAIR_SECONDS", 120, 5, 300)

# Gradio's worker threads (``launch(max_threads=...)``, 40 by default): a generator's handler holds
# one while it waits for its next update, so every group's concurrency is counted, and a few more
# for the handlers without a group.
WORKER_THREADS = (GENERATION_CONCURRENCY + FORWARD_CONCURRENCY + LIGHT_CONCURRENCY + EXPENSIVE_CONCURRENCY
                  + MAX_RUNNING + MAX_LINE + 8)


def for_browser() -> dict[str, int | float]:
    """Every limit by its name here (``MAX_PROMPT_CHARS``...): what a page checks in the browser
    before it runs anything, the one route by which limits reach both editions (the static
    edition's site.json, the app's Run on: this browser)."""
    names = globals()
    return {name: value for name, value in sorted(names.items())
            if name.isupper() and isinstance(value, (int, float)) and not isinstance(value, bool)}
