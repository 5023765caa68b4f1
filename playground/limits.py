"""Every input limit of the playground, in one place (docs/app.md's "Limits" section lists them).

Each constant is the largest (or smallest) value a public function accepts; past it the function
raises :class:`playground.validation.InputError` with a message naming the limit.
"""

from __future__ import annotations

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
MIN_TOP_K = 0  # 0 = no cut; maximum: the vocabulary size (50257)
MIN_TOP_P, MAX_TOP_P = 0.0, 1.0  # top-p in (0, 1]
MIN_SEED, MAX_SEED = 0, 2**32 - 1
MIN_SAMPLES, MAX_SAMPLES = 1, 4
# Wall-clock budget of one generation: past it the generation stops after the current token with
# stop reason "time limit" and a notice, so no request (or abandoned job) holds a slot for long.
# 4 samples x 512 tokens take ~20 s on the 2-core CPU with another generation running.
GENERATION_BUDGET_S = 60.0
# Continuous batching (runtime/batching.py): samples decoding together in one loop. Each holds up
# to the context's 256 positions of cache (3 MiB for the shipped model), so the batch's cache
# stays under 50 MiB; a generation that does not fit waits for rows to free up (first come,
# first served), and past MAX_WAITING_REQUESTS waiting ones a new one is told to try again.
MAX_BATCH_ROWS = 16
MAX_WAITING_REQUESTS = 64
