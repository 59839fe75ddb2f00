"""The low-rank chapter's answer, from its run: two or three sentences with the run's numbers."""

from __future__ import annotations

from ...book.chapter_text import either


def lead(run) -> str:
    linear = either(run, "softmax-rho1-to-zero",
                    "On the low-rank linear class the pretrained softmax unit projects onto the tasks' subspace: "
                    "$\\rho_1(M, B)$ ends at {v} or less in every seed",
                    "On the low-rank linear class the pretrained softmax unit moves towards the tasks' subspace but "
                    "$\\rho_1(M, B)$ ends at {v} in its worst seed, above the 0.1 required") + either(
        run, "softmax-rho2-to-zero", " ($\\rho_2$ {v}).", " ($\\rho_2$ {v}, above the 0.15 required).")
    links = either(run, "links-rho2-to-zero",
                   "On the slides' nonlinear links it does the same (worst $\\rho_2$ {v}), ",
                   "On the slides' nonlinear links it does not get as close (worst $\\rho_2$ {v}), ")
    links += either(run, "softmax-beats-linear-on-links",
                    "and its error is at most {v} of the better of linear attention's and the plain average's.",
                    "and its error is {v} of the better of linear attention's and the plain average's, above the "
                    "0.9 required.")
    return " ".join([linear, links])
