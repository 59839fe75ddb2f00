"""One-layer attention predictors for in-context regression (SPEC 1.1), stacked over configurations.

Every function takes a leading configuration axis C: inputs (C, B, n, d), weights (C, d, d).

* softmax attention:  f_hat(x_q) = sum_i y_i softmax_i(x_i^T M x_q)   (a Nadaraya-Watson estimator)
* linear attention:   f_hat(x_q) = (1/n) sum_i y_i x_i^T M x_q
* full attention:     W_K, W_Q, W_V in R^{(d+1)x(d+1)} on raw tokens z = [x; y], query [x_q; 0];
  the prediction is the label coordinate of the attention output.
"""

from __future__ import annotations

import math

import torch

MODEL_KINDS = ("softmax", "linear")
PARAMETERISATIONS = ("M", "KQ", "full")


def scores(x_ctx: torch.Tensor, x_q: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Attention scores x_i^T M x_q, shape (C, B, n)."""
    q = torch.einsum("cde,cbe->cbd", M, x_q)
    return torch.matmul(x_ctx, q.unsqueeze(-1)).squeeze(-1)


def _mask_bias(kind: str, mask, dtype):
    return None if mask is None else torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def attention_weights(kind: str, x_ctx, x_q, M, mask=None) -> torch.Tensor:
    """Weights the query puts on each context token, shape (C, B, n).

    ``mask`` (C, 1 or B, n) marks the context slots in use; masked slots get weight 0.
    """
    s = scores(x_ctx, x_q, M)
    if kind == "softmax":
        if mask is not None:
            s = s + _mask_bias(kind, mask, s.dtype)
        return torch.softmax(s, dim=-1)
    if kind == "linear":
        if mask is None:
            return s / s.shape[-1]
        n = mask.sum(-1, keepdim=True).to(s.dtype)
        return s.masked_fill(~mask, 0.0) / n
    raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")


class _Readout(torch.autograd.Function):
    """f_hat = sum_i y_i a_i(x_i^T M x_q), differentiable in M only, with an analytic backward.

    Fusing the readout keeps a training step to two passes over the context (one forward, one
    backward) instead of autograd's chain of small kernels. Tested against autograd.
    """

    @staticmethod
    def forward(ctx, M, x_ctx, y_ctx, x_q, mask, kind):
        s = scores(x_ctx, x_q, M)
        if kind == "softmax":
            if mask is not None:
                s += _mask_bias(kind, mask, s.dtype)
            a = torch.softmax(s, dim=-1)
            pred = (a * y_ctx).sum(-1)
            ctx.save_for_backward(x_ctx, y_ctx, x_q, a, pred)
        else:
            n = s.shape[-1] if mask is None else mask.sum(-1).to(s.dtype)
            yw = y_ctx if mask is None else y_ctx.masked_fill(~mask, 0.0)
            pred = (s * yw).sum(-1) / n
            ctx.save_for_backward(x_ctx, yw, x_q, torch.as_tensor(n, dtype=s.dtype), pred)
        ctx.kind = kind
        return pred

    @staticmethod
    def backward(ctx, g):
        x_ctx, y, x_q, aux, pred = ctx.saved_tensors
        if ctx.kind == "softmax":
            gs = g.unsqueeze(-1) * aux * (y - pred.unsqueeze(-1))            # dL/ds, (C, B, n)
        else:
            n = aux if aux.dim() == 0 else aux.unsqueeze(-1)
            gs = g.unsqueeze(-1) * y / n
        r = torch.matmul(gs.unsqueeze(-2), x_ctx).squeeze(-2)              # sum_i dL/ds_i x_i, (C, B, d)
        return torch.einsum("cbd,cbe->cde", r, x_q), None, None, None, None, None


def predict(kind: str, x_ctx, y_ctx, x_q, M, mask=None) -> torch.Tensor:
    """Prediction of the label at the query, shape (C, B) (differentiable in M)."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")
    return _Readout.apply(M, x_ctx, y_ctx, x_q, mask, kind)


def predict_reference(kind: str, x_ctx, y_ctx, x_q, M, mask=None) -> torch.Tensor:
    """Same as :func:`predict`, written plainly with autograd (the tests compare the two)."""
    return (attention_weights(kind, x_ctx, x_q, M, mask) * y_ctx).sum(-1)


def predict_full(kind: str, x_ctx, y_ctx, x_q, WK, WQ, WV, mask=None) -> torch.Tensor:
    """Prediction of a unit with full key/query/value matrices on raw tokens [x; y]."""
    z = torch.cat([x_ctx, y_ctx.unsqueeze(-1)], dim=-1)                         # (C, B, n, d+1)
    zq = torch.cat([x_q, torch.zeros_like(x_q[..., :1])], dim=-1)                # (C, B, d+1)
    keys = torch.einsum("cef,cbnf->cbne", WK, z)
    query = torch.einsum("cef,cbf->cbe", WQ, zq)
    s = torch.einsum("cbne,cbe->cbn", keys, query)
    if kind == "softmax":
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        a = torch.softmax(s, dim=-1)
    elif kind == "linear":
        n = s.shape[-1] if mask is None else mask.sum(-1, keepdim=True).to(s.dtype)
        a = (s if mask is None else s.masked_fill(~mask, 0.0)) / n
    else:
        raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")
    value_label = torch.einsum("cf,cbnf->cbn", WV[:, -1, :], z)                 # label row of W_V z_i
    return (a * value_label).sum(-1)


class AttentionUnit(torch.nn.Module):
    """C independent attention units held as stacked tensors.

    ``param``: "M" trains M directly; "KQ" trains M = M_K^T M_Q; "full" trains W_K, W_Q, W_V.
    ``init`` (S, ...) per-seed initial values are broadcast to configurations by ``seed_idx``.
    """

    def __init__(self, kind: str, param: str, d: int, seed_idx: torch.Tensor, init_seeds: list[int],
                 init_scale: float, device):
        super().__init__()
        if kind not in MODEL_KINDS:
            raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")
        if param not in PARAMETERISATIONS:
            raise ValueError(f"param={param!r} is not one of {PARAMETERISATIONS}")
        self.kind, self.param, self.d = kind, param, d
        names = {"M": ["M"], "KQ": ["MK", "MQ"], "full": ["WK", "WQ", "WV"]}[param]
        size = d + 1 if param == "full" else d
        per_seed = []
        for s in init_seeds:
            g = torch.Generator().manual_seed(int(s))
            per_seed.append(torch.randn(len(names), size, size, generator=g) * init_scale / math.sqrt(size))
        init = torch.stack(per_seed).to(device)[seed_idx]                            # (C, P, size, size)
        for j, name in enumerate(names):
            self.register_parameter(name, torch.nn.Parameter(init[:, j].clone()))

    def matrix(self) -> torch.Tensor:
        """The key-query matrix M (C, d, d) (for "full": the x-block of W_K^T W_Q)."""
        if self.param == "M":
            return self.M
        if self.param == "KQ":
            return self.MK.transpose(1, 2) @ self.MQ
        return (self.WK.transpose(1, 2) @ self.WQ)[:, : self.d, : self.d]

    def forward(self, batch) -> torch.Tensor:
        if self.param == "full":
            return predict_full(self.kind, batch.x_ctx, batch.y_ctx, batch.x_q, self.WK, self.WQ, self.WV,
                                batch.mask)
        return predict(self.kind, batch.x_ctx, batch.y_ctx, batch.x_q, self.matrix(), batch.mask)
