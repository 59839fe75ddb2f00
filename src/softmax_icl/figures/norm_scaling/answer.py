"""The norm-scaling chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number and verdict read from the run's checks."""

from __future__ import annotations

import math
import re

from ...book.chapter_text import check, status as _status
from . import claims as check_ids


def _seeds(run, cid: str):
    return check(run, cid).decision["seeds"]


def _maths(label: str) -> str:
    """A cell label in MyST: ``relu/isotropic, L = 0.1 -> 0.3`` as ``relu/isotropic, $L = 0.1 \\to 0.3$``."""
    def sub(m):
        name = {"sigma": "\\sigma"}.get(m[1], m[1])
        return "$" + name + " = " + m[2] + " \\to " + m[3] + "$"
    return re.sub(r"\b(L|n|sigma) = (\S+) -> (\S+)", sub, label)


def _factor(run, cid: str) -> str:
    """A log-ratio check's deciding bound as a factor per step: exp of the worst step's bound, inverted for a check
    of a fall (a factor of 1.25 then means "falls by at least a factor 1.25")."""
    c = check(run, cid)
    return f"{math.exp(-c.value if c.decision['test'] == 'below' else c.value):.3g}"


#: The three trend checks: id, what they show (pass), what they do not (fail), the factor's sign and the grid.
TRENDS = ((check_ids.NORM_GROWS_WITH_L, "ends larger for larger $L$ in all four panels of Fig. 3",
           "does not end larger for larger $L$ in every panel of Fig. 3", "×", "step of $L$ up to saturation"),
          (check_ids.W_FALLS_WITH_SIGMA, "$w$ falls as $\\sigma$ grows", "$w$ does not fall at every step of $\\sigma$",
           "÷",
           "step of $\\sigma$"),
          (check_ids.W_RISES_WITH_N, "rises with $n$", "does not rise at every step of $n$", "×", "step of $n$"))


def short(run) -> str:
    """The answer in a sentence: the trained window scale against $L$, $\\sigma$ and $n$, each with its worst step's
    95 % bound as a factor, and which of them were still moving at the end of training."""
    parts, moving = [], []
    for cid, says, not_says, op, per in TRENDS:
        status, f = _status(run, cid), _factor(run, cid)
        text = not_says if status == "fail" else says
        bound = "at least " if status in ("pass", "not settled") else "worst step "
        parts.append(f"{text} ({bound}{op}{f} per {per}" + (", not decided" if status == "inconclusive"
                                                            else "") + ")")
        if status == "not settled":
            moving.append(per.split(" up to")[0].replace("step of ", ""))
    tail = (f"; the ratios along {', '.join(moving)} were still moving when training stopped" if moving else "")
    return ("Averaged over "
            f"{_seeds(run, check_ids.NORM_GROWS_WITH_L)} trained units per setting, the learned window scale "
            f"$\\|M\\|_2$ {parts[0]}; "
            f"{parts[1]} and {parts[2]}{tail}.")


def lead(run) -> str:
    """The rest of the answer: the growth during pretraining, Theorem 3.4 (exponent and isotropy) and the covariance
    lemma."""
    c = check(run, check_ids.GROWTH_RATE_ORDERS_WITH_L)
    cells = c.decision["cells"]
    slow, low = min(cells, key=lambda x: x["mean"]), min(cells, key=lambda x: x["lo"])
    bar = math.exp(c.decision["threshold"]) - 1
    growth = {"pass": "During pretraining $\\|M\\|_2$ grows faster for larger $L$: after the same number of steps the "
                      f"unit of the next larger $L$ is on average more than {bar:.0%} larger, at every step of $L$ up "
                      f"to saturation (smallest: {math.exp(low['lo']) - 1:.0%}, lower bound).",
              "fail": "During pretraining $\\|M\\|_2$ does not grow measurably faster for larger $L$: after the same "
                      f"number of steps the unit of the next larger $L$ is on average only "
                      f"{math.exp(slow['mean']) - 1:.1%} larger in the seed mean ({_maths(slow['label'])}), short of "
                      f"the {bar:.0%} the check asks.",
              }.get(_status(run, c.id), "During pretraining the seeds do not decide whether $\\|M\\|_2$ grows faster "
                                        f"for larger $L$ (status: {_status(run, c.id)}).")
    ex, iso = check(run, check_ids.THEOREM34_SLIDES_RANGE), check(run, check_ids.THEOREM34_ISOTROPIC)
    theory = ("At the longest context the population optimum's local exponent " +
              ("lies inside Theorem 3.4's range $[1/d, 2/d]$ for every $d$ by more than its Monte Carlo error "
               f"(smallest distance to an edge, lower bound {ex.value:.3g})" if _status(run, ex.id) == "pass" else
               f"is not inside Theorem 3.4's range $[1/d, 2/d]$ for every $d$ by its Monte Carlo error (status "
               f"{_status(run, ex.id)}, bound {ex.value:.3g})") + "; the trained isotropic units' $M$ " +
              (f"is $wI$ within {iso.value:.3g} (95 % upper bound of the relative distance)" if _status(run, iso.id)
               == "pass" else f"is not shown to be $wI$ (status {_status(run, iso.id)}, bound {iso.value:.3g})"))
    cov = check(run, check_ids.COVARIANCE_LEMMA_WHITENED)
    cov_text = ("; with whitened tasks the trained $M$ is $w\\Sigma^{-1}$ within the "
                f"{cov.decision['threshold']:g} the lemma's check asks (worst 95 % bound {cov.value:.3g})."
                if _status(run, cov.id) == "pass" else
                f"; with whitened tasks the trained $M$ is not shown to be $w\\Sigma^{{-1}}$ (status "
                f"{_status(run, cov.id)}, worst bound {cov.value:.3g}).")
    return " ".join([growth, theory + cov_text])
