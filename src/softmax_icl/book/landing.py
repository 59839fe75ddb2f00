"""The landing page's answer (``book/landing_answer.md``), printed from the records: per paper, what its authors claim,
what the book finds of its headline results with the number that says it in words, and the exceptions among its
claims; then the overview figure, labelled in words. The words around each number are the ledger's (a paper's
``headline`` in ``book/claims.yml``); the machinery that decides the verdicts stays out of it."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..profiles import fmt
from . import ledger as lg
from .overview import BADGE, by_paper
from .settings_page import _md
from .verdicts import BookVerdicts

#: How a verdict reads in a sentence of the landing page (the badges' words are :data:`overview.SHORT`).
PLAIN = {lg.REPRODUCED: "reproduced", lg.NOT_REPRODUCED: "not reproduced", lg.INCONCLUSIVE: "inconclusive",
         lg.DEPENDS: "depends on a setting the paper leaves open",
         lg.NOT_SETTLED: "still changing when training stopped", None: "no record"}

_NBSP = "\u00a0"


def in_words(text: str, value: float | None = None, **counts: int) -> str:
    """A headline's ``text`` (``book/claims.yml``, a paper's ``headline``) with its number in words: ``{more}`` /
    ``{less}`` a log ratio as the percentage more or less than 1, ``{times}`` a log ratio as a factor, ``{share}`` a
    fraction as a percentage, ``{value}`` the number as it is; ``counts`` fill the other placeholders."""
    words = dict(counts)
    if value is not None:
        v = float(value)
        words.update(more=f"{100 * math.expm1(v):.0f}{_NBSP}%", less=f"{-100 * math.expm1(v):.0f}{_NBSP}%",
                     times=f"{fmt(math.exp(v))} times", share=f"{100 * v:.0f}{_NBSP}%", value=fmt(v))
    return " ".join(text.split()).format(**words)


def _at(ev, scale: str):
    return ev.default if scale == "default" else ev.paper


def headline_clause(book: BookVerdicts, h: Mapping, scale: str = "default") -> str:
    """One of a paper's headline results in words (:func:`in_words`) with its verdict at ``scale`` in words."""
    ev = next(x for x in book.entries if x.entry.id == h["entry"])
    v = _at(ev, scale)
    if v is None:
        return f"{ev.entry.label} ({PLAIN[None]})"
    if ev.entry.is_map:
        text = in_words(h["text"], held=sum(st == lg.REPRODUCED for st in v.parts.values()),
                        readings=len(ev.entry.readings))
    else:
        fv, c = book.check(h["check"])
        c = fv.paper_check(c["id"]) if (c is not None and scale == "paper") else c
        if c is None:
            return f"{ev.entry.label} ({PLAIN[None]})"
        value = c.get("value")
        if h.get("cell"):
            value = next(x["mean"] for x in (c.get("decision") or {}).get("cells", []) if x["label"] == h["cell"])
        text = in_words(h["text"], value)
    return f"{text} ({PLAIN[v.status]})"


def _series(items: list[str], sep: str = ", ") -> str:
    """``a``, ``a and b``, ``a, b and c`` (with ``sep`` "; ": ``a; b; and c``, whose parts may hold commas)."""
    if len(items) < 3:
        return " and ".join(items)
    return sep.join(items[:-1]) + (f"{sep.strip()} and " if sep.strip() != "," else " and ") + items[-1]


def paper_answer(book: BookVerdicts, key: str, evs: list, scale: str = "default") -> str:
    """What the landing page says of a paper, in at most three sentences printed from the records at ``scale``: what
    its authors claim (its ``idea``), what the book finds of its headline results, each with its number and verdict
    in words (:func:`headline_clause`) with how many of its claims the other scale reproduces, and the exceptions among
    its claims. Opens with the paper's name and a badge counting its claims reproduced."""
    paper = book.ledger.papers[key]
    n = len(evs)
    count = sum(_at(ev, scale) is not None and _at(ev, scale).status == lg.REPRODUCED for ev in evs)
    out = [f"**{_md(paper['short'])}** {{{BADGE[lg.REPRODUCED]}}}`{count} of {n} claims reproduced` claim that "
           f"{' '.join(str(paper.get('idea', '')).split())}."]
    clauses = [headline_clause(book, h, scale) for h in paper.get("headline") or ()]
    other = "paper" if scale == "default" else "default"
    there = sum(_at(ev, other) is not None and _at(ev, other).status == lg.REPRODUCED for ev in evs)
    also = (f"; {there} of {n} at the {other} scale"
            if any(_at(ev, other) is not None for ev in evs) else "")
    if clauses:
        out.append(f"At the {scale} scale the book finds that " + _series(clauses, "; ") + also + ".")
    shown = {h["entry"] for h in paper.get("headline") or ()}
    groups: dict = {}
    for ev in evs:
        v = _at(ev, scale)
        st = v.status if v is not None else None
        if st != lg.REPRODUCED and ev.entry.id not in shown:
            groups.setdefault(st, []).append(f"“{ev.entry.label}”")
    order = [lg.NOT_REPRODUCED, lg.INCONCLUSIVE, lg.DEPENDS, lg.NOT_SETTLED, None]
    parts = [f"{PLAIN[st]}: {_series(groups[st])}" for st in order if st in groups]
    if parts:
        out.append(("Of its other claims, " if clauses else "Among its claims, ")
                   + "; ".join(parts)[:1].lower() + "; ".join(parts)[1:] + ".")
    return " ".join(out)


def answer_markdown(book: BookVerdicts) -> str:
    """What the landing page shows first (``book/landing_answer.md``): what each paper claims and what the book finds
    (:func:`paper_answer`), and the overview figure, labelled in words."""
    return "\n".join([f"* {paper_answer(book, key, evs)}" for key, evs in by_paper(book)] + [
        # dark-light: the dark theme shows the figure as drawn (its colours are the badges'), not dimmed
        "", "```{figure} figures/claims_overview.png", ":name: fig-claims-overview", ":class: dark-light",
        ":alt: for each claim of the two papers, whether the book reproduces it at the default and at the paper scale",
        "", "Each row is one claim of the two papers; the left column says whether the book reproduces it at the "
        "default scale (runs of minutes on a 2-core CPU), the right one at the paper scale (longer training and "
        "larger contexts, as in the papers). Each cell names the verdict and is coloured as its badge is.", "```"]) + "\n"
