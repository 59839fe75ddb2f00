"""In-context classification with one attention layer (SPEC Part 2; Dragutinovic, Saxe, Singh 2025).

Everything here works on a leading stack of K configurations, like the regression code.

* **Task.** Each context draws its own class prototypes on the sphere ``U^d``: ``P`` prototypes per class,
  ``C`` classes; inputs ``x_i ~ U^d``; the label of ``x`` is the class owning the prototype with the largest
  ``p^T x``. With ``P = 1`` the prototypes are the class vectors ``c_k`` and ``y = argmax_k c_k^T x`` (the
  paper's task, linearly separable: the classes are the Voronoi cells of the ``c_k`` on the sphere). With
  ``P >= 2`` each class is a union of ``P`` cells around its own prototypes: local, and not linearly
  separable (SPEC 2.4).
* **Model.** Tokens ``e_i = [x_i; y_i] in R^{d+C}`` (one-hot ``y_i``), query ``e_q = [x_q; 0]``; full
  ``W_K, W_Q, W_V``; scores ``s_i = e_i^T W_K^T W_Q e_q`` over the context only (the query does not attend
  to itself); linear SA weights ``s_i / n``, softmax SA weights ``softmax_i(s)``; the prediction is the
  softmax of the y-slot of the query's attention update ``sum_i a_i W_V e_i``; the loss is cross-entropy.
* **Algorithms** the trained models are compared with (``logits = rate * z_beta``):

  ====================  ==========================================================  ===================
  ``gd``                one GD step from W_0 = 0: ``(eta/n) sum_i y_i x_i^T x_q``    rate = eta
  ``kernel_gd``         ``gamma sum_i y_i k_b(x_i, x_q) / sum_j k_b(x_j, x_q)``     rate = gamma
  ``exp_fixed``         ``(eta/n) sum_i y_i exp(beta (x_i^T x_q - 1))``              exp kernel, fixed rate
  ``linear_norm``       ``gamma sum_i y_i (1 + b x_i^T x_q) / sum_j (1 + b x_j^T x_q)``  linear kernel,
                                                                                     adaptive rate
  ====================  ==========================================================  ===================

  with ``k_b(x, x') = exp(beta x^T x')``. ``kernel_gd`` is what softmax SA computes with
  ``(W_K^T W_Q)_xx = beta I`` and ``W_V``'s y-block ``gamma I``; ``gd`` is linear SA with ``a I``, ``b I``,
  ``eta = a b`` (:func:`construct_weights`; the tests check both to machine precision).
* **Hyperparameter search** (:func:`search_hyperparameters`): the cross-entropy of ``rate * z`` is convex in
  the rate, so for every ``beta`` on a grid the best rate is found by golden-section search in ``log rate``;
  ``beta`` is the grid minimiser refined by a parabola through its neighbours in ``log beta``.
* **Alignment metrics** (:func:`alignment_metrics`): cosine of mean-centred logits, L2 distance of the
  probability vectors, cosine of the Jacobians ``d y_hat / d x_q``, argmax agreement.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .base import derive_seed, optimise, resolve_device

MODELS = ("softmax", "linear")
ALGORITHMS = ("gd", "kernel_gd", "exp_fixed", "linear_norm")
#: Which algorithm each trained model is compared with.
MODEL_ALGORITHM = {"linear": "gd", "softmax": "kernel_gd"}
METRICS = ("logit_cosine", "prob_l2", "jacobian_cosine", "argmax_agreement")


# ---------------------------------------------------------------------------------------------
# Task sampler


def draw_raw_cls(batch: int, n: int, C_max: int, P_max: int, d_max: int, generator: torch.Generator,
                 device) -> dict:
    """Raw Gaussian draws of ``batch`` contexts: ``zx`` (B, n+1, d_max) inputs (last row = query) and
    ``zp`` (B, C_max, P_max, d_max) prototypes. :func:`make_cls_batch` turns them into tasks of any
    ``C <= C_max``, ``P <= P_max``, ``d <= d_max`` (first ``d`` coordinates, normalised: exactly ``U^d``)."""
    zx = torch.randn(batch, n + 1, d_max, generator=generator, device=device)
    zp = torch.randn(batch, C_max, P_max, d_max, generator=generator, device=device)
    return {"zx": zx, "zp": zp}


@dataclass
class ClsBatch:
    """Contexts for K configurations, padded to common sizes.

    ``x_ctx`` (K, B, n, d_max), ``y_ctx`` (K, B, n, C_max) one-hot, ``x_q`` (K, B, d_max), ``label_q`` (K, B),
    ``label_ctx`` (K, B, n), ``ctx_mask`` (K, 1, n) or None (context slots in use), ``class_mask``
    (K, 1, C_max) or None (classes in use), ``protos`` (K, B, C_max, P_max, d_max).
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    label_q: torch.Tensor
    label_ctx: torch.Tensor
    ctx_mask: torch.Tensor | None
    class_mask: torch.Tensor | None
    protos: torch.Tensor

    def chunk(self, sl: slice) -> "ClsBatch":
        """The contexts ``sl`` of the batch axis."""
        return ClsBatch(self.x_ctx[:, sl], self.y_ctx[:, sl], self.x_q[:, sl], self.label_q[:, sl],
                        self.label_ctx[:, sl], self.ctx_mask, self.class_mask, self.protos[:, sl])


def _as_col(v, K, device, dtype=torch.long) -> torch.Tensor:
    t = torch.as_tensor(v, device=device, dtype=dtype)
    return t.expand(K).clone() if t.dim() == 0 else t


def make_cls_batch(raw: dict, C, P, d, n, dtype=torch.float32) -> ClsBatch:
    """Tasks from raw draws already gathered per configuration (leading dims (K, B)).

    ``C``, ``P``, ``d``, ``n``: ints or (K,) tensors, each at most the raw draws' size. Labels are
    ``argmax_k max_p p_{k,p}^T x`` over the classes and prototypes in use.
    """
    zx, zp = raw["zx"].to(dtype), raw["zp"].to(dtype)
    K, B, n1, dm = zx.shape
    Cm, Pm = zp.shape[2], zp.shape[3]
    dev = zx.device
    C, P, d, n = (_as_col(v, K, dev) for v in (C, P, d, n))
    if bool((d < dm).any()):
        dmask = (torch.arange(dm, device=dev).view(1, -1) < d.view(-1, 1)).to(dtype)      # (K, dm)
        zx = zx * dmask.view(K, 1, 1, dm)
        zp = zp * dmask.view(K, 1, 1, 1, dm)
    x = zx / zx.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    pr = zp / zp.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    sc = torch.matmul(x, pr.flatten(2, 3).transpose(-1, -2))                               # (K, B, n+1, Cm*Pm)
    # unused prototypes and classes get a score below any real one (real scores lie in [-1, 1])
    if bool((P < Pm).any()) or bool((C < Cm).any()):
        pmask = torch.arange(Pm, device=dev).view(1, -1) < P.view(-1, 1)                   # (K, Pm)
        cmask = torch.arange(Cm, device=dev).view(1, -1) < C.view(-1, 1)                   # (K, Cm)
        keep = (cmask.unsqueeze(-1) & pmask.unsqueeze(-2)).flatten(1)                       # (K, Cm*Pm)
        sc = sc + torch.where(keep, 0.0, -10.0).to(dtype).view(K, 1, 1, -1)
    cmask = torch.arange(Cm, device=dev).view(1, -1) < C.view(-1, 1)
    lab = torch.div(sc.argmax(-1), Pm, rounding_mode="floor")                             # owner class, (K, B, n+1)
    n_ctx = n1 - 1
    y = torch.nn.functional.one_hot(lab[:, :, :n_ctx], Cm).to(dtype)
    ctx_mask = None
    if bool((n < n_ctx).any()):
        ctx_mask = torch.arange(n_ctx, device=dev).view(1, 1, -1) < n.view(-1, 1, 1)
    class_mask = cmask.view(K, 1, Cm) if bool((C < Cm).any()) else None
    return ClsBatch(x[:, :, :n_ctx], y, x[:, :, n_ctx], lab[:, :, n_ctx], lab[:, :, :n_ctx], ctx_mask, class_mask,
                    pr)


def sample_contexts(batch: int, n: int, C: int, d: int, P: int = 1, seed: int = 0, device="cpu",
                    dtype=torch.float32) -> ClsBatch:
    """``batch`` contexts of one setting (K = 1), drawn from ``seed``."""
    g = torch.Generator(device=device).manual_seed(int(seed))
    raw = draw_raw_cls(batch, n, C, P, d, g, device)
    return make_cls_batch({k: v.unsqueeze(0) for k, v in raw.items()}, C, P, d, n, dtype)


# ---------------------------------------------------------------------------------------------
# The attention models


def _masked_weights(kind_softmax: torch.Tensor, s: torch.Tensor, ctx_mask) -> torch.Tensor:
    """Attention weights for a stack: softmax where ``kind_softmax`` (K,) is true, ``s / n`` elsewhere."""
    K = s.shape[0]
    if ctx_mask is None:
        n = s.shape[-1]
        lin = s / n
        soft = torch.softmax(s, dim=-1)
    else:
        n = ctx_mask.sum(-1, keepdim=True).to(s.dtype)
        lin = s.masked_fill(~ctx_mask, 0.0) / n
        soft = torch.softmax(s.masked_fill(~ctx_mask, float("-inf")), dim=-1)
    if bool(kind_softmax.all()):
        return soft
    if not bool(kind_softmax.any()):
        return lin
    return torch.where(kind_softmax.view(K, 1, 1), soft, lin)


def sa_logits(kind_softmax: torch.Tensor, WK: torch.Tensor, WQ: torch.Tensor, WV: torch.Tensor, x_ctx, y_ctx, x_q,
              ctx_mask=None) -> torch.Tensor:
    """Logits (K, B, C_max): the y-slot of the query's attention update.

    ``WK, WQ, WV`` (K, D, D) with ``D = d_max + C_max``; ``kind_softmax`` (K,) bool. Only the x-columns of
    ``A = W_K^T W_Q`` (the query's y-slot is 0) and the y-rows of ``W_V`` enter.
    """
    dm = x_ctx.shape[-1]
    A = WK.transpose(1, 2) @ WQ                                                   # (K, D, D)
    u = torch.einsum("kef,kbf->kbe", A[:, :, :dm], x_q)                             # A e_q, (K, B, D)
    s = torch.matmul(x_ctx, u[..., :dm].unsqueeze(-1)).squeeze(-1) \
        + torch.matmul(y_ctx, u[..., dm:].unsqueeze(-1)).squeeze(-1)                # (K, B, n)
    a = _masked_weights(kind_softmax, s, ctx_mask)
    hx = torch.matmul(a.unsqueeze(-2), x_ctx).squeeze(-2)                           # (K, B, dm)
    hy = torch.matmul(a.unsqueeze(-2), y_ctx).squeeze(-2)                           # (K, B, C_max)
    WVy = WV[:, dm:, :]                                                             # (K, C_max, D)
    return torch.einsum("kcf,kbf->kbc", WVy[:, :, :dm], hx) + torch.einsum("kcf,kbf->kbc", WVy[:, :, dm:], hy)


def sa_logits_reference(kind: str, WK, WQ, WV, x_ctx, y_ctx, x_q) -> torch.Tensor:
    """Plain token-level transformer forward pass (one unmasked configuration stack), for the tests."""
    E = torch.cat([x_ctx, y_ctx], dim=-1)                                           # (K, B, n, D)
    eq = torch.cat([x_q, torch.zeros_like(y_ctx[..., 0, :])], dim=-1)               # (K, B, D)
    keys = torch.einsum("kef,kbnf->kbne", WK, E)
    query = torch.einsum("kef,kbf->kbe", WQ, eq)
    values = torch.einsum("kef,kbnf->kbne", WV, E)
    s = torch.einsum("kbne,kbe->kbn", keys, query)
    a = torch.softmax(s, -1) if kind == "softmax" else s / s.shape[-1]
    update = torch.einsum("kbn,kbne->kbe", a, values)
    return update[..., x_ctx.shape[-1]:]


def masked_ce(logits: torch.Tensor, labels: torch.Tensor, class_mask=None) -> torch.Tensor:
    """Cross-entropy per context (..., B) with unused classes masked out."""
    if class_mask is not None:
        logits = logits.masked_fill(~class_mask, float("-inf"))
    labels = labels.expand(logits.shape[:-1])
    return torch.logsumexp(logits, -1) - logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def construct_weights(kind: str, d: int, C: int, a: float, b: float, dtype=torch.float64):
    """``W_K, W_Q, W_V`` (D, D) with ``(W_K^T W_Q)_xx = a I`` and ``W_V``'s y-block ``b I`` (zero elsewhere).

    Linear SA then computes the GD step with ``eta = a b``; softmax SA the kernel GD step with
    ``beta = a``, ``gamma = b`` (Propositions 3.1 and 3.2 of the paper).
    """
    D = d + C
    WK = torch.zeros(D, D, dtype=dtype)
    WQ = torch.zeros(D, D, dtype=dtype)
    WV = torch.zeros(D, D, dtype=dtype)
    WK[:d, :d] = torch.eye(d, dtype=dtype)
    WQ[:d, :d] = a * torch.eye(d, dtype=dtype)
    WV[d:, d:] = b * torch.eye(C, dtype=dtype)
    return WK, WQ, WV


def read_off(A: np.ndarray, WV: np.ndarray, d: int, C: int, d_max: int | None = None) -> dict:
    """GD hyperparameters implied by trained weights, and how far the weights are from the ansatz.

    ``A = W_K^T W_Q`` and ``W_V`` (..., D, D). ``scale`` = tr(A_xx)/d (``a`` or ``beta``);
    ``value`` = the identity coefficient of the class-centred y-block of ``W_V`` (``b`` or ``gamma``;
    a multiple of the all-ones matrix adds the same number to every logit and cancels in the softmax).
    Deviations are relative Frobenius norms: ``xx_dev`` of A_xx from ``scale I``, ``yy_dev`` of the centred
    y-block from ``value (I - 11^T/C)``, ``yx_rel`` of A's y-rows (x-columns) and ``vx_rel`` of W_V's
    x-columns in its y-rows, each relative to the block of the ansatz.
    """
    dm = d if d_max is None else d_max
    A, WV = np.asarray(A, dtype=np.float64), np.asarray(WV, dtype=np.float64)
    Axx = A[..., :d, :d]
    Ayx = A[..., dm:dm + C, :d]
    Wyy = WV[..., dm:dm + C, dm:dm + C]
    Wyx = WV[..., dm:dm + C, :d]
    Pc = np.eye(C) - np.ones((C, C)) / C
    Wc = Pc @ Wyy @ Pc
    scale = np.trace(Axx, axis1=-2, axis2=-1) / d
    value = np.trace(Wc, axis1=-2, axis2=-1) / (C - 1)
    fro = lambda M: np.linalg.norm(M, axis=(-2, -1))  # noqa: E731
    return {
        "scale": scale, "value": value, "product": scale * value,
        "xx_dev": fro(Axx - scale[..., None, None] * np.eye(d)) / fro(Axx),
        "yy_dev": fro(Wc - value[..., None, None] * Pc) / fro(Wc),
        "yx_rel": fro(Ayx) / fro(Axx), "vx_rel": fro(Wyx) / fro(Wc),
    }


# ---------------------------------------------------------------------------------------------
# The comparison algorithms


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


#: beta grids of the search (``gd`` has no beta; ``linear_norm`` needs 1 + beta x^T x' > 0, so beta < 1).
BETA_GRIDS = {
    "gd": np.array([0.0]),
    "kernel_gd": np.geomspace(0.1, 100.0, 31),
    "exp_fixed": np.geomspace(0.1, 100.0, 31),
    "linear_norm": np.concatenate([np.geomspace(0.01, 0.8, 14), [0.9, 0.95, 0.99, 1.0]]),
}
RATE_BOUNDS = (1e-3, 1e5)


def _ce_of_scale(z: torch.Tensor, label: torch.Tensor, t: torch.Tensor, class_mask=None) -> torch.Tensor:
    """Mean CE of logits ``t z``: z (..., B, C), t (...,) -> (...)."""
    return masked_ce(t[..., None, None] * z, label, class_mask).mean(-1)


def best_rate(z: torch.Tensor, label: torch.Tensor, class_mask=None, iters: int = 36):
    """Golden-section search of ``log t`` minimising the (convex in t) CE of ``t z``; batched over (...).

    ``z`` (..., B, C); ``label`` broadcastable to (..., B). The bracket ``RATE_BOUNDS`` shrinks by 0.618 per
    iteration (36 iterations: to a relative precision of about 1e-6 in t). Returns ``(t, ce)`` each (...).
    """
    lo = torch.full(z.shape[:-2], math.log(RATE_BOUNDS[0]), dtype=z.dtype, device=z.device)
    hi = torch.full_like(lo, math.log(RATE_BOUNDS[1]))
    r = (math.sqrt(5) - 1) / 2
    f = lambda u: _ce_of_scale(z, label, u.exp(), class_mask)  # noqa: E731
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
    return t, _ce_of_scale(z, label, t, class_mask)


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
    grid_ce = torch.cat(ce_rows, 1).cpu().numpy().astype(np.float64)                               # (K, G)
    grid_t = torch.cat(t_rows, 1).cpu().numpy().astype(np.float64)
    j = grid_ce.argmin(1)
    beta = grid[j].copy()
    if len(grid) >= 3:
        lg = np.log(np.where(grid > 0, grid, 1.0))
        for k in range(K):
            i = j[k]
            if 0 < i < len(grid) - 1:
                x0, x1, x2 = lg[i - 1:i + 2]
                y0, y1, y2 = grid_ce[k, i - 1:i + 2]
                den = (x0 - x1) * (x0 - x2) * (x1 - x2)
                A_ = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
                B_ = (x2**2 * (y0 - y1) + x1**2 * (y2 - y0) + x0**2 * (y1 - y2)) / den
                if A_ > 0:
                    beta[k] = float(np.exp(np.clip(-B_ / (2 * A_), x0, x2)))
    b = torch.tensor(beta, dtype=dt, device=batch.x_ctx.device)
    z = algorithm_features(name, batch.x_ctx, batch.y_ctx, batch.x_q, b.view(-1, 1), batch.ctx_mask)
    t, ce = best_rate(z.unsqueeze(1), batch.label_q.unsqueeze(1),
                      None if batch.class_mask is None else batch.class_mask.unsqueeze(1))
    ce_ref = ce[:, 0].cpu().numpy().astype(np.float64)
    rate = t[:, 0].cpu().numpy().astype(np.float64)
    worse = ce_ref > grid_ce.min(1)                        # keep the grid point if the refinement did not help
    beta = np.where(worse, grid[j], beta)
    rate = np.where(worse, grid_t[np.arange(K), j], rate)
    return {"beta": beta, "rate": rate, "ce": np.minimum(ce_ref, grid_ce.min(1)), "grid": grid,
            "grid_ce": grid_ce, "grid_rate": grid_t}


# ---------------------------------------------------------------------------------------------
# Alignment metrics


def prob_jacobian(fn, x_q: torch.Tensor) -> torch.Tensor:
    """``d y_hat / d x_q`` for a batch: ``fn`` maps x_q (..., d) to probabilities (..., C), each context's output
    depending only on its own query. Returns (..., C, d): one reverse pass per class (torch.func.jacrev) of
    the outputs summed over contexts, which is exact because contexts do not interact."""
    from torch.func import jacrev

    out = fn(x_q)
    C = out.shape[-1]
    jac = jacrev(lambda xq: fn(xq).reshape(-1, C).sum(0))(x_q)          # (C, ..., d)
    return jac.movedim(0, -2)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-30)


def alignment_metrics(logits_a, logits_b, jac_a=None, jac_b=None, class_mask=None) -> dict:
    """Per-context alignment of two predictors (tensors (..., B, C); Jacobians (..., B, C, d)).

    ``logit_cosine``: cosine of the mean-centred logits; ``prob_l2``: ||p_a - p_b||_2; ``jacobian_cosine``:
    cosine of the flattened Jacobians of the probabilities; ``argmax_agreement``: 1 where the argmaxes agree.
    """
    if class_mask is not None:
        m = class_mask.to(logits_a.dtype)
        cnt = m.sum(-1, keepdim=True)
        ca = (logits_a - (logits_a * m).sum(-1, keepdim=True) / cnt) * m
        cb = (logits_b - (logits_b * m).sum(-1, keepdim=True) / cnt) * m
        la, lb = logits_a.masked_fill(~class_mask, float("-inf")), logits_b.masked_fill(~class_mask, float("-inf"))
    else:
        ca = logits_a - logits_a.mean(-1, keepdim=True)
        cb = logits_b - logits_b.mean(-1, keepdim=True)
        la, lb = logits_a, logits_b
    pa, pb = torch.softmax(la, -1), torch.softmax(lb, -1)
    out = {"logit_cosine": _cos(ca, cb), "prob_l2": (pa - pb).norm(dim=-1),
           "argmax_agreement": (la.argmax(-1) == lb.argmax(-1)).to(logits_a.dtype)}
    if jac_a is not None and jac_b is not None:
        out["jacobian_cosine"] = _cos(jac_a.flatten(-2), jac_b.flatten(-2))
    return out


def per_context_stats(logits, label, class_mask=None) -> dict:
    """CE loss, probability of the correct class, entropy of y_hat, and correctness, per context."""
    if class_mask is not None:
        logits = logits.masked_fill(~class_mask, float("-inf"))
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    label = label.expand(logits.shape[:-1])
    lp_true = logp.gather(-1, label.unsqueeze(-1)).squeeze(-1)
    ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)
    return {"ce": -lp_true, "p_correct": lp_true.exp(), "entropy": ent,
            "correct": (logits.argmax(-1) == label).to(logits.dtype)}


# ---------------------------------------------------------------------------------------------
# Batched training


@dataclass(frozen=True)
class ClsSweep:
    """A grid of classification pretraining configurations: models x prototypes x (C, d) x n x seeds."""

    models: tuple = ("softmax", "linear")
    prototypes: tuple = (1,)                 # P per class; 1 = the paper's task
    shapes: tuple = ((5, 5),)                # (C, d) pairs
    n: tuple = (100,)
    seeds: int = 1
    steps: int = 1000
    batch_size: int = 128
    lr: float = 0.01
    init_scale: float = 0.5
    data_seed: int = 0
    init_seed: int = 1
    log_every: int = 20
    lr_schedule: str = "cosine"              # constant | cosine (decay to lr_final_frac * lr)
    lr_final_frac: float = 0.05

    def configs(self) -> list[dict]:
        """Flattened grid, seed varying fastest."""
        rows = itertools.product(self.models, self.prototypes, self.shapes, self.n, range(self.seeds))
        return [dict(model=m, P=int(p), C=int(c), d=int(d), n=int(n), seed=int(s)) for m, p, (c, d), n, s in rows]

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """Padding sizes (n_max, C_max, P_max, d_max) shared by every configuration of the sweep."""
        return (max(self.n), max(c for c, _ in self.shapes), max(self.prototypes), max(d for _, d in self.shapes))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ClsResult:
    """Per-configuration training history and final weights (numpy)."""

    sweep: dict
    configs: list[dict]
    dims: tuple
    log_steps: np.ndarray                    # (T,)
    A_history: np.ndarray                    # (T, K, D, D)   W_K^T W_Q
    WV_history: np.ndarray                   # (T, K, D, D)
    loss_history: np.ndarray                 # (T, K) mean training CE since the previous log
    final: dict                              # WK, WQ, WV: (K, D, D)
    timings: dict = field(default_factory=dict)

    def select(self, **where) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.configs) if all(c[k] == v for k, v in where.items())],
                        dtype=int)


class ClsStream:
    """Per-seed online context streams for a stack of configurations (common random numbers).

    Configurations that share a seed see the same raw draws; those that also share ``(C, P, d)`` see the
    same contexts, so labels are computed once per distinct ``(seed, C, P, d)`` and gathered.
    """

    def __init__(self, configs: list[dict], dims, seeds: list[int], device, dtype=torch.float32):
        self.n_max, self.C_max, self.P_max, self.d_max = dims
        self.device, self.dtype = torch.device(device), dtype
        self.gens = [torch.Generator(device=self.device).manual_seed(int(s)) for s in seeds]
        keys = [(c["seed"], c["C"], c["P"], c["d"]) for c in configs]
        uniq = sorted(set(keys))
        self.group_idx = torch.tensor([uniq.index(k) for k in keys], device=self.device)
        col = lambda i: torch.tensor([u[i] for u in uniq], device=self.device)  # noqa: E731
        self.g_seed, self.g_C, self.g_P, self.g_d = (col(i) for i in range(4))
        self.n = torch.tensor([c["n"] for c in configs], device=self.device)

    def sample(self, batch_size: int) -> ClsBatch:
        raws = [draw_raw_cls(batch_size, self.n_max, self.C_max, self.P_max, self.d_max, g, self.device)
                for g in self.gens]
        raw = {k: torch.stack([r[k] for r in raws])[self.g_seed] for k in raws[0]}
        g = make_cls_batch(raw, self.g_C, self.g_P, self.g_d, self.n_max, self.dtype)
        i = self.group_idx
        ctx_mask = None
        if bool((self.n < self.n_max).any()):
            ctx_mask = torch.arange(self.n_max, device=self.device).view(1, 1, -1) < self.n.view(-1, 1, 1)
        return ClsBatch(g.x_ctx[i], g.y_ctx[i], g.x_q[i], g.label_q[i], g.label_ctx[i], ctx_mask,
                        None if g.class_mask is None else g.class_mask[i], g.protos[i])


def init_weights(configs: list[dict], dims, init_seed: int, init_scale: float, device, dtype=torch.float32):
    """Initial ``W_K, W_Q, W_V`` (K, D, D): N(0, init_scale^2 / D) entries drawn per seed index."""
    _, C_max, _, d_max = dims
    D = d_max + C_max
    seeds = sorted({c["seed"] for c in configs})
    per = {}
    for s in seeds:
        g = torch.Generator().manual_seed(derive_seed(init_seed, s))
        per[s] = torch.randn(3, D, D, generator=g, dtype=torch.float64) * init_scale / math.sqrt(D)
    W = torch.stack([per[c["seed"]] for c in configs]).to(device=device, dtype=dtype)            # (K, 3, D, D)
    return [W[:, j].clone().requires_grad_(True) for j in range(3)]


def train_cls_sweep(sweep: ClsSweep, device="auto", configs: list[dict] | None = None, progress=None,
                    desc: str = "training") -> ClsResult:
    """Train every configuration of ``sweep`` (or the subset ``configs``) as one batched program.

    The loss is the *sum* over configurations of each one's mean CE, Adam is elementwise, and each seed
    index has its own data stream and initial weights: a configuration trained alone (same sweep, subset
    ``configs``) follows exactly the trajectory it follows inside the sweep.
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    configs = sweep.configs() if configs is None else configs
    dims = sweep.dims
    data_seeds = [derive_seed(sweep.data_seed, s) for s in range(sweep.seeds)]
    stream = ClsStream(configs, dims, data_seeds, dev)
    WK, WQ, WV = init_weights(configs, dims, sweep.init_seed, sweep.init_scale, dev)
    is_soft = torch.tensor([c["model"] == "softmax" for c in configs], device=dev)
    if sweep.lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule={sweep.lr_schedule!r} is not one of ('constant', 'cosine')")

    def step_loss():
        b = stream.sample(sweep.batch_size)
        logits = sa_logits(is_soft, WK, WQ, WV, b.x_ctx, b.y_ctx, b.x_q, b.ctx_mask)
        return masked_ce(logits, b.label_q, b.class_mask).mean(-1)

    def cosine(step):
        return sweep.lr_final_frac + (1 - sweep.lr_final_frac) * 0.5 * (1 + math.cos(math.pi * (step - 1) / sweep.steps))

    def snapshot():
        return {"A": (WK.transpose(1, 2) @ WQ).cpu().numpy().copy(), "WV": WV.detach().cpu().numpy().copy()}

    hist, seconds = optimise([WK, WQ, WV], step_loss, sweep.steps, sweep.lr, sweep.log_every, snapshot,
                             lr_factor=cosine if sweep.lr_schedule == "cosine" else None, progress=progress, desc=desc)
    K = len(configs)
    final = {k: v.detach().cpu().numpy() for k, v in zip(("WK", "WQ", "WV"), (WK, WQ, WV))}
    return ClsResult(sweep=sweep.to_dict(), configs=configs, dims=dims, log_steps=hist["steps"],
                     A_history=hist["A"], WV_history=hist["WV"], loss_history=hist["loss"],
                     final=final, timings={"train_seconds": seconds, "configs": K, "device": str(dev)})


def model_logits_from(A: torch.Tensor, WV: torch.Tensor, is_soft: torch.Tensor, x_ctx, y_ctx, x_q, ctx_mask=None):
    """Logits of trained models given ``A = W_K^T W_Q`` (K, D, D) and ``W_V`` (W_K = I, W_Q = A gives the same
    scores as the trained pair)."""
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    return sa_logits(is_soft, eye, A, WV, x_ctx, y_ctx, x_q, ctx_mask)


def fixed_batch(settings: list[dict], dims, seed: int, n_contexts: int, device="cpu") -> ClsBatch:
    """A fixed set of contexts for each setting (dicts with C, P, d, n), all from one seed (common random
    numbers across settings): the evaluation and search sets."""
    stream = ClsStream([dict(s, seed=0) for s in settings], dims, [derive_seed(seed, 0)], device)
    return stream.sample(n_contexts)


def take(batch: ClsBatch, idx, sl: slice = slice(None)) -> ClsBatch:
    """Settings ``idx`` (and contexts ``sl``) of a batch."""
    idx = torch.as_tensor(idx, device=batch.x_ctx.device)
    return ClsBatch(batch.x_ctx[idx, sl], batch.y_ctx[idx, sl], batch.x_q[idx, sl], batch.label_q[idx, sl],
                    batch.label_ctx[idx, sl], None if batch.ctx_mask is None else batch.ctx_mask[idx],
                    None if batch.class_mask is None else batch.class_mask[idx], batch.protos[idx, sl])


def models_on(A, WV, is_soft, batch: ClsBatch, idx, chunk: int = 512, jacobian: bool = False):
    """Logits (K, B, C_max) (and probability Jacobians (K, B, C_max, d_max)) of K models on their settings
    ``idx`` (K,) of ``batch``, in chunks of contexts."""
    B = batch.x_ctx.shape[1]
    outs, jacs = [], []
    for b0 in range(0, B, chunk):
        sub = take(batch, idx, slice(b0, b0 + chunk))
        with torch.no_grad():
            outs.append(model_logits_from(A, WV, is_soft, sub.x_ctx, sub.y_ctx, sub.x_q, sub.ctx_mask))
        if jacobian:
            def probs(xq, sub=sub):
                lg = model_logits_from(A, WV, is_soft, sub.x_ctx, sub.y_ctx, xq, sub.ctx_mask)
                if sub.class_mask is not None:
                    lg = lg.masked_fill(~sub.class_mask, float("-inf"))
                return torch.softmax(lg, -1)
            jacs.append(prob_jacobian(probs, sub.x_q.clone()).detach())
    return torch.cat(outs, 1), (torch.cat(jacs, 1) if jacobian else None)


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
