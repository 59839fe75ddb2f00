"""The window chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run's decided checks (their cells'
seed means and 95 % bounds of per-seed log ratios, printed as factors)."""

from __future__ import annotations

import math

from ...book.chapter_text import cells as _cells, status as _status
from .analysis import WindowAnalysis
from .claims import N_ORACLE
from . import claims as check_ids


#: A decided check's status in words.
SAYS = {"pass": "it holds", "fail": "it does not hold", "inconclusive": "the seeds do not decide it",
        "not settled": "it is still moving at the end of training"}


def _seeds(run, cid: str) -> int:
    return max(c["n"] for c in _cells(run, cid))


def short(run, a: WindowAnalysis) -> str:
    """The answer in a sentence: how far the learned window moves with $L$ and $\\sigma$ (geometric means over the
    seeds of the per-seed half-width ratios)."""
    L0, L2 = a.settings[0].L, a.settings[2].L
    s_lo, s_hi = a.settings[1].sigma, a.settings[3].sigma
    narrow = math.exp(sum(c["mean"] for c in _cells(run, check_ids.WINDOW_NARROWS_WITH_L)))
    widen = math.exp(_cells(run, check_ids.WINDOW_WIDENS_WITH_SIGMA)[0]["mean"])
    bar = math.exp(_cells(run, check_ids.WINDOW_NARROWS_WITH_L)[0]["threshold"])
    says = {"pass": f"every step up in $L$ narrows it by more than {bar:.2g}×",
            "fail": f"but some step up in $L$ narrows it by less than {bar:.2g}×",
            "inconclusive": f"whether every step up in $L$ narrows it by {bar:.2g}× is not decided",
            "not settled": "the window was still moving when training stopped"}
    return ("Pretraining sets the softmax window: averaged over "
            f"{_seeds(run, check_ids.WINDOW_NARROWS_WITH_L)} trained "
            f"units, its half-width is {narrow:.3g}× as wide at $L = {L0:g}$ as at $L = {L2:g}$, and {widen:.3g}× as "
            f"wide at $\\sigma = {s_hi:g}$ as at $\\sigma = {s_lo:g}$ ("
            f"{says[_status(run, check_ids.WINDOW_NARROWS_WITH_L)]}).")


def _worst(run, cid: str, key: str = "hi") -> tuple[float, str]:
    """The largest bound ``key`` over the check's cells, as a factor, with its cell's label."""
    c = max(_cells(run, cid), key=lambda x: x[key])
    return math.exp(c[key]), c["label"]


def _rival(run, cid: str) -> str:
    """A rival of the near-oracle check in words: how much worse than the tuned window it gets (seed mean), and in how
    many cells it is rejected."""
    cells = _cells(run, cid)
    worst, where = _worst(run, cid, "mean")
    failed = sum(c["verdict"] == "fail" for c in cells)
    passed = sum(c["verdict"] == "pass" for c in cells)
    return (f"is up to {worst:.3g}× worse ({where}) and rejected in {failed} of its {len(cells)} cells"
            + (f", but within the margin in {passed}" if passed else ""))


def lead(run, a: WindowAnalysis) -> str:
    """The rest of the answer: the trained window against the tuned one and its rivals, and softmax against linear
    attention."""
    soft, where = _worst(run, check_ids.SOFTMAX_NEAR_ORACLE)
    n_cells = len(_cells(run, check_ids.SOFTMAX_NEAR_ORACLE))
    bar = math.exp(_cells(run, check_ids.SOFTMAX_NEAR_ORACLE)[0]["threshold"])
    oracle = (f"Against the Nadaraya–Watson window tuned to each setting ($n \\ge {N_ORACLE}$, {n_cells} cells), the "
              f"trained unit's error ratio has its largest upper bound at {soft:.3g} ({where}; the bar is {bar:.3g}): "
              f"{SAYS[_status(run, check_ids.SOFTMAX_NEAR_ORACLE)]}. One window shared by all settings "
              + _rival(run, check_ids.SOFTMAX_NEAR_ORACLE_FIXED_WINDOW)
              + "; the trained linear unit " + _rival(run, check_ids.SOFTMAX_NEAR_ORACLE_CONTROL)
              + ("." if all(_status(run, c) == "fail" for c in (check_ids.SOFTMAX_NEAR_ORACLE_FIXED_WINDOW,
                                                                 check_ids.SOFTMAX_NEAR_ORACLE_CONTROL))
                 else ": a rival that passes a cell leaves the check unable to tell adaptation apart there."))
    beat, beat_where = _worst(run, check_ids.SOFTMAX_BEATS_LINEAR)
    every = _status(run, check_ids.SOFTMAX_BEATS_LINEAR_EVERY_N)
    linear = (f"Where a window can help, softmax's error over the better of linear attention and the plain average "
              f"has its largest upper bound at {beat:.3g} ({beat_where}; it must stay below "
              f"{math.exp(_cells(run, check_ids.SOFTMAX_BEATS_LINEAR)[0]['threshold']):.2g}): "
              f"{SAYS[_status(run, check_ids.SOFTMAX_BEATS_LINEAR)]}"
              + ("; at every $n$ it beats linear attention by that margin too." if every == "pass" else
                 "; over every $n$, down to contexts too short for any window, it does not beat linear attention by "
                 "that margin in "
                 f"{sum(c['verdict'] != 'pass' for c in _cells(run, check_ids.SOFTMAX_BEATS_LINEAR_EVERY_N))} "
                 f"of {len(_cells(run, check_ids.SOFTMAX_BEATS_LINEAR_EVERY_N))} cells."))
    return " ".join([oracle, linear])
