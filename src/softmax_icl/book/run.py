"""One execution of a figure notebook: :class:`Run`.

A notebook opens a run right after its parameters cell (``Run.from_notebook(low_rank.FIGURE, globals())``). The
run resolves and validates the configuration (before any compute), picks the device, trains and computes through
the result cache (:mod:`softmax_icl.book.cache`), times the stages, collects claim checks that can fail
(:mod:`softmax_icl.book.records`), and at the end prints the verdicts and writes one machine-readable record to
``<output_dir>/results/<figure>.json``, with its provenance (:mod:`softmax_icl.book.provenance`). The book's pages
are generated from these records; the chapter's page text comes from :mod:`softmax_icl.book.chapter`.

Training goes through one front, :meth:`Run.train`: a sweep of either paper (``softmax_icl.training.Sweep``,
``softmax_icl.classification.models.ClsSweep``) gives its cache key (``to_dict()``) and trains itself
(``train(device, desc)``), so the run knows no trainer.
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch

from .. import stats
from ..base import resolve_device
from ..plotting import save, use_style
from ..profiles import Figure, coerce, validate_device
from . import design, records
from .cache import cached, code_fingerprint
from .provenance import default_output_dir, git_revision, provenance, repo_root
from .registry import resolve


#: The hidden folder (``<output>/<PENDING_FIGURES><pid>/``) where a run's figures wait until its record is written.
PENDING_FIGURES = ".pending-figures-"


def discard_pending_figures(output_dir: Path, alive_only: bool = True) -> None:
    """Remove the figures of runs into ``output_dir`` that stopped before their end (their pending folders): those of
    processes no longer running, or, with ``alive_only=False``, every one (the runner, once its kernel is gone)."""
    for folder in Path(output_dir).glob(f"{PENDING_FIGURES}*"):
        pid = folder.name[len(PENDING_FIGURES):]
        if alive_only and pid.isdigit():
            try:
                os.kill(int(pid), 0)
                continue                      # that run is still going
            except ProcessLookupError:
                pass
            except OSError:                   # exists, but not ours to signal
                continue
        shutil.rmtree(folder, ignore_errors=True)


class Trainable(Protocol):
    """What :meth:`Run.train` trains: a sweep that names its cache key and trains itself."""

    def to_dict(self) -> dict: ...

    def train(self, device: torch.device, desc: str | None = None) -> Any: ...


class Run:
    """One execution of a figure notebook: ``figure`` is the figure's definition (its package's ``FIGURE``)."""

    def __init__(self, figure: Figure, profile: str = "default", device: str = "auto", use_cache: bool = True,
                 output_dir: str | None = None, overrides: dict | None = None):
        if not isinstance(figure, Figure):
            raise TypeError(f"Run needs the figure's definition (its package's FIGURE, e.g. "
                            f"softmax_icl.figures.low_rank.FIGURE), got {figure!r}")
        self.definition = figure
        self.figure = figure.name
        self.cfg = resolve(figure, profile, overrides)
        self.profile = profile
        self.device = resolve_device(validate_device(device))
        self.use_cache = bool(use_cache)
        #: the parameters this run sets to other values than its profile's (compared one by one, no second resolve)
        self.custom = {k: self.cfg[k] for k, v in (overrides or {}).items()
                       if v is not None and self.cfg[k] != coerce(k, figure.params[k], figure.params[k].value(profile))}
        self.output_dir = (Path(output_dir) if output_dir else
                           default_output_dir(self.figure, profile, bool(self.custom)))
        discard_pending_figures(self.output_dir)
        self.claims: list[records.Claim] = []
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
        self.fingerprint = code_fingerprint(self.figure)
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
    def from_notebook(cls, figure: Figure, namespace: dict) -> "Run":
        """The run a notebook's parameters cell describes: ``Run.from_notebook(norm_scaling.FIGURE, globals())``.

        Reads ``profile``, ``device``, ``use_cache``, ``output_dir`` and every parameter of the figure from
        ``namespace`` (a figure parameter left at ``None`` takes the profile's value), so the notebook does not
        repeat every name; a parameter the cell does not declare is an error naming it.
        """
        missing = [p for p in ("profile", *figure.params) if p not in namespace]
        if missing:
            raise NameError(f"the parameters cell of {figure.name!r} does not declare {', '.join(missing)}")
        overrides = {p: namespace[p] for p in figure.params}
        return cls(figure, namespace.get("profile", "default"), namespace.get("device", "auto"),
                   namespace.get("use_cache", True), namespace.get("output_dir"), overrides=overrides)

    # -- configuration and provenance ---------------------------------------------------------
    def __getitem__(self, name: str):
        return self.cfg[name]

    def provenance(self) -> dict:
        return provenance(self.figure, self.profile, self.device, self.cfg, revision=self.revision,
                          fingerprint=self.fingerprint, use_cache=self.use_cache)

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

    def train(self, tag: str, sweep: Trainable, desc: str | None = None) -> Any:
        """Train a sweep (one batched program), through the cache: keyed by ``sweep.to_dict()``, trained by
        ``sweep.train(device, desc)`` (``desc``, the progress label, defaults to ``tag``)."""
        return self.cached(tag, sweep.to_dict(), lambda: sweep.train(self.device, desc=desc or tag))

    # -- results -------------------------------------------------------------------------------
    def check(self, id: str, statement: str, value: Any, passed: bool, threshold: str, *, kind: str, source: str,
              control_of: str | None = None, anchor: str | None = None, ledger: str | None = None,
              title: str | None = None, status: str | None = None, decision: dict | None = None) -> records.Claim:
        """Record one check (:func:`softmax_icl.book.records.make_claim`: ``kind`` and ``source`` are required, a
        claim names its ledger entry); a check of the same id replaces the earlier one."""
        claim = records.make_claim(self.figure, id, statement, value, passed, threshold, kind=kind, source=source,
                                   control_of=control_of, anchor=anchor, ledger=ledger, title=title,
                                   default_title=self.titles.get(id), status=status, decision=decision)
        self.claims = [c for c in self.claims if c.id != id] + [claim]
        return claim

    def decide(self, id: str, statement: str, cells, *, source: str, anchor: str | None = None,
               title: str | None = None, kind: str | None = None, control_of: str | None = None,
               ledger: str | None = None) -> records.Claim:
        """Record a check decided by the statistical design (``book/design.yml``, :mod:`softmax_icl.stats`).

        What the check is comes from the design alone: a control listed under a check's ``controls`` is a control
        of that check; a check with ``claim: <entry>`` is a claim of that ledger entry, one with ``beyond: <entry>``
        a finding past that entry's scope, any other a finding of its own (:meth:`softmax_icl.book.design.Design.role`).
        ``kind``, ``control_of`` and ``ledger`` need not be given; where a caller gives one, it must be the design's
        (a ValueError otherwise), so the design stays the one source of what a check is.

        ``cells``: label -> per-seed samples of the check's statistic, or label -> ``(samples, steps, means)`` with
        the statistic's seed mean at the logged training steps (for the settling rule). The test, threshold and
        margin are the design's for ``id`` (a control takes the test of the check it controls), never the caller's.
        A check passes when every cell's interval lies on the claim's side of the threshold, fails when one lies
        wholly on the other side. A control is the same check on a rival, combined by the same rule: it does its job
        when it FAILS, i.e. when one of its cells fails, each of its K cells judged at the Bonferroni level ALPHA / K
        (:func:`stats.rival_alpha`), so that a rival as good as the claim everywhere is rejected with probability at
        most ALPHA (:func:`stats.combine`). A check whose design names several ``metrics`` takes one cell per metric,
        labelled by its name, each with that metric's test; it passes only when every metric passes, and its control
        does its job when the same conjunction fails (a rival that misses one metric is told apart from the claim). A metric measured in several
        cells (e.g. one per context length) labels them ``"<metric>: <cell>"``; every metric needs at least one (a
        control may take a subset of the metrics, e.g. those defined at initialisation). A cell of an ``exact`` test
        whose Monte Carlo error is estimated is a :class:`stats.Estimate` (value and standard error).
        The recorded value is the deciding bound of the worst cell (for a control that fails: its clearest failure)."""
        role = design.load().role(self.figure, id)
        for name, given, found in zip(("kind", "control_of", "ledger"), (kind, control_of, ledger), role):
            if given is not None and given != found:
                raise ValueError(f"check {id!r}: {name}={given!r}, but the statistical design (book/design.yml) makes "
                                 f"it {found!r}; what a check is, is the design's")
        kind, control_of, ledger = role
        entry = design.load().entry(self.figure, id)
        metric = lambda label: str(label).split(": ", 1)[0]  # noqa: E731  (the metric of a cell's label)
        given = set(map(metric, cells))
        if entry.metrics and (given - set(entry.metrics) or (kind != "control" and given != set(entry.metrics))):
            raise ValueError(f"check {id!r} decides on the metrics {', '.join(entry.metrics)}; got cells "
                             f"{', '.join(map(str, cells))} (a control may take a subset of the metrics)")
        test = None if entry.metrics else entry.test
        judged = []
        alpha = stats.rival_alpha(len(cells)) if kind == "control" and cells else stats.ALPHA
        for label, x in cells.items():
            samples, steps, means = (x, None, None) if not isinstance(x, tuple) else x
            se = samples.se if isinstance(samples, stats.Estimate) else None
            samples = samples.value if isinstance(samples, stats.Estimate) else samples
            judged.append(stats.Cell(str(label), np.asarray(samples, dtype=np.float64),
                                     test or entry.test_for(metric(label)),
                                     None if steps is None else np.asarray(steps),
                                     None if means is None else np.asarray(means), se=se, alpha=alpha).judge())
        if not judged:
            raise ValueError(f"check {id!r} has no cell to decide")
        status = stats.combine([c["verdict"] for c in judged])
        margins = [stats.margin_over_threshold(c) for c in judged]
        deciding = judged[int(np.argmin(margins))]
        test = test or entry.test_for(metric(deciding["label"]))
        seeds = sorted({c["n"] for c in judged})
        decision = {"test": test.kind, "threshold": test.threshold, "margin": test.margin, "alpha": alpha,
                    "seeds": seeds[0] if len(seeds) == 1 else seeds, "design": entry.key,
                    "margin_over_threshold": stats.margin_over_threshold(deciding), "cells": judged}
        required = test.text() if not entry.metrics else "every metric: " + "; ".join(
            f"{m} {t.text()}" for m, t in entry.metrics.items())
        return self.check(id, statement, stats.worst_bound(deciding), status == stats.PASS, required, kind=kind,
                          source=source, control_of=control_of, anchor=anchor, ledger=ledger, title=title,
                          status=status, decision=decision)

    def record(self, **numbers: Any) -> None:
        """Key numbers for the machine-readable record."""
        self.numbers.update({k: records.plain(v) for k, v in numbers.items()})

    def savefig(self, fig, name: str, glue: str | None = None) -> None:
        """Save ``fig`` as ``<output>/figures/<figure>_<name>.png`` and ``.pdf``; show the saved PNG here, or, with
        ``glue``, glue it under that key (myst-nb) for a ``{glue:figure}`` higher up the page, and show nothing.

        The files wait in a hidden folder of the output (:meth:`pending_figures`) until :meth:`finish` moves them
        into ``figures/`` with the record: a run stopped before its end leaves no figure of its own beside an earlier
        run's record."""
        paths = save(fig, self.pending_figures(), f"{self.figure}_{name}", show=glue is None)
        if glue is not None:
            import matplotlib.pyplot as plt

            from .glue import glue_image
            glue_image(glue, paths[0])
            plt.close(fig)

    def _seeds_figure(self) -> None:
        """Glue the figure of the seeds behind the claim checks (``seeds``: each trained unit's value, their mean
        and its bound, :mod:`softmax_icl.book.seeds_figure`), for the chapter's claims section; none where no claim
        check is decided on seeds."""
        from .seeds_figure import seeds_figure

        fig = seeds_figure([asdict(c) if is_dataclass(c) else dict(c) for c in self.claims])
        if fig is not None:
            self.savefig(fig, "seeds", glue="seeds")

    def pending_figures(self) -> Path:
        """Where this run's figures wait for :meth:`finish` (``<output>/.pending-figures-<pid>/``)."""
        return self.output_dir / f"{PENDING_FIGURES}{os.getpid()}"

    def _place_figures(self) -> None:
        """Move the figures this run saved into ``<output>/figures/`` (each an ``os.replace``)."""
        pending = self.pending_figures()
        if not pending.is_dir():
            return
        (self.output_dir / "figures").mkdir(parents=True, exist_ok=True)
        for path in sorted(pending.iterdir()):
            os.replace(path, self.output_dir / "figures" / path.name)
        pending.rmdir()

    def verdicts(self) -> str:
        return records.verdict_lines(self.claims)

    def values_table(self) -> str:
        """Each check's measured value against its threshold (:func:`softmax_icl.book.records.values_table`)."""
        return records.values_table(self.claims)

    def finish(self) -> str:
        """Write the record (atomically) and return the verdict lines: PASS/FAIL, id, statement and threshold,
        without the measured values, so the lines are the same on every machine (nbval compares them). The values
        are in the record, in the chapter's verdict box and in :meth:`values_table`."""
        self.timings["total"] = time.perf_counter() - self._t0
        self._seeds_figure()
        self._place_figures()
        records.write_record(self.output_dir, records.record(
            self.figure, self.profile, self.cfg, self.claims, self.numbers, self.provenance(), self.timings,
            self.cache_hits, self.compute_seconds, self.trained_in_parts))
        return self.verdicts()
