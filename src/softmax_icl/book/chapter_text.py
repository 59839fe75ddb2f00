"""Helpers for a chapter's answer (``figures/<figure>/answer.py``): read a check of a run by id, and say its verdict
and number in words, so every number in an answer is printed from the run."""

from __future__ import annotations

from typing import Any

from ..profiles import fmt


def check(run: Any, cid: str):
    """The check ``cid`` of ``run`` (a :class:`~softmax_icl.book.records.Claim`); KeyError naming the ids if absent."""
    for c in run.claims:
        if c.id == cid:
            return c
    raise KeyError(f"{run.figure} has no check {cid!r}; it has {', '.join(c.id for c in run.claims)}")


def value(run: Any, cid: str, index: int | None = None) -> str:
    """The check's value as printed in the tables (one element of a list value with ``index``)."""
    v = check(run, cid).value
    return fmt(v[index] if index is not None else v)


def passed(run: Any, cid: str) -> bool:
    return bool(check(run, cid).passed)


def cells(run: Any, cid: str) -> list[dict]:
    """The cells of a check decided by the statistical design (each with its label, seed mean, bounds and verdict)."""
    return check(run, cid).decision["cells"]


def status(run: Any, cid: str) -> str:
    """The check's status: pass, fail, inconclusive or not settled (pass/fail from ``passed`` where undecided)."""
    c = check(run, cid)
    return c.status or ("pass" if c.passed else "fail")
