"""Measurements of the exported model, its runtime and the app, each a command (docs/export.md lists them):

    python -m benchmarks.bench                # the engine against PyTorch and transformers; --streams-only, --context-only, --memory
    python -m benchmarks.bench_sampling       # sampled decoding against greedy
    python -m benchmarks.quant_compare        # the 8-bit formats side by side (--shipped: the three shipped files)
    python -m benchmarks.bench_tabs           # every tab's slowest action, as the server answers it
    python -m benchmarks.bench_inside         # the Inside the model tab's controls, as the server answers them
    python -m benchmarks.load                 # many gradio_client users at once on a launched app (--table: 1 and 16 clients)
    python -m benchmarks.page_generate        # the page's Generate event against /generate, side by side
    python -m benchmarks.classroom            # a class behind a proxy, the whole lesson (--url, --learners, --siege)
    python -m benchmarks.browser_engine       # the browser engine in Chromium beside native onnxruntime
    python -m benchmarks.browser_inside       # the Inside the model tab's click-to-drawn times in Chromium
    python -m benchmarks.browser_positional   # the Positional encoding tab's click-to-drawn at 1024 x 512
    python -m benchmarks.browser_compare      # Compare's untrained start drawn in the static edition's page, beside Python's
    python -m benchmarks.peak_memory          # the default test run's peak memory, every process it starts (-- COMMAND: another)
    python -m benchmarks.turns                # turns in the decoding loop: a yield's cost, learners' tokens beside a group
    python -m benchmarks.bench_train_step     # Watch it learn's step graph in onnxruntime against PyTorch's step
    python -m benchmarks.browser_learn        # Watch it learn trained in Chromium beside the server's step (--full: 500 steps)
"""
