"""The inference runtime: the exported ONNX GPT generating text on onnxruntime, for the app and the
benchmarks. Nothing here builds files (export/ does) or knows where they are kept (export.naming).

Modules, each importing only those above it:

- ``draws``: Philox4x32-10, the random numbers the server and the browser draw alike
- ``interface``: the graph's input and output names, which export/ writes and the engine feeds
- ``providers``: CUDA or CPU, and why CUDA cannot be used
- ``engine``: ``Engine``, one onnxruntime session on a file: graph calls and their cache
- ``sampling``: the next token from logits (greedy, temperature, top-k, top-p)
- ``params``: ``SamplingParams``, what a generation asks for, checked once; the prompt's check
- ``steps``: what a generation yields, one ``Step`` per new position
- ``batching``: the decoding loop (``Batch``) and the ``Scheduler`` many generations share
- ``generate``: ``generate`` and ``stream``, one generation alone in the loop
"""
