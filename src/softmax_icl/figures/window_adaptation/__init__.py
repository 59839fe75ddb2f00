"""The window-adaptation figure (Collins et al. (2024), Figure 1): parameters, computation, claims and plots.

This package imports nothing itself, so the registry (:mod:`softmax_icl.book.registry`) can read ``params`` without
loading the figure's computation. The notebook imports the stage modules it calls.
"""
