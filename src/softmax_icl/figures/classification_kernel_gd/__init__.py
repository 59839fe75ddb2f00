"""The classification-kernel-gd figure (Dragutinovic, Saxe, Singh (2025), Figures 1-5 and ablations): parameters, computation, claims and plots.

The package exports its ``FIGURE`` (the parameters, from ``params``), which :mod:`softmax_icl.figures` registers; it
imports nothing else, so the registry is read without loading the figure's computation. The notebook imports the
stage modules it calls.
"""

from .params import FIGURE

__all__ = ["FIGURE"]
