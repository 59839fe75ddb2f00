"""Reference predictors that need no pretraining.

The Nadaraya-Watson oracle is softmax attention with M = w I (a Gaussian kernel on the sphere)
whose bandwidth is tuned per test setting and context length on a *tuning* set drawn
from its own seed, and reported on the evaluation set. It is an oracle because it is tuned on the
test distribution. Every bandwidth, test setting and context length is one batched evaluation
(:func:`softmax_icl.metrics.icl_error_grid`).

The one-step GD baselines of the classification chapter live in :mod:`softmax_icl.classification`.
"""

from __future__ import annotations

import numpy as np

from .metrics import icl_error_grid
from .tasks import InputSpec

DEFAULT_W_GRID = tuple(np.round(np.geomspace(0.05, 2000, 57), 6))


def nw_matrices(w_grid, d: int) -> np.ndarray:
    """Stack of M = w I, shape (W, d, d)."""
    return np.asarray(w_grid, dtype=np.float64)[:, None, None] * np.eye(d)


def scan_bandwidth(tests: list[dict], ns, spec: InputSpec, w_grid=DEFAULT_W_GRID, n_tasks: int = 4096,
                   seed: int = 11, device="cpu") -> np.ndarray:
    """ICL error of the Nadaraya-Watson estimator M = w I for every (w, test setting, n): (W, R, N).

    ``tests``: R dicts with ``function_class``, ``L``, ``sigma``; ``ns``: context lengths.
    """
    err, _ = icl_error_grid("softmax", nw_matrices(w_grid, spec.d), tests, ns, spec, n_tasks=n_tasks,
                            eval_seed=seed, device=device)
    return err


def nadaraya_watson_oracle(tests: list[dict], ns, spec: InputSpec, w_grid=DEFAULT_W_GRID, n_tune: int = 4096,
                           n_eval: int = 10_000, tune_seed: int = 11, eval_seed: int = 3, device="cpu",
                           shared: bool = False):
    """Best bandwidth per (test setting, n), tuned on ``tune_seed``, and its ICL error on ``eval_seed``.

    Returns ``(w_best, error, stderr)``, each (R, N). With ``shared=True`` also the *fixed-window* baseline: one
    bandwidth per n for all R settings together, the one whose worst ratio to the per-setting best over the settings
    is smallest on the tuning set (a window that is not adapted to the tasks, free to take its best value); then
    returns ``(w_best, error, stderr, w_fixed (N,), error_fixed (R, N))``.
    """
    w = np.asarray(w_grid, dtype=np.float64)
    scan = scan_bandwidth(tests, ns, spec, w, n_tasks=n_tune, seed=tune_seed, device=device)           # (W, R, N)
    best = scan.argmin(0)                                                                                # (R, N)
    fixed = (scan / scan.min(0, keepdims=True)).max(1).argmin(0)                                        # (N,)
    # errors only of the bandwidths tuned for some setting (the same numbers as evaluating the whole grid)
    used = np.unique(np.concatenate([best.ravel(), fixed])) if shared else np.unique(best)
    err, se = icl_error_grid("softmax", nw_matrices(w, spec.d), tests, ns, spec, n_tasks=n_eval,
                             eval_seed=eval_seed, device=device, units=used)
    pick = lambda a: np.take_along_axis(a, np.searchsorted(used, best)[None], 0)[0]  # noqa: E731
    if not shared:
        return w[best], pick(err), pick(se)
    k = np.searchsorted(used, fixed)                                                                     # (N,)
    err_fixed = err[k, :, np.arange(len(k))].T                                                           # (R, N)
    return w[best], pick(err), pick(se), w[fixed], err_fixed
