"""The population loss over ``M = w B`` (``B = I`` or ``Sigma^{-1}``) by Monte Carlo with common random numbers, split
exactly into a bias term and a noise term: for noisy context labels ``y_i = f(x_i) + sigma eps_i`` and the noiseless
target, conditioning on everything but the noise gives

    E[(sum_i a_i y_i - f(x_q))^2] = E[(sum_i a_i f(x_i) - f(x_q))^2] + sigma^2 E[sum_i a_i^2],

so one pass over the draws gives the loss at every ``sigma`` (and the noise term is averaged over the label noise
exactly). All ``w`` values are stacked along one axis and evaluated in one program. Then the minimum over a grid of
``w`` (refined), its near-optimal interval, the noiseless saturation level and the optimal ``w`` against ``s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..base import Progress, derive_seed, resolve_device
from ..models import scores, segment_weights
from ..tasks import InputSpec, draw_raw, task_values


@dataclass
class LossTerms:
    """Monte Carlo loss terms: ``loss = bias + sigma^2 * noise`` for every (row, matrix).

    ``bias`` and ``noise`` have shape (R, K) (or (R,) when the matrices were paired with the rows);
    ``*_se`` are their standard errors over tasks.
    """

    bias: np.ndarray
    noise: np.ndarray
    bias_se: np.ndarray
    noise_se: np.ndarray
    n_tasks: int

    def loss(self, sigma) -> np.ndarray:
        """Loss at noise level ``sigma`` (scalar, or one per row)."""
        s2 = np.asarray(sigma, dtype=np.float64) ** 2
        if s2.ndim == 1 and self.bias.ndim == 2:
            s2 = s2[:, None]
        return self.bias + s2 * self.noise


def loss_terms(spec: InputSpec, rows: list[dict], matrices, n_tasks: int = 4096, seed: int = 11,
               device="cpu", paired: bool = False, chunk: int | None = None,
               n_draw: int | None = None, desc: str = "population loss") -> LossTerms:
    """Population loss terms of softmax attention with key-query ``matrices`` (K, d, d) on the tasks of ``rows``.

    ``rows``: R dicts with ``function_class``, ``L`` and ``n`` (the noise level enters only through
    :meth:`LossTerms.loss`). Every (row, matrix) pair sees the same draws (inputs at the largest ``n``,
    shorter contexts use prefixes, the query is shared; task coefficients shared), drawn from ``seed``.
    ``paired=True`` evaluates matrix ``r`` on row ``r`` only (R == K). The whole grid is one batched
    computation per chunk of tasks: scores for all matrices at once, then one softmax per distinct n.
    Two calls with the same ``spec`` and ``seed`` see identical draws: task b is the same numbers whatever the
    chunk, and its first n points whatever ``n_draw`` (the counter-based streams, :mod:`softmax_icl.streams`).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    Ms = torch.as_tensor(np.asarray(matrices, dtype=np.float64), dtype=torch.float32, device=dev)
    K, R = Ms.shape[0], len(rows)
    if paired and K != R:
        raise ValueError(f"paired evaluation needs one matrix per row, got {K} matrices for {R} rows")
    n_max = max(int(r["n"]) for r in rows) if n_draw is None else int(n_draw)
    if n_max < max(int(r["n"]) for r in rows):
        raise ValueError(f"n_draw={n_draw} is smaller than the largest n of the rows")
    ns = sorted({int(r["n"]) for r in rows})
    classes = sorted({r["function_class"] for r in rows})
    L = torch.tensor([float(r["L"]) for r in rows], device=dev)
    row_n = np.array([int(r["n"]) for r in rows])
    row_cls = np.array([classes.index(r["function_class"]) for r in rows])
    if chunk is None:   # keep each chunk's largest tensors near 2e7 elements
        chunk = int(min(2048, max(16, 2e7 // (max(K, R) * (n_max + 1)))))
    shape = (R,) if paired else (R, K)
    sums = {k: torch.zeros(shape, dtype=torch.float64, device=dev) for k in ("b", "b2", "v", "v2")}
    stream = derive_seed(seed, 7919)
    done = 0
    bar = Progress(-(-n_tasks // chunk), desc)
    try:
        with torch.no_grad():
            while done < n_tasks:
                b = min(chunk, n_tasks - done)
                raw = draw_raw(spec, b, n_max, stream, dev, first_task=done)
                x = raw["x"]
                xt = raw.get("x_task", x)          # where the task is evaluated (whitened inputs, if any)
                xq = x[:, n_max]
                # f at every input for every row: one call per class on the shared draws, (R, b, n_max + 1)
                f = torch.empty(R, b, n_max + 1, device=dev)
                raw1 = {k: v.unsqueeze(0) for k, v in raw.items()}
                for j, name in enumerate(classes):
                    st = torch.as_tensor(np.nonzero(row_cls == j)[0], device=dev)
                    basis = spec.basis(dev) if name.startswith("lowrank_") else None
                    f[st] = task_values(name, xt.unsqueeze(0), raw1, L[st].unsqueeze(0), basis)[0]
                s_all = scores(x[None, :, :n_max], xq[None], Ms[None])[0]                  # (K, b, n_max)
                for n, rs, pred, v in _prefix_terms(s_all, f, row_n, ns, paired):
                    target = f[rs, :, n_max] if paired else f[rs, :, n_max].unsqueeze(1)
                    err = (pred - target).double() ** 2
                    v = v.double() if paired else v.double().unsqueeze(0).expand(len(rs), K, b)
                    sums["b"][rs] += err.sum(-1)
                    sums["b2"][rs] += (err**2).sum(-1)
                    sums["v"][rs] += v.sum(-1)
                    sums["v2"][rs] += (v**2).sum(-1)
                done += b
                bar.update(-(-done // chunk))
    finally:
        bar.close()
    out = {k: (t / n_tasks).cpu().numpy() for k, t in sums.items()}

    def se(m, m2):
        return np.sqrt(np.clip(m2 - m**2, 0, None) / n_tasks)

    return LossTerms(out["b"], out["v"], se(out["b"], out["b2"]), se(out["v"], out["v2"]), int(n_tasks))


def _prefix_terms(s: torch.Tensor, f: torch.Tensor, row_n: np.ndarray, ns: list[int], paired: bool):
    """For each context length ``n`` of ``ns`` (increasing), the rows evaluated at ``n``, their softmax predictions
    and ``sum_i a_i^2``, from scores ``s`` (K, b, n_max) and labels ``f`` (R, b, n_max + 1) of rows of lengths
    ``row_n``. Not paired: every matrix on every row, predictions (r, K, b), ``sum a^2`` (K, b); paired: matrix r on
    row r only, (r, b) and (r, b).

    Not paired, every matrix is read at every length: the context is cut into the segments between consecutive
    lengths, each segment's weights taken relative to its own largest score (:func:`softmax_icl.models.
    segment_weights`) and the running sums rescaled as segments are added (log-sum-exp), so every score's exp is
    computed once whatever the number of lengths, and a row's weighted labels are summed only up to its own length.
    Paired, each matrix is read at its row's length only: one softmax per length over the rows of that length.
    """
    row_t = torch.as_tensor(row_n, device=s.device)
    if paired:
        for n in ns:
            at = torch.nonzero(row_t == n).flatten()
            if at.numel():
                a = torch.softmax(s[at, :, :n], dim=-1)                                       # (r, b, n)
                yield n, at, (a * f[at, :, :n]).sum(-1), (a**2).sum(-1)
        return
    S1 = torch.zeros((f.shape[0], s.shape[0], s.shape[1]), dtype=s.dtype, device=s.device)
    E, stats = segment_weights(s, [0] + list(ns), inplace=True)
    logm = S0 = S2 = None
    lo = 0
    for k, n in enumerate(ns):
        alive = torch.nonzero(row_t >= n).flatten()                      # rows whose context reaches past lo
        cm, A0, A2 = stats[:, :, k, 0], stats[:, :, k, 1], stats[:, :, k, 2]          # (K, b)
        A1 = torch.einsum("kbm,rbm->rkb", E[:, :, lo:n], f[alive, :, lo:n])          # (r, K, b)
        if logm is None:
            logm, S0, S2 = cm, A0, A2
            S1[alive] = A1
        else:
            new = torch.maximum(logm, cm)
            f_old, f_new = torch.exp(logm - new), torch.exp(cm - new)
            S1[alive] = S1[alive] * f_old + A1 * f_new
            S0, S2, logm = S0 * f_old + A0 * f_new, S2 * f_old**2 + A2 * f_new**2, new
        lo = n
        at = torch.nonzero(row_t == n).flatten()
        if at.numel():
            yield n, at, S1[at] / S0, S2 / S0**2


def refine_minimum(w_grid, loss, log: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Minimiser and minimum of ``loss`` (..., W) over ``w_grid``, refined by a parabola through the three
    grid points around the minimum (in ``log w`` by default, else in ``w``).

    At the ends of the grid the grid value is returned (the minimum may lie beyond the grid).
    """
    w = np.asarray(w_grid, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    lw = np.log(w) if log else w
    j = loss.argmin(-1)
    w_best = w[j].astype(np.float64)
    l_best = np.take_along_axis(loss, j[..., None], -1)[..., 0]
    inner = (j > 0) & (j < w.size - 1)
    if np.any(inner):
        jj = np.clip(j, 1, w.size - 2)
        x0, x1, x2 = lw[jj - 1], lw[jj], lw[jj + 1]
        y0 = np.take_along_axis(loss, (jj - 1)[..., None], -1)[..., 0]
        y1 = np.take_along_axis(loss, jj[..., None], -1)[..., 0]
        y2 = np.take_along_axis(loss, (jj + 1)[..., None], -1)[..., 0]
        den = (x0 - x1) * (x0 - x2) * (x1 - x2)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # an infinite neighbour: no parabola
            a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
            bb = (x2**2 * (y0 - y1) + x1**2 * (y2 - y0) + x0**2 * (y1 - y2)) / den
            cc = (x1 * x2 * (x1 - x2) * y0 + x2 * x0 * (x2 - x0) * y1 + x0 * x1 * (x0 - x1) * y2) / den
            xv = np.clip(-bb / (2 * a), x0, x2)
        ok = inner & (a > 0) & np.isfinite(bb) & np.isfinite(cc)
        with np.errstate(invalid="ignore", over="ignore"):
            w_best = np.where(ok, np.exp(xv) if log else xv, w_best)
            l_best = np.where(ok, a * xv**2 + bb * xv + cc, l_best)
    return w_best, l_best


def near_optimal_interval(w_grid, loss, rel_tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest grid ``w`` whose loss is within ``(1 + rel_tol)`` of the minimum, over (..., W)."""
    w = np.asarray(w_grid, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    ok = loss <= loss.min(-1, keepdims=True) * (1 + rel_tol)
    lo = w[ok.argmax(-1)]
    hi = w[w.size - 1 - ok[..., ::-1].argmax(-1)]
    return lo, hi


def saturation_w(w_grid, bias) -> np.ndarray:
    """The window the optimum saturates at when the noise vanishes: ``argmin_w bias(w)`` (refined)."""
    return refine_minimum(w_grid, bias)[0]


def optimal_w_curve(w_grid, bias_1, noise, snr_values, n: int) -> np.ndarray:
    """Population-optimal ``w`` of the ReLU class against ``s = n L^2 / sigma^2`` at one ``n``.

    For the ReLU (and affine) class ``f`` scales linearly with ``L``, so ``bias(L) = L^2 bias(1)`` and the
    loss is ``L^2 [bias_1(w) + noise(w) n / s]``: the optimum depends on ``L`` and ``sigma`` only through
    ``s``. ``bias_1`` and ``noise`` are the (W,) terms at ``L = 1`` and this ``n``.
    """
    s = np.asarray(snr_values, dtype=np.float64)
    loss = np.asarray(bias_1)[None, :] + (n / s)[:, None] * np.asarray(noise)[None, :]
    return refine_minimum(w_grid, loss)[0]


def half_width_deg(w) -> np.ndarray:
    """Half-width (degrees) of the softmax window with ``M = w I`` on the sphere: ``arccos(1 - ln 2 / w)``."""
    w = np.asarray(w, dtype=np.float64)
    c = np.clip(1 - math.log(2) / w, -1, 1)
    return np.degrees(np.arccos(c))
