"""The norm-scaling figure (Collins et al. (2024), Figure 3, Theorem 3.4 and the covariance lemma): parameters, computation, claims and plots.

This package imports nothing itself, so the registry (:mod:`softmax_icl.book.registry`) can read ``params`` without
loading the figure's computation. The notebook imports the stage modules it calls.
"""
