"""Theorem 3.4 across ``n`` and ``d``: the ReLU class over ``M = w I``, batched over ``w`` and ``n`` (its own sampler,
independent of :func:`softmax_icl.theory.population.loss_terms`), the noise term's limit for inputs on the sphere and
the fit of its exponent."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..base import Progress, derive_seed
from ..engine import regression as engine
from .fits import SlopeFit, fit_loglog


@dataclass(frozen=True)
class WindowScan:
    """Population terms of the ReLU class (L = 1) over ``M = w I`` at several context lengths.

    ``bias`` and ``noise`` (N, W): ``E[(sum_i a_i f(x_i) - f(x_q))^2]`` at ``L = 1`` and ``E[sum_i a_i^2]``, one
    row per ``ns``; the loss at ``(L, sigma)`` is ``L^2 bias + sigma^2 noise``. ``*_se``: standard errors over tasks.
    """

    d: int
    ns: tuple
    w: np.ndarray
    bias: np.ndarray
    noise: np.ndarray
    bias_se: np.ndarray
    noise_se: np.ndarray
    n_tasks: int


def relu_window_scan(d: int, ns, w, n_tasks: int, seed: int = 0, chunk: int = 32,
                     dtype: torch.dtype = torch.float32, desc: str | None = None) -> WindowScan:
    """Monte Carlo of the ReLU class's bias and noise terms over ``M = w I`` for every ``n`` of ``ns`` at once.

    Independent of :func:`loss_terms` (its own sampler, float64): by rotation invariance the query is fixed at
    ``e_1`` (so ``x_i^T M x_q = w c_i`` with ``c_i`` the first coordinate of ``x_i``); the coefficients
    ``l1, l2 ~ U[-1, 1]`` are averaged in closed form (``E[l^2] = 1/3``, the offset ``b`` cancels because the
    weights sum to one). The contexts of the shorter ``n`` are prefixes of the longest. Every ``w`` sees the same
    draws; for each task and ``w`` the sums over a segment of the context are taken relative to the segment's
    largest ``c`` and combined in log-sum-exp fashion, so no term that matters underflows at large ``w``. The
    inputs are drawn in float64 and the per-task sums computed in ``dtype`` (float32: every weight is at most 1
    relative to the largest, so what float32 drops is below 1e-38 of it); the sums over tasks are float64. In float32
    on the CPU the per-segment sums run in the engine (:func:`softmax_icl.engine.window_sums`, where it is built and
    chosen), else in PyTorch; the two agree to float32 rounding (a test). A progress bar (``desc``, default
    "Theorem 3.4 scan, d = <d>") counts the chunks.
    """
    ns = tuple(sorted(int(n) for n in ns))
    wt = torch.as_tensor(np.asarray(w, dtype=np.float64)).to(dtype)
    W, n_max = wt.numel(), ns[-1]
    bounds = (0,) + ns
    g = torch.Generator().manual_seed(derive_seed(seed, 3413))
    fused = dtype == torch.float32 and engine.available()
    sums = {k: torch.zeros(len(ns), W, dtype=torch.float64) for k in ("b", "b2", "v", "v2")}
    done = 0
    bar = Progress(-(-n_tasks // chunk), desc or f"Theorem 3.4 scan, d = {d}")
    try:
        with torch.no_grad():
            while done < n_tasks:
                b = min(chunk, n_tasks - done)
                x = torch.randn(b, n_max, d, generator=g, dtype=torch.float64)
                x = x / x.norm(dim=-1, keepdim=True)
                q = torch.randn(b, d, generator=g, dtype=torch.float64)
                q = q / q.norm(dim=-1, keepdim=True)
                c = x[..., 0].to(dtype)                                     # (b, n): cosine to the query e_1
                p = (x @ q.unsqueeze(-1)).to(dtype)                         # (b, n, 1): q^T x_i
                G = torch.cat([torch.ones_like(p), p.clamp_min(0), (-p).clamp_min(0)], -1)      # (b, n, 3)
                gq = torch.stack([q[:, 0].clamp_min(0), (-q[:, 0]).clamp_min(0)], -1).to(dtype)  # (b, 2)
                if fused:                    # every segment's sums at once, each exp computed once (the engine)
                    AA = engine.window_sums(wt, c.contiguous(), G[..., 1].contiguous(), G[..., 2].contiguous(), bounds)
                logm = None                                                 # running shift (b, W) of the prefix
                S = None                                                    # prefix sums (b, W, 3) and (b, W)
                for k, n in enumerate(ns):
                    seg = slice(bounds[k], n)
                    cm = c[:, seg].max(-1).values                                              # (b,)
                    if fused:
                        A, A2 = AA[:, k, :, :3], AA[:, k, :, 3]
                    else:
                        E = torch.exp(wt[None, :, None] * (c[:, None, seg] - cm[:, None, None]))    # (b, W, m)
                        A = torch.bmm(E, G[:, seg])                                                # (b, W, 3)
                        A2 = (E * E).sum(-1)                                                       # (b, W)
                    lm = wt[None, :] * cm[:, None]                                             # (b, W) log-scale
                    if S is None:
                        logm, S, S2 = lm, A, A2
                    else:
                        new = torch.maximum(logm, lm)
                        f_old, f_new = torch.exp(logm - new), torch.exp(lm - new)
                        S = S * f_old[..., None] + A * f_new[..., None]
                        S2 = S2 * f_old**2 + A2 * f_new**2
                        logm = new
                    pred = S[..., 1:] / S[..., :1]                                             # (b, W, 2)
                    err = ((pred - gq[:, None, :]) ** 2).sum(-1) / 3.0                         # E over l1, l2
                    v = S2 / S[..., 0] ** 2
                    err, v = err.double(), v.double()
                    sums["b"][k] += err.sum(0)
                    sums["b2"][k] += (err**2).sum(0)
                    sums["v"][k] += v.sum(0)
                    sums["v2"][k] += (v**2).sum(0)
                done += b
                bar.update(-(-done // chunk))
    finally:
        bar.close()
    m = {k: (t / n_tasks).numpy() for k, t in sums.items()}

    def se(a, a2):
        return np.sqrt(np.clip(a2 - a**2, 0, None) / n_tasks)

    return WindowScan(d, ns, np.asarray(w, dtype=np.float64), m["b"], m["v"], se(m["b"], m["b2"]),
                      se(m["v"], m["v2"]), int(n_tasks))


def sphere_noise_limit(d: int, w) -> np.ndarray:
    """``lim_{n->inf} n E[sum_i a_i^2]`` for ``M = w I`` and inputs on ``S^{d-1}``:
    ``E[e^{2 w c}] / E[e^{w c}]^2`` with ``c`` the cosine between two uniform points (density
    ``~ (1 - c^2)^{(d-3)/2}``), by quadrature in ``t = 1 - c`` on a geometric grid. It grows like
    ``w^{(d-1)/2}`` for large ``w`` (the slides' sketch writes ``w^{d/2}``); for ``d = 3``,
    ``E[e^{w c}] = sinh(w) / w``.
    """
    w = np.atleast_1d(np.asarray(w, dtype=np.float64))
    t = np.geomspace(1e-14, 2.0, 20001)
    lt = np.log(t)
    dens = np.exp(0.5 * (d - 3) * (np.log(t) + np.log(np.clip(2 - t, 1e-300, None))))   # unnormalised

    def moment(k):        # E[exp(-k w t)] (t = 1 - c): integral in log t of dens * exp(-k w t) * t
        y = dens[None, :] * np.exp(-k * w[:, None] * t[None, :]) * t[None, :]
        return np.trapezoid(y, lt, axis=-1)

    z = np.trapezoid(dens * t, lt)
    return moment(2.0) * z / moment(1.0) ** 2


def noise_exponent_fit(w, n_noise, w_lo: float, w_hi: float) -> SlopeFit:
    """Power-law fit ``n E[sum a_i^2] ~ w^k`` over ``w_lo <= w <= w_hi``."""
    w, y = np.asarray(w, dtype=np.float64), np.asarray(n_noise, dtype=np.float64)
    m = (w >= w_lo) & (w <= w_hi)
    return fit_loglog(w[m], y[m])
