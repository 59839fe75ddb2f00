"""Low rank: the reference windows M = s A (A = I: the best isotropic window; A = B B^T: the theorem's shape), their
scale s tuned per class, and per seed on a tuning set of the seed's own, apart from the evaluation set.

The tuning set of seed s is the evaluation stream keyed by ``derive_seed(eval_seed, TUNE_KEY, s)``: its own inputs,
tasks and noise, shared by every class and scale of that seed (common random numbers), drawn from another key than
the evaluation set (``derive_seed(eval_seed, 7919)``, :func:`softmax_icl.metrics.eval_stream`) and than the
pretraining streams. The scale is the minimiser over a log-spaced grid, refined by the vertex of the parabola through
the tuning error at the grid minimum and its two neighbours (in log s), so a rival is tuned more finely than its
grid.
"""

from __future__ import annotations

import numpy as np
import torch

from ...base import derive_seed, resolve_device
from ...models import predict
from ...tasks import InputSpec
from ...training import TaskStream

#: Scales scanned for the reference units M = s B B^T and M = s I (24 log-spaced points, ratio 1.35).
SCALE_GRID = tuple(np.round(np.geomspace(0.3, 300.0, 24), 6))
#: The key that sets the tuning sets apart from the evaluation set and the pretraining streams.
TUNE_KEY = 104729


def refine_log_argmin(grid, err) -> np.ndarray:
    """The minimiser of ``err`` over the log-spaced ``grid`` (G,), refined by a parabola in log s.

    ``err`` (..., G). At the grid minimum j (0 < j < G - 1) the vertex of the parabola through (log s[j-1],
    log s[j], log s[j+1]) and their errors, clipped to [s[j-1], s[j+1]]; at an end of the grid, that end.
    Returns (...,) scales."""
    g = np.log(np.asarray(grid, dtype=np.float64))
    err = np.asarray(err, dtype=np.float64)
    G = g.size
    j = err.argmin(-1)
    jc = np.clip(j, 1, G - 2)
    e0, e1, e2 = (np.take_along_axis(err, (jc + o)[..., None], -1)[..., 0] for o in (-1, 0, 1))
    h0, h2 = g[jc] - g[jc - 1], g[jc + 1] - g[jc]
    # vertex of the parabola through (-h0, e0), (0, e1), (h2, e2), measured from g[jc]
    num = h2**2 * (e0 - e1) - h0**2 * (e2 - e1)
    den = h2 * (e0 - e1) + h0 * (e2 - e1)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(den > 0, 0.5 * num / den, 0.0)
    step = np.clip(step, -h0, h2)
    inner = (j > 0) & (j < G - 1)
    return np.exp(np.where(inner, g[jc] + step, g[j]))


def tuning_errors(kind: str, Ms, rows: list[dict], spec: InputSpec, keys: list[int], n_tasks: int,
                  device="cpu", chunk: int = 512) -> np.ndarray:
    """ICL error of the units ``Ms`` (U, d, d) on each of S tuning sets (``keys``, one per seed).

    ``rows``: U dicts (``function_class``, ``L``, ``sigma``, ``n``; one ``n``): unit u is evaluated in setting
    ``rows[u]``. Set s holds tasks 0 .. n_tasks - 1 of the stream keyed by ``keys[s]``; its inputs are shared by the
    U units (one batched prediction per chunk, the seeds as its row axis). Returns (S, U) mean squared errors."""
    dev = resolve_device(device) if isinstance(device, str) else device
    n = int(rows[0]["n"])
    S, U = len(keys), len(rows)
    configs = [dict(function_class=r["function_class"], L=float(r["L"]), sigma=float(r["sigma"]), n=n, seed=s)
               for s in range(S) for r in rows]
    stream = TaskStream(spec, configs, sorted({r["function_class"] for r in rows}), n, list(keys), dev)
    if stream.index.shape != (S, U):
        raise ValueError("the tuning sets must lay the units out as seeds x units")
    Mt = torch.as_tensor(np.asarray(Ms), dtype=torch.float32, device=dev).unsqueeze(0).expand(S, U, -1, -1)
    total, done = torch.zeros(S, U, dtype=torch.float64, device=dev), 0
    with torch.no_grad():
        while done < n_tasks:
            b = min(chunk, n_tasks - done)
            batch = stream.sample(b, first_task=done)
            total += ((predict(kind, batch.x_ctx, batch.y_ctx, batch.x_q, Mt) - batch.f_q).double() ** 2).sum(-1)
            done += b
    return (total / n_tasks).cpu().numpy()


def tuned_scales(base, rows: list[dict], spec: InputSpec, eval_seed: int, seeds: int, n_tasks: int,
                 device="cpu", grid=SCALE_GRID) -> tuple[np.ndarray, np.ndarray]:
    """The softmax window M = s ``base`` (d, d) tuned per setting (``rows``: K settings) and per seed.

    Returns the refined scales (K, S) and the tuning errors over the grid (K, S, G)."""
    grid = np.asarray(grid, dtype=np.float64)
    K, G = len(rows), grid.size
    Ms = np.tile(grid[:, None, None] * np.asarray(base)[None], (K, 1, 1))       # (K * G, d, d): class-major
    keys = [derive_seed(eval_seed, TUNE_KEY, s) for s in range(seeds)]
    err = tuning_errors("softmax", Ms, [r for r in rows for _ in grid], spec, keys, n_tasks, device)
    err = err.reshape(seeds, K, G).transpose(1, 0, 2)                             # (K, S, G)
    return refine_log_argmin(grid, err), err
