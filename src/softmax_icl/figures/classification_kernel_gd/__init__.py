"""The classification-kernel-gd figure (Dragutinovic, Saxe, Singh (2025), Figures 1-5 and ablations): parameters, computation, claims and plots.

This package imports nothing itself, so the registry (:mod:`softmax_icl.book.registry`) can read ``params`` without
loading the figure's computation. The notebook imports the stage modules it calls.
"""
