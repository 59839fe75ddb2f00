"""The norm-scaling figure (Collins et al. (2024), Figure 3, Theorem 3.4 and the covariance lemma): parameters, computation, claims and plots.

The package exports its ``FIGURE`` (the parameters, from ``params``), which :mod:`softmax_icl.figures` registers; it
imports nothing else, so the registry is read without loading the figure's computation. The notebook imports the
stage modules it calls.
"""

from .params import FIGURE

__all__ = ["FIGURE"]
