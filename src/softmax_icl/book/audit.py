"""The seed audit: every figure rerun with other seed sets, and whether each check keeps its status in each.

``softmax-icl audit`` (``make audit``) reruns each figure at a profile (the book's: ``default``) with ``K >= 5`` seed
sets in all. A set is identified by its **seed offset**, which it adds to the profile value of **every** ``*_seed``
parameter of the figure (``data_seed``, ``init_seed``, ``eval_seed``, and ``basis_seed``/``search_seed`` where a
figure has them). The book's own runs draw from the pool at :data:`softmax_icl.profiles.BOOK_POOL` (10000); the sets
are computed relative to it (:func:`seed_overrides`):

* **the earlier pool**: offset 0 (relative ``-BOOK_POOL``), the profile values themselves, which the committed runs
  used before the book moved to its own pool;
* **fresh set k** (k = 1 .. K-1): offset ``BOOK_POOL + SEED_OFFSET * k`` (11000, 12000, ...), seeds no committed run
  used.

``--sets 5`` gives five sets in all: the earlier pool and four fresh sets. The number of independent pretraining runs
(``seeds``) and every other parameter stay as the profile has them. Each run goes into its own folder
(``runs/audit/<profile>/<figure>/offset<offset>/``, never the book), through the executor of
:mod:`softmax_icl.book.dispatch`.

The audit record ``book/results/audit/<figure>.json`` (committed; ``format`` 2) lists each set (``offset``,
``name``, the seeds it used, where it ran) and, per check of the committed record, its committed **status** (pass,
fail, inconclusive, not settled: :mod:`softmax_icl.stats`) with its deciding interval (:func:`deciding`: the worst
cell's label, mean, ``lo``, ``hi`` and deciding bound, and the check's value), the same for every set (``sets``;
None where the set did not run), and whether every set that ran gives the committed status (``stable``). It keeps
the audited run's checks (``committed_claims``: statuses and values). A check is *stable* when every set that ran
gives its committed status (:func:`stability`); :func:`status` words a check with its audit. An audit speaks for the
committed run only while that run is the audited one (:func:`speaks_for`): the same checks with the same statuses,
and values within the regression tolerance.

Older records (kept pass/fail only: ``fresh`` booleans, ``committed`` a boolean, sets numbered 1000 k) are still
read: their sets count as passing or failing, so they speak only for checks whose status is pass or fail.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .. import profiles
from ..profiles import Figure, fmt
from ..stats import margin_over_threshold, worst_bound
from .records import status_of

#: Fresh set ``k`` lies ``SEED_OFFSET * k`` above the book's pool (:data:`softmax_icl.profiles.BOOK_POOL`).
SEED_OFFSET = 1000
#: Fewest seed sets an audit runs, the earlier pool included (three sets let verdicts near their thresholds look
#: stable by luck: two further sets changed the verdict of three 'not reproduced' checks).
MIN_SETS = 5
#: The absolute offset of the earlier pool: the profile values, which the committed runs used before the book's pool.
EARLIER_POOL = 0
EARLIER_NAME = "the earlier pool"
#: The audit record's format: 2 keeps statuses and deciding intervals (1: pass/fail only).
FORMAT = 2


# -- the seed sets -------------------------------------------------------------------------------------------------

def set_offsets(n: int) -> list[int]:
    """The absolute seed offsets of an audit with ``n`` sets in all: the earlier pool (0), then the fresh sets at
    ``BOOK_POOL + SEED_OFFSET * k``, k = 1 .. n-1."""
    if n < 2:
        raise ValueError(f"an audit has at least two seed sets (the earlier pool and a fresh one); got {n}")
    return [EARLIER_POOL] + [profiles.BOOK_POOL + SEED_OFFSET * k for k in range(1, n)]


def set_name(offset: int) -> str:
    """A set in words: "the earlier pool", "fresh set k", or its offset."""
    if offset == EARLIER_POOL:
        return EARLIER_NAME
    k, rest = divmod(offset - profiles.BOOK_POOL, SEED_OFFSET)
    return f"fresh set {k}" if rest == 0 and k >= 1 else f"the seeds at offset {offset}"


def seed_overrides(fig: Figure, profile: str, offset: int) -> dict:
    """The parameters of the set at absolute seed ``offset``: every ``*_seed`` parameter at its value in the book's
    pool (its profile value, :attr:`Param.value`, which adds BOOK_POOL to a pooled seed) moved by the set's offset
    relative to that pool (``offset - BOOK_POOL``: ``-BOOK_POOL`` for the earlier pool, the seeds' base values). The
    values are absolute: an override is taken as given."""
    if offset < 0:
        raise ValueError(f"a seed offset is >= 0 (seeds are non-negative); got {offset}")
    relative = offset - profiles.BOOK_POOL
    return {name: p.value(profile) + (0 if p.pool else profiles.BOOK_POOL) + relative
            for name, p in fig.params.items() if name.endswith("_seed")}


def run_folder(root: Path, profile: str, figure: str, offset: int | None) -> Path:
    """The folder of the set at ``offset``; ``None``: the reference run of a profile other than the book's."""
    return Path(root) / "runs" / "audit" / profile / figure / ("reference" if offset is None else f"offset{offset}")


def audit_dir(root: Path, profile: str) -> Path:
    """Where the audit records go: the book's for the book's profile, else next to the runs."""
    return Path(root) / "book" / "results" / "audit" if profile == "default" else Path(root) / "runs" / "audit" / profile


def sets_of(audit: dict | None) -> list[dict]:
    """The sets of an audit record, each with its ``offset`` and ``name`` (an older record's set k: offset 1000 k)."""
    out = []
    for s in (audit or {}).get("sets", []):
        if "offset" not in s:
            s = dict(s, offset=(audit.get("seed_offset") or SEED_OFFSET) * s.get("set", 0),
                     name=f"fresh set {s.get('set')}")
        out.append(s)
    return out


# -- a check's status and its deciding interval ----------------------------------------------------------------------

def deciding(check: dict) -> dict:
    """A check's status with its deciding interval: the value, and where the design decided it, its worst cell (the
    one nearest its threshold, as the pages name it: :func:`softmax_icl.book.deciding.decided_number`) with its
    label, mean, bounds ``lo`` and ``hi``, deciding ``bound``, test and threshold."""
    out = {"status": status_of(check), "value": check.get("value")}
    cells = (check.get("decision") or {}).get("cells") or []
    try:
        worst = min(cells, key=margin_over_threshold) if cells else None
        if worst is not None:
            out.update(cell=worst.get("label"), mean=worst.get("mean"), lo=worst["lo"], hi=worst["hi"],
                       bound=worst_bound(worst), test=worst["test"], threshold=worst["threshold"])
    except (KeyError, TypeError):          # a cell without an interval: the status and value only
        pass
    return out


def _committed(entry: dict) -> dict:
    c = entry.get("committed")
    return c if isinstance(c, dict) else {"status": "pass" if c else "fail"}


def _sets(entry: dict) -> list[dict | None]:
    """One check's result in each set (None: the set did not run); an older record's booleans as pass/fail."""
    if "sets" in entry:
        return entry["sets"]
    values = entry.get("values") or [None] * len(entry.get("fresh", []))
    return [None if v is None else {"status": "pass" if v else "fail", "value": x}
            for v, x in zip(entry.get("fresh", []), values)]


# -- the record ----------------------------------------------------------------------------------------------------

def build_record(figure: str, committed: dict, runs: list[tuple[int, dict, dict | None]]) -> dict:
    """The audit record of one figure: ``runs`` is ``[(offset, seeds, record or None if the run failed), ...]``."""
    sets = []
    for offset, seeds, rec in runs:
        prov = (rec or {}).get("provenance", {})
        sets.append({"offset": offset, "name": set_name(offset), "seeds": seeds, "completed": rec is not None,
                     "git_revision": prov.get("git_revision"), "device": prov.get("device"),
                     "kernel": prov.get("kernel")})
    checks = []
    for c in committed["claims"]:
        results = []
        for _, _, rec in runs:
            match = None if rec is None else next((f for f in rec.get("claims", []) if f["id"] == c["id"]), None)
            # a set that ran without recording the check has no status: it does not agree
            results.append(None if rec is None else {"status": None, "value": None} if match is None
                           else deciding(match))
        entry = {"id": c["id"], "kind": c.get("kind", "claim"), "committed": deciding(c), "sets": results,
                 # pass/fail per set, for readers of the older format
                 "fresh": [None if r is None else r["status"] == "pass" for r in results]}
        entry["stable"] = _stability(entry).stable
        checks.append(entry)
    return {"format": FORMAT, "figure": figure, "profile": committed.get("profile"),
            "book_pool": profiles.BOOK_POOL, "seed_step": SEED_OFFSET,
            "committed_revision": committed.get("provenance", {}).get("git_revision"),
            "committed_claims": audited_claims(committed["claims"]), "sets": sets, "checks": checks}


def audited_claims(claims: list[dict]) -> list[dict]:
    """What an audit keeps of the run it audited: each check's id, kind, statement, verdict, status and value."""
    return [{k: c.get(k) for k in ("id", "kind", "statement", "passed", "status", "value")} for c in claims]


def speaks_for(audit: dict | None, figure: str, claims: list[dict], revision: str | None = None,
               tolerances: dict | None = None) -> bool:
    """Whether ``audit`` was of the run whose checks are ``claims``: the same checks, statuses equal (a check without
    a decided status: its pass/fail) and values within the figure's regression ``tolerances`` (``Figure.tolerances``;
    :mod:`softmax_icl.book.compare`). An audit record written before audits kept the audited checks is matched by the
    git revision of the run (``revision``) instead."""
    if not audit:
        return False
    audited = audit.get("committed_claims")
    if audited is None:
        return revision is not None and audit.get("committed_revision") == revision
    from .compare import compare_records

    run = lambda cs: {"notebook": figure, "profile": audit.get("profile"), "claims": cs}  # noqa: E731
    return all(r.ok for r in compare_records(run(audited), run(claims), tolerances))


def write_record(root: Path, figure: str, profile: str, runs: list[tuple[int, dict, dict | None]],
                 committed: dict | None = None) -> Path:
    """Build and write ``<audit_dir>/<figure>.json`` against the committed record (``book/results/<figure>.json``)."""
    from ..base import atomic_write_bytes

    if committed is None:
        committed = json.loads((Path(root) / "book" / "results" / f"{figure}.json").read_text())
    path = audit_dir(root, profile) / f"{figure}.json"
    atomic_write_bytes(path, (json.dumps(build_record(figure, committed, runs), indent=2) + "\n").encode())
    return path


def read_fresh(root: Path, profile: str, figure: str, offset: int | None) -> dict | None:
    path = run_folder(root, profile, figure, offset) / "results" / f"{figure}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def read_audit(results_dir: Path, figure: str) -> dict | None:
    path = Path(results_dir) / "audit" / f"{figure}.json"
    return json.loads(path.read_text()) if path.is_file() else None


# -- stability -----------------------------------------------------------------------------------------------------

def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) else None


@dataclass(frozen=True)
class Stability:
    """One check over the audit's seed sets: the committed status, each set's status (None: the set did not run)
    and each set's deciding bound (its value where the check has no interval)."""

    committed: str
    statuses: tuple
    bounds: tuple = ()
    what: str = "bounds"         # "bounds" (deciding bounds of an interval) or "values"

    @property
    def total(self) -> int:      # the sets the audit started
        return len(self.statuses)

    @property
    def ran(self) -> int:        # the sets that ran
        return sum(s is not None for s in self.statuses)

    @property
    def agree(self) -> int:      # the sets that give the committed status
        return sum(s is not None and s.get("status") == self.committed for s in self.statuses)

    @property
    def stable(self) -> bool:
        """Every set that ran gives the committed status (and at least one ran)."""
        return self.ran > 0 and self.agree == self.ran

    def span(self) -> tuple[float, float] | None:
        xs = [b for b in self.bounds if b is not None]
        return (min(xs), max(xs)) if xs else None

    def short(self) -> str:
        """``4 of 5 agree``."""
        return f"{self.agree} of {self.ran} agree"

    def text(self, show=fmt, bounds: bool = True) -> str:
        """In words: ``4 of 5 seed sets agree (bounds 0.91 to 0.97)``, with the sets that did not run; ``show``
        writes a bound (e.g. :func:`softmax_icl.book.deciding.bound_text`: as the check's pages show it)."""
        notes = []
        span = self.span() if bounds else None
        if span is not None:
            lo, hi = show(span[0]), show(span[1])
            notes.append(f"{self.what} {lo} to {hi}" if lo != hi else f"{self.what[:-1]} {lo} in every set")
        if self.total > self.ran:
            notes.append(f"{self.total - self.ran} did not run")
        return f"{self.agree} of {self.ran} seed sets agree" + (f" ({'; '.join(notes)})" if notes else "")


def _stability(entry: dict) -> Stability:
    sets = _sets(entry)
    ran = [s for s in sets if s is not None]
    interval = any(_number(s.get("bound")) is not None for s in ran)
    key = "bound" if interval else "value"
    bounds = tuple(None if s is None else _number(s.get(key)) for s in sets)
    return Stability(_committed(entry)["status"], tuple(sets), bounds, "bounds" if interval else "values")


def stability(check_id: str, audit: dict | None, committed) -> Stability | None:
    """One check's agreement over the audit's sets; ``committed``: the committed check (a dict), its status, or its
    ``passed``. None when the figure was not audited, the check is newer than the audit, or the committed status
    changed since the audit (its sets do not apply)."""
    if not audit:
        return None
    entry = next((c for c in audit.get("checks", []) if c["id"] == check_id), None)
    if entry is None:
        return None
    if isinstance(committed, dict):
        committed = status_of(committed)
    elif isinstance(committed, bool):
        committed = "pass" if committed else "fail"
    st = _stability(entry)
    return st if st.committed == committed else None


def status(claim: dict, audit: dict | None) -> str:
    """A check in words with its audit: ``inconclusive`` where a set that ran gives another status (or the check's own
    status is inconclusive), ``not settled`` where its own status is; otherwise for a claim of the papers
    ``reproduced`` / ``not reproduced``, for a finding ``holds`` / ``does not hold``, for a control ``fails, as it
    must`` / ``passes: does not discriminate``."""
    st = stability(claim["id"], audit, claim)
    own = status_of(claim)
    if (st is not None and not st.stable) or own == "inconclusive":
        return "inconclusive"
    if own == "not settled":
        return "not settled"
    kind = claim.get("kind", "claim")
    if kind == "control":
        return "fails, as it must" if own == "fail" else "passes: does not discriminate"
    if kind == "finding":
        return "holds" if own == "pass" else "does not hold"
    return "reproduced" if own == "pass" else "not reproduced"


_ABBREV = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INC.", "not settled": "N.S.", None: "MISS"}


def report_lines(rec: dict, path: Path) -> list[str]:
    """What ``softmax-icl audit`` prints of one audit record: the stable checks, then each check's status in the
    committed run | in every set."""
    flips = [c["id"] for c in rec["checks"] if not c["stable"]]
    sets = sets_of(rec)
    out = [f"{rec['figure']}: {len(rec['checks']) - len(flips)}/{len(rec['checks'])} checks keep their status in "
           f"every seed set" + (f"; not stable: {', '.join(flips)}" if flips else "") + f" -> {path}",
           "    sets: " + ", ".join(f"{s['name']} (offset {s['offset']})" for s in sets)
           + "; INC. inconclusive, N.S. not settled, MISS check not recorded, ---- did not run"]
    def word(r: dict | None) -> str:
        return "----" if r is None else _ABBREV.get(r.get("status"), str(r.get("status"))[:4].upper())

    for c in rec["checks"]:
        out.append(f"    {c['id']:<44} {word(_committed(c))} | " + " ".join(word(r) for r in _sets(c)))
    return out
