"""The Text generation tab's logic, one module a job (no Gradio; the page is ``playground/ui/generation.py``):

- ``params``: the settings, their starting values and checks, the example prompts, the precisions;
- ``state``: what a generation holds (each step's token and candidates, speed, stop reasons, the
  "Next token" history);
- ``streaming``: a generation run, the settings checked on the shared engine, then the engine's
  stream as state snapshots (the engine of each precision is ``Resources.engine_for``'s);
- ``figures``: the candidates chart of a step and its caption (and Compare's chart of one model);
- ``views``: the text as shaded tokens, the "Next token" steps, the statistics, the provider line.

Callers import a name from the module that owns it; this file imports nothing, so that one
module (``figures`` for Compare, ``params`` for the static edition) loads without the rest.
"""
