"""Low rank: the window in the range of the projection (the window sweep, :func:`.sweeps.window_sweep`).

The authors' rebuttal suspects that for a nonlinear link preceded by the shared projection the attention learns the
projection and a nearest-neighbour window in its range, sized by the link's Lipschitz constant and the noise. On the
cosine link f(x) = cos(omega a^T B^T x) (Lipschitz constant omega) a learned M = c BB^T + (small) weighs context
point i by exp(c <B^T x_i, B^T x_q>): the larger ``|c|``, the narrower the window in col(B). The link is even and the
inputs are symmetric, so M and -M attend equally well (-M to the antipodal projections, whose labels are the same):
the sign of c is immaterial and the window's scale is ``|c|``.

Axes: T logged steps, P settings (omega, sigma) of the sweep, S seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...book.run import Run
from ...metrics import icl_error_of_matrices, rho2
from ...training import SweepResult
from .rivals import SCALE_GRID, tuned_scales
from .sweeps import input_spec, window_settings


def subspace_scale(M, B) -> np.ndarray:
    """The in-subspace scale c = tr(B^T M B) / k of ``M`` (..., d, d), for ``B`` (d, k) with orthonormal columns;
    returns (...). For M = c BB^T + N with B^T N B = 0 it is exactly c; in general it is the mean eigenvalue of
    the k x k block B^T M B (the signed scale; the window statistic is its modulus)."""
    M, B = np.asarray(M, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return np.einsum("dk,...de,ek->...", B, M, B) / B.shape[1]


@dataclass(frozen=True)
class WindowUnits:
    """The window sweep's softmax units on the cosine link, with the best window of the theorem's shape."""

    omega: np.ndarray             # (P,) Lipschitz constant of the link, 4 L
    sigma: np.ndarray             # (P,) label noise
    log_steps: np.ndarray         # (T,)
    scale: np.ndarray             # (T, P, S) |c| = |tr(B^T M B)| / k
    rho2: np.ndarray              # (T, P, S) rho_2(M, B)
    best_scale: np.ndarray        # (P,) c of the best M = c BB^T (tuned on the first seed's tuning set)
    best_over_mean: np.ndarray    # (P,) that window's ICL error over the plain average's (M = 0), evaluation set
    lipschitz: tuple              # setting positions of the omega grid (increasing omega, at link_sigma)
    noise: tuple                  # setting positions of (low sigma, high sigma) at noise_omega


def _best_windows(run: Run, B: np.ndarray) -> dict:
    """The best M = c BB^T per setting (c tuned on the first seed's tuning set) and its ICL error over the plain
    average's on the evaluation set."""
    cfg = run.cfg
    rows = [dict(function_class="lowrank_cosine", L=L, sigma=s, n=cfg["n"]) for L, s in window_settings(cfg)]
    spec, P, d = input_spec(cfg), len(rows), cfg["d"]
    c, _ = tuned_scales(B @ B.T, rows, spec, cfg["eval_seed"], 1, cfg["tune_tasks"], run.device)    # (P, 1)
    Ms = np.concatenate([c[:, 0, None, None] * (B @ B.T), np.zeros((P, d, d))])
    err, _ = icl_error_of_matrices("softmax", Ms, rows * 2, spec, n_tasks=cfg["eval_tasks"],
                                   eval_seed=cfg["eval_seed"], device=run.device)
    return {"best_scale": c[:, 0], "best_over_mean": err[:P] / err[P:]}


def analyse_window(run: Run, res: SweepResult, B: np.ndarray, sweep_key: dict) -> WindowUnits:
    """``|c|`` and rho_2 of every logged snapshot of the window sweep's units, and the best windows (cached)."""
    cfg = run.cfg
    settings = window_settings(cfg)
    idx = np.stack([res.select(setting=s) for s in settings])                      # (P, S)
    Mh = res.M_history[:, idx]                                                      # (T, P, S, d, d)
    key = {"layout": 1, "train": sweep_key, "tune_tasks": cfg["tune_tasks"], "eval_tasks": cfg["eval_tasks"],
           "eval_seed": cfg["eval_seed"], "grid": list(SCALE_GRID)}
    best = run.cached("window_best", key, lambda: _best_windows(run, B))
    grid = [settings.index((om / 4.0, float(cfg["link_sigma"]))) for om in cfg["link_omegas"]]
    noise = [settings.index((cfg["noise_omega"] / 4.0, float(s))) for s in cfg["noise_sigmas"]]
    return WindowUnits(omega=np.array([4.0 * L for L, _ in settings]), sigma=np.array([s for _, s in settings]),
                       log_steps=np.asarray(res.log_steps), scale=np.abs(subspace_scale(Mh, B)), rho2=rho2(Mh, B),
                       best_scale=np.asarray(best["best_scale"]), best_over_mean=np.asarray(best["best_over_mean"]),
                       lipschitz=tuple(grid), noise=tuple(noise))
