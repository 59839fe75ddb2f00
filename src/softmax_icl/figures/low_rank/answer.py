"""The low-rank chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

from ...book.chapter_text import either


def short(run) -> str:
    """The answer in a sentence: the softmax unit's learned $M$ against the tasks' subspace, on the linear class and
    on the nonlinear links (the headline figure shows the last link)."""
    return either(run, "softmax-rho1-to-zero",
                  "On the low-rank linear class the pretrained softmax unit projects onto the tasks' subspace: "
                  "$\\rho_1(M, B)$ ends at {v} or less in every seed",
                  "On the low-rank linear class the pretrained softmax unit moves towards the tasks' subspace but "
                  "$\\rho_1(M, B)$ ends at {v} in its worst seed, above the 0.1 required") + either(
        run, "softmax-rho2-to-zero", " ($\\rho_2$ {v})", " ($\\rho_2$ {v}, above the 0.15 required)") + either(
        run, "links-rho2-to-zero", "; on the slides' nonlinear links too (worst $\\rho_2$ {v}).",
        "; on the slides' nonlinear links it does not get as close (worst $\\rho_2$ {v}).")


def lead(run) -> str:
    """The rest of the answer: softmax against linear attention on the links."""
    return either(run, "softmax-beats-linear-on-links",
                  "On the links the softmax unit's error is at most {v} of the better of linear attention's and the "
                  "plain average's.",
                  "On the links the softmax unit's error is {v} of the better of linear attention's and the plain "
                  "average's, above the 0.9 required.")
