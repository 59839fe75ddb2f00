"""The results appendix "Results at both scales": every check at the book's profile beside the paper profile.

The book's chapters run at the ``default`` profile; the ``paper`` profile is the most faithful scale (more steps,
seeds and context lengths; meant for a GPU). :func:`scales_markdown` reads the records of both -- ``<results>/
<figure>.json`` (default) and ``<results>/paper/<figure>.json`` (paper, where one exists) -- and sets each check's
verdict and value side by side, marks the verdicts that change with scale, and lists the figures that have no paper
record yet, with the reason. It reads JSON only (no torch), so the page can be rebuilt anywhere.

``python -m softmax_icl.book.scales book/results`` prints the page.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from .myst import nobreak
from .compare import verdict_word
from .records import read_json
from .verdicts import fingerprint, same_code

#: Where the paper-profile records sit, relative to the results folder.
PAPER_SUBDIR = "paper"
#: Why a figure has no paper record, unless the caller says more.
DEFAULT_MISSING_REASON = "no paper-profile record yet"
#: Why these figures have no paper record, where more is known than :data:`DEFAULT_MISSING_REASON` says.
MISSING_REASONS: dict[str, str] = {}


def _md(x) -> str:
    """Text for a table cell: one line, pipes escaped, word-internal hyphens non-breaking
    (:func:`softmax_icl.book.myst.nobreak`), so a narrow cell never splits "t-interval" over two lines."""
    return nobreak(str(x).replace("|", "\\|").replace("\n", " "))


def _value(v) -> str:
    """A check's value for a table cell: numbers to 3 significant digits, lists shortened."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.3g}" if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        items = [_value(x) for x in v[:4]]
        return "[" + ", ".join(items) + (", ..." if len(v) > 4 else "") + "]"
    return "" if v is None else _md(v)


def _verdict(check: dict) -> str:
    """The verdict word; a control says whether it failed as it must."""
    word = verdict_word(check)
    if check.get("kind") == "control":
        return word + {"FAIL": " (as it must)", "PASS": " (control broken)"}.get(word, " (not rejected)")
    return word


def _name(row: dict) -> str:
    """A check's name for a table cell: its title where the record gives one, else its id in words."""
    title = next((c.get("title") for c in (row["default"], row["paper"]) if c is not None and c.get("title")), None)
    return _md(title) if title else row["id"].replace("-", " ")


def _words(text) -> str:
    """A requirement for a narrow cell: a metric's code name read as words (``argmax_agreement`` -> ``argmax
    agreement``), so no token is wider than the column."""
    return re.sub(r"(?<=[a-z])_(?=[a-z])", " ", str(text))


def _required(row: dict) -> str:
    """The threshold a check's value must meet; both where the profiles differ."""
    ca, cb = row["default"], row["paper"]
    if ca is not None and cb is not None and ca.get("threshold") != cb.get("threshold"):
        return _md(_words(f"default: {ca.get('threshold')}; paper: {cb.get('threshold')}"))
    return _md(_words((cb or ca).get("threshold", "")))


def _checks(record: dict) -> dict[str, dict]:
    return {c["id"]: c for c in record.get("claims", record.get("checks", []))}


def _cached_stages(record: dict) -> str:
    """'' for a run that computed everything; else 'K of N stages read from the result cache': its notebook time
    then measures the cache, not the computation."""
    hits = record.get("cache_hits") or {}
    k = sum(bool(v) for v in hits.values())
    return f"{k} of {len(hits)} stages read from the result cache" if k else ""


def cache_note(record: dict) -> str:
    """:func:`_cached_stages` in brackets after a time, or ''; with what computing every stage took, where the cache
    kept it (``compute_seconds`` of the record)."""
    cached = _cached_stages(record)
    if not cached:
        return ""
    took = [(record.get("compute_seconds") or {}).get(tag) for tag in record.get("cache_hits", {})]
    if took and all(t is not None for t in took):
        cached += f"; computing its {len(took)} stages took {sum(took):.0f} s"
    parts = record.get("trained_in_parts") or {}
    if parts:
        cached += "; " + ", ".join(f"`{tag}` trained in {p} parts by seed" for tag, p in parts.items())
    return f" ({cached})"


def _run_line(label: str, record: dict) -> str:
    prov = record.get("provenance", {})
    seconds = record.get("timings", {}).get("total")
    bits = [f"device `{prov.get('device', '?')}`"]
    if seconds is not None:
        bits.append(f"notebook compute {float(seconds):.0f} s{cache_note(record)}")
    peak = prov.get("peak_memory_mb") or {}
    if peak:
        whose = " of the notebook (not of the stages it read from the cache)" if _cached_stages(record) else ""
        bits.append(f"peak memory{whose} " + ", ".join(f"{k.replace('_', ' ')} {v:.0f} MB" for k, v in peak.items()))
    profile = record.get("profile")
    tag = "" if profile in (None, label) else f" (its record says profile `{profile}`)"
    return f"* **{label}**{tag}: " + ", ".join(bits)


def compare_scales(default: dict, paper: dict) -> list[dict]:
    """One row per check id of either record (default's order first): ids, kind, both checks (or None), and
    whether the verdict changes with scale (only where both exist)."""
    a, b = _checks(default), _checks(paper)
    rows = []
    for cid in [*a, *(k for k in b if k not in a)]:
        ca, cb = a.get(cid), b.get(cid)
        kind = (ca or cb).get("kind", "claim")
        changes = ca is not None and cb is not None and verdict_word(ca) != verdict_word(cb)
        rows.append({"id": cid, "kind": kind, "default": ca, "paper": cb, "changes": changes})
    return rows


def scales_markdown(results_dir, figures: list[str] | None = None, titles: dict[str, str] | None = None,
                    missing_reasons: dict[str, str] | None = None) -> str:
    """The results appendix "Results at both scales" from the records in ``results_dir`` (e.g. ``book/results``).

    ``figures``: the figures in book order (default: every ``<figure>.json`` in ``results_dir``, by name);
    ``titles``: chapter titles by figure (default: the names); ``missing_reasons``: why a figure has no
    paper record (e.g. the CPU time it would need; default :data:`MISSING_REASONS`), else
    :data:`DEFAULT_MISSING_REASON`.
    """
    results = Path(results_dir)
    paper_dir = results / PAPER_SUBDIR
    if figures is None:
        figures = sorted(p.stem for p in results.glob("*.json"))
    titles = titles or {}
    reasons = MISSING_REASONS if missing_reasons is None else missing_reasons

    default = {f: read_json(results / f"{f}.json") for f in figures}
    paper = {f: read_json(paper_dir / f"{f}.json") for f in figures}
    present = [f for f in figures if default[f] is not None and paper[f] is not None]
    other_code = [f for f in present if not same_code(default[f], paper[f])]
    both = [f for f in present if f not in other_code]
    missing = [f for f in figures if paper[f] is None]
    rows = {f: compare_scales(default[f], paper[f]) for f in both}
    changed = [(f, r) for f in both for r in rows[f] if r["changes"]]
    compared = sum(1 for f in both for r in rows[f] if r["default"] is not None and r["paper"] is not None)

    titles = {f: str(t).replace("||M||", "‖M‖") for f, t in titles.items()}
    out = ["# Results at both scales", "",
           "The chapters show the `default` profile: the scale at which the whole book runs in minutes on a "
           "two-core CPU. The `paper` profile is the most faithful scale (more training steps, seeds and context "
           "lengths). This page sets every check's verdict and value at the two profiles side by side, so a reader "
           "can see which conclusions hold at both scales and which depend on the scale. It is generated from the "
           "records (`book/results/<figure>.json` and `book/results/paper/<figure>.json`) by "
           "`softmax_icl.book.scales`. "
           "Two records are compared only when the same code computed them (the result cache's code fingerprint, "
           "kept in each record): a record of other code is another experiment.", "",
           f"{len(both)} of {len(figures)} figures have a paper-profile record of the same code; {compared} checks "
           f"are compared at both scales, and {len(changed)} of them change their verdict with scale.", ""]

    if changed:
        out += ["## Verdicts that change with scale", "", "```{list-table}", ":header-rows: 1",
                ":class: check-table", ":widths: 34 12 18 18 18", "",
                "* - Check", "  - Kind", "  - Default", "  - Paper", "  - Required"]
        for f, r in changed:
            out += [f"* - {_md(titles.get(f, f))}: {_name(r)}", f"  - {r['kind']}",
                    f"  - {_verdict(r['default'])} ({_value(r['default'].get('value'))})",
                    f"  - {_verdict(r['paper'])} ({_value(r['paper'].get('value'))})", f"  - {_required(r)}"]
        out += ["```", ""]
    elif both:
        out += ["Every check compared has the same verdict at both scales.", ""]

    for f in both:
        n_changed = sum(r["changes"] for r in rows[f])
        out += ["## " + str(titles.get(f, f)).replace("|", "\\|"), "",
                f"````{{admonition}} Every check at both scales ({len(rows[f])} checks, {n_changed} change with "
                "scale)", ":class: dropdown", "", "```{list-table}", ":header-rows: 1", ":class: check-table",
                ":widths: 34 22 22 22", "", "* - Check", "  - Default", "  - Paper", "  - Required"]
        for r in rows[f]:
            ca, cb = r["default"], r["paper"]
            cell = lambda c: "not in this record" if c is None else f"{_verdict(c)} ({_value(c.get('value'))})"  # noqa: E731
            out += [f"* - {_name(r)} ({r['kind']})", f"  - {cell(ca)}",
                    f"  - {'**' + cell(cb) + '**' if r['changes'] else cell(cb)}", f"  - {_required(r)}"]
        out += ["```", "", "How the two runs ran:", "", _run_line("default", default[f]), _run_line("paper", paper[f]),
                "````", ""]

    if other_code:
        out += ["## Records of other code, not compared", ""]
        out += [f"* **{_md(titles.get(f, f))}** (`{f}`): the paper-profile record was computed by code with "
                f"fingerprint `{fingerprint(paper[f]) or 'none recorded'}`, the default record by "
                f"`{fingerprint(default[f]) or 'none recorded'}`." for f in other_code]
        out += ["", "Rerun the paper profile with the current code to compare them: `softmax-icl build --profile "
                "paper --publish` (with `--device cuda` on a GPU).", ""]

    if missing:
        out += ["## Figures with no paper-profile record", ""]
        for f in missing:
            why = reasons.get(f, DEFAULT_MISSING_REASON)
            if default[f] is None:
                why += " (and it has no default-profile record either)"
            out.append(f"* **{_md(titles.get(f, f))}** (`{f}`): {_md(why)}.")
        out += ["", "To add them: `softmax-icl build --profile paper --publish` (`--device cuda` on a GPU; on a CPU "
                "the stages are cached, so a run can be stopped and resumed): the notebooks run into "
                "`runs/<figure>-paper/`, and their records are copied to `book/results/paper/`, from where this page "
                "is regenerated.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(scales_markdown(sys.argv[1] if len(sys.argv) > 1 else "book/results"))
