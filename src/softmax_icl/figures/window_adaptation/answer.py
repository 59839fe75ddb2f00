"""The window chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

from ...book.chapter_text import either, value
from .analysis import WindowAnalysis


def short(run, a: WindowAnalysis) -> str:
    """The answer in a sentence: how far the learned window moves with $L$ and $\\sigma$."""
    L0, L2 = a.settings[0].L, a.settings[2].L
    s_lo, s_hi = a.settings[1].sigma, a.settings[3].sigma
    return (f"Pretraining sets the softmax window: its half-width is {value(run, 'window-narrows-with-L')}× as wide "
            f"at $L = {L0:g}$ as at $L = {L2:g}$, and {value(run, 'window-widens-with-sigma')}× as wide at "
            f"$\\sigma = {s_hi:g}$ as at $\\sigma = {s_lo:g}$ "
            + either(run, "window-narrows-with-L", "(narrowing at every step of $L$ in every seed)",
                     "(but not at every step of $L$ in every seed)") + ".")


def lead(run, a: WindowAnalysis) -> str:
    """The rest of the answer: the trained window against the tuned one, and softmax against linear attention."""
    oracle = either(run, "softmax-near-oracle",
                    "The trained unit stays within a factor {v} of the Nadaraya–Watson window tuned to each setting "
                    "($n \\ge 16$)", "The trained unit is up to {v}× worse than the Nadaraya–Watson window tuned to "
                    "each setting ($n \\ge 16$)") + (f", while one window shared by all settings is up to "
                                                     f"{value(run, 'softmax-near-oracle-fixed-window')}× worse.")
    linear = either(run, "softmax-beats-linear",
                    "Where a window can help, softmax attention beats both linear attention and the plain average "
                    "(worst ratio {v})", "Where a window can help, softmax attention does not beat the better of "
                    "linear attention and the plain average everywhere (worst ratio {v})") + either(
        run, "softmax-beats-linear-every-n", "; it does at every $n$ too.",
        "; over every $n$, down to contexts too short for any window, linear attention is ahead in some cells "
        "(worst ratio {v}).")
    return " ".join([oracle, linear])
