"""The generalisation chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run's decided checks (the cells'
seed means and one-sided bounds; ratios are exponentials of the per-seed log ratios)."""

from __future__ import annotations

import math

from ...book.chapter_text import cells as _cells, check
from . import claims as check_ids

SAYS = {"pass": "holds", "fail": "fails", "inconclusive": "is not decided",
        "not settled": "is still moving at the end of training"}


def _n_of(cell: dict) -> int:
    return int(cell["label"].rsplit("n = ", 1)[1])


def _passing_ns(run, cid: str) -> list[int]:
    """The test lengths at which every cell of ``cid`` passes."""
    ns = sorted({_n_of(c) for c in _cells(run, cid)})
    return [n for n in ns if all(c["verdict"] == "pass" for c in _cells(run, cid) if _n_of(c) == n)]


def _ratio(cell: dict, bound: str = "hi") -> str:
    """A log-ratio cell as a ratio: the exponential of its seed mean, and of its one-sided bound."""
    side = "upper" if bound == "hi" else "lower"
    return f"{math.exp(cell['mean']):.3g}× ({side} bound {math.exp(cell[bound]):.3g}×)"


def _mean(cell: dict) -> str:
    """A log-ratio cell as a ratio in words: the exponential of its mean over the trained units."""
    return f"{math.exp(cell['mean']):.3g}×"


def short(run) -> str:
    """The answer in a sentence: how units pretrained with the same $L$ on another class compare with the unit
    pretrained on the test class, and how close all come to the best window at the pretraining length."""
    cid = check_ids.MATCHED_L_CURVES_COINCIDE
    c = check(run, cid)
    cells = _cells(run, cid)
    worst = max(cells, key=lambda x: x["hi"])
    bar = math.exp(c.decision["threshold"])
    ns = sorted({_n_of(x) for x in cells})
    ok = _passing_ns(run, cid)
    head = "Units pretrained on affine, ReLU or cosine tasks with the same $L$ "
    alike = f"come within a factor {bar:.3g} of the unit pretrained on the test class"
    if c.status == "pass":
        text = head + f"{alike} at every test length up to pretraining ($n \\le {ns[-1]}$; worst {_mean(worst)})."
    elif not ok:
        text = head + f"do not {alike} at any test length up to pretraining (worst at $n = {_n_of(worst)}$: " \
            f"{_mean(worst)})."
    else:
        where = (f"$n = {ok[0]}$" if len(ok) == 1 else f"$n = {ok[0]}$ to ${ok[-1]}$"
                 if ok == ns[ns.index(ok[0]):] else f"$n$ = {', '.join(map(str, ok))}")
        text = head + f"{alike} at {where}, but not at every shorter length (worst at $n = {_n_of(worst)}$: " \
            f"{_mean(worst)})."
    level = check(run, check_ids.MATCHED_L_LEVEL)
    top = max(_cells(run, check_ids.MATCHED_L_LEVEL), key=lambda x: x["hi"])
    return text + (f" At the pretraining length every unit's error lies within {_mean(top)} of the best re-tuned "
                   "window" + ("." if level.status == "pass" else f": that check {SAYS[level.status]}."))


def lead(run) -> str:
    """The rest of the answer: units pretrained at another $L$, Theorem 3.5's crossover and its matched bound."""
    small, large = (_cells(run, f"mismatched-L-{k}-worse")[0] for k in ("small", "large"))
    seeds = check(run, check_ids.MISMATCHED_L_SMALL_WORSE).decision["seeds"]
    text = (f"A unit pretrained at a smaller $L$ is {_ratio(small, 'lo')} and one at a larger $L$ "
            f"{_ratio(large, 'lo')} worse than the matched unit (seed means over {seeds} seeds). ")
    cross = max(_cells(run, check_ids.THM35_CROSSOVER_AT_L), key=lambda x: x["hi"])
    text += (f"Theorem 3.5's two error branches meet within a factor {math.exp(cross['hi']):.3g} (upper bound) of "
             "the pretraining $L$" + (". " if check(run, check_ids.THM35_CROSSOVER_AT_L).status == "pass" else
                                  f": the crossover check {SAYS[check(run, check_ids.THM35_CROSSOVER_AT_L).status]}. "))
    bound = max(_cells(run, check_ids.THM35_MATCHED_BOUND), key=lambda x: x["hi"])
    rival = check(run, check_ids.THM35_MATCHED_BOUND_CONTROL)
    text += (f"The matched units' error is at most {math.exp(bound['hi']):.2g}× Theorem 3.5's bound with the "
             f"slide's constant 1 (upper bound, {bound['label']}), ")
    text += {"fail": "while the unit pretrained at the wrong $L$ lies above it.",
             "pass": "but the unit pretrained at the wrong $L$ lies below it too: at these $n$ the bound with the "
                     "constant 1 does not tell a matched window from a too-wide one.",
             }.get(rival.status, "and the seeds do not decide whether the unit pretrained at the wrong $L$ lies "
                                 "above it.")
    return text
