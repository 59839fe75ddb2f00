"""How the deciding number of a check decided by the statistical design reads on the book's pages: its deciding
cell's bound against the threshold and by how much it clears or misses it, as a factor where the design states the
statistic as a log ratio (``log(x)`` thresholds)."""

from __future__ import annotations

import math
import re

from .. import stats
from ..profiles import fmt
from . import design


def decided_number(check: dict, cell: bool = True) -> str | None:
    """A check decided by the statistical design, as a reader checks it at a glance: the deciding cell's bound against
    the threshold and by how much it clears or misses it, as a factor where the statistic is a log ratio (``0.887,
    upper bound; required < 0.9; clears by 1.5 %``), with the cell where the check has several (``cell``); None for a
    check decided by a rule of its own."""
    d = check.get("decision") or {}
    if not d.get("cells"):
        return None
    worst = min(d["cells"], key=stats.margin_over_threshold)
    is_log = _is_log(d, worst)
    b, c, m, test = stats.worst_bound(worst), worst["threshold"], stats.margin_over_threshold(worst), worst["test"]
    kind = "value" if worst.get("exact") else {"below": "upper bound", "above": "lower bound",
                                                "equal": "bound"}[test]
    if is_log and test == "equal":
        shown, need = f"within a factor {math.exp(b):.3g}", f"within {math.exp(c):.3g}"
    elif is_log:
        shown, need = f"{math.exp(b):.3g}", f"{'<' if test == 'below' else '>'} {math.exp(c):.3g}"
    else:
        shown, need = fmt(b), f"{ {'below': '<', 'above': '>', 'equal': '|.| <'}[test]} {fmt(c)}".strip()
    factor = math.exp(abs(m))
    by = (f"a factor {factor:.3g}" if factor >= 2 else f"{factor - 1:.1%}") if is_log else fmt(abs(m))
    label = worst["label"].replace(" -> ", " → ").replace("/", " / ")           # breakable in a narrow column
    where = f" at {label}" if cell and len(d["cells"]) > 1 else ""
    return f"{shown} ({kind}{where}; required {need}; {'clears' if m >= 0 else 'misses'} by {by})"


def _is_log(decision: dict, cell: dict) -> bool:
    """Whether the design states the statistic of ``cell`` as a log ratio (a ``log(x)`` threshold)."""
    entry = design.load().entries.get(decision.get("design", ""))
    raw = entry.raw if entry is not None else {}
    raw = (raw.get("metrics") or {}).get(str(cell.get("label", "")).split(": ", 1)[0], raw)
    return str(raw.get("threshold", "")).replace(" ", "").lstrip("-").startswith("log(")


def bound_text(check: dict, bound: float) -> str:
    """A deciding bound of ``check`` (in the statistic's units, e.g. from its seed audit) as :func:`decided_number`
    shows the check's own: as a factor where the design states the statistic as a log ratio."""
    d = check.get("decision") or {}
    try:
        worst = min(d["cells"], key=stats.margin_over_threshold) if d.get("cells") else None
        log = worst is not None and _is_log(d, worst)
    except (KeyError, TypeError):
        log = False
    try:
        if log:
            return f"{math.exp(abs(bound) if worst['test'] == 'equal' else bound):.3g}"
    except OverflowError:
        pass
    return fmt(bound)


def in_words(check: dict) -> str:
    """A check's deciding number in a reader's words, without the machinery's (no bound, margin or threshold named):
    where it lies and where the claim needs it (``at most 1.16 times, where the claim needs below 1.25 times``), as a
    factor where the design states the statistic as a log ratio; from the check's value and threshold where no
    design decides it."""
    d = check.get("decision") or {}
    if not d.get("cells"):
        m = _THRESHOLD_TEXT.match(str(check.get("threshold", "")))
        if m is None:
            return fmt(check.get("value"))
        return f"{fmt(check.get('value'))}, where the claim needs {_NEEDS[m.group(1)]} {m.group(2)}"
    worst = min(d["cells"], key=stats.margin_over_threshold)
    b, c, test = stats.worst_bound(worst), worst["threshold"], worst["test"]
    metric = str(worst.get("label", "")).split(": ", 1)[0]
    if metric in METRIC_WORDS and len(d["cells"]) > 1:
        return f"{METRIC_WORDS[metric]} {_in_words(d, worst, b, c, test)}"
    return _in_words(d, worst, b, c, test)


def _in_words(d: dict, worst: dict, b: float, c: float, test: str) -> str:
    if _is_log(d, worst):
        if test == "equal":
            return f"within a factor {math.exp(abs(b)):.3g}, where the claim needs within {math.exp(c):.3g}"
        return (f"{_AT[test]} {math.exp(b):.3g} times, where the claim needs {_NEEDS[_SIGN[test]]} "
                f"{math.exp(c):.3g} times")
    if test == "equal":
        return f"within {fmt(abs(b))}, where the claim needs within {fmt(c)}"
    return f"{_AT[test]} {fmt(b)}, where the claim needs {_NEEDS[_SIGN[test]]} {fmt(c)}"


_THRESHOLD_TEXT = re.compile(r"\s*(?:value|mean)?\s*([<>])\s*([-+0-9.eE]+)")
#: The metrics of the checks decided on several metrics, in words.
METRIC_WORDS = {"label_row": "the label row's share", "xblock": "the covariate block", "value": "the value part",
                "w_factor": "the scale factor", "distance": "the distance", "exponent": "the exponent",
                "logit_cosine": "the logit cosine", "argmax_agreement": "the argmax agreement",
                "loss_rel_diff": "the relative loss difference", "prob_correct_diff": "the difference of p(correct)",
                "entropy_diff": "the entropy difference", "prob_l2": "the probability distance"}
_SIGN = {"below": "<", "above": ">"}
_NEEDS = {"<": "below", ">": "above"}
_AT = {"below": "at most", "above": "at least"}
