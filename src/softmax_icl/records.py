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

from . import __version__, kernels
from .cache import atomic_write_bytes, cached
from .plotting import save, use_style
from .profiles import FIGURES, resolve, validate_device
from .training import Sweep, SweepResult, resolve_device, train_sweep


def git_revision() -> str:
    """Short git revision (with ``-dirty`` when the package source or pyproject.toml has uncommitted changes;
    notebooks and book pages are outputs of the build, so they do not count)."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "../../src", "../../pyproject.toml"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev or "unknown") + ("-dirty" if dirty else "")


def default_output_dir() -> Path:
    """``$SOFTMAX_ICL_OUTPUT_DIR``, else the book directory next to ``notebooks/``."""
    env = os.environ.get("SOFTMAX_ICL_OUTPUT_DIR")
    if env:
        return Path(env)
    cwd = Path.cwd()
    if cwd.name == "notebooks" and (cwd.parent / "book").is_dir():
        return cwd.parent / "book"
    return cwd / "softmax_icl_output"


def fmt(x: Any) -> str:
    """Numbers rounded to 3 significant digits, so printed values are stable across reruns."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.3g}"
    if isinstance(x, (list, tuple, np.ndarray)):
        return "[" + ", ".join(fmt(v) for v in np.asarray(x).ravel().tolist()) + "]"
    return str(x)


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


@dataclass
class Claim:
    id: str
    statement: str
    passed: bool
    value: Any
    threshold: str
    kind: str = "claim"                # claim (the papers') | finding (an open test, see Figure.findings)

    def line(self) -> str:
        tag = " [finding]" if self.kind == "finding" else ""
        return f"{'PASS' if self.passed else 'FAIL'}  {self.id}{tag}: {self.statement} -- value {fmt(self.value)}, " \
               f"required {self.threshold}"


class Run:
    """One execution of a figure notebook."""

    def __init__(self, figure: str, profile: str = "default", device: str = "auto", use_cache: bool = True,
                 output_dir: str | None = None, overrides: dict | None = None):
        self.figure = figure
        self.cfg = resolve(figure, profile, overrides)
        self.profile = profile
        self.device = resolve_device(validate_device(device))
        self.use_cache = bool(use_cache)
        self.output_dir = Path(output_dir) if output_dir else default_output_dir()
        self.claims: list[Claim] = []
        self.numbers: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.cache_hits: dict[str, bool] = {}
        self._t0 = time.perf_counter()
        self.revision = git_revision()     # the code this run loaded: read now, not when the record is written
        torch.manual_seed(0)  # nothing should use the global generator; make it deterministic if something does
        use_style()

    # -- configuration and provenance ---------------------------------------------------------
    def __getitem__(self, name: str):
        return self.cfg[name]

    def provenance(self) -> dict:
        return {
            "figure": self.figure, "profile": self.profile, "device": str(self.device),
            "package_version": __version__, "git_revision": self.revision, "torch": torch.__version__,
            "python": platform.python_version(), "threads": torch.get_num_threads(),
            "kernel": kernels.backend() if self.device.type == "cpu" else "torch",
            "seeds": {k: self.cfg[k] for k in ("data_seed", "init_seed", "eval_seed", "seeds") if k in self.cfg},
            "use_cache": self.use_cache,
        }

    def describe(self) -> str:
        """Human-readable provenance and settings (volatile: keep out of checked cells)."""
        prov = self.provenance()
        lines = [f"{k}: {v}" for k, v in prov.items()]
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
        with self.timer(tag):
            value, hit = cached(f"{self.figure}-{tag}", config, str(self.device), compute, self.use_cache)
        self.cache_hits[tag] = hit
        return value

    def train(self, tag: str, sweep: Sweep) -> SweepResult:
        """Train a sweep (one batched program), through the cache."""
        return self.cached(tag, sweep.to_dict(), lambda: train_sweep(sweep, self.device, desc=tag))

    # -- results -------------------------------------------------------------------------------
    def check(self, id: str, statement: str, value: Any, passed: bool, threshold: str) -> Claim:
        kind = "finding" if id in FIGURES[self.figure].findings else "claim"
        claim = Claim(id, statement, bool(passed), _plain(value), threshold, kind)
        self.claims = [c for c in self.claims if c.id != id] + [claim]
        return claim

    def record(self, **numbers: Any) -> None:
        """Key numbers for the machine-readable record."""
        self.numbers.update({k: _plain(v) for k, v in numbers.items()})

    def savefig(self, fig, name: str) -> None:
        save(fig, self.output_dir / "figures", f"{self.figure}_{name}")

    def verdicts(self) -> str:
        claims = [c for c in self.claims if c.kind == "claim"]
        findings = [c for c in self.claims if c.kind == "finding"]
        total = f"{sum(c.passed for c in claims)}/{len(claims)} claims hold"
        if findings:
            total += f"; {sum(c.passed for c in findings)}/{len(findings)} findings hold (an open test: either verdict " \
                     "is a result)"
        return "\n".join([c.line() for c in self.claims] + [total])

    def finish(self) -> str:
        """Write the record (atomically) and return the verdict lines (stable: fit for nbval)."""
        self.timings["total"] = time.perf_counter() - self._t0
        rec = {
            "notebook": self.figure, "profile": self.profile, "parameters": _plain(self.cfg),
            "claims": [asdict(c) for c in self.claims], "key_numbers": self.numbers,
            "provenance": self.provenance(), "timings": {k: round(v, 2) for k, v in self.timings.items()},
            "cache_hits": self.cache_hits,
        }
        path = self.output_dir / "results" / f"{self.figure}.json"
        atomic_write_bytes(path, (json.dumps(rec, indent=2, sort_keys=False) + "\n").encode())
        return self.verdicts()
