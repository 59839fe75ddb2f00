"""Hold one run's record against another: verdicts exactly, numbers within declared tolerances.

Two runs of the same figure and profile on different machines (the fused CPU kernel and PyTorch, a CPU and a GPU)
round differently, so their numbers agree only to a tolerance, while every verdict must be the same (a verdict that
a rounding difference can flip sits on a knife's edge, which the chapters must avoid). This module is what
``tests/test_regression.py`` and ``softmax-icl compare DIR_A DIR_B`` use; it reads JSON only (no torch).

What is compared, leaf by leaf:

* every check of the reference record: its verdict (``passed``) exactly and its statement up to its decimal numbers
  (:func:`mask_measured`; both are printed in the verdict line that nbval compares), and its value numerically;
* every key number (``key_numbers``), walked recursively through dicts and lists: numbers within the tolerance,
  strings, booleans and the structure itself (dict keys, list lengths) exactly;
* a check or key number present in one record only is a difference.

Tolerance of a number ``ref`` (the reference) against ``new``: ``|new - ref| <= max(rtol * |ref|, atol, SE_UNITS *
se)``, where ``rtol`` is :data:`softmax_icl.profiles.DEFAULT_RTOL` unless the figure declares an override for the
number's path (``Figure.tolerances``, longest matching path prefix wins; ``None`` there means "not compared") and
``se`` is the number's seed standard error when the record has one: a sibling key ``<name>_se`` or
``<name>_stderr`` (a scalar, or the same shape as ``<name>``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Iterator

from ..profiles import DEFAULT_ATOL, DEFAULT_RTOL, SE_UNITS, Figure, fmt
from .records import read_json, status_of


#: Decimal numbers (and numbers in scientific notation) in a check's statement are measured context ("argmax
#: agreement 0.971"): they round differently on another machine, so statements are compared with them masked, as nbval
#: compares the verdict lines (``notebooks/nbval_sanitize.cfg`` holds the same pattern).
MEASURED = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+")


def mask_measured(text: Any) -> Any:
    """``text`` with every decimal number replaced by ``#`` (other values unchanged)."""
    return MEASURED.sub("#", text) if isinstance(text, str) else text


def verdict_word(check: dict) -> str:
    """A check's verdict in capitals: its status where the statistical design decided it (PASS, FAIL, INCONCLUSIVE,
    NOT SETTLED), else PASS / FAIL from ``passed``."""
    return status_of(check).upper()


@dataclass(frozen=True)
class Row:
    """One compared leaf: ``path`` (e.g. ``key_numbers.halfwidth_deg.softmax[2]`` or ``claims.<id>.verdict``)."""

    path: str
    reference: Any
    new: Any
    tolerance: float | None      # absolute tolerance used (None: compared exactly, or not compared)
    ok: bool
    note: str = ""

    @property
    def is_verdict(self) -> bool:
        return self.path.endswith(".verdict")

    def line(self) -> str:
        if self.note == "not compared":
            status = "skip"
        else:
            status = "ok  " if self.ok else "DIFF"
        if self.tolerance is not None and _is_number(self.reference) and _is_number(self.new):
            diff = self.new - self.reference
            rel = f" ({diff / self.reference:+.2%})" if self.reference else ""
            detail = f"{fmt(self.reference)} -> {fmt(self.new)}: {diff:+.3g}{rel}, tolerance {self.tolerance:.3g}"
        else:
            detail = f"{_short(self.reference)} -> {_short(self.new)}"
        return f"{status} {self.path}: {detail}" + (f" [{self.note}]" if self.note else "")


def _short(x: Any) -> str:
    text = fmt(x) if not isinstance(x, (dict, str)) else (x if isinstance(x, str) else json.dumps(x))
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _rtol(path: str, tolerances: dict) -> tuple[float | None, bool]:
    """(rtol, declared): the override with the longest path prefix of ``path``, else the default."""
    best = None
    for prefix in tolerances:
        if path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "["):
            if best is None or len(prefix) > len(best):
                best = prefix
    if best is None:
        return DEFAULT_RTOL, False
    return tolerances[best], True


def _leaves(path: str, ref: Any, new: Any, se: Any, tolerances: dict) -> Iterator[Row]:
    rtol, _ = _rtol(path, tolerances)
    if rtol is None:
        yield Row(path, ref, new, None, True, "not compared")
        return
    if isinstance(ref, dict) and isinstance(new, dict):
        for key in ref:
            sub = f"{path}.{key}"
            if key not in new:
                yield Row(sub, ref[key], None, None, False, "missing in the new record")
                continue
            sib = next((ref[k] for k in (f"{key}_se", f"{key}_stderr") if k in ref), None)
            sub_se = sib if sib is not None else (se.get(key) if isinstance(se, dict) else se)
            yield from _leaves(sub, ref[key], new[key], sub_se, tolerances)
        for key in new:
            if key not in ref:
                yield Row(f"{path}.{key}", None, new[key], None, False, "not in the reference record")
        return
    if isinstance(ref, list) and isinstance(new, list):
        if len(ref) != len(new):
            yield Row(path, ref, new, None, False, f"length {len(ref)} -> {len(new)}")
            return
        for i, (a, b) in enumerate(zip(ref, new)):
            sub_se = se[i] if isinstance(se, list) and len(se) == len(ref) else (se if _is_number(se) else None)
            yield from _leaves(f"{path}[{i}]", a, b, sub_se, tolerances)
        return
    if _is_number(ref) and _is_number(new):
        if math.isnan(ref) or math.isnan(new):
            yield Row(path, ref, new, 0.0, math.isnan(ref) and math.isnan(new))
            return
        tol = max(rtol * abs(ref), DEFAULT_ATOL, SE_UNITS * se if _is_number(se) and not math.isnan(se) else 0.0)
        note = f"{SE_UNITS:g} seed SE" if _is_number(se) and SE_UNITS * se >= max(rtol * abs(ref), DEFAULT_ATOL) else ""
        yield Row(path, ref, new, tol, abs(new - ref) <= tol, note)
        return
    yield Row(path, ref, new, None, ref == new, "" if ref == new else "differs")


def compare_records(reference: dict, new: dict, tolerances: dict | None = None) -> list[Row]:
    """Every compared leaf of two records of the same figure (see the module docstring)."""
    tolerances = tolerances or {}
    rows: list[Row] = []
    for field in ("notebook", "profile"):
        if reference.get(field) != new.get(field):
            rows.append(Row(field, reference.get(field), new.get(field), None, False, "different runs"))
    ref_claims = {c["id"]: c for c in reference.get("claims", [])}
    new_claims = {c["id"]: c for c in new.get("claims", [])}
    for cid, c in ref_claims.items():
        if cid not in new_claims:
            rows.append(Row(f"claims.{cid}.verdict", c["passed"], None, None, False, "check missing in the new record"))
            continue
        n = new_claims[cid]
        was, now = verdict_word(c), verdict_word(n)
        rows.append(Row(f"claims.{cid}.verdict", was, now, None, was == now))
        if mask_measured(c.get("statement")) != mask_measured(n.get("statement")):   # printed in the verdict line
            rows.append(Row(f"claims.{cid}.statement", c.get("statement"), n.get("statement"), None, False,
                            "the statement differs (a measured number in it?)"))
        rows += _leaves(f"claims.{cid}.value", c.get("value"), n.get("value"), None, tolerances)
    for cid, n in new_claims.items():
        if cid not in ref_claims:
            rows.append(Row(f"claims.{cid}.verdict", None, verdict_word(n), None, False, "not in the reference record"))
    rows += _leaves("key_numbers", reference.get("key_numbers", {}), new.get("key_numbers", {}), None, tolerances)
    return rows


def figure_tolerances(fig: Figure | None) -> dict:
    """The regression tolerances a figure declares (``Figure.tolerances``; none for ``None``, a figure unknown here)."""
    return dict(getattr(fig, "tolerances", {}) or {}) if fig is not None else {}


def results_dir(path: Path) -> Path:
    """A run's folder (holding ``results/``) or its ``results/`` folder itself."""
    path = Path(path)
    return path / "results" if (path / "results").is_dir() else path


def compare_dirs(dir_a: Path, dir_b: Path, registry: Mapping[str, Figure], figures: list[str] | None = None
                 ) -> dict[str, list[Row]]:
    """Figure -> rows, for every record present in both folders (``dir_a`` is the reference), each figure within
    the tolerances it declares in ``registry``."""
    a, b = results_dir(dir_a), results_dir(dir_b)
    names = sorted({p.stem for p in a.glob("*.json")} & {p.stem for p in b.glob("*.json")})
    if figures:
        names = [n for n in names if n in figures]
    return {name: compare_records(json.loads((a / f"{name}.json").read_text()),
                                  json.loads((b / f"{name}.json").read_text()), figure_tolerances(registry.get(name)))
            for name in names}


def read_record(folder: Path, figure: str) -> dict | None:
    """The record of ``figure`` in ``folder`` (a run's folder, the book's ``book/`` or a results folder), or None."""
    return read_json(results_dir(folder) / f"{figure}.json")


def parameter_changes(reference: Mapping[str, Any] | None, new: Mapping[str, Any] | None
                      ) -> list[tuple[str, Any, Any]]:
    """``(name, reference value, new value)`` for every parameter whose value differs between two configurations
    (two records' ``parameters``), in the new one's order; ``profile`` is not a parameter."""
    ref, now = dict(reference or {}), dict(new or {})
    names = [k for k in now if k != "profile"] + [k for k in ref if k not in now and k != "profile"]
    return [(k, ref.get(k), now.get(k)) for k in names if ref.get(k) != now.get(k)]


def verdict_changes(reference: dict | None, new: dict) -> list[tuple[str, str | None, str]]:
    """``(check id, reference verdict or None, new verdict)`` for every check of ``new`` whose verdict word differs
    from the reference's (None: the reference has no such check)."""
    ref = {c["id"]: verdict_word(c) for c in (reference or {}).get("claims", [])}
    return [(c["id"], ref.get(c["id"]), verdict_word(c)) for c in new.get("claims", [])
            if ref.get(c["id"]) != verdict_word(c)]


def _cell(text: str, width: int) -> str:
    """``text`` in a column ``width`` wide: cut with ``...`` where longer, padded where shorter."""
    text = str(text)
    return (text if len(text) <= width else text[:width - 3] + "...").ljust(width)


def _value_text(value: Any) -> str:
    return fmt(value) if _is_number(value) else ("-" if value is None else _short(value))


def _wrapped(head: str, items: list[str], width: int) -> list[str]:
    """``head`` then ``items`` joined by ``; ``, wrapped to ``width`` with a two-space hanging indent."""
    import textwrap

    return textwrap.wrap(head + "; ".join(items), width=width, subsequent_indent="    ", break_on_hyphens=False)


#: The widths of the run report's columns: check id, kind, verdict, value, the book's verdict where it differs.
REPORT_COLUMNS = (40, 9, 13, 10, 16)


def run_report(record: dict, book: dict | None = None, given: Mapping[str, Any] | None = None,
               book_parameters: dict | None = None, width: int = 100) -> str:
    """What a run found, for the terminal at its end: one line per check (id, kind, verdict word, measured value,
    and the book's verdict where it differs), the counts by kind, then, for a run not at the book's settings, the
    parameters that differ from the book's (``book_parameters``: the book profile's configuration; ``given``: those
    set with ``-p``, marked) and the verdicts that differ from the book's record ``book``. Every line fits ``width``
    columns."""
    given = dict(given or {})
    claims = record.get("claims", [])
    changed = {cid: was for cid, was, _ in verdict_changes(book, record)} if book is not None else {}
    cols = REPORT_COLUMNS
    lines = [f"{record.get('notebook')}: {len(claims)} checks at the {record.get('profile')} profile"]
    head = ("check", "kind", "verdict", "value", "book's verdict" if book is not None else "")
    lines.append(("  " + "".join(_cell(h, w) for h, w in zip(head, cols))).rstrip())
    for c in claims:
        row = (c["id"], c.get("kind", ""), verdict_word(c), _value_text(c.get("value")),
               (changed.get(c["id"]) or "(none)") if c["id"] in changed else "")
        lines.append(("  " + "".join(_cell(x, w) for x, w in zip(row, cols))).rstrip())
    counts = []
    for kind, word in (("claim", "claims hold"), ("finding", "findings hold"), ("control", "controls fail, as they "
                                                                                      "must")):
        group = [c for c in claims if c.get("kind") == kind]
        if group:
            ok = sum((verdict_word(c) == "FAIL") if kind == "control" else (verdict_word(c) == "PASS") for c in group)
            counts.append(f"{ok}/{len(group)} {word}")
    lines += _wrapped("  ", counts, width)
    if book_parameters is not None:
        diffs = parameter_changes(book_parameters, record.get("parameters", {}))
        if diffs:
            items = [f"{k} {fmt(new)} (book {fmt(ref)}{', -p' if k in given else ''})" for k, ref, new in diffs]
            lines += _wrapped(f"Parameters that differ from the book's ({len(diffs)}): ", items, width)
        else:
            lines.append("Parameters: the book's.")
    if book is not None:
        if changed:
            items = [f"{cid} {was or '(no such check)'} -> {verdict_word(c)}" for c in claims
                     for cid, was in [(c["id"], changed.get(c["id"]))] if cid in changed]
            lines += _wrapped(f"Verdicts that differ from the book's ({len(changed)} of {len(claims)}): ", items,
                              width)
        else:
            lines.append(f"Every verdict is the book's ({len(claims)} checks).")
    return "\n".join(lines)


def report(results: dict[str, list[Row]], verbose: bool = False, parameters: dict | None = None,
           limit: int = 20) -> tuple[str, bool]:
    """Text of a comparison and whether everything agrees (every verdict equal, every number within tolerance).

    Per figure: a count line, the parameters whose values differ between the two records (``parameters``: figure ->
    :func:`parameter_changes`), then the differences, verdicts first, at most ``limit`` of them; ``verbose`` lists
    every compared leaf instead."""
    lines, all_ok = [], True
    for name, rows in results.items():
        bad = [r for r in rows if not r.ok]
        verdicts = [r for r in rows if r.is_verdict]
        numbers = [r for r in rows if not r.is_verdict and r.tolerance is not None]
        all_ok &= not bad
        lines.append(f"== {name}: {sum(r.ok for r in verdicts)}/{len(verdicts)} verdicts equal, "
                     f"{sum(r.ok for r in numbers)}/{len(numbers)} numbers within tolerance"
                     + ("" if not bad else f", {len(bad)} difference(s)"))
        changes = (parameters or {}).get(name) or []
        if changes:
            lines += _wrapped("  parameters that differ: ", [f"{k} {fmt(a)} -> {fmt(b)}" for k, a, b in changes],
                              110)
        elif parameters is not None:
            lines.append("  parameters: the same")
        if verbose:
            lines += ["  " + r.line() for r in rows]
            continue
        shown = sorted(bad, key=lambda r: not r.is_verdict)
        lines += ["  " + r.line() for r in shown[:limit]]
        if len(shown) > limit:
            lines.append(f"  ... and {len(shown) - limit} more differences (--all lists every compared number)")
    return "\n".join(lines), all_ok
