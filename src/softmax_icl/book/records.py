"""What a notebook run records: provenance, timings, claim checks, key numbers.

A notebook opens a :class:`Run` right after its parameters cell. The run resolves and validates
the configuration (before any compute), picks the device, trains through the cache, times the
stages, collects claim checks that can fail, and at the end prints the verdicts and writes one
machine-readable record per notebook to ``<output_dir>/results/<figure>.json``. The book's
results summary is generated from these records.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from .. import __version__
from . import ledger
from ..engine import regression as engine
from .cache import cached, code_fingerprint
from ..plotting import save, use_style
from ..base import OUTPUT_DIR_ENV, atomic_write_bytes, resolve_device
from ..profiles import fmt, validate_device
from .registry import resolve
from .registry import figure as figure_of
from ..training import Sweep, SweepResult, train_sweep


#: The revision of a copy of the code that has no git metadata (a tree copied to a GPU machine or a cluster node),
#: as the person who copied it states it; read only where git cannot tell.
REVISION_ENV = "SOFTMAX_ICL_REVISION"


def git_revision() -> str:
    """Short git revision (with ``-dirty`` when the package source or pyproject.toml has uncommitted changes;
    notebooks and book pages are outputs of the build, so they do not count).

    Where the code is not in a git checkout (a copied tree), ``$SOFTMAX_ICL_REVISION`` names it, marked
    ``(stated)`` since git did not check it; without it, ``unknown``."""
    here = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "../../src",
                                "../../pyproject.toml"], cwd=here, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", ""
    if not rev:
        stated = os.environ.get(REVISION_ENV, "").strip()
        return f"{stated} (stated)" if stated else "unknown"
    return rev + ("-dirty" if dirty else "")


#: The profile the book shows: only a run of this profile, with no parameter overridden, may write the book.
BOOK_PROFILE = "default"


def repo_root(start: Path | None = None) -> Path | None:
    """The checkout holding ``_config.yml`` and ``notebooks/``, searched upwards from ``start`` (the cwd)."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "_config.yml").is_file() and (p / "notebooks").is_dir():
            return p
    return None


def default_output_dir(figure: str, profile: str = BOOK_PROFILE, custom: bool = False) -> Path:
    """Where a run writes its record and figures when the notebook gives no ``output_dir``.

    ``$SOFTMAX_ICL_OUTPUT_DIR`` when set (``softmax-icl run --in-place`` and ``build`` set it to the book; ``make
    test`` to a temporary folder). Otherwise never the book: ``runs/<figure>-<profile>/`` under the checkout (or
    under the cwd outside one), ``runs/<figure>-<profile>-custom/`` when a parameter differs from the profile's
    value. So a plain ``papermill notebooks/x.ipynb out.ipynb -p profile smoke`` cannot overwrite the book's record.
    """
    env = os.environ.get(OUTPUT_DIR_ENV)
    if env:
        return Path(env)
    return (repo_root() or Path.cwd()) / "runs" / f"{figure}-{profile}{'-custom' if custom else ''}"


def peak_memory_mb(device: torch.device) -> dict:
    """Peak memory of this process so far, in MB: ``host`` (its resident set) and, on a CUDA device, ``cuda`` (the
    largest amount PyTorch allocated there)."""
    out = {}
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss          # KB on Linux, bytes on macOS
        out["host"] = round(rss / (2**20 if platform.system() == "Darwin" else 2**10), 1)
    except (ImportError, OSError):
        pass
    if device.type == "cuda" and torch.cuda.is_available():
        out["cuda"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return out


def _plain(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


#: What a check is (SPEC Part 4): the papers say it; a question the papers do not answer; the same check against the
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

    One run gives one verdict, PASS or FAIL. Whether a claim of the papers is *reproduced*, *not reproduced* or
    *inconclusive* is a statement over seeds, so it is not a field of one run's check: the audit
    (:mod:`softmax_icl.book.audit`, ``softmax-icl audit``) reruns the figure with fresh seed sets, and a check whose
    verdict is not the same in the committed run and in every fresh set is *inconclusive*
    (:func:`softmax_icl.book.audit.status`); a claim the audit has not rerun keeps its committed verdict.
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

    @property
    def as_expected(self) -> bool:
        """A claim or finding that holds; a control that fails."""
        return (not self.passed) if self.kind == "control" else self.passed

    def line(self) -> str:
        """The verdict line: what must be the same on every machine (no measured number; see :meth:`value_line`)."""
        if self.kind == "control":
            verdict = "FAIL" if not self.passed else "PASS"
            tag = f" [control of {self.control_of}: " + ("fails, as it must]" if not self.passed else
                                                         "passes too: the check does not discriminate]")
        else:
            verdict = "PASS" if self.passed else "FAIL"
            tag = " [finding]" if self.kind == "finding" else ""
        return f"{verdict}  {self.id}{tag}: {self.statement} -- required {self.threshold}"

    def value_line(self) -> str:
        """The measured value against the threshold (it may differ in its last digits between machines)."""
        return f"{self.id}: {fmt(self.value)} (required {self.threshold})"


#: The source of a baseline control: the simplest model that should not pass a claim check, run through it.
BASELINE_SOURCE = "a baseline that must fail (claims ledger)"


def claim_or_baseline(tag: str, cid: str, entry: str, source: str) -> dict:
    """Keyword arguments of :meth:`Run.check` for claim ``cid`` of ledger entry ``entry`` (``tag`` empty) or, for any
    other ``tag``, for its baseline: the same check run on a model that must fail it (a control of ``cid``)."""
    if tag:
        return dict(kind="control", control_of=cid, source=BASELINE_SOURCE)
    return dict(kind="claim", ledger=entry, source=source)


def _check_ledger(figure: str, cid: str, kind: str, entry_id: str | None) -> None:
    """A claim names the ledger entry that lists it; a finding naming an entry is among its ``beyond``; a control
    names none (it belongs to the check it controls)."""
    key = f"{figure}/{cid}"
    if kind == "control":
        if entry_id is not None:
            raise ValueError(f"control {cid!r} names a ledger entry; a control belongs to the check it controls")
        return
    if entry_id is None:
        if kind == "claim":
            raise ValueError(f"claim {cid!r} names no ledger entry (book/claims.yml); a check of an authors' "
                             "statement names the entry that quotes it, anything else is a finding")
        return
    entry = ledger.load().by_id(entry_id)
    listed = entry.all_checks() if kind == "claim" else entry.beyond
    if key not in listed:
        where = "checks/readings" if kind == "claim" else "beyond"
        raise ValueError(f"{kind} {key!r} names ledger entry {entry_id!r}, whose {where} do not list it "
                         f"({', '.join(listed) or 'none'})")


class Run:
    """One execution of a figure notebook."""

    def __init__(self, figure: str, profile: str = "default", device: str = "auto", use_cache: bool = True,
                 output_dir: str | None = None, overrides: dict | None = None):
        self.figure = figure
        self.cfg = resolve(figure, profile, overrides)
        self.profile = profile
        self.device = resolve_device(validate_device(device))
        self.use_cache = bool(use_cache)
        custom = self.cfg != resolve(figure, profile)
        self.output_dir = Path(output_dir) if output_dir else default_output_dir(figure, profile, custom)
        self.claims: list[Claim] = []
        #: short titles of the figure's checks by id (a claims module fills it; :meth:`check` reads it)
        self.titles: dict[str, str] = {}
        self.numbers: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.cache_hits: dict[str, bool] = {}
        #: per cached stage, how long its computation took (on a hit: when it was computed; None if not recorded)
        self.compute_seconds: dict[str, float | None] = {}
        #: cached stages assembled from parts trained apart (``tools/paper_stages.py --part``): tag -> parts
        self.trained_in_parts: dict[str, int] = {}
        self._t0 = time.perf_counter()
        self.revision = git_revision()     # the code this run loaded: read now, not when the record is written
        #: the result cache's fingerprint of the code that computes this figure (records of other code are not
        #: compared number by number: :mod:`softmax_icl.book.scales`)
        self.fingerprint = code_fingerprint(figure)
        torch.manual_seed(0)  # nothing should use the global generator; make it deterministic if something does
        use_style()
        print(f"This run writes its record and figures to {self.where()}")

    def where(self) -> str:
        """The output folder, relative to the checkout when inside it; the book's own is named as such."""
        out, root = self.output_dir.resolve(), repo_root()
        if root is not None and out == root / "book":
            return "the book (book/results/, book/figures/)"
        if root is not None and out.is_relative_to(root):
            return f"{out.relative_to(root).as_posix()}/ (not the book)"
        return f"{out} (not the book)"

    @classmethod
    def from_notebook(cls, figure: str, namespace: dict) -> "Run":
        """The run a notebook's parameters cell describes: ``Run.from_notebook("norm_scaling", globals())``.

        Reads ``profile``, ``device``, ``use_cache``, ``output_dir`` and every parameter of the figure from
        ``namespace`` (a figure parameter left at ``None`` takes the profile's value), so the notebook does not
        repeat every name; a parameter the cell does not declare is an error naming it.
        """
        params = figure_of(figure).params
        missing = [p for p in ("profile", *params) if p not in namespace]
        if missing:
            raise NameError(f"the parameters cell of {figure!r} does not declare {', '.join(missing)}")
        overrides = {p: namespace[p] for p in params}
        return cls(figure, namespace.get("profile", "default"), namespace.get("device", "auto"),
                   namespace.get("use_cache", True), namespace.get("output_dir"), overrides=overrides)

    # -- configuration and provenance ---------------------------------------------------------
    def __getitem__(self, name: str):
        return self.cfg[name]

    def provenance(self) -> dict:
        return {
            "figure": self.figure, "profile": self.profile, "device": str(self.device),
            "package_version": __version__, "git_revision": self.revision, "code_fingerprint": self.fingerprint,
            "torch": torch.__version__,
            "python": platform.python_version(), "threads": torch.get_num_threads(),
            "kernel": engine.backend() if self.device.type == "cpu" else "torch",
            "seeds": {k: self.cfg[k] for k in ("data_seed", "init_seed", "eval_seed", "seeds") if k in self.cfg},
            "use_cache": self.use_cache,
            "peak_memory_mb": peak_memory_mb(self.device),
        }

    def describe(self) -> str:
        """Human-readable provenance and settings (volatile: keep out of checked cells)."""
        prov = self.provenance()
        lines = [f"{k}: {v}" for k, v in prov.items() if k != "peak_memory_mb"]      # at the start: not a peak yet
        lines.append("settings: " + ", ".join(f"{k}={fmt(v)}" for k, v in self.cfg.items() if k != "profile"))
        return "\n".join(lines)

    # -- compute -------------------------------------------------------------------------------
    @contextmanager
    def timer(self, name: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t

    def cached(self, tag: str, config: dict, compute: Callable[[], Any]) -> Any:
        """Cache ``compute()`` under (figure, tag, config, device); timed under ``tag``."""
        info: dict = {}
        with self.timer(tag):
            value, hit = cached(f"{self.figure}-{tag}", config, str(self.device), compute, self.use_cache,
                               figure=self.figure, info=info)
        self.cache_hits[tag] = hit
        if info.get("parts"):
            self.trained_in_parts[tag] = int(info["parts"])
        seconds = info.get("seconds")
        if seconds is None:   # an entry from before the cache kept times: trained results carry their own
            seconds = (getattr(value, "timings", None) or {}).get("train_seconds")
        self.compute_seconds[tag] = None if seconds is None else round(float(seconds), 2)
        return value

    def train(self, tag: str, sweep: Sweep) -> SweepResult:
        """Train a sweep (one batched program), through the cache."""
        return self.cached(tag, sweep.to_dict(), lambda: train_sweep(sweep, self.device, desc=tag))

    # -- results -------------------------------------------------------------------------------
    def check(self, id: str, statement: str, value: Any, passed: bool, threshold: str, *, kind: str, source: str,
              control_of: str | None = None, anchor: str | None = None, ledger: str | None = None,
              title: str | None = None) -> Claim:
        """Record one check. ``kind`` ("claim", "finding" or "control") and ``source`` (what it tests, quoted
        briefly, or "beyond the papers") are required: SPEC Part 4 (see :class:`Claim`). A claim names its ledger
        entry (``ledger``), which must list it; a finding may name the entry it goes beyond."""
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r} is not allowed; allowed values: {', '.join(KINDS)}")
        if not str(source).strip():
            raise ValueError(f"check {id!r} names no source (the paper's figure, theorem, caption or slide it tests, "
                             "or 'beyond the papers')")
        if (kind == "control") != (control_of is not None):
            raise ValueError("a control names the check it controls (control_of), and only a control does")
        _check_ledger(self.figure, id, kind, ledger)
        if title is None and kind == "control":            # "control: the same for X; ..." -> "X"
            title = statement.split(";")[0].removeprefix("control: ").removeprefix("the same for ").strip()
        title = title or self.titles.get(id)
        claim = Claim(id, statement, bool(passed), _plain(value), threshold, kind, source, control_of, anchor, ledger,
                      title)
        self.claims = [c for c in self.claims if c.id != id] + [claim]
        return claim

    def record(self, **numbers: Any) -> None:
        """Key numbers for the machine-readable record."""
        self.numbers.update({k: _plain(v) for k, v in numbers.items()})

    def savefig(self, fig, name: str, glue: str | None = None) -> None:
        """Save ``fig`` as ``<output>/figures/<figure>_<name>.png`` and ``.pdf``; show the saved PNG here, or, with
        ``glue``, glue it under that key (myst-nb) for a ``{glue:figure}`` higher up the page, and show nothing."""
        paths = save(fig, self.output_dir / "figures", f"{self.figure}_{name}", show=glue is None)
        if glue is not None:
            import matplotlib.pyplot as plt

            from .chapter import glue_image
            glue_image(glue, paths[0])
            plt.close(fig)

    def verdicts(self) -> str:
        counts = []
        for kind, word in (("claim", "claims hold"), ("finding", "findings hold (an open test: either verdict is a "
                                                                 "result)"),
                           ("control", "controls fail, as they must")):
            group = [c for c in self.claims if c.kind == kind]
            if group:
                counts.append(f"{sum(c.as_expected for c in group)}/{len(group)} {word}")
        return "\n".join([c.line() for c in self.claims] + ["; ".join(counts)])

    def values_table(self) -> str:
        """Each check's measured value against its threshold: for a cell that nbval does not compare (the numbers
        are compared with the committed record within tolerances by ``tests/test_regression.py``)."""
        return "\n".join(c.value_line() for c in self.claims)

    def finish(self) -> str:
        """Write the record (atomically) and return the verdict lines: PASS/FAIL, id, statement and threshold,
        without the measured values, so the lines are the same on every machine (nbval compares them). The values
        are in the record, in the chapter's verdict box and in :meth:`values_table`."""
        self.timings["total"] = time.perf_counter() - self._t0
        rec = {
            "notebook": self.figure, "profile": self.profile, "parameters": _plain(self.cfg),
            "claims": [asdict(c) for c in self.claims], "key_numbers": self.numbers,
            "provenance": self.provenance(), "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "cache_hits": self.cache_hits, "compute_seconds": self.compute_seconds,
            **({"trained_in_parts": self.trained_in_parts} if self.trained_in_parts else {}),
        }
        path = self.output_dir / "results" / f"{self.figure}.json"
        atomic_write_bytes(path, (json.dumps(rec, indent=2, sort_keys=False) + "\n").encode())
        return self.verdicts()
