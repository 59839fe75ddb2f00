"""The seed audit: every figure rerun with fresh seed sets, and whether each check keeps its verdict.

``softmax-icl audit`` (``make audit``) reruns each figure at a profile (the book's: ``default``) with ``K >= 5`` seed
sets that no committed run used. Set ``k`` (1, 2, ...) offsets **every** ``*_seed`` parameter of the figure
(``data_seed``, ``init_seed``, ``eval_seed``, and ``basis_seed``/``search_seed`` where a figure has them) by
``SEED_OFFSET * k``: set 1 uses ``1000 + `` the profile's seed, set 2 ``2000 +`` it, and so on. The number of
independent pretraining runs (``seeds``) and every other parameter stay as the profile has them. Each run goes into
its own folder (``runs/audit/<profile>/<figure>/set<k>/``, never the book), through the executor of
:mod:`softmax_icl.book.dispatch`.

The audit record ``book/results/audit/<figure>.json`` (committed) lists, per check of the committed record, its
committed verdict, its verdict and value in every fresh set, and whether all agree (``stable``), and it keeps the
audited run's checks (``committed_claims``: verdicts and values). The results summary and the chapters' verdict boxes
read these records: a claim is *reproduced* when it passes in the committed run and in every fresh set, *not
reproduced* when it fails in all of them, and *inconclusive* when the verdicts differ (:func:`status`); a figure
without an audit record keeps its committed verdicts and says "not audited". An audit speaks for the committed run
only while that run is the audited one (:func:`speaks_for`): the same checks with the same verdicts, and values
within the regression tolerance (a re-execution that reproduces the run, after a code move, keeps its audit; one
that changes a result needs a new audit).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..profiles import Figure

#: Seed set ``k`` adds ``SEED_OFFSET * k`` to every ``*_seed`` parameter (no committed run used seeds >= 1000).
SEED_OFFSET = 1000
#: Fewest fresh seed sets an audit runs (three sets let verdicts near their thresholds look stable by luck: two
#: further sets changed the verdict of three 'not reproduced' checks).
MIN_SETS = 5


def seed_overrides(fig: Figure, profile: str, k: int) -> dict:
    """The parameters of fresh seed set ``k`` (>= 1): every ``*_seed`` parameter offset by ``SEED_OFFSET * k``."""
    if k < 1:
        raise ValueError("seed sets are numbered from 1 (set 0 is the committed run)")
    return {name: p.value(profile) + SEED_OFFSET * k for name, p in fig.params.items() if name.endswith("_seed")}


def run_folder(root: Path, profile: str, figure: str, k: int) -> Path:
    return Path(root) / "runs" / "audit" / profile / figure / f"set{k}"


def audit_dir(root: Path, profile: str) -> Path:
    """Where the audit records go: the book's for the book's profile, else next to the runs."""
    return Path(root) / "book" / "results" / "audit" if profile == "default" else Path(root) / "runs" / "audit" / profile


def build_record(figure: str, committed: dict, fresh: list[tuple[int, dict, dict | None]]) -> dict:
    """The audit record of one figure: ``fresh`` is ``[(k, seeds, record or None if the run failed), ...]``."""
    sets = []
    for k, seeds, rec in fresh:
        prov = (rec or {}).get("provenance", {})
        sets.append({"set": k, "seeds": seeds, "completed": rec is not None,
                     "git_revision": prov.get("git_revision"), "device": prov.get("device"),
                     "kernel": prov.get("kernel")})
    checks = []
    for c in committed["claims"]:
        verdicts, values = [], []
        for _, _, rec in fresh:
            match = next((f for f in (rec or {}).get("claims", []) if f["id"] == c["id"]), None)
            verdicts.append(None if match is None else bool(match["passed"]))
            values.append(None if match is None else match.get("value"))
        stable = all(v is not None and v == bool(c["passed"]) for v in verdicts)
        checks.append({"id": c["id"], "kind": c.get("kind", "claim"), "committed": bool(c["passed"]),
                       "fresh": verdicts, "values": values, "stable": stable})
    return {"figure": figure, "profile": committed.get("profile"), "seed_offset": SEED_OFFSET,
            "committed_revision": committed.get("provenance", {}).get("git_revision"),
            "committed_claims": audited_claims(committed["claims"]), "sets": sets, "checks": checks}


def audited_claims(claims: list[dict]) -> list[dict]:
    """What an audit keeps of the run it audited: each check's id, kind, statement, verdict and value."""
    return [{k: c.get(k) for k in ("id", "kind", "statement", "passed", "value")} for c in claims]


def speaks_for(audit: dict | None, figure: str, claims: list[dict], revision: str | None = None,
               tolerances: dict | None = None) -> bool:
    """Whether ``audit`` was of the run whose checks are ``claims``: the same checks, verdicts equal and values within
    the figure's regression ``tolerances`` (``Figure.tolerances``; :mod:`softmax_icl.book.compare`). An audit record
    written before audits kept the audited checks is matched by the git revision of the run (``revision``) instead."""
    if not audit:
        return False
    audited = audit.get("committed_claims")
    if audited is None:
        return revision is not None and audit.get("committed_revision") == revision
    from .compare import compare_records

    run = lambda cs: {"notebook": figure, "profile": audit.get("profile"), "claims": cs}  # noqa: E731
    return all(r.ok for r in compare_records(run(audited), run(claims), tolerances))


def write_record(root: Path, figure: str, profile: str, fresh: list[tuple[int, dict, dict | None]],
                 committed: dict | None = None) -> Path:
    """Build and write ``<audit_dir>/<figure>.json`` against the committed record (``book/results/<figure>.json``)."""
    from ..base import atomic_write_bytes

    if committed is None:
        committed = json.loads((Path(root) / "book" / "results" / f"{figure}.json").read_text())
    path = audit_dir(root, profile) / f"{figure}.json"
    atomic_write_bytes(path, (json.dumps(build_record(figure, committed, fresh), indent=2) + "\n").encode())
    return path


def read_fresh(root: Path, profile: str, figure: str, k: int) -> dict | None:
    path = run_folder(root, profile, figure, k) / "results" / f"{figure}.json"
    return json.loads(path.read_text()) if path.is_file() else None


@dataclass(frozen=True)
class Stability:
    """One check's verdicts over the committed run and the fresh seed sets."""

    agree: int          # fresh sets whose verdict equals the committed one
    ran: int            # fresh sets that ran (and recorded this check)
    total: int          # fresh sets the audit started

    @property
    def stable(self) -> bool:
        return self.agree == self.ran == self.total

    def text(self) -> str:
        missing = self.total - self.ran
        return f"{self.agree}/{self.ran} fresh seed sets agree" + (f" ({missing} did not run)" if missing else "")


def stability(check_id: str, audit: dict | None, committed_passed: bool) -> Stability | None:
    """From an audit record (None when the figure was not audited, or the check is newer than the audit)."""
    if not audit:
        return None
    entry = next((c for c in audit.get("checks", []) if c["id"] == check_id), None)
    if entry is None or entry["committed"] != bool(committed_passed):
        return None                      # the committed verdict changed since the audit: its sets do not apply
    ran = [v for v in entry["fresh"] if v is not None]
    agree = sum(v == entry["committed"] for v in ran)
    return Stability(agree, len(ran), len(entry["fresh"]))


def status(claim: dict, audit: dict | None) -> str:
    """``reproduced`` / ``not reproduced`` / ``inconclusive`` for a claim of the papers (see the module docstring);
    for a finding ``holds`` / ``does not hold`` / ``inconclusive``; for a control ``fails, as it must`` /
    ``passes: does not discriminate`` / ``inconclusive``."""
    st = stability(claim["id"], audit, claim["passed"])
    if st is not None and not st.stable:
        return "inconclusive"
    kind = claim.get("kind", "claim")
    if kind == "control":
        return "fails, as it must" if not claim["passed"] else "passes: does not discriminate"
    if kind == "finding":
        return "holds" if claim["passed"] else "does not hold"
    return "reproduced" if claim["passed"] else "not reproduced"


def read_audit(results_dir: Path, figure: str) -> dict | None:
    path = Path(results_dir) / "audit" / f"{figure}.json"
    return json.loads(path.read_text()) if path.is_file() else None
