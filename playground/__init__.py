"""The playground's logic: one plain module per tab, no Gradio (app.py and the UI modules wire it).

Every module, with its job: docs/app.md, "Code".
"""

from .validation import InputError

__all__ = ["InputError"]
