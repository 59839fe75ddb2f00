"""One folder per figure of the book: its parameters, computation, claims and plots.

Each figure package exports its ``FIGURE`` (its parameters and how the book shows them); :data:`FIGURES` is the
book's registry, built here, in book order, from those. This is the layer above the book machinery
(:mod:`softmax_icl.book`), which never imports the figures: the registry is handed to it, by :func:`main` (the
``softmax-icl`` command) and by a notebook's glue cell.
"""

from __future__ import annotations

from ..book.registry import Registry
from . import classification_kernel_gd, generalization, low_rank, norm_scaling, window_adaptation

#: Every figure, in the order of the book.
FIGURES = Registry(package.FIGURE for package in (window_adaptation, norm_scaling, generalization, low_rank,
                                                  classification_kernel_gd))


def main(argv: list[str] | None = None) -> int:
    """The ``softmax-icl`` command (and ``python -m softmax_icl``): the command line over the book's figures."""
    from ..book.cli import main as cli_main

    return cli_main(FIGURES, argv)
