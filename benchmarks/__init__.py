"""Measurements of the exported model and its runtime, each a command (docs/export.md has the figures):

    python -m benchmarks.bench              # the engine against PyTorch and transformers; --streams-only, --context-only, --memory
    python -m benchmarks.bench_sampling     # sampled decoding against greedy
    python -m benchmarks.quant_compare      # the 8-bit formats side by side (--shipped: the three shipped files)
"""
