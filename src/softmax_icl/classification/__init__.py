"""In-context classification with one attention layer (Dragutinovic, Saxe, Singh 2025).

Paper 2 in paper 1's shape; import the modules themselves (this file imports nothing, so it stays light):

* :mod:`.tasks` — the context sampler (every reading of the task), fixed evaluation sets;
* :mod:`.models` — softmax and linear attention units, the paper's weight constructions, the batched trainer;
* :mod:`.algorithms` — one GD step, kernel GD and the two ablated steps, and their hyperparameter search;
* :mod:`.metrics` — cross-entropy, alignment metrics, per-context statistics.
"""
