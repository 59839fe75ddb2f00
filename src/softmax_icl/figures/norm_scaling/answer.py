"""The norm-scaling chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

from ...book.chapter_text import either


def short(run) -> str:
    """The answer in a sentence: the trained window scale against $L$, $\\sigma$ and $n$."""
    return either(run, "norm-grows-with-L",
                  "The learned window scale $\\|M\\|_2$ ends larger for larger $L$ in all four panels of Fig. 3 (up "
                  "to saturation; smallest ratio of consecutive norms {v})",
                  "The learned window scale $\\|M\\|_2$ does not end larger for larger $L$ in every panel (smallest "
                  "ratio of consecutive norms {v})") + ", and $w$ " + either(
        run, "w-falls-with-sigma", "falls with $\\sigma$", "does not fall with $\\sigma$ at every step") + " and " + \
        either(run, "w-rises-with-n", "rises with $n$.", "does not rise with $n$ at every step.")


def lead(run) -> str:
    """The rest of the answer: the growth during pretraining, Theorem 3.4's exponent and the covariance lemma."""
    growth = either(run, "growth-rate-orders-with-L",
                    "During pretraining $\\|M\\|_2$ grows faster for larger $L$ (smallest step of the seed-mean growth "
                    "rate {v} per step).",
                    "During pretraining the seed-mean growth rate of $\\|M\\|_2$ does not rise at every step of $L$ "
                    "(smallest step {v} per step): ‖M‖ grows about as fast whatever $L$, and ends higher for "
                    "larger $L$ because it keeps rising for longer.")
    theory = either(run, "theorem34-slides-range",
                    "At the longest context the population optimum's local exponent lies inside Theorem 3.4's range "
                    "$[1/d, 2/d]$ for every $d$ (smallest margin {v}), ",
                    "At the longest context the population optimum's local exponent leaves Theorem 3.4's range "
                    "$[1/d, 2/d]$ for some $d$ (margin {v}), ") + either(
        run, "covariance-lemma-whitened", "and with whitened tasks the trained $M$ is $\\Sigma^{{-1}}$ up to {v} "
        "(normalised Frobenius distance).", "and with whitened tasks the trained $M$ is {v} from $\\Sigma^{{-1}}$ "
        "(normalised Frobenius distance), beyond the 0.1 required.")
    return " ".join([growth, theory])
