"""Verdicts as a reader meets them: each check's status at both scales, and each ledger entry's verdict.

Three sources meet here: a figure's record at the book's profile (``book/results/<figure>.json``), its seed audit
(``book/results/audit/<figure>.json``, :mod:`softmax_icl.book.audit`) and its record at the paper profile
(``book/results/paper/<figure>.json``). :class:`FigureVerdicts` holds them for one figure; :class:`BookVerdicts` for
the whole book, with each entry of the claims ledger (:mod:`softmax_icl.book.ledger`) combined at both scales. The
book's pages (the landing table, the results summary, the chapters' verdict boxes, the two-scale page) all read
their verdicts from here, so they cannot disagree.

A paper record counts only when it was computed by the same code as the book's record (the result cache's code
fingerprint, ``provenance.code_fingerprint``): a record of other code is a different experiment, and its numbers are
not set beside these (:func:`same_code`). The paper scale is one seed set (it is not audited): its statuses are its
run's verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..profiles import Figure
from . import ledger as lg
from .audit import read_audit, speaks_for, stability
from .records import read_json

PAPER_SUBDIR = "paper"


def fingerprint(record: dict | None) -> str | None:
    return None if record is None else (record.get("provenance") or {}).get("code_fingerprint")


def same_code(a: dict | None, b: dict | None) -> bool:
    """Whether two records were computed by the same code (equal code fingerprints; a record without one never is)."""
    fa, fb = fingerprint(a), fingerprint(b)
    return fa is not None and fa == fb


def check_word(check: dict, status: str | None = None) -> str:
    """What a single check's verdict means, by its kind: a claim passes or fails, a finding holds or not, a control
    fails as it must or passes (does not discriminate); ``status`` "inconclusive" overrides."""
    if status == lg.INCONCLUSIVE or check.get("status") == "inconclusive":
        return "inconclusive"
    if status == lg.NOT_SETTLED or check.get("status") == "not settled":
        return "not settled"
    kind, passed = check.get("kind", "claim"), bool(check.get("passed"))
    if kind == "control":
        return "fails, as it must" if control_failed(check) else "passes: does not discriminate"
    if kind == "finding":
        return "holds" if passed else "does not hold"
    return "passes" if passed else "fails"


def control_failed(control: dict) -> bool:
    """Whether a control did its job: a decided control's interval lies wholly on the failing side; any other
    control's check did not pass."""
    return control["status"] == "fail" if control.get("status") is not None else not control.get("passed")


def _discriminates(check: dict, status: str, checks: list[dict]) -> str:
    """``status``, or "inconclusive" where a passing check has a control that did not fail."""
    if status != lg.REPRODUCED:
        return status
    controls = [c for c in checks if c.get("control_of") == check["id"]]
    return lg.INCONCLUSIVE if any(not control_failed(c) for c in controls) else status


@dataclass
class FigureVerdicts:
    """One figure: its book record, the audit that speaks for it (or None), its paper record when computed by the
    same code (or None), and why a paper record was set aside (``paper_note``)."""

    figure: str
    record: dict | None
    audit: dict | None = None
    paper: dict | None = None
    paper_note: str = ""
    paper_other: dict | None = None     # a paper-profile record computed by other code (not compared, not counted)

    @classmethod
    def from_records(cls, figure: str, record: dict | None, audit: dict | None = None,
                     paper: dict | None = None, tolerances: dict | None = None) -> "FigureVerdicts":
        """``tolerances``: the figure's regression tolerances (``Figure.tolerances``), within which an audit's run
        must agree with ``record`` to speak for it."""
        note, other = "", None
        if record is not None and audit is not None and not speaks_for(
                audit, figure, record.get("claims", []), (record.get("provenance") or {}).get("git_revision"),
                tolerances):
            audit = None                       # an audit of another run does not speak for this one
        if paper is not None and record is not None and not same_code(record, paper):
            note = (f"the paper-profile record was computed by other code (fingerprint "
                    f"{fingerprint(paper) or 'none'}, this record's {fingerprint(record) or 'none'}): not compared")
            paper, other = None, paper
        return cls(figure, record, audit, paper, note, other)

    @classmethod
    def read(cls, results_dir: Path, figure: str, tolerances: dict | None = None) -> "FigureVerdicts":
        results_dir = Path(results_dir)
        return cls.from_records(figure, read_json(results_dir / f"{figure}.json"), read_audit(results_dir, figure),
                                read_json(results_dir / PAPER_SUBDIR / f"{figure}.json"), tolerances)

    def checks(self) -> list[dict]:
        return [] if self.record is None else list(self.record.get("claims", []))

    def paper_check(self, cid: str) -> dict | None:
        if self.paper is None:
            return None
        return next((c for c in self.paper.get("claims", []) if c["id"] == cid), None)

    def stability(self, check: dict):
        """The check's agreement over the audit's seed sets (:class:`softmax_icl.book.audit.Stability`: how many give
        its committed status, and the range of their deciding bounds), or None where no audit applies."""
        return stability(check["id"], self.audit, check)

    def fresh(self, check: dict) -> list[bool]:
        """Each seed set that ran, as a pass (True) where it gives the check's committed status and the opposite of
        the committed ``passed`` where it does not ([] where no audit applies): what :func:`ledger.check_status`
        combines for a check without a decided status."""
        st = self.stability(check)
        if st is None:
            return []
        passed = bool(check.get("passed"))
        return [passed if s.get("status") == st.committed else not passed for s in st.statuses if s is not None]

    def status(self, check: dict) -> str:
        """The ledger status of a check at the book's profile: the decision on its pooled seeds, or (a check with one
        PASS/FAIL) its verdict here and in every seed set of the audit; a check whose control does not fail is
        inconclusive (it does not discriminate)."""
        st = lg.check_status(bool(check.get("passed")), self.fresh(check), check.get("status"))
        return _discriminates(check, st, self.checks())

    def paper_status(self, cid: str) -> str | None:
        c = self.paper_check(cid)
        if c is None:
            return None
        return _discriminates(c, lg.check_status(bool(c.get("passed")), None, c.get("status")),
                              self.paper.get("claims", []))


@dataclass
class EntryVerdict:
    entry: lg.Entry
    default: lg.Verdict | None
    paper: lg.Verdict | None


@dataclass
class BookVerdicts:
    """Every figure's verdicts and every ledger entry's, at both scales; ``registry``: the figures' definitions (their
    parameters' meanings, their tolerances), by name."""

    figures: dict                       # figure -> FigureVerdicts
    ledger: lg.Ledger
    entries: list = field(default_factory=list)
    registry: Mapping = field(default_factory=dict)

    @classmethod
    def read(cls, results_dir: Path, registry: Mapping[str, Figure], led: lg.Ledger | None = None
             ) -> "BookVerdicts":
        """The verdicts of every figure of ``registry`` (in its order) from the records in ``results_dir``."""
        led = led or lg.load()
        figs = {f: FigureVerdicts.read(results_dir, f, fig.tolerances) for f, fig in registry.items()}
        book = cls(figs, led, registry=registry)
        book.entries = [book.entry_verdict(e) for e in led.entries]
        return book

    def check(self, key: str) -> tuple[FigureVerdicts | None, dict | None]:
        figure, cid = key.split("/", 1)
        fv = self.figures.get(figure)
        if fv is None:
            return None, None
        return fv, next((c for c in fv.checks() if c["id"] == cid), None)

    def entry_verdict(self, e: lg.Entry) -> EntryVerdict:
        default, paper = {}, {}
        for key in e.all_checks():
            fv, c = self.check(key)
            if c is None:
                continue
            default[key] = fv.status(c)
            st = fv.paper_status(c["id"])
            if st is not None:
                paper[key] = st
        vd, vp = lg.verdict(e, default), lg.verdict(e, paper)
        return EntryVerdict(e, None if vd.missing else vd, None if vp.missing else vp)

    def counts(self, scale: str) -> dict:
        """Entries per category at ``scale`` ("default" or "paper"); entries without a verdict under "missing"."""
        out = {c: 0 for c in lg.CATEGORIES}
        out["missing"] = 0
        for ev in self.entries:
            v = ev.default if scale == "default" else ev.paper
            out["missing" if v is None else v.status] += 1
        return out

    def passing_rivals(self, check: dict, scale: str = "default") -> list[dict]:
        """The rivals of a claim check that passes which pass as well (they leave its entry inconclusive), from the
        record at ``scale`` that holds the check."""
        if check.get("kind") != "claim" or check.get("status") != "pass":
            return []
        for fv in self.figures.values():
            pool = fv.checks() if scale == "default" else [fv.paper_check(x["id"]) for x in fv.checks()]
            if any(x is check for x in pool):
                return [r for r in pool if r is not None and r.get("control_of") == check["id"]
                        and not control_failed(r)]
        return []

    def controls_of(self, key: str) -> list[tuple[FigureVerdicts, dict]]:
        """The controls (baselines) of a check ``figure/id``, from its figure's record."""
        figure, cid = key.split("/", 1)
        fv = self.figures.get(figure)
        return [] if fv is None else [(fv, c) for c in fv.checks() if c.get("control_of") == cid]
