"""The low-rank chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run's decided checks (the seed
mean of each cell and its one-sided 95 % bound, over every seed of the run)."""

from __future__ import annotations

import math

from ...book.chapter_text import check

#: How a check's status reads in the answer.
SAYS = {"pass": "", "fail": "above its bar", "inconclusive": "the seeds do not decide it",
        "not settled": "still falling at the end of pretraining"}


def _worst(run, cid: str) -> dict:
    """The deciding cell of a decided check: the one whose bound clears its threshold by the least."""
    cells = check(run, cid).decision["cells"]
    return min(cells, key=lambda c: c["threshold"] - c["hi"] if c["test"] == "below" else c["lo"] - c["threshold"])


def _rho(run, cid: str) -> str:
    """'0.0092 (bound 0.011)' for the deciding cell of a one-cell rho check; 'quadratic link: 0.12, bound 0.14' for
    one with several cells."""
    c = _worst(run, cid)
    if len(check(run, cid).decision["cells"]) > 1:
        return f"{c['label']} link: {c['mean']:.2g}, bound {c['hi']:.2g}"
    return f"{c['mean']:.2g} (bound {c['hi']:.2g})"


def _ratio(run, cid: str) -> str:
    """The deciding cell of a log-ratio check as a ratio: exp(seed mean) and exp(upper bound)."""
    c = _worst(run, cid)
    return (f"largest on the {c['label']}: {math.exp(c['mean']):.2f} (geometric mean over the seeds; upper bound "
            f"{math.exp(c['hi']):.2f})")


def _status(run, cid: str) -> str:
    return check(run, cid).status


def short(run) -> str:
    """The answer in a sentence: the softmax unit's learned $M$ against the tasks' subspace, on the linear class and
    on the nonlinear links (the headline figure shows the last link), over the run's seeds."""
    seeds = check(run, "softmax-rho1-to-zero").decision["seeds"]
    ok = all(_status(run, f"softmax-{r}-to-zero") == "pass" for r in ("rho1", "rho2"))
    head = ("On the low-rank linear class the pretrained softmax unit projects onto the tasks' subspace" if ok else
            "On the low-rank linear class the pretrained softmax unit moves towards the tasks' subspace")
    out = (f"{head}: over {seeds} seeds $\\rho_1(M, B)$ averages {_rho(run, 'softmax-rho1-to-zero')} and $\\rho_2$ "
           f"{_rho(run, 'softmax-rho2-to-zero')}, bars 0.1 and 0.15")
    links = {r: _status(run, f"links-{r}-to-zero") for r in ("rho1", "rho2")}
    if all(s == "pass" for s in links.values()):
        return out + "; on the slides' nonlinear links too."
    r = next(r for r in ("rho1", "rho2") if links[r] != "pass")
    sym = "$\\rho_1$" if r == "rho1" else "$\\rho_2$"
    return out + f"; on the nonlinear links {sym} is {SAYS[links[r]]} ({_rho(run, f'links-{r}-to-zero')})."


def lead(run) -> str:
    """The rest of the answer: the softmax unit against the best isotropic window on every class, and against linear
    attention and the plain average on the links (largest ratios over the classes, with their bounds)."""
    iso, lin = _status(run, "softmax-beats-isotropic-window"), _status(run, "softmax-beats-linear-on-links")
    first = {"pass": "Measuring distance in the subspace pays",
             "fail": "Measuring distance in the subspace does not pay by the factor required",
             "inconclusive": "Whether measuring distance in the subspace pays, the seeds do not decide",
             "not settled": "What measuring distance in the subspace pays is still changing at the end of "
                            "pretraining"}[iso]
    return (f"{first}: the softmax unit's ICL error over the best isotropic window's ($M = wI$, $w$ tuned per seed) "
            f"is {_ratio(run, 'softmax-beats-isotropic-window')}, bar "
            f"{math.exp(check(run, 'softmax-beats-isotropic-window').decision['threshold']):.2g}. On the links its error over the better of "
            f"linear attention's and the plain average's is {_ratio(run, 'softmax-beats-linear-on-links')}"
            + ("." if lin == "pass" else f": {SAYS[lin]}."))
