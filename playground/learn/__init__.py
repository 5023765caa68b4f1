"""Watch it learn: a small GPT trained from random weights on the server's CPU, live. One job a
module:

- ``corpus``: Shakespeare's works as ids of a small vocabulary (characters by default);
- ``refs``: the reference losses (ln V, unigram, bigram, the shipped model);
- ``run``: a run's settings, its untrained model, its samples, its state;
- ``batches``: a run's batches, drawn from the generator the browser shares (runtime/draws.py);
- ``batched``: one training step of many same-shaped models at once (model.train's step);
- ``scheduler``: many learners' runs at once, grouped by shape, a line past the limit;
- ``view``: the chart, the counters, the samples, the table of runs, the sentences;
- ``__main__``: the command line, ``python -m playground.learn --vocab gpt2 --steps 500``.
"""
