"""Window adaptation: the windows and ICL errors of the pretrained units (Collins et al. 2024, Figure 1).

Everything per seed (the statistical design decides on seed samples), at the end of training on the evaluation set,
and along training (every logged step) on the curve set, the evaluation set's first ``curve_tasks`` tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...base import Progress, resolve_device
from ...metrics import MIN_CHUNK, _mean_and_stderr, eval_stream, icl_error_grid, spectral_norm, window_halfwidth
from ...models import scores, segment_weights
from ...book.run import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .rivals import tuned_windows
from .sweeps import MODELS, Setting, families, settings, unit_index

#: Baselines that need no pretraining (:meth:`WindowAnalysis.samples`).
BASELINES = ("oracle", "fixed", "uniform")


@dataclass(frozen=True)
class WindowAnalysis:
    """Windows at ``n_window`` and ICL errors of every unit, per model, for the two task families (axis "family":
    the paper's, then the zero-mean one), settings, context lengths and seeds. The softmax units serve both families
    (:mod:`.sweeps`), so their family axis holds the same units twice."""

    families: tuple               # (paper's class, zero-mean class)
    settings: list                # Setting per column
    n: list                       # context lengths
    steps: np.ndarray             # (T,) logged pretraining steps
    curve_tasks: int              # tasks of the curve set
    halfwidth: dict               # model -> (family, setting, seed) half-width of the window at the end, degrees
    halfwidth_history: np.ndarray  # (T, setting, seed) softmax half-width at every logged step (paper's family)
    w: dict                       # model -> (family, setting, seed) ||M||_2
    error: dict                   # "softmax", "linear", "untrained" -> (family, setting, n, seed) ICL error
    curve: dict                   # "softmax", "linear" -> (T, family, setting, n, seed) ICL error on the curve set
    oracle: np.ndarray            # (family, setting, n, seed) tuned Nadaraya-Watson error, each seed's tuning set
    oracle_w: np.ndarray          # (family, setting, n, seed) its bandwidth
    fixed: np.ndarray             # (family, setting, n, seed) error of the one bandwidth per n for every setting
    fixed_w: np.ndarray           # (n, seed) that bandwidth
    uniform: np.ndarray           # (family, setting, n) error of M = 0: the uniform average of the context labels
    baseline_curve: dict          # "oracle", "fixed" (family, setting, n, seed), "uniform" (family, setting, n)

    @property
    def halfwidth_init(self) -> np.ndarray:
        """(setting, seed): the softmax half-width at initialisation (degrees; paper's family)."""
        return self.halfwidth_history[0]

    def samples(self, model: str, curve: bool = False) -> np.ndarray:
        """Per-seed ICL error (family, setting, n, seed) of a trained model, the softmax units at initialisation
        ("untrained") or a baseline (:data:`BASELINES`; "uniform" has no seed and is repeated along the seed axis);
        ``curve``: on the curve set at every logged step, (T, family, setting, n, seed) ("untrained": no curve)."""
        seeds = self.oracle.shape[-1]
        if model == "uniform":
            u = self.baseline_curve["uniform"] if curve else self.uniform
            return np.repeat(u[..., None], seeds, -1)
        if model in BASELINES:
            return self.baseline_curve[model] if curve else getattr(self, model)
        return self.curve[model] if curve else self.error[model]

    def mean_error(self, model: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of a model or baseline (see :meth:`samples`)."""
        return self.samples(model).mean(-1)

    def ratio(self, num: str, den: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of ``num`` over ``den`` (see :meth:`mean_error`)."""
        return self.mean_error(num) / self.mean_error(den)

    def window_helps(self) -> np.ndarray:
        """(family, setting, n): cells where a window has something to adapt to -- the tuned Nadaraya-Watson
        estimator's seed-mean error is at most half the uniform average's (elsewhere every window is near the task
        variance)."""
        return self.mean_error("oracle") <= 0.5 * self.uniform


def own_cell_errors(groups: list[tuple], tests: list[dict], ns, spec: InputSpec, n_tasks: int, eval_seed: int,
                    device, chunk: int = 2048, desc: str = "evaluate") -> list[np.ndarray]:
    """ICL error of every unit on its own test setting and context length only.

    ``groups``: ``(kind, M, cells)`` with ``kind`` "softmax" or "linear", ``M`` (..., U, d, d) (leading axes: e.g.
    the logged steps) and ``cells`` U pairs ``(test index into tests, n)``: unit u is read on ``tests[cells[u][0]]``
    at context length ``cells[u][1]``. The tasks are those of :func:`~softmax_icl.metrics.icl_error_grid` with the
    same ``tests``, ``ns`` and ``eval_seed`` (one stream drawn at max(ns), shorter contexts its prefixes; ``n_tasks``
    of them), so a unit's error is the one the whole grid gives for its cell, up to float rounding, without the
    len(tests) x len(ns) cells per unit the grid computes. Per chunk of tasks and per cell, the units of that cell are
    one batched computation: softmax ``sum_i y_i exp(s_i) / sum_j exp(s_j)`` with ``s_i = x_i^T M x_q``; linear
    ``(1/n) sum_i s_i y_i = v^T M x_q`` with ``v = (1/n) sum_i y_i x_i`` (one (R, b, d) tensor per length, shared by
    every unit). Returns each group's mean error, shaped (..., U).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    ns = [int(n) for n in ns]
    if any(k not in MODELS for k, _, _ in groups):
        raise ValueError(f"kinds={[k for k, _, _ in groups]!r}: each group's kind must be one of {MODELS}")
    stream = eval_stream(tests, spec, max(ns), eval_seed, dev)
    stacks, rows, shapes = {k: [] for k in MODELS}, [], []
    for kind, M, cells in groups:
        M = np.asarray(M)
        if M.shape[-3] != len(cells):
            raise ValueError(f"a group of {M.shape[-3]} units has {len(cells)} cells")
        start = sum(len(m) for m in stacks[kind])
        flat = M.reshape(-1, spec.d, spec.d)
        stacks[kind].append(flat)
        reps = flat.shape[0] // len(cells)
        rows.append((kind, start, flat.shape[0], [c for _ in range(reps) for c in cells]))
        shapes.append(M.shape[:-2])
    Ms = {k: torch.as_tensor(np.concatenate(v), dtype=torch.float32, device=dev) for k, v in stacks.items() if v}
    offset = {k: 0 for k in MODELS}
    base = 0
    for k in MODELS:                                  # the error vector holds softmax rows first, then linear rows
        offset[k] = base
        base += len(Ms[k]) if k in Ms else 0
    by_cell: dict = {}                                # (kind, test, n) -> rows of the error vector
    for kind, start, count, cells in rows:
        for j, (r, n) in enumerate(cells):
            by_cell.setdefault((kind, int(r), int(n)), []).append(offset[kind] + start + j)
    work = [(kind, r, n, torch.as_tensor(idx, device=dev), torch.as_tensor(idx, device=dev) - offset[kind])
            for (kind, r, n), idx in sorted(by_cell.items())]
    largest = max((len(idx) * n for kind, _, n, idx, _ in work if kind == "softmax"), default=1)
    chunk = max(MIN_CHUNK, min(chunk, int(2e7 // largest)))        # scores of one cell: (units, chunk, n) <= ~2e7
    bar, done = Progress(-(-n_tasks // chunk), desc), [0]

    def squared_errors(batch):
        x, xq, y, f = batch.x_ctx, batch.x_q, batch.y_ctx[0], batch.f_q[0]  # (1, b, n, d), (1, b, d), (R, b, n), (R, b)
        err = torch.empty((base, f.shape[-1]), dtype=torch.float64, device=dev)
        v = {}
        for kind, r, n, out, idx in work:
            if kind == "softmax":
                E, st = segment_weights(scores(x[:, :, :n], xq, Ms[kind][idx][None])[0], [0, n], inplace=True)
                pred = (E * y[r, :, :n]).sum(-1) / st[..., 0, 1]                           # (units, b)
            else:
                if n not in v:
                    v[n] = torch.einsum("bnd,rbn->rbd", x[0, :, :n], y[:, :, :n]) / n    # (R, b, d)
                pred = torch.einsum("ude,be,bd->ub", Ms[kind][idx], xq[0], v[n][r])
            err[out] = (pred - f[r]).double() ** 2
        done[0] += 1
        bar.update(done[0])
        return err

    try:
        mean, _ = _mean_and_stderr(stream, n_tasks, chunk, squared_errors, (base,))
    finally:
        bar.close()
    return [mean[offset[kind] + start: offset[kind] + start + count].reshape(shape)
            for (kind, start, count, _), shape in zip(rows, shapes)]


def halfwidth_degrees(kind: str, M, max_units: int = 64) -> np.ndarray:
    """Window half-width in degrees (:func:`~softmax_icl.metrics.window_halfwidth`) of ``kind`` units M (..., d, d),
    in blocks of ``max_units`` matrices (the profile of one block is (units, queries, angles))."""
    M = np.asarray(M)
    flat = M.reshape(-1, *M.shape[-2:])
    out = np.concatenate([window_halfwidth(kind, flat[i:i + max_units])
                          for i in range(0, len(flat), max_units)])
    return np.degrees(out).reshape(M.shape[:-2])


def analyse(run: Run, results: dict[str, SweepResult]) -> WindowAnalysis:
    """Windows, ICL errors (trained units, their initialisation, the tuned and the fixed Nadaraya-Watson windows, the
    uniform average) per family, setting, n and seed, at the end of training and along it."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    sets, ns, fams = settings(cfg), cfg["n_values"], families(cfg)
    S = cfg["seeds"]
    tests = [dict(function_class=f, L=s.L, sigma=s.sigma) for f in fams for s in sets]
    # units of every (family, setting, n, seed) per model, in that order, with their cells (test index, n)
    order = [(k, i, j) for k in range(len(fams)) for i in range(len(sets)) for j in range(len(ns))]
    units = {m: np.concatenate([unit_index(results[m], sets[i], ns[j], fams[k]) for k, i, j in order]) for m in MODELS}
    cells = [(k * len(sets) + i, ns[j]) for k, i, j in order for _ in range(S)]
    shape = (len(fams), len(sets), len(ns), S)
    half = len(cells) // len(fams)                  # the paper's family's units come first
    at_nw = lambda m, f, s: results[m].M[unit_index(results[m], s, cfg["n_window"], f)]  # noqa: E731

    def per_family(fn):
        return np.stack([np.stack([fn(m_f, s) for s in sets]) for m_f in fams])

    w = {m: per_family(lambda f, s: spectral_norm(at_nw(m, f, s))) for m in MODELS}

    def evaluate():
        kw = dict(eval_seed=cfg["eval_seed"], device=run.device)
        soft, lin = (results[m].M_history[:, units[m]] for m in MODELS)                  # (T, F S N seeds, d, d)
        final = own_cell_errors([("softmax", soft[-1], cells), ("linear", lin[-1], cells), ("softmax", soft[0], cells)],
                                tests, ns, spec, cfg["eval_tasks"], desc="evaluate units", **kw)
        # along training on the curve set: the softmax units on the paper's family only (on the zero-mean family
        # they are the same units with the same errors), the linear units on both
        curve = own_cell_errors([("softmax", soft[:, :half], cells[:half]), ("linear", lin, cells)], tests, ns, spec,
                                cfg["curve_tasks"], desc="evaluate along training", **kw)
        T = soft.shape[0]
        out = {m: e.reshape(shape) for m, e in zip(("softmax", "linear", "untrained"), final)}
        out["curve"] = {"softmax": np.concatenate([curve[0]] * len(fams), axis=1).reshape((T,) + shape),
                        "linear": curve[1].reshape((T,) + shape)}
        out["uniform"], out["uniform_curve"] = (icl_error_grid(
            "softmax", np.zeros((1, spec.d, spec.d)), tests, ns, spec, n_tasks=n, **kw)[0][0].reshape(shape[:-1])
            for n in (cfg["eval_tasks"], cfg["curve_tasks"]))
        tw = tuned_windows(tests, ns, spec, S, cfg["tune_tasks"], cfg["eval_seed"] + 100, cfg["eval_tasks"],
                           cfg["curve_tasks"], **kw)
        seed_last = lambda a: np.moveaxis(a, 0, -1).reshape(shape)  # noqa: E731  (S, R, N) -> (F, S, N, seed)
        out.update(oracle=seed_last(tw.oracle), oracle_w=seed_last(tw.oracle_w), fixed=seed_last(tw.fixed),
                   fixed_w=tw.fixed_w.T, oracle_curve=seed_last(tw.oracle_curve), fixed_curve=seed_last(tw.fixed_curve))
        # the softmax half-width at n_window at every logged step (paper's family): (T, setting, seed)
        nw = [unit_index(results["softmax"], s, cfg["n_window"], fams[0]) for s in sets]
        out["halfwidth_history"] = halfwidth_degrees("softmax", results["softmax"].M_history[:, np.stack(nw)])
        out["halfwidth_linear"] = per_family(lambda f, s: halfwidth_degrees("linear", at_nw("linear", f, s)))
        return out

    key = {"layout": 6, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "eval_seed": cfg["eval_seed"], "curve_tasks": cfg["curve_tasks"], "tune_tasks": cfg["tune_tasks"],
           "n_window": cfg["n_window"]}
    ev = run.cached("evaluate", key, evaluate)
    hw_soft = np.broadcast_to(ev["halfwidth_history"][-1], (len(fams),) + ev["halfwidth_history"].shape[1:])
    return WindowAnalysis(
        families=fams, settings=sets, n=ns, steps=np.asarray(results["softmax"].log_steps),
        curve_tasks=cfg["curve_tasks"], halfwidth={"softmax": hw_soft.copy(), "linear": ev["halfwidth_linear"]},
        halfwidth_history=ev["halfwidth_history"], w=w, error={m: ev[m] for m in ("softmax", "linear", "untrained")},
        curve=ev["curve"], oracle=ev["oracle"], oracle_w=ev["oracle_w"], fixed=ev["fixed"], fixed_w=ev["fixed_w"],
        uniform=ev["uniform"], baseline_curve={"oracle": ev["oracle_curve"], "fixed": ev["fixed_curve"],
                                               "uniform": ev["uniform_curve"]})


__all__ = ["Setting", "WindowAnalysis", "analyse", "own_cell_errors"]
