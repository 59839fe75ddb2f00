"""The low-rank chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run's decided checks (the seed
mean of each cell and its one-sided 95 % bound, over every seed of the run)."""

from __future__ import annotations

import math

from ...book.chapter_text import check, status as _status
from . import claims as check_ids

#: How a check's status reads in the answer.
SAYS = {"pass": "", "fail": "too large for the claim", "inconclusive": "not decided",
        "not settled": "still falling at the end of pretraining"}


def _worst(run, cid: str) -> dict:
    """The deciding cell of a decided check: the one whose bound clears its threshold by the least."""
    cells = check(run, cid).decision["cells"]
    return min(cells, key=lambda c: c["threshold"] - c["hi"] if c["test"] == "below" else c["lo"] - c["threshold"])


def _ratio(run, cid: str) -> str:
    """The deciding cell of a log-ratio check as a ratio: exp(seed mean) and exp(upper bound)."""
    c = _worst(run, cid)
    return (f"largest on the {c['label']}: {math.exp(c['mean']):.2f} (geometric mean over the seeds; upper bound "
            f"{math.exp(c['hi']):.2f})")


def short(run) -> str:
    """The answer in a sentence: the softmax unit's learned $M$ against the tasks' subspace, on the linear class and
    on the nonlinear links (the headline figure shows the last link), over the run's seeds."""
    seeds = check(run, check_ids.SOFTMAX_RHO1_TO_ZERO).decision["seeds"]
    ok = all(_status(run, f"softmax-{r}-to-zero") == "pass" for r in ("rho1", "rho2"))
    head = ("On the low-rank linear class the pretrained softmax unit projects onto the tasks' subspace" if ok else
            "On the low-rank linear class the pretrained softmax unit moves towards the tasks' subspace")
    out = (f"{head}: averaged over {seeds} trained units, its distances from the subspace $\\rho_1(M, B)$ and "
           "$\\rho_2$ (zero for an exact projection) are "
           f"{_worst(run, check_ids.SOFTMAX_RHO1_TO_ZERO)['mean']:.2g} and "
           f"{_worst(run, check_ids.SOFTMAX_RHO2_TO_ZERO)['mean']:.2g}")
    links = {r: _status(run, f"links-{r}-to-zero") for r in ("rho1", "rho2")}
    if all(s == "pass" for s in links.values()):
        return out + "; on the slides' nonlinear links too."
    r = next(r for r in ("rho1", "rho2") if links[r] != "pass")
    sym = "$\\rho_1$" if r == "rho1" else "$\\rho_2$"
    c = _worst(run, f"links-{r}-to-zero")
    where = f", {c['label']} link" if len(check(run, f"links-{r}-to-zero").decision["cells"]) > 1 else ""
    return out + f"; on the nonlinear links {sym} is {SAYS[links[r]]} ({c['mean']:.2g}{where})."


def lead(run) -> str:
    """The rest of the answer: the softmax unit against the best isotropic window on every class, and against linear
    attention and the plain average on the links (largest ratios over the classes, with their bounds)."""
    iso, lin = _status(run, check_ids.SOFTMAX_BEATS_ISOTROPIC_WINDOW), _status(run,
                                                                               check_ids.SOFTMAX_BEATS_LINEAR_ON_LINKS)
    first = {"pass": "Measuring distance in the subspace pays",
             "fail": "Measuring distance in the subspace does not pay by the factor required",
             "inconclusive": "Whether measuring distance in the subspace pays, the seeds do not decide",
             "not settled": "What measuring distance in the subspace pays is still changing at the end of "
                            "pretraining"}[iso]
    return (f"{first}: the softmax unit's ICL error over the best isotropic window's ($M = wI$, $w$ tuned per seed) "
            f"is {_ratio(run, check_ids.SOFTMAX_BEATS_ISOTROPIC_WINDOW)}, bar "
            f"{math.exp(check(run, check_ids.SOFTMAX_BEATS_ISOTROPIC_WINDOW).decision['threshold']):.2g}. "
            "On the links its error over the better of "
            f"linear attention's and the plain average's is {_ratio(run, check_ids.SOFTMAX_BEATS_LINEAR_ON_LINKS)}"
            + ("." if lin == "pass" else f": {SAYS[lin]}."))
