"""Measurements of the exported model, its runtime and the app's tabs, each a command (docs/export.md has the figures):

    python -m benchmarks.bench              # the engine against PyTorch and transformers; --streams-only, --context-only, --memory
    python -m benchmarks.bench_sampling     # sampled decoding against greedy
    python -m benchmarks.quant_compare      # the 8-bit formats side by side (--shipped: the three shipped files)
    python -m benchmarks.browser_inside     # the Inside the model tab's click-to-drawn times in Chromium (docs/app.md)
    python -m benchmarks.bench_tabs         # every tab's slowest action, as the server answers it
    python -m benchmarks.bench_inside       # the Inside the model tab's controls
"""
