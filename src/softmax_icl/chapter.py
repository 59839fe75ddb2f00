"""Reader-first chapters: what a figure notebook shows *before* its code, computed by its code.

A chapter opens with its question, the paper's figure it reproduces, and a **verdict box**: the run's
claims with their status. The box is computed at the end of the notebook (after the claim checks) and
*glued* into a markdown cell near the top with myst-nb's ``{glue:md}`` directive, so the reader meets the
result first while the code that computes it still runs in order (``notebooks/LAYOUT.md``)::

    # last cells of a figure notebook
    print(run.finish())            # nbval-checked verdict lines (unchanged)
    chapter.glue_verdicts(run)     # a separate cell: stores the box under the key "verdicts"

    <!-- markdown cell right after the title -->
    ```{glue:md} verdicts
    :format: myst
    ```

The claim checks are read with attribute defaults, so records written before a field existed (``kind``,
``source``) still render.
"""

from __future__ import annotations

from typing import Any, Iterable

#: The glue key under which :func:`glue_verdicts` stores the verdict box; the markdown cell pastes it.
VERDICT_KEY = "verdicts"

#: How each kind of check is introduced in the box (kinds not listed are shown under their own name).
KIND_HEADINGS = {
    "claim": "The papers' claims",
    "finding": "Findings: open tests, where either verdict is a result",
    "control": "Controls: checks that the experiment measures what it should",
}


def _get(claim: Any, name: str, default: Any = None) -> Any:
    """A claim's field, from a :class:`~softmax_icl.records.Claim` or from its dict in a JSON record."""
    if isinstance(claim, dict):
        return claim.get(name, default)
    return getattr(claim, name, default)


def _cell(text: Any) -> str:
    """Text for one cell of a markdown table: no line breaks, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _fmt(value: Any) -> str:
    from .records import fmt

    return fmt(value)


def _fresh_cell(claim: Any, audit: dict) -> tuple[str, bool]:
    """The "fresh seed sets" cell of a check, and whether the check is inconclusive (its verdict differs in a
    fresh set or a set did not run)."""
    from .audit import stability

    st = stability(str(_get(claim, "id", "")), audit, bool(_get(claim, "passed")))
    if st is None:
        return "not audited", False
    text = f"{st.agree}/{st.total} agree" + (f" ({st.total - st.ran} did not run)" if st.ran < st.total else "")
    return (text, False) if st.stable else (f"**{text}: inconclusive**", True)


def verdict_markdown(claims: Iterable[Any], title: str = "Verdict", audit: dict | None = None) -> str:
    """The verdict box as MyST markdown: an admonition with one table per kind of check.

    ``claims`` are :class:`~softmax_icl.records.Claim` objects or their dicts (``record["claims"]``); the
    fields used are ``id, statement, passed, value, threshold`` and, where present, ``kind`` (``claim``,
    ``finding``, ``control``; default ``claim``) and ``source``. The admonition is green (``tip``) when every
    claim of the papers holds, orange (``warning``) when one fails; findings and controls do not colour it.
    ``audit``: the figure's seed-audit record (:mod:`softmax_icl.audit`); with one, each check gets a column saying
    in how many fresh seed sets it keeps its verdict, and the summary line counts the inconclusive ones.
    """
    claims = list(claims)
    by_kind: dict[str, list[Any]] = {}
    for c in claims:
        by_kind.setdefault(str(_get(c, "kind", "claim") or "claim"), []).append(c)
    order = [k for k in KIND_HEADINGS if k in by_kind] + [k for k in by_kind if k not in KIND_HEADINGS]

    def count(kind: str) -> str:
        items = by_kind[kind]
        noun = {"claim": "claims", "finding": "findings", "control": "controls"}.get(kind, kind)
        if kind == "control":       # a control does its job when its criterion fails
            return f"{sum(not _get(c, 'passed') for c in items)}/{len(items)} {noun} fail, as they must"
        return f"{sum(bool(_get(c, 'passed')) for c in items)}/{len(items)} {noun} hold"

    summary = "; ".join(count(k) for k in order) if claims else "no checks were recorded"
    fresh = {id(c): _fresh_cell(c, audit) for c in claims} if audit else {}
    unstable = sum(flag for _, flag in fresh.values())
    if audit:
        n_sets = len(audit.get("sets", []))
        summary += (f"; {unstable} inconclusive over {n_sets} fresh seed sets" if unstable
                    else f"; every verdict kept in {n_sets} fresh seed sets")
    # a claim that fails, or whose verdict does not survive fresh seeds, turns the box orange
    failed_claim = any(not _get(c, "passed") or (id(c) in fresh and fresh[id(c)][1]) for c in by_kind.get("claim", []))
    with_source = any(_get(c, "source") for c in claims)

    lines = [f"````{{admonition}} {title}: {summary}",
             f":class: {'warning' if failed_claim else 'tip'} verdict-box", ""]
    for kind in order:
        lines += [f"**{KIND_HEADINGS.get(kind, kind.capitalize())}**", ""]
        header = ["", "check", "what is tested" + (" (and its source)" if with_source else ""), "value", "required"] \
            + (["fresh seed sets"] if audit else [])
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for c in by_kind[kind]:
            as_expected = (not _get(c, "passed")) if kind == "control" else bool(_get(c, "passed"))
            mark = "✓" if as_expected else "✗"
            what = _cell(_get(c, "statement", ""))
            if _get(c, "source"):            # in the same cell: a seventh column left the statements no room
                what += f" · **source:** {_cell(_get(c, 'source'))}"
            row = [f"{mark} {'PASS' if _get(c, 'passed') else 'FAIL'}", f"`{_cell(_get(c, 'id', ''))}`", what,
                   _cell(_fmt(_get(c, "value"))), _cell(_get(c, "threshold", ""))]
            if audit:
                row.append(fresh[id(c)][0])
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["Each value is computed by this chapter's code from the run shown below; the same lines are "
              "printed by its claim-check cell and written to its JSON record."]
    if audit:
        lines += ["", "*Fresh seed sets*: the same chapter rerun with seeds no committed run used (`softmax-icl "
                  "audit`, record `book/results/audit/`); a check whose verdict differs in one of them is "
                  "inconclusive, and the results summary counts it so."]
    lines += ["````"]
    return "\n".join(lines)


def glue_verdicts(run: Any, key: str = VERDICT_KEY) -> str:
    """Store the verdict box of ``run`` (a :class:`~softmax_icl.records.Run` after its claim checks) in the
    notebook under ``key``, without displaying it here; returns the markdown.

    Call it in its own cell after the cell that prints ``run.finish()``. Outside a notebook kernel it only
    returns the markdown.
    """
    text = verdict_markdown(getattr(run, "claims", []), audit=book_audit(run))
    glue_markdown(key, text)
    return text


def book_audit(run: Any) -> dict | None:
    """The committed seed audit of ``run``'s figure (``book/results/audit/<figure>.json``) when ``run`` is at the
    book's settings (the book's profile, no parameter overridden) and reproduces the audited run (same verdicts,
    values within tolerance: :func:`softmax_icl.audit.speaks_for`): the audit reran exactly those settings with other
    seeds, so it says how far this run's verdicts hold. None for any other run, or where there is no audit."""
    from dataclasses import asdict, is_dataclass

    from .audit import read_audit, speaks_for
    from .records import BOOK_PROFILE, repo_root
    from .registry import resolve

    figure, cfg = getattr(run, "figure", None), getattr(run, "cfg", None)
    if figure is None or getattr(run, "profile", None) != BOOK_PROFILE or cfg != resolve(figure, BOOK_PROFILE):
        return None
    root = repo_root()
    audit = None if root is None else read_audit(root / "book" / "results", figure)
    claims = [asdict(c) if is_dataclass(c) else dict(c) for c in getattr(run, "claims", [])]
    return audit if speaks_for(audit, figure, claims, getattr(run, "revision", None)) else None


def glue_markdown(key: str, text: str) -> None:
    """Glue ``text`` as ``text/markdown`` under ``key`` (myst-nb's ``glue`` with ``display=False``)."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown
    except ImportError:  # no IPython: nothing to glue into
        return
    if get_ipython() is None:
        return
    try:
        from myst_nb import glue
    except ImportError:  # the same output myst-nb writes, so the book renders it
        from IPython.display import display

        display({"application/papermill.record/text/markdown": text}, raw=True,
                metadata={"scrapbook": {"name": key, "mime_prefix": "application/papermill.record/"}})
        return
    glue(key, Markdown(text), display=False)


def audit_summary(run: Any) -> str:
    """The seed audit of ``run`` in words, for a chapter to print under its claim checks: how many fresh seed sets
    reran the chapter, and every check whose verdict is not the same in all of them (its verdict and value in each),
    from the committed audit record (:func:`book_audit`). Says so where no audit applies to ``run``."""
    from .audit import stability
    from .records import fmt

    audit = book_audit(run)
    if audit is None:
        return ("No seed audit applies to this run: the audit (`softmax-icl audit`) reruns the book's own run with "
                "fresh seeds, and this run has other settings or results, or its chapter has not been audited yet.")
    sets = audit.get("sets", [])
    offsets = ", ".join(str(audit.get("seed_offset", 1000) * s["set"]) for s in sets)
    lines = [f"Seed audit: this chapter rerun with {len(sets)} fresh seed sets (every seed parameter offset by "
             f"{offsets}; book/results/audit/{run.figure}.json)."]
    entries = {c["id"]: c for c in audit.get("checks", [])}
    unstable = []
    for c in getattr(run, "claims", []):
        st = stability(c.id, audit, c.passed)
        if st is not None and not st.stable:
            e = entries[c.id]
            fresh = ", ".join("did not run" if v is None else f"{'PASS' if v else 'FAIL'} ({fmt(x)})"
                              for v, x in zip(e["fresh"], e["values"]))
            unstable.append(f"  {c.id} [{c.kind}]: {'PASS' if c.passed else 'FAIL'} ({fmt(c.value)}) here; "
                            f"fresh sets: {fresh}")
    if unstable:
        lines.append(f"{len(unstable)} of {len(run.claims)} checks do not keep their verdict in every set "
                     "(inconclusive):")
        lines += unstable
    else:
        lines.append(f"Every one of the {len(run.claims)} checks keeps its verdict in every set.")
    return "\n".join(lines)
