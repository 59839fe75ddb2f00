"""Low rank: representation errors and ICL errors along pretraining, and the reference predictors.

Every logged snapshot of every unit is evaluated (all snapshots of all units stacked as rows of one evaluation).
Axes: T logged steps, K classes, S seeds (the sweeps' seed axis; every seed meets the same evaluation set).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...metrics import icl_error_of_matrices, rho1, rho2, spectral_norm
from ...book.run import Run
from ...training import SweepResult
from ...tasks import low_rank_basis
from .rivals import SCALE_GRID, tuned_scales
from .sweeps import FLOOR_SCHEDULES, MODELS, basis, input_spec
from .window import WindowUnits, analyse_window


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

    @property
    def distance(self) -> np.ndarray:
        """(T, K, S) min_c ||M - c B B^T||_F / ||M||_F at every logged step."""
        return np.sqrt(np.clip(1.0 - self.align**2, 0.0, None))


@dataclass(frozen=True)
class TheoremUnits:
    """Theorem 4.4 on the linear class: softmax units at n in ``n`` x sigma in ``sigma`` (axes N, Sig), S seeds,
    logged at ``log_steps`` (T)."""

    n: list
    sigma: list
    log_steps: np.ndarray         # (T,)
    rho1: np.ndarray              # (N, Sig, S) final
    rho2: np.ndarray              # (N, Sig, S) final
    rho2_history: np.ndarray      # (T, N, Sig, S)
    rho2_other_basis: np.ndarray  # (N, Sig, S) rho_2 against another random basis B' (the control)
    dist: np.ndarray | None = None           # (N, Sig, S) final min_c ||M - c BB^T|| / ||M||
    dist_history: np.ndarray | None = None   # (T, N, Sig, S)
    dist_other_basis: np.ndarray | None = None  # (N, Sig, S) the same against B'


@dataclass(frozen=True)
class FloorStudy:
    """The rho floor: final rho of linear-class units against the training length, per learning-rate schedule."""

    schedules: tuple
    steps: list
    rho1: np.ndarray              # (schedule, T, S)
    rho2: np.ndarray              # (schedule, T, S)


@dataclass(frozen=True)
class LowRankAnalysis:
    """Both models' curves and the reference predictors.

    The isotropic window M = w I is the rival of the subspace check: its w is tuned per class and seed on the seed's
    own tuning set (:mod:`.rivals`), so its errors are (K, S), on the evaluation set and on the curves' tasks. The
    other references are one predictor per class (K,)."""

    classes: list
    B: np.ndarray
    log_steps: np.ndarray
    softmax: UnitCurves
    linear: UnitCurves
    zero: np.ndarray              # (K,) error of predicting 0
    mean: np.ndarray              # (K,) uniform average of the context labels (softmax with M = 0)
    oracle_cBB: np.ndarray        # (K,) best M = c B B^T (c tuned per class on one tuning set)
    oracle_cBB_scale: np.ndarray  # (K,)
    oracle_wI: np.ndarray         # (K, S) best M = w I, w tuned per class and seed
    oracle_wI_scale: np.ndarray   # (K, S)
    untrained: np.ndarray         # (K, S) ICL error of the softmax units at initialisation (evaluation set)
    zero_curve_set: np.ndarray    # (K,) the references on the curves' tasks
    mean_curve_set: np.ndarray    # (K,)
    oracle_cBB_curve_set: np.ndarray  # (K,)
    oracle_wI_curve_set: np.ndarray   # (K, S)

    theorem: TheoremUnits
    floor: FloorStudy
    window: WindowUnits           # the window sweep on the cosine link (:mod:`.window`)
    affine_minus_linear: float    # softmax: max over seeds ||M_affine - M_linear||_F / ||M_linear||_F (0: identical)

    def model(self, m: str) -> UnitCurves:
        return getattr(self, m)


def _rows(cfg: dict, classes) -> list[dict]:
    return [dict(function_class=c, L=cfg["L"], sigma=cfg["sigma"], n=cfg["n"]) for c in classes]


def _evaluate(run: Run, results: dict[str, SweepResult], B: np.ndarray) -> dict:
    """Every ICL error of the chapter, as one cached computation (dict of arrays).

    The reference windows are tuned first: M = w I per class and seed on the seeds' tuning sets, M = c B B^T per
    class on the first of them. Then, per model, every snapshot of every unit together with that model's reference
    units, as rows of one evaluation on the curves' tasks (the first ``curve_tasks`` of the evaluation set), and the
    final units, the untrained softmax units and the references on the whole evaluation set."""
    cfg, spec, classes = run.cfg, input_spec(run.cfg), run.cfg["classes"]
    rows = _rows(cfg, classes)
    K, d, S = len(classes), cfg["d"], cfg["seeds"]
    ev = dict(spec=spec, eval_seed=cfg["eval_seed"], device=run.device)
    out = {}
    w, _ = tuned_scales(np.eye(d), rows, spec, cfg["eval_seed"], S, cfg["tune_tasks"], run.device)   # (K, S)
    c, _ = tuned_scales(B @ B.T, rows, spec, cfg["eval_seed"], 1, cfg["tune_tasks"], run.device)     # (K, 1)
    out["oracle_wI_scale"], out["oracle_cBB_scale"] = w, c[:, 0]
    wI = (w.reshape(K * S)[:, None, None] * np.eye(d))                         # (K * S, d, d): class-major
    refs = {"oracle_wI": wI, "oracle_cBB": c[:, 0, None, None] * (B @ B.T), "mean": np.zeros((K, d, d))}
    ref_rows = {"oracle_wI": [r for r in rows for _ in range(S)], "oracle_cBB": rows, "mean": rows}
    for m in MODELS:
        res = results[m]
        T, C = res.M_history.shape[:2]
        run_rows = _rows(cfg, [cf["function_class"] for cf in res.configs])
        out[f"{m}_final"], _ = icl_error_of_matrices(m, res.M, run_rows, n_tasks=cfg["eval_tasks"], **ev)
        mine = list(refs) if m == "softmax" else []
        Ms = np.concatenate([res.M_history.reshape(T * C, d, d)] + [refs[r] for r in mine])
        err, _ = icl_error_of_matrices(m, Ms, run_rows * T + [x for r in mine for x in ref_rows[r]],
                                       n_tasks=cfg["curve_tasks"], **ev)
        out[f"{m}_curve"] = err[: T * C].reshape(T, C)
        start = T * C
        for r in mine:
            out[f"{r}_curve_set"] = err[start: start + len(ref_rows[r])]
            start += len(ref_rows[r])
    # on the evaluation set: the untrained softmax units (the baselines) and the softmax references
    res = results["softmax"]
    init_rows = _rows(cfg, [cf["function_class"] for cf in res.configs])
    Ms = np.concatenate([res.M_history[0]] + list(refs.values()))
    err, _ = icl_error_of_matrices("softmax", Ms, init_rows + [x for r in refs for x in ref_rows[r]],
                                   n_tasks=cfg["eval_tasks"], **ev)
    out["untrained"], start = err[: len(init_rows)], len(init_rows)
    for r in refs:
        out[r] = err[start: start + len(ref_rows[r])]
        start += len(ref_rows[r])
    out["zero"], _ = icl_error_of_matrices("linear", np.zeros((K, d, d)), rows, n_tasks=cfg["eval_tasks"], **ev)
    out["zero_curve_set"], _ = icl_error_of_matrices("linear", np.zeros((K, d, d)), rows,
                                                     n_tasks=cfg["curve_tasks"], **ev)
    for r in ("oracle_wI", "oracle_wI_curve_set", "oracle_wI_scale"):
        out[r] = np.asarray(out[r]).reshape(K, S)
    return out


def analyse(run: Run, results: dict[str, SweepResult]) -> LowRankAnalysis:
    """rho_1, rho_2, alignment and ICL error of every unit along pretraining, plus the reference predictors."""
    cfg = run.cfg
    B, classes = basis(cfg), cfg["classes"]

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

    key = {"layout": 4, "train": {m: results[m].sweep for m in MODELS}, "eval_tasks": cfg["eval_tasks"],
           "curve_tasks": cfg["curve_tasks"], "tune_tasks": cfg["tune_tasks"], "eval_seed": cfg["eval_seed"],
           "grid": list(SCALE_GRID)}
    ev = run.cached("evaluate", key, lambda: _evaluate(run, results, B))
    curves = {m: UnitCurves(**unit[m], curve=per_class(results[m], ev[f"{m}_curve"]),   # (T, K, S)
                            final=per_class(results[m], ev[f"{m}_final"]))                  # (K, S)
              for m in MODELS}
    refs = {name: ev[name] for name in ("zero", "mean", "oracle_cBB", "oracle_wI", "oracle_cBB_scale",
                                        "oracle_wI_scale", "zero_curve_set", "mean_curve_set",
                                        "oracle_cBB_curve_set", "oracle_wI_curve_set")}
    th = results["theory"]
    B_other = low_rank_basis(cfg["d"], cfg["k"], cfg["basis_seed"] + 1000).numpy()
    ns, sig = [cfg["theory_n"], cfg["n"]], [0.0, cfg["theory_sigma"]]
    idx = np.array([[th.select(n=n, sigma=s) for s in sig] for n in ns])        # (N, Sig, S)
    theorem = TheoremUnits(n=ns, sigma=sig, log_steps=th.log_steps, rho1=rho1(th.M[idx], B),
                           rho2=rho2(th.M[idx], B), rho2_history=rho2(th.M_history[:, idx], B),
                           rho2_other_basis=rho2(th.M[idx], B_other), dist=distance_to_cBB(th.M[idx], B),
                           dist_history=distance_to_cBB(th.M_history[:, idx], B),
                           dist_other_basis=distance_to_cBB(th.M[idx], B_other))
    fl = np.array([[results[f"floor_{sch}_{T}"].M for T in cfg["floor_steps"]] for sch in FLOOR_SCHEDULES])
    floor = FloorStudy(schedules=FLOOR_SCHEDULES, steps=list(cfg["floor_steps"]), rho1=rho1(fl, B), rho2=rho2(fl, B))
    gap = np.nan
    if "lowrank_affine" in classes and "lowrank_linear" in classes:
        Ma, Ml = (curves["softmax"].M[classes.index(c)] for c in ("lowrank_affine", "lowrank_linear"))
        gap = float((np.linalg.norm(Ma - Ml, axis=(-2, -1)) / np.linalg.norm(Ml, axis=(-2, -1))).max())
    return LowRankAnalysis(classes=classes, B=B, log_steps=results["softmax"].log_steps, **curves, **refs,
                           untrained=per_class(results["softmax"], ev["untrained"]),
                           theorem=theorem, floor=floor, affine_minus_linear=gap,
                           window=analyse_window(run, results["window"], B, results["window"].sweep))
