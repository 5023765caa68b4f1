"""The inference runtime: the exported ONNX GPT generating text on onnxruntime, for the app and the
benchmarks. Nothing here builds files (export/ does) or knows where they are kept (export.naming).

- ``interface``: the graph's input and output names, which export/ writes and the engine feeds
- ``providers``: CUDA or CPU, and why CUDA cannot be used
- ``engine``: ``Engine``, one onnxruntime session on a file: graph calls and the cache
- ``sampling``: the next token from logits (greedy, temperature, top-k, top-p)
- ``batching``: the decoding loop (``Batch``) and the scheduler many generations share
"""
