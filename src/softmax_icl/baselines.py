"""Reference predictors that need no pretraining.

The Nadaraya-Watson oracle is softmax attention with M = w I (a Gaussian kernel on the sphere,
SPEC 1.1) whose bandwidth is tuned per test setting on a *tuning* set drawn from its own seed, and
reported on the evaluation set. It is an oracle because it is tuned on the test distribution.
"""

from __future__ import annotations

import numpy as np

from .metrics import icl_error_of_matrices
from .tasks import InputSpec

DEFAULT_W_GRID = tuple(np.round(np.geomspace(0.05, 2000, 57), 6))


def nw_matrices(w_grid, d: int, sqrt_cov=None) -> np.ndarray:
    """Stack of M = w I (or w Sigma^-1 when ``sqrt_cov`` is given), shape (W, d, d)."""
    base = np.eye(d) if sqrt_cov is None else np.diag(1.0 / np.asarray(sqrt_cov, dtype=np.float64) ** 2)
    return np.asarray(w_grid, dtype=np.float64)[:, None, None] * base


def scan_bandwidth(rows: list[dict], spec: InputSpec, w_grid=DEFAULT_W_GRID, n_tasks: int = 4096, seed: int = 11,
                   device="cpu", **kw) -> np.ndarray:
    """ICL error of the Nadaraya-Watson estimator M = w I for every (row, w); shape (R, W).

    All (row, w) pairs are one batched evaluation.
    """
    W = len(w_grid)
    Ms = nw_matrices(w_grid, spec.d)
    big_rows = [r for r in rows for _ in range(W)]
    big_M = np.tile(Ms, (len(rows), 1, 1))
    err, _ = icl_error_of_matrices("softmax", big_M, big_rows, spec, n_tasks=n_tasks, eval_seed=seed,
                                   device=device, **kw)
    return err.reshape(len(rows), W)


def nadaraya_watson_oracle(rows: list[dict], spec: InputSpec, w_grid=DEFAULT_W_GRID, n_tune: int = 4096,
                           n_eval: int = 10_000, tune_seed: int = 11, eval_seed: int = 3, device="cpu"):
    """Best bandwidth per row (tuned on ``tune_seed``), and its ICL error on the ``eval_seed`` set.

    Returns ``(w_best (R,), error (R,), stderr (R,))``.
    """
    scan = scan_bandwidth(rows, spec, w_grid, n_tasks=n_tune, seed=tune_seed, device=device)
    w_best = np.asarray(w_grid)[scan.argmin(axis=1)]
    err, se = icl_error_of_matrices("softmax", nw_matrices(w_best, spec.d), rows, spec, n_tasks=n_eval,
                                    eval_seed=eval_seed, device=device)
    return w_best, err, se
