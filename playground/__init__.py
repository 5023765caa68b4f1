"""The playground's logic: one plain module per tab, no Gradio (app.py and the UI modules wire it).

Modules: ``validation`` (InputError and shared checks), ``limits`` (every input limit),
``resources`` (the shared model and tokenizer), ``tokenization``, ``embeddings``,
``positional``, ``attention``, ``plots`` (shared plotly helpers), ``assets`` (shipped data).
"""

from .validation import InputError

__all__ = ["InputError"]
