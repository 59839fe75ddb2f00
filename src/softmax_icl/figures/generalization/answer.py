"""The generalisation chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run's decided checks (the cells'
seed means and one-sided bounds; ratios are exponentials of the per-seed log ratios)."""

from __future__ import annotations

import math

from ...book.chapter_text import check

SAYS = {"pass": "holds", "fail": "fails", "inconclusive": "is not decided by the seeds",
        "not settled": "is still moving at the end of training"}


def _cells(run, cid: str) -> list[dict]:
    return check(run, cid).decision["cells"]


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


def short(run) -> str:
    """The answer in a sentence: how close units pretrained with the same $L$ on any class come to the best window."""
    cid = "matched-L-curves-coincide"
    c = check(run, cid)
    cells = _cells(run, cid)
    worst = max(cells, key=lambda x: x["hi"])
    bar = math.exp(c.decision["threshold"])
    ns = sorted({_n_of(x) for x in cells})
    ok = _passing_ns(run, cid)
    head = "Units pretrained on affine, ReLU or cosine tasks with the same $L$ "
    within = f"within a factor {bar:.3g} of the best re-tuned window on every class"
    if c.status == "pass":
        return head + f"come {within} at every test length up to pretraining ($n \\le {ns[-1]}$; worst " \
            f"{_ratio(worst)})."
    if not ok:
        return head + f"do not come {within} at any test length up to pretraining (worst at $n = {_n_of(worst)}$: " \
            f"{_ratio(worst)}, {c.decision['seeds']} seeds)."
    if len(ok) == 1:
        where = f"$n = {ok[0]}$"
    elif ok == ns[ns.index(ok[0]):]:
        where = f"$n = {ok[0]}$ to ${ok[-1]}$"
    else:
        where = f"$n$ = {', '.join(map(str, ok))}"
    return head + f"come {within} at {where}, but not at every shorter length (worst at $n = {_n_of(worst)}$: " \
        f"{_ratio(worst)}, {c.decision['seeds']} seeds)."


def lead(run) -> str:
    """The rest of the answer: units pretrained at another $L$, Theorem 3.5's crossover and its matched bound."""
    small, large = (_cells(run, f"mismatched-L-{k}-worse")[0] for k in ("small", "large"))
    seeds = check(run, "mismatched-L-small-worse").decision["seeds"]
    text = (f"A unit pretrained at a smaller $L$ is {_ratio(small, 'lo')} and one at a larger $L$ "
            f"{_ratio(large, 'lo')} worse than the matched unit (seed means over {seeds} seeds). ")
    cross = max(_cells(run, "thm35-crossover-at-L"), key=lambda x: x["hi"])
    text += (f"Theorem 3.5's two error branches meet within a factor {math.exp(cross['hi']):.3g} (upper bound) of "
             "the pretraining $L$" + (". " if check(run, "thm35-crossover-at-L").status == "pass" else
                                  f": the crossover check {SAYS[check(run, 'thm35-crossover-at-L').status]}. "))
    bound = max(_cells(run, "thm35-matched-bound"), key=lambda x: x["hi"])
    rival = check(run, "thm35-matched-bound-control")
    text += (f"The matched units' error is at most {math.exp(bound['hi']):.2g}× Theorem 3.5's bound with the "
             f"slide's constant 1 (upper bound, {bound['label']}), ")
    text += {"fail": "while the unit pretrained at the wrong $L$ lies above it.",
             "pass": "but the unit pretrained at the wrong $L$ lies below it too: at these $n$ the bound with the "
                     "constant 1 does not tell a matched window from a too-wide one.",
             }.get(rival.status, "and the seeds do not decide whether the unit pretrained at the wrong $L$ lies "
                                 "above it.")
    return text
