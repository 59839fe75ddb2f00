"""What a run records: its checks (claim | finding | control) and the machine-readable record.

A check is a :class:`Claim`, made and validated by :func:`make_claim` (its kind, its source, the ledger entry it
tests); :func:`verdict_lines` prints the verdicts that nbval compares, :func:`record` assembles a run's record and
:func:`write_record` writes it, atomically, to ``<output_dir>/results/<figure>.json``, from where the book's pages
and the regression test read it. Nothing here trains or writes pages: :class:`softmax_icl.book.run.Run` composes it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..base import atomic_write_bytes
from ..stats import VERDICTS
from ..profiles import fmt
from . import ledger


def plain(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


#: What a check is: the papers say it; a question the papers do not answer; the same check against the
#: wrong counterpart, which must fail for the check it controls to mean anything.
KINDS = ("claim", "finding", "control")


@dataclass
class Claim:
    """One check of a run: computed from the run, compared with a threshold fixed before the run.

    ``source`` names what is tested (the paper's figure, theorem, caption or slide, quoted briefly, or
    "beyond the papers"). A *control* (``kind="control"``) repeats the check ``control_of`` against the wrong
    counterpart; ``passed`` is then whether the criterion held there, and the control does its job when it does not.
    ``anchor`` optionally names the MyST label in the chapter where the verdict is discussed (the results summary
    links a claim that is not reproduced there; without it, to the chapter).
    ``ledger`` names the entry of the claims ledger (``book/claims.yml``, :mod:`softmax_icl.book.ledger`) that the check
    tests: required for a claim (the entry must list the check), optional for a finding that pushes an entry past its
    scope (the entry lists it under ``beyond``).
    ``title`` is a short name of the check for tables (MyST: ``$...$`` maths allowed); without one, pages use the id.

    A check decided by the statistical design (:meth:`softmax_icl.book.run.Run.decide`) carries its ``status``
    (pass, fail, inconclusive, not settled) and its evidence (``decision``: seeds, test, threshold, margin, the
    interval of every cell); its verdict rests on its pooled seeds, and the audit's sets are a display beside it.
    Any other check: one run gives one verdict, PASS or FAIL. Whether a claim of the papers is *reproduced*, *not
    reproduced* or *inconclusive* is then a statement over seeds, not a field of one run's check: the audit
    (:mod:`softmax_icl.book.audit`, ``softmax-icl audit``) reruns the figure with other seed sets (the earlier pool
    and fresh sets), and a check whose status is not the same in the committed run and in every set that ran is
    *inconclusive* (:func:`softmax_icl.book.audit.status`); a claim the audit has not rerun keeps its committed verdict.
    """

    id: str
    statement: str
    passed: bool
    value: Any
    threshold: str
    kind: str = "claim"
    source: str = ""
    control_of: str | None = None
    anchor: str | None = None
    ledger: str | None = None
    title: str | None = None
    #: a check decided by the statistical design (:meth:`softmax_icl.book.run.Run.decide`): "pass", "fail",
    #: "inconclusive" or "not settled" (:data:`STATUSES`); None for a check with one PASS/FAIL
    status: str | None = None
    #: its seeds, test, threshold, margin and judged cells (interval, samples, trajectory): the evidence
    decision: dict | None = None

    @property
    def as_expected(self) -> bool:
        """A claim or finding that holds; a control that fails (a decided control: whose interval lies wholly on the
        failing side)."""
        if self.kind == "control":
            return self.status == "fail" if self.status is not None else not self.passed
        return self.passed

    def line(self) -> str:
        """The verdict line: what must be the same on every machine (no measured number; see :meth:`value_line`)."""
        failed = self.status == "fail" if self.status is not None else not self.passed
        verdict = (self.status or ("pass" if self.passed else "fail")).upper()
        if self.kind == "control":
            tag = f" [control of {self.control_of}: " + ("fails, as it must]" if failed else
                                                         "passes too: the check does not discriminate]"
                                                         if self.passed else "does not fail: it does not discriminate]")
        else:
            tag = " [finding]" if self.kind == "finding" else ""
        return f"{verdict}  {self.id}{tag}: {self.statement} -- required {self.threshold}"

    def value_line(self) -> str:
        """The measured value against the threshold (it may differ in its last digits between machines)."""
        return f"{self.id}: {fmt(self.value)} (required {self.threshold})"


#: The verdicts of a check decided on seeds.
STATUSES = VERDICTS

#: The source of a baseline control: the simplest model that should not pass a claim check, run through it.
BASELINE_SOURCE = "a baseline that must fail (claims ledger)"


def check_ledger(figure: str, cid: str, kind: str, entry_id: str | None) -> None:
    """A claim names the ledger entry that lists it; a finding naming an entry is among its ``beyond``; a control
    names none (it belongs to the check it controls)."""
    key = f"{figure}/{cid}"
    if kind == "control":
        if entry_id is not None:
            raise ValueError(f"control {cid!r} names a ledger entry; a control belongs to the check it controls")
        return
    if entry_id is None:
        if kind == "claim":
            raise ValueError(f"claim {cid!r} names no ledger entry; a check of an authors' statement names the "
                             "entry that quotes it (book/design.yml: claim), anything else is a finding")
        return
    entry = ledger.load().by_id(entry_id)
    listed = entry.all_checks() if kind == "claim" else entry.beyond
    if key not in listed:
        where = "checks/readings" if kind == "claim" else "beyond"
        raise ValueError(f"{kind} {key!r} names ledger entry {entry_id!r}, whose {where} do not list it "
                         f"({', '.join(listed) or 'none'})")


def make_claim(figure: str, id: str, statement: str, value: Any, passed: bool, threshold: str, *, kind: str,
               source: str, control_of: str | None = None, anchor: str | None = None, ledger: str | None = None,
               title: str | None = None, default_title: str | None = None, status: str | None = None,
               decision: dict | None = None) -> Claim:
    """One check of ``figure``, validated. ``kind`` ("claim", "finding" or "control") and ``source`` (what it
    tests, quoted briefly, or "beyond the papers") are required (see :class:`Claim`). A claim names its
    ledger entry (``ledger``), which must list it; a finding may name the entry it goes beyond; a control names the
    check it controls (``control_of``), and without a ``title`` takes its short name from its statement; any other
    check without one takes ``default_title`` (the short title its figure's claims module gives it)."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not allowed; allowed values: {', '.join(KINDS)}")
    if not str(source).strip():
        raise ValueError(f"check {id!r} names no source (the paper's figure, theorem, caption or slide it tests, "
                         "or 'beyond the papers')")
    if (kind == "control") != (control_of is not None):
        raise ValueError("a control names the check it controls (control_of), and only a control does")
    check_ledger(figure, id, kind, ledger)
    if title is None and kind == "control":            # "control: the same for X; ..." -> "X"
        title = statement.split(";")[0].removeprefix("control: ").removeprefix("the same for ").strip()
    title = title or default_title
    if status is not None and status not in STATUSES:
        raise ValueError(f"status={status!r} is not allowed; allowed values: {', '.join(STATUSES)}")
    if status is not None and bool(passed) != (status == "pass"):
        raise ValueError(f"check {id!r}: passed={passed!r} disagrees with status {status!r}")
    return Claim(id, statement, bool(passed), plain(value), threshold, kind, source, control_of, anchor, ledger, title,
                 status, None if decision is None else plain(decision))


def verdict_lines(claims: list[Claim]) -> str:
    """Every check's verdict line, then the counts by kind: what must be the same on every machine (nbval compares
    it; the measured values are in :func:`values_table` and the record)."""
    counts = []
    for kind, word in (("claim", "claims hold"), ("finding", "findings hold (an open test: either verdict is a "
                                                             "result)"),
                       ("control", "controls fail, as they must")):
        group = [c for c in claims if c.kind == kind]
        if group:
            counts.append(f"{sum(c.as_expected for c in group)}/{len(group)} {word}")
    return "\n".join([c.line() for c in claims] + ["; ".join(counts)])


def values_table(claims: list[Claim]) -> str:
    """Each check's measured value against its threshold: for a cell that nbval does not compare (the numbers are
    compared with the committed record within tolerances by ``tests/test_regression.py``)."""
    return "\n".join(c.value_line() for c in claims)


def record(figure: str, profile: str, cfg: dict, claims: list[Claim], numbers: dict, provenance: dict,
           timings: dict, cache_hits: dict, compute_seconds: dict, trained_in_parts: dict | None = None) -> dict:
    """A run's machine-readable record: its settings, checks, key numbers, provenance, stage timings (rounded to
    0.01 s) and cache use."""
    return {
        "notebook": figure, "profile": profile, "parameters": plain(cfg),
        "claims": [asdict(c) for c in claims], "key_numbers": numbers,
        "provenance": provenance, "timings": {k: round(v, 2) for k, v in timings.items()},
        "cache_hits": cache_hits, "compute_seconds": compute_seconds,
        **({"trained_in_parts": trained_in_parts} if trained_in_parts else {}),
    }


def record_path(output_dir: Path, figure: str) -> Path:
    return Path(output_dir) / "results" / f"{figure}.json"


def write_record(output_dir: Path, rec: dict) -> Path:
    """Write ``rec`` (atomically) to ``<output_dir>/results/<figure>.json``; returns the path."""
    path = record_path(output_dir, rec["notebook"])
    atomic_write_bytes(path, (json.dumps(rec, indent=2, sort_keys=False) + "\n").encode())
    return path


def status_of(check: dict) -> str:
    """A recorded check's status: its decided ``status`` (pass, fail, inconclusive, not settled), else pass/fail."""
    return check.get("status") or ("pass" if check.get("passed") else "fail")


def read_json(path: Path) -> dict | None:
    """The JSON file ``path`` (a record), or None where it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
