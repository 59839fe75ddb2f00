"""Window adaptation: the Nadaraya-Watson windows the trained units are held against, tuned per seed.

A Nadaraya-Watson estimator on the sphere is softmax attention with ``M = w I`` (:mod:`softmax_icl.baselines`). Two
are tuned here, on the same data:

* the **oracle**: the bandwidth ``w`` best for each test setting and context length ``n`` (tuned on the task
  distribution it is tested on: the best window for those tasks);
* the **fixed window**: one bandwidth per ``n`` for every setting together, the one whose worst ratio of error to the
  oracle's over the settings is smallest (a window adapted to ``n`` but not to the tasks, free to take its best
  value).

Each seed has its own tuning set, as it has its own pretraining stream: seed ``s`` tunes on tasks ``s T`` to
``(s + 1) T - 1`` of the tuning stream (``T = n_tune``, stream keyed by ``tune_seed``), so the tuning noise is part of
a seed's spread like the training noise of a pretrained unit. Every seed's tuned windows are then evaluated on the
fixed evaluation set (and on its first tasks, the curve set) that the pretrained units meet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...base import resolve_device
from ...baselines import DEFAULT_W_GRID, nw_matrices
from ...metrics import MIN_CHUNK, eval_stream, icl_error_grid, prefix_predictions
from ...models import scores
from ...tasks import InputSpec


def scan_per_seed(tests: list[dict], ns, spec: InputSpec, seeds: int, n_tune: int, tune_seed: int,
                  w_grid=DEFAULT_W_GRID, device="cpu", max_elements: float = 1.5e7) -> np.ndarray:
    """ICL error of ``M = w I`` for every (seed, w, test setting, n) on each seed's own tuning set: (S, W, R, N).

    ``tests``: R dicts with ``function_class``, ``L``, ``sigma``; seed ``s``'s tuning set is tasks ``s n_tune`` to
    ``(s + 1) n_tune - 1`` of the stream of ``tune_seed`` (contexts drawn at max(ns), shorter ones their prefixes, as
    in :func:`~softmax_icl.metrics.icl_error_grid`). One pass over ``seeds * n_tune`` tasks in chunks; each task's
    squared errors (W, R, N) are summed into its seed's block.
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    ns = [int(n) for n in ns]
    lengths = sorted(set(ns))
    order = [lengths.index(n) for n in ns]
    stream = eval_stream(tests, spec, max(ns), tune_seed, dev)
    Mt = torch.as_tensor(nw_matrices(w_grid, spec.d), dtype=torch.float32, device=dev).unsqueeze(0)
    W, R, total = Mt.shape[1], len(tests), seeds * n_tune
    chunk = max(MIN_CHUNK, int(max_elements // (W * R * (max(ns) + 1))))
    sums = torch.zeros((seeds, W, R, len(ns)), dtype=torch.float64, device=dev)
    with torch.no_grad():
        for first in range(0, total, chunk):
            b = min(chunk, total - first)
            batch = stream.sample(b, first_task=first)
            s = scores(batch.x_ctx, batch.x_q, Mt)[0]                                      # (W, b, n)
            pred = prefix_predictions("softmax", s, batch.y_ctx[0], lengths)[..., order]  # (W, R, b, N)
            err = (pred - batch.f_q[0][None, :, :, None]).double() ** 2
            block = torch.div(torch.arange(first, first + b, device=dev), n_tune, rounding_mode="floor")
            sums.index_add_(0, block, err.permute(2, 0, 1, 3))
    return (sums / n_tune).cpu().numpy()


def choose(scan: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From a scan (S, W, R, N): the oracle's bandwidth index per (seed, setting, n), (S, R, N), and the fixed
    window's per (seed, n), (S, N): the index whose worst ratio to the per-setting best over the R settings is
    smallest."""
    best = scan.argmin(1)
    fixed = (scan / scan.min(1, keepdims=True)).max(2).argmin(1)
    return best, fixed


@dataclass(frozen=True)
class TunedWindows:
    """Per seed: the oracle's and the fixed window's bandwidths and their ICL errors on the evaluation set and on
    the curve set (its first ``curve_tasks`` tasks). Axes: seed S, test setting R, context length N."""

    oracle_w: np.ndarray          # (S, R, N)
    oracle: np.ndarray            # (S, R, N) ICL error on the evaluation set
    oracle_curve: np.ndarray      # (S, R, N) on the curve set
    fixed_w: np.ndarray           # (S, N)
    fixed: np.ndarray             # (S, R, N)
    fixed_curve: np.ndarray       # (S, R, N)


def tuned_windows(tests: list[dict], ns, spec: InputSpec, seeds: int, n_tune: int, tune_seed: int, n_eval: int,
                  n_curve: int, eval_seed: int, w_grid=DEFAULT_W_GRID, device="cpu") -> TunedWindows:
    """Tune the oracle and the fixed window on each seed's tuning set (:func:`scan_per_seed`, :func:`choose`) and
    evaluate every bandwidth any seed chose on the evaluation set of ``eval_seed`` (``n_eval`` tasks; the curve set:
    its first ``n_curve``)."""
    w = np.asarray(w_grid, dtype=np.float64)
    best, fixed = choose(scan_per_seed(tests, ns, spec, seeds, n_tune, tune_seed, w, device))
    used = np.unique(np.concatenate([best.ravel(), fixed.ravel()]))
    errs = [icl_error_grid("softmax", nw_matrices(w, spec.d), tests, ns, spec, n_tasks=n, eval_seed=eval_seed,
                           device=device, units=used)[0] for n in (n_eval, n_curve)]          # each (used, R, N)
    R = len(tests)
    pos_best, pos_fixed = np.searchsorted(used, best), np.searchsorted(used, fixed)             # (S, R, N), (S, N)
    r_idx, n_idx = np.arange(R)[None, :, None], np.arange(len(ns))[None, None, :]
    at_best = [e[pos_best, r_idx, n_idx] for e in errs]
    at_fixed = [e[pos_fixed[:, None, :], r_idx, n_idx] for e in errs]
    return TunedWindows(oracle_w=w[best], oracle=at_best[0], oracle_curve=at_best[1], fixed_w=w[fixed],
                        fixed=at_fixed[0], fixed_curve=at_fixed[1])
