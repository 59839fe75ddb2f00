"""Low rank: representation errors and ICL errors along pretraining, and the reference predictors.

Every logged snapshot of every unit is evaluated (all snapshots of all units stacked as rows of one evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...metrics import icl_error_of_matrices, rho1, rho2, spectral_norm
from ...book.run import Run
from ...training import SweepResult
from ...tasks import low_rank_basis
from .sweeps import FLOOR_SCHEDULES, MODELS, basis, input_spec

#: Scales scanned for the reference units M = c B B^T and M = w I (tuned per class on a separate set).
SCALE_GRID = tuple(np.round(np.geomspace(0.3, 300.0, 24), 6))


def subspace_alignment(M, B) -> np.ndarray:
    """cos(M, B B^T) = <M, B B^T>_F / (||M||_F ||B B^T||_F) over the last two axes.

    min_c ||M - c B B^T||_F / ||M||_F equals sqrt(1 - cos^2).
    """
    M, B = np.asarray(M, dtype=np.float64), np.asarray(B, dtype=np.float64)
    P = B @ B.T
    return np.einsum("...de,de->...", M, P) / (np.linalg.norm(M, axis=(-2, -1)) * np.linalg.norm(P))


def distance_to_cBB(M, B) -> np.ndarray:
    """min over c of ||M - c B B^T||_F / ||M||_F."""
    return np.sqrt(np.clip(1.0 - subspace_alignment(M, B) ** 2, 0.0, None))


@dataclass(frozen=True)
class UnitCurves:
    """One model's units: per logged step (T), class (K) and seed (S)."""

    rho1: np.ndarray              # (T, K, S)
    rho2: np.ndarray              # (T, K, S)
    align: np.ndarray             # (T, K, S) cos(M, B B^T)
    norm: np.ndarray              # (T, K, S) ||M||_2
    M: np.ndarray                 # (K, S, d, d) final
    M0: np.ndarray                # (K, S, d, d) at initialisation
    curve: np.ndarray             # (T, K, S) ICL error on the curves' tasks
    final: np.ndarray             # (K, S) ICL error of the final unit on the evaluation set


@dataclass(frozen=True)
class TheoremUnits:
    """Theorem 4.4 on the linear class: softmax units at n in ``n`` x sigma in ``sigma`` (axes 0, 1), S seeds."""

    n: list
    sigma: list
    rho1: np.ndarray              # (N, Sig, S)
    rho2: np.ndarray              # (N, Sig, S)
    rho2_other_basis: np.ndarray  # (N, Sig, S) rho_2 against another random basis B' (the control)


@dataclass(frozen=True)
class FloorStudy:
    """The rho floor: final rho of linear-class units against the training length, per learning-rate schedule."""

    schedules: tuple
    steps: list
    rho1: np.ndarray              # (schedule, T, S)
    rho2: np.ndarray              # (schedule, T, S)


@dataclass(frozen=True)
class LowRankAnalysis:
    """Both models' curves and the reference predictors (per class, (K,))."""

    classes: list
    B: np.ndarray
    log_steps: np.ndarray
    softmax: UnitCurves
    linear: UnitCurves
    zero: np.ndarray              # error of predicting 0
    mean: np.ndarray              # uniform average of the context labels (softmax with M = 0)
    oracle_cBB: np.ndarray        # best M = c B B^T
    oracle_wI: np.ndarray         # best M = w I
    oracle_cBB_scale: np.ndarray
    oracle_wI_scale: np.ndarray
    untrained: np.ndarray         # (K, S) ICL error of the softmax units at initialisation (evaluation set)
    zero_curve_set: np.ndarray    # the same references on the curves' tasks
    oracle_cBB_curve_set: np.ndarray
    oracle_wI_curve_set: np.ndarray

    theorem: TheoremUnits
    floor: FloorStudy
    affine_minus_linear: float    # softmax: max over seeds ||M_affine - M_linear||_F / ||M_linear||_F (0: identical)

    def model(self, m: str) -> UnitCurves:
        return getattr(self, m)


def _rows(cfg: dict, classes) -> list[dict]:
    return [dict(function_class=c, L=cfg["L"], sigma=cfg["sigma"], n=cfg["n"]) for c in classes]


def analyse(run: Run, results: dict[str, SweepResult]) -> LowRankAnalysis:
    """rho_1, rho_2, alignment and ICL error of every unit along pretraining, plus the reference predictors."""
    cfg = run.cfg
    B, spec, classes = basis(cfg), input_spec(cfg), cfg["classes"]

    def per_class(res: SweepResult, values: np.ndarray) -> np.ndarray:
        """(..., C) -> (..., class, seed) by selection."""
        return np.stack([values[..., res.select(function_class=c)] for c in classes], axis=-2)

    unit = {}
    for m in MODELS:
        Mh = results[m].M_history                                               # (T, C, d, d)
        unit[m] = dict(
            rho1=per_class(results[m], rho1(Mh, B)), rho2=per_class(results[m], rho2(Mh, B)),
            align=per_class(results[m], subspace_alignment(Mh, B)), norm=per_class(results[m], spectral_norm(Mh)),
            M=np.stack([results[m].M[results[m].select(function_class=c)] for c in classes]),   # (K, S, d, d)
            M0=np.stack([results[m].M_history[0][results[m].select(function_class=c)] for c in classes]))

    def evaluate():
        out = {}
        ev = dict(spec=spec, eval_seed=cfg["eval_seed"], device=run.device)
        rows = _rows(cfg, classes)
        K, d = len(classes), cfg["d"]
        # reference units, tuned on a separate set: M = c B B^T (the theorem's shape) and M = w I
        grid = np.asarray(SCALE_GRID)
        refs = {}
        for name, base in (("cBB", B @ B.T), ("wI", np.eye(d))):
            Ms = grid[:, None, None] * base                                     # (G, d, d)
            tune, _ = icl_error_of_matrices("softmax", np.tile(Ms, (K, 1, 1)), [r for r in rows for _ in grid],
                                            spec=spec, n_tasks=min(4096, cfg["eval_tasks"]),
                                            eval_seed=cfg["eval_seed"] + 100, device=run.device)
            out[f"oracle_{name}_scale"] = grid[tune.reshape(K, len(grid)).argmin(1)]
            refs[f"oracle_{name}"] = ("softmax", out[f"oracle_{name}_scale"][:, None, None] * base)
        refs["zero"] = ("linear", np.zeros((K, d, d)))                           # predicts 0
        refs["mean"] = ("softmax", np.zeros((K, d, d)))                          # uniform average of the labels
        for m in MODELS:
            res = results[m]
            T, C = res.M_history.shape[:2]
            run_rows = _rows(cfg, [c["function_class"] for c in res.configs])
            out[f"{m}_final"], out[f"{m}_final_se"] = icl_error_of_matrices(m, res.M, run_rows,
                                                                            n_tasks=cfg["eval_tasks"], **ev)
            if m == "softmax":      # the untrained units: the baseline of the softmax-vs-linear check
                out["untrained"], _ = icl_error_of_matrices(m, res.M_history[0], run_rows,
                                                            n_tasks=cfg["eval_tasks"], **ev)
            # every snapshot of every unit, plus this model's reference units, as rows of one evaluation
            # (so the reference lines of the curves are measured on the same tasks as the curves)
            mine = [r for r in refs if refs[r][0] == m]
            Ms = np.concatenate([res.M_history.reshape(T * C, d, d)] + [refs[r][1] for r in mine])
            err, _ = icl_error_of_matrices(m, Ms, run_rows * T + rows * len(mine), n_tasks=cfg["curve_tasks"], **ev)
            out[f"{m}_curve"] = err[: T * C].reshape(T, C)
            for j, r in enumerate(mine):
                out[f"{r}_curve_set"] = err[T * C + j * K: T * C + (j + 1) * K]
        for r, (kind, Ms) in refs.items():
            out[r], _ = icl_error_of_matrices(kind, Ms, rows, n_tasks=cfg["eval_tasks"], **ev)
        return out

    key = {"layout": 3, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "curve_tasks": cfg["curve_tasks"], "eval_seed": cfg["eval_seed"], "grid": list(SCALE_GRID)}
    ev = run.cached("evaluate", key, evaluate)
    curves = {m: UnitCurves(**unit[m], curve=per_class(results[m], ev[f"{m}_curve"]),   # (T, K, S)
                            final=per_class(results[m], ev[f"{m}_final"]))                  # (K, S)
              for m in MODELS}
    refs = {name: ev[name] for name in ("zero", "mean", "oracle_cBB", "oracle_wI", "oracle_cBB_scale",
                                        "oracle_wI_scale", "zero_curve_set", "oracle_cBB_curve_set",
                                        "oracle_wI_curve_set")}
    th = results["theory"]
    B_other = low_rank_basis(cfg["d"], cfg["k"], cfg["basis_seed"] + 1000).numpy()
    ns, sig = [cfg["theory_n"], cfg["n"]], [0.0, cfg["theory_sigma"]]
    idx = np.array([[th.select(n=n, sigma=s) for s in sig] for n in ns])        # (N, Sig, S)
    theorem = TheoremUnits(n=ns, sigma=sig, rho1=rho1(th.M[idx], B), rho2=rho2(th.M[idx], B),
                           rho2_other_basis=rho2(th.M[idx], B_other))
    fl = np.array([[results[f"floor_{sch}_{T}"].M for T in cfg["floor_steps"]] for sch in FLOOR_SCHEDULES])
    floor = FloorStudy(schedules=FLOOR_SCHEDULES, steps=list(cfg["floor_steps"]), rho1=rho1(fl, B), rho2=rho2(fl, B))
    gap = np.nan
    if "lowrank_affine" in classes and "lowrank_linear" in classes:
        Ma, Ml = (curves["softmax"].M[classes.index(c)] for c in ("lowrank_affine", "lowrank_linear"))
        gap = float((np.linalg.norm(Ma - Ml, axis=(-2, -1)) / np.linalg.norm(Ml, axis=(-2, -1))).max())
    return LowRankAnalysis(classes=classes, B=B, log_steps=results["softmax"].log_steps, **curves, **refs,
                           untrained=per_class(results["softmax"], ev["untrained"]),
                           theorem=theorem, floor=floor, affine_minus_linear=gap)
