"""The algorithms the trained units are compared with, and their hyperparameter search.

Each algorithm's logits are ``rate * z_beta``:

* ``gd``: one GD step from W_0 = 0, ``(eta/n) sum_i y_i x_i^T x_q``; rate = eta;
* ``kernel_gd``: ``gamma sum_i y_i k_b(x_i, x_q) / sum_j k_b(x_j, x_q)``; rate = gamma;
* ``exp_fixed``: ``(eta/n) sum_i y_i exp(beta (x_i^T x_q - 1))``; exp kernel, fixed rate;
* ``linear_norm``: ``gamma sum_i y_i (1 + b x_i^T x_q) / sum_j (1 + b x_j^T x_q)``; linear kernel, adaptive rate;

with ``k_b(x, x') = exp(beta x^T x')``. ``kernel_gd`` is what softmax SA computes with ``(W_K^T W_Q)_xx = beta I``
and ``W_V``'s y-block ``gamma I``; ``gd`` is linear SA with ``a I``, ``b I``, ``eta = a b``
(:func:`softmax_icl.classification.models.construct_weights`; the tests check both to machine precision).

**Search** (:func:`search_hyperparameters`): the cross-entropy of ``rate * z`` is convex in the rate, so for every
``beta`` on a grid the best rate is found by golden-section search in ``log rate``; ``beta`` is the grid minimiser
refined by a parabola through its neighbours in ``log beta`` (:func:`softmax_icl.theory.refine_minimum`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..theory import refine_minimum
from .metrics import prob_jacobian
from .tasks import ClsBatch


ALGORITHMS = ("gd", "kernel_gd", "exp_fixed", "linear_norm")


#: Which algorithm each trained model is compared with.
MODEL_ALGORITHM = {"linear": "gd", "softmax": "kernel_gd"}


def _kernel_weights(name: str, dot: torch.Tensor, beta: torch.Tensor, ctx_mask=None) -> torch.Tensor:
    """Weights of the context points in an algorithm's step, from ``dot = x_i^T x_q`` (..., n) and ``beta``
    broadcastable to (..., 1); ``ctx_mask`` broadcastable to (..., n)."""
    if ctx_mask is not None:
        ctx_mask = ctx_mask.expand(dot.shape)
        n = ctx_mask.sum(-1, keepdim=True).to(dot.dtype)
    else:
        n = dot.shape[-1]
    if name == "gd":
        w = dot / n
    elif name == "kernel_gd":
        s = beta * dot
        w = torch.softmax(s if ctx_mask is None else s.masked_fill(~ctx_mask, float("-inf")), -1)
    elif name == "exp_fixed":
        w = torch.exp(beta * (dot - 1.0)) / n
    elif name == "linear_norm":
        k = 1.0 + beta * dot
        if ctx_mask is not None:
            k = k.masked_fill(~ctx_mask, 0.0)
        w = k / k.sum(-1, keepdim=True)
    else:
        raise ValueError(f"algorithm={name!r} is not one of {ALGORITHMS}")
    if ctx_mask is not None and name in ("gd", "exp_fixed"):
        w = w.masked_fill(~ctx_mask, 0.0)
    return w


def algorithm_features(name: str, x_ctx, y_ctx, x_q, beta, ctx_mask=None) -> torch.Tensor:
    """``z_beta`` (..., C) such that the algorithm's logits are ``rate * z_beta``.

    ``x_ctx`` (..., n, d), ``y_ctx`` (..., n, C), ``x_q`` (..., d); ``beta`` a number or a tensor
    broadcastable to the batch dims (...); ``ctx_mask`` broadcastable to (..., n).
    """
    dot = torch.matmul(x_ctx, x_q.unsqueeze(-1)).squeeze(-1)                        # (..., n)
    beta = torch.as_tensor(beta, dtype=dot.dtype, device=dot.device)
    beta = beta.unsqueeze(-1) if beta.dim() else beta
    w = _kernel_weights(name, dot, beta, ctx_mask)
    return torch.matmul(w.unsqueeze(-2), y_ctx).squeeze(-2)


def algorithm_features_grid(name: str, batch: "ClsBatch", betas) -> torch.Tensor:
    """``z_beta`` for every beta of a grid at once: (K, G, B, C) for a batch of K configurations."""
    dot = torch.matmul(batch.x_ctx, batch.x_q.unsqueeze(-1)).squeeze(-1)           # (K, B, n)
    b = torch.as_tensor(np.asarray(betas, dtype=np.float64), dtype=dot.dtype, device=dot.device).view(1, 1, -1, 1)
    mask = None if batch.ctx_mask is None else batch.ctx_mask.unsqueeze(-2)          # (K, 1, 1, n)
    w = _kernel_weights(name, dot.unsqueeze(-2), b, mask)                           # (K, B, G, n)
    return torch.matmul(w, batch.y_ctx).transpose(1, 2)                             # (K, G, B, C)


def algorithm_logits(name: str, x_ctx, y_ctx, x_q, beta, rate, ctx_mask=None) -> torch.Tensor:
    z = algorithm_features(name, x_ctx, y_ctx, x_q, beta, ctx_mask)
    rate = torch.as_tensor(rate, dtype=z.dtype, device=z.device)
    return (rate.unsqueeze(-1) if rate.dim() else rate) * z


#: beta grids of the search (``gd`` has no beta). ``linear_norm`` is an ablation free to take its best parameters:
#: beyond beta = 1 its kernel 1 + beta x^T x' takes negative values far from the query (a sharper, signed linear
#: window), which the search may choose where it pays; where its normaliser comes near 0 the cross-entropy is large
#: (or not finite, counted as infinite), so the search leaves that region.
BETA_GRIDS = {
    "gd": np.array([0.0]),
    "kernel_gd": np.geomspace(0.1, 100.0, 31),
    "exp_fixed": np.geomspace(0.1, 100.0, 31),
    "linear_norm": np.unique(np.concatenate([np.geomspace(0.01, 100.0, 33), [0.9, 0.95, 0.99, 1.0]])),
}


RATE_BOUNDS = (1e-3, 1e5)


def _margins(z: torch.Tensor, label: torch.Tensor, class_mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(margin, top)`` with CE(t z) = t top + log sum_c exp(t margin_c) for every t > 0, per context.

    ``d_c = z_c - z_label`` (masked classes -inf), ``top = max_c d_c`` (>= 0: d_label = 0), ``margin = d - top``
    (<= 0). Computed once per search, so each evaluation of the CE is one product, one exp and one sum over the
    classes (no max, gather or mask per evaluation), and no digits are lost to the difference of two large logits.
    ``margin`` is laid out classes first, (C, ..., B) for ``z`` (..., B, C): the sum over the few classes is then
    C - 1 additions of whole contiguous slices (a reduction over a last axis of 2 to 20 entries is several times
    slower on the CPU); ``top`` is (..., B).
    """
    if class_mask is not None:
        z = z.masked_fill(~class_mask, float("-inf"))
    label = label.expand(z.shape[:-1])
    d = z - z.gather(-1, label.unsqueeze(-1))
    top = d.amax(-1, keepdim=True)
    return (d - top).movedim(-1, 0).contiguous(), top.squeeze(-1)


def _ce_of_margins(margin: torch.Tensor, top: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Mean CE over the contexts of logits ``t z`` from :func:`_margins`: t (...,) -> (...). A CE that is not finite
    (a logit that is not, as where linear_norm's normaliser vanishes) counts as infinite."""
    tt = t[..., None]
    e = torch.mul(margin, tt).exp_()                                          # (C, ..., B)
    ce = e.sum(0).log_().add_(tt * top).mean(-1)
    return ce.nan_to_num(nan=math.inf)


def best_rate(z: torch.Tensor, label: torch.Tensor, class_mask=None, iters: int = 36):
    """Golden-section search of ``log t`` minimising the (convex in t) CE of ``t z``; batched over (...).

    ``z`` (..., B, C); ``label`` broadcastable to (..., B). The bracket ``RATE_BOUNDS`` shrinks by 0.618 per
    iteration (36 iterations: to a relative precision of about 1e-6 in t). Returns ``(t, ce)`` each (...).
    """
    lo = torch.full(z.shape[:-2], math.log(RATE_BOUNDS[0]), dtype=z.dtype, device=z.device)
    hi = torch.full_like(lo, math.log(RATE_BOUNDS[1]))
    r = (math.sqrt(5) - 1) / 2
    margin, top = _margins(z, label, class_mask)
    f = lambda u: _ce_of_margins(margin, top, u.exp())  # noqa: E731
    c, e = hi - r * (hi - lo), lo + r * (hi - lo)
    fc, fe = f(c), f(e)
    for _ in range(iters):
        left = fc < fe                       # minimum in [lo, e]: e <- c, new c; else: c <- e, new e
        hi = torch.where(left, e, hi)
        lo = torch.where(left, lo, c)
        new = torch.where(left, hi - r * (hi - lo), lo + r * (hi - lo))
        fnew = f(new)
        c, e, fc, fe = (torch.where(left, new, e), torch.where(left, c, new),
                        torch.where(left, fnew, fe), torch.where(left, fc, fnew))
    t = ((lo + hi) / 2).exp()
    return t, _ce_of_margins(margin, top, t)


def search_hyperparameters(name: str, batch: ClsBatch, beta_grid=None, chunk: int = 8) -> dict:
    """Best ``(beta, rate)`` of an algorithm for each configuration of ``batch`` (K settings).

    For every ``beta`` of the grid the best rate is found by :func:`best_rate`; the best ``beta`` is the
    grid minimiser refined by a parabola in ``log beta`` through it and its neighbours (then its rate is
    searched again). Returns numpy arrays: ``beta`` (K,), ``rate`` (K,), ``ce`` (K,), and the profile
    ``grid`` (G,), ``grid_ce`` (K, G), ``grid_rate`` (K, G).
    """
    grid = np.asarray(BETA_GRIDS[name] if beta_grid is None else beta_grid, dtype=np.float64)
    dt = batch.x_ctx.dtype
    K = batch.x_ctx.shape[0]
    ce_rows, t_rows = [], []
    for g0 in range(0, len(grid), chunk):
        z = algorithm_features_grid(name, batch, grid[g0:g0 + chunk])                             # (K, g, B, C)
        cm = None if batch.class_mask is None else batch.class_mask.unsqueeze(1)
        t, ce = best_rate(z, batch.label_q.unsqueeze(1), cm)
        ce_rows.append(ce)
        t_rows.append(t)
    grid_ce = np.nan_to_num(torch.cat(ce_rows, 1).cpu().numpy().astype(np.float64), nan=np.inf)    # (K, G)
    grid_t = torch.cat(t_rows, 1).cpu().numpy().astype(np.float64)
    j = grid_ce.argmin(1)
    beta = refine_minimum(grid, grid_ce)[0] if len(grid) >= 3 else grid[j].copy()
    b = torch.tensor(beta, dtype=dt, device=batch.x_ctx.device)
    z = algorithm_features(name, batch.x_ctx, batch.y_ctx, batch.x_q, b.view(-1, 1), batch.ctx_mask)
    t, ce = best_rate(z.unsqueeze(1), batch.label_q.unsqueeze(1),
                      None if batch.class_mask is None else batch.class_mask.unsqueeze(1))
    ce_ref = ce[:, 0].cpu().numpy().astype(np.float64)
    rate = t[:, 0].cpu().numpy().astype(np.float64)
    worse = ~(ce_ref <= grid_ce.min(1))                    # keep the grid point if the refinement did not help
    beta = np.where(worse, grid[j], beta)
    rate = np.where(worse, grid_t[np.arange(K), j], rate)
    return {"beta": beta, "rate": rate, "ce": np.minimum(ce_ref, grid_ce.min(1)), "grid": grid,
            "grid_ce": grid_ce, "grid_rate": grid_t}


def algorithm_on(name: str, beta, rate, batch: ClsBatch, jacobian: bool = False, chunk: int = 1024):
    """Logits (S, B, C) (and probability Jacobians) of an algorithm with per-setting ``beta``, ``rate`` (S,)."""
    dt, dev = batch.x_ctx.dtype, batch.x_ctx.device
    b = torch.as_tensor(np.asarray(beta, dtype=np.float64), dtype=dt, device=dev).view(-1, 1)
    r = torch.as_tensor(np.asarray(rate, dtype=np.float64), dtype=dt, device=dev).view(-1, 1)
    B = batch.x_ctx.shape[1]
    outs, jacs = [], []
    for b0 in range(0, B, chunk):
        sl = slice(b0, b0 + chunk)
        x, y, xq = batch.x_ctx[:, sl], batch.y_ctx[:, sl], batch.x_q[:, sl]

        def probs(q, x=x, y=y):
            lg = algorithm_logits(name, x, y, q, b, r, batch.ctx_mask)
            if batch.class_mask is not None:
                lg = lg.masked_fill(~batch.class_mask, float("-inf"))
            return torch.softmax(lg, -1)
        with torch.no_grad():
            outs.append(algorithm_logits(name, x, y, xq, b, r, batch.ctx_mask))
        if jacobian:
            jacs.append(prob_jacobian(probs, xq.clone()).detach())
    return torch.cat(outs, 1), (torch.cat(jacs, 1) if jacobian else None)
