"""Window adaptation: the windows and ICL errors of the pretrained units (Collins et al. 2024, Figure 1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import torch

from ...base import Progress, resolve_device
from ...baselines import nadaraya_watson_oracle
from ...metrics import MIN_CHUNK, _mean_and_stderr, eval_stream, icl_error_grid, spectral_norm, window_halfwidth
from ...models import scores
from ...book.run import Run
from ...tasks import InputSpec
from ...training import SweepResult
from .sweeps import MODELS, Setting, families, settings, unit_index


@dataclass(frozen=True)
class WindowAnalysis:
    """Windows at ``n_window`` and ICL errors of every unit, per model (keys of the dicts: "softmax", "linear"), for
    the two task families (axis 0: the paper's family, then the zero-mean one)."""

    families: tuple               # (paper's class, zero-mean class)
    settings: list                # Setting per column
    n: list                       # context lengths
    halfwidth: dict               # model -> (family, setting, seed) half-width of the window, degrees
    w: dict                       # model -> (family, setting, seed) ||M||_2
    error: dict                   # model -> (family, setting, n, seed) ICL error
    oracle: np.ndarray            # (family, setting, n) best-bandwidth Nadaraya-Watson error
    oracle_w: np.ndarray          # (family, setting, n) its bandwidth
    fixed: np.ndarray             # (family, setting, n) error of the one bandwidth per n best over all settings
    fixed_w: np.ndarray           # (family, n) that bandwidth
    uniform: np.ndarray           # (family, setting, n) error of M = 0: the uniform average of the context labels
    halfwidth_init: np.ndarray    # (family, setting, seed) softmax half-width at initialisation (degrees)

    def mean_error(self, model: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of a trained model, the softmax units at their initialisation
        ("untrained"), or a baseline ("oracle", "fixed", "uniform")."""
        if model in ("oracle", "fixed", "uniform"):
            return getattr(self, model)
        return self.error[model].mean(-1)

    def ratio(self, num: str, den: str) -> np.ndarray:
        """(family, setting, n): seed-mean ICL error of ``num`` over ``den`` (see :meth:`mean_error`)."""
        return self.mean_error(num) / self.mean_error(den)

    def window_helps(self) -> np.ndarray:
        """(family, setting, n): cells where a window has something to adapt to -- the tuned Nadaraya-Watson
        estimator's error is at most half the uniform average's (elsewhere every window is near the task variance)."""
        return self.oracle <= 0.5 * self.uniform


def own_cell_errors(kinds: list[str], Ms: list, cells: list[tuple[int, int]], tests: list[dict], ns, spec: InputSpec,
                    n_tasks: int, eval_seed: int, device, chunk: int = 2048, desc: str = "evaluate") -> list[np.ndarray]:
    """ICL error of every unit on its own test setting and context length only.

    ``kinds[g]`` ("softmax" or "linear") and ``Ms[g]`` (U, d, d) are groups of units that share ``cells``: unit u of
    every group is evaluated on test ``tests[cells[u][0]]`` at context length ``cells[u][1]``. The tasks are those of
    :func:`~softmax_icl.metrics.icl_error_grid` with the same ``tests``, ``ns`` and ``eval_seed`` (one stream drawn
    at max(ns), shorter contexts its prefixes), so each unit's error is the one the whole grid gives for its cell,
    up to float rounding; a pretrained unit is only ever read on its own cell, and the grid would compute
    len(tests) x len(ns) cells per unit. Returns the mean error per group, each (U,).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    ns = [int(n) for n in ns]
    stream = eval_stream(tests, spec, max(ns), eval_seed, dev)
    if sorted(set(kinds)) not in (["linear"], ["softmax"], ["linear", "softmax"]) or len(kinds) != len(Ms):
        raise ValueError(f"kinds={kinds!r}: one of 'softmax', 'linear' per group of units ({len(Ms)} groups)")
    Mt = torch.as_tensor(np.concatenate([np.asarray(M) for M in Ms]), dtype=torch.float32, device=dev).unsqueeze(0)
    U = len(cells)
    test_of = torch.as_tensor([r for r, _ in cells], device=dev)
    groups = []                                   # per context length and kind: its units (of every group), their tests
    for n in sorted({n for _, n in cells}):
        own = [u for u, (_, m) in enumerate(cells) if m == n]
        for kind in sorted(set(kinds)):
            gs = [g for g, k in enumerate(kinds) if k == kind]
            units = torch.as_tensor([g * U + u for g in gs for u in own], device=dev)
            groups.append((n, units, test_of[own].repeat(len(gs)), kind == "softmax"))
    # each length's scores are (its units, chunk, n): keep the largest to about 2e7 elements
    chunk = max(MIN_CHUNK, min(chunk, int(2e7 // max(len(units) * n for n, units, _, _ in groups))))
    bar = Progress(-(-n_tasks // chunk), desc)
    done = [0]

    def squared_errors(batch):
        y, f = batch.y_ctx[0], batch.f_q[0]                   # (R, b, n_max), (R, b)
        err = torch.empty((len(Ms) * U, f.shape[-1]), dtype=torch.float64, device=dev)
        for n, units, test, soft in groups:
            sn = scores(batch.x_ctx[:, :, :n], batch.x_q, Mt[:, units])[0]       # (units, b, n)
            yn = y[test, :, :n]
            pred = (torch.softmax(sn, dim=-1) * yn).sum(-1) if soft else (sn * yn).sum(-1) / n
            err[units] = (pred - f[test]).double() ** 2
        done[0] += 1
        bar.update(done[0])
        return err

    try:
        mean, _ = _mean_and_stderr(stream, n_tasks, chunk, squared_errors, (len(Ms) * U,))
    finally:
        bar.close()
    return list(mean.reshape(len(Ms), U))


def analyse(run: Run, results: dict[str, SweepResult]) -> WindowAnalysis:
    """Windows, ICL errors (trained units and the Nadaraya-Watson oracle) per family, setting and n."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    sets, ns, fams = settings(cfg), cfg["n_values"], families(cfg)

    def per_family(fn):
        return np.stack([np.stack([fn(f, s) for s in sets]) for f in fams])

    # attention window half-width (degrees) and ||M|| of every unit at n_window: (family, setting, seed)
    at_nw = lambda m, f, s: results[m].M[unit_index(results[m], s, cfg["n_window"], f)]  # noqa: E731
    halfwidth = {m: per_family(lambda f, s: np.degrees(window_halfwidth(m, at_nw(m, f, s)))) for m in MODELS}
    init = results["softmax"].M_history[0]
    halfwidth_init = per_family(lambda f, s: np.degrees(window_halfwidth(
        "softmax", init[unit_index(results["softmax"], s, cfg["n_window"], f)])))
    w = {m: per_family(lambda f, s: spectral_norm(at_nw(m, f, s))) for m in MODELS}

    def evaluate():
        err = {}
        tests = [dict(function_class=f, L=s.L, sigma=s.sigma) for f in fams for s in sets]
        kw = dict(n_tasks=cfg["eval_tasks"], eval_seed=cfg["eval_seed"], device=run.device)
        # every unit on its own family, setting and n (the tasks of the oracle's grid); the softmax units also at
        # their initialisation (the untrained baseline). The two sweeps list the same units in the same order.
        where = [(k * len(sets) + i, j, unit_index(results["softmax"], s, n, f))
                 for k, f in enumerate(fams) for i, s in enumerate(sets) for j, n in enumerate(ns)]
        for m in MODELS[1:]:
            if any(not np.array_equal(unit_index(results[m], s, n, f), unit_index(results["softmax"], s, n, f))
                   for f in fams for s in sets for n in ns):
                raise ValueError(f"the {m} sweep lists its units in another order than the softmax sweep")
        cells = [None] * len(results["softmax"].M)
        for r, j, idx in where:
            for u in idx:
                cells[u] = (r, ns[j])
        groups = {"softmax": results["softmax"].M, "linear": results["linear"].M, "untrained": init}
        e = dict(zip(groups, own_cell_errors(["linear" if g == "linear" else "softmax" for g in groups],
                                             list(groups.values()), cells, tests, ns, spec, desc="evaluate units",
                                             **kw)))
        for m, v in e.items():
            err[m] = np.stack([np.stack([np.stack([v[unit_index(results["softmax"], s, n, f)] for n in ns])
                                         for s in sets]) for f in fams])                   # (family, setting, n, seed)
        shape = (len(fams), len(sets), len(ns))
        err["uniform"] = icl_error_grid("softmax", np.zeros((1, spec.d, spec.d)), tests, ns, spec, **kw)[0][0]
        ow, oe, _, fw, fe = nadaraya_watson_oracle(
            tests, ns, spec, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device, shared=True)
        err["oracle_w"], err["oracle"], err["fixed"], err["uniform"] = (
            v.reshape(shape) for v in (ow, oe, fe, err["uniform"]))
        err["fixed_w"] = np.broadcast_to(fw, (len(fams), len(ns))).copy()
        return err

    key = {"layout": 5, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "eval_seed": cfg["eval_seed"]}
    ev = run.cached("evaluate", key, evaluate)
    return WindowAnalysis(families=fams, settings=sets, n=ns, halfwidth=halfwidth, w=w,
                          error={m: ev[m] for m in (*MODELS, "untrained")}, oracle=ev["oracle"],
                          oracle_w=ev["oracle_w"], fixed=ev["fixed"], fixed_w=ev["fixed_w"], uniform=ev["uniform"],
                          halfwidth_init=halfwidth_init)


__all__ = ["Setting", "WindowAnalysis", "analyse"]
