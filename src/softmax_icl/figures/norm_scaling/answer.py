"""The norm-scaling chapter's answer, from its run: two or three sentences with the run's numbers."""

from __future__ import annotations

from ...book.chapter_text import either


def lead(run) -> str:
    trends = either(run, "norm-grows-with-L",
                    "The learned window scale $\\|M\\|_2$ ends larger for larger $L$ in all four panels of Fig. 3 (up "
                    "to where the population optimum saturates; smallest ratio of consecutive norms {v})",
                    "The learned window scale $\\|M\\|_2$ does not end larger for larger $L$ in every panel (smallest "
                    "ratio of consecutive norms {v})") + ", and $w$ " + either(
        run, "w-falls-with-sigma", "falls with $\\sigma$", "does not fall with $\\sigma$ at every step") + " and " + \
        either(run, "w-rises-with-n", "rises with $n$.", "does not rise with $n$ at every step.")
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
    return " ".join([trends, growth, theory])
