"""The Gradio wiring: one module per tab (``build()`` inside a ``gr.Tab``), plus ``common``
(errors -> gr.Error, concurrency groups, theme) and ``startup`` (the ONNX files)."""
