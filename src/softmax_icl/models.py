"""One-layer attention predictors for in-context regression, for a whole layout of configurations.

Inputs come in the layout of :class:`softmax_icl.tasks.TaskBatch`: R rows of shared inputs ``x_ctx`` (R, B, n, d)
and queries ``x_q`` (R, B, d), G configurations per row with their own labels ``y_ctx`` (R, G, B, n) and their
own key-query matrices ``M`` (R, G, d, d). Predictions are (R, G, B).

* softmax attention:  f_hat(x_q) = sum_i y_i softmax_i(x_i^T M x_q)   (a Nadaraya-Watson estimator)
* linear attention:   f_hat(x_q) = (1/n) sum_i y_i x_i^T M x_q
* full attention:     W_K, W_Q, W_V in R^((d+1)x(d+1)) on raw tokens z = [x; y], query [x_q; 0];
  the prediction is the label coordinate of the attention output.

The scores of the G configurations of a row are formed as ``x_i^T M x_q = x_i . q`` with ``q = M x_q`` (one
d-vector per configuration and task): one batched matrix product ``(G, d) @ (d, n)`` per task, the inputs read once
for all G configurations, and nothing of size d^2 per context point. The gradient in M is
``sum_b (sum_i dL/ds_i x_i) x_q^T``: two more batched products. (Internally the scores are laid out (R, B, G, n),
a task's G rows together; the functions return (R, G, B, n) views.)
"""

from __future__ import annotations

import math

import torch

from .engine import regression as engine

MODEL_KINDS = ("softmax", "linear")
PARAMETERISATIONS = ("M", "KQ", "full")


def check_kind(kind: str) -> None:
    if kind not in MODEL_KINDS:
        raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")


def query_vectors(M: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """``q = M x_q`` for every configuration and task: (R, B, G, d) from ``M`` (R, G, d, d), ``x_q`` (R, B, d)."""
    R, G, d, _ = M.shape
    return torch.matmul(x_q, M.permute(0, 3, 1, 2).reshape(R, d, G * d)).view(R, x_q.shape[1], G, d)


def _scores_rbgn(x_ctx: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Scores (R, B, G, n) from inputs (R, B, n, d) and query vectors (R, B, G, d)."""
    R, B, n, d = x_ctx.shape
    G = q.shape[2]
    return torch.bmm(q.reshape(R * B, G, d), x_ctx.reshape(R * B, n, d).transpose(1, 2)).view(R, B, G, n)


def scores(x_ctx: torch.Tensor, x_q: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """Attention scores ``x_i^T M x_q``, (R, G, B, n), for ``x_ctx`` (R, B, n, d), ``x_q`` (R, B, d) and ``M``
    (R, G, d, d)."""
    return _scores_rbgn(x_ctx, query_vectors(M, x_q)).transpose(1, 2)


def segment_weights(s: torch.Tensor, bounds, inplace: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax weights of scores ``s`` (..., n) cut into the segments ``bounds[k]`` to ``bounds[k + 1] - 1``, each
    relative to its own segment's largest score: ``(E, stats)``, ``E`` (..., n) with ``e_i = exp(s_i - max)`` and
    ``stats`` (..., K, 3) each segment's largest score, sum of weights and sum of squared weights.

    The readout of every prefix length of one context in one pass (the segments between consecutive lengths are
    combined log-sum-exp fashion by the caller): each score's exp is taken once. On the CPU in the engine where it is
    built and chosen (:func:`softmax_icl.engine.segment_exp`; weights below exp(-40) of their segment's largest are
    dropped there, below float32's resolution of a sum >= 1), else in PyTorch. ``inplace``: ``E`` may be ``s``
    itself (the engine writes the weights over the scores).
    """
    bounds = [int(b) for b in bounds]
    if s.device.type == "cpu" and s.dtype == torch.float32 and engine.available():
        E = s.contiguous()                       # a copy unless s is contiguous
        if E.data_ptr() == s.data_ptr() and not inplace:
            E = E.clone()
        return E, engine.segment_exp(E, bounds)
    E = s if inplace else torch.empty_like(s)
    stats = s.new_empty(*s.shape[:-1], len(bounds) - 1, 3)
    for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        cm = s[..., lo:hi].amax(-1)
        e = torch.exp(s[..., lo:hi] - cm[..., None])
        E[..., lo:hi] = e
        stats[..., k, 0], stats[..., k, 1], stats[..., k, 2] = cm, e.sum(-1), (e * e).sum(-1)
    return E, stats


def attention_weights(kind: str, x_ctx, x_q, M) -> torch.Tensor:
    """Weights the query puts on each context token, (R, G, B, n)."""
    check_kind(kind)
    s = scores(x_ctx, x_q, M)
    return torch.softmax(s, dim=-1) if kind == "softmax" else s / s.shape[-1]


class _Readout(torch.autograd.Function):
    """f_hat = sum_i y_i a_i(x_i^T M x_q), differentiable in M only, with an analytic backward.

    Forward: ``q = M x_q``, the scores as one batched product, the weights, one weighted sum. Backward:
    ``dL/ds_i`` elementwise, ``r = sum_i dL/ds_i x_i`` (R, B, G, d) as one batched product, then
    ``dL/dM = sum_b r x_q^T``. Tested against autograd.
    """

    @staticmethod
    def forward(ctx, M, x_ctx, y_ctx, x_q, kind):
        n = x_ctx.shape[2]
        s = _scores_rbgn(x_ctx, query_vectors(M, x_q))                       # (R, B, G, n)
        y = y_ctx.transpose(1, 2)                                            # (R, B, G, n), a view
        if kind == "softmax":
            a = torch.softmax(s, dim=-1)
            ay = a * y
            pred = ay.sum(-1)
            ctx.save_for_backward(x_ctx, x_q, a, ay, pred)
        else:
            pred = torch.linalg.vecdot(s, y) / n
            ctx.save_for_backward(x_ctx, x_q, y)
        ctx.kind, ctx.shape = kind, M.shape
        return pred.transpose(1, 2)                                          # (R, G, B)

    @staticmethod
    def backward(ctx, g):
        R, G, d, _ = ctx.shape
        gt = g.transpose(1, 2).unsqueeze(-1)                                 # (R, B, G, 1)
        if ctx.kind == "softmax":
            x_ctx, x_q, a, ay, pred = ctx.saved_tensors
            gs = torch.addcmul(ay, a, pred.unsqueeze(-1), value=-1).mul_(gt)       # g a_i (y_i - f_hat)
        else:
            x_ctx, x_q, y = ctx.saved_tensors
            gs = y * (gt / y.shape[-1])
        B, n = x_ctx.shape[1:3]
        r = torch.bmm(gs.reshape(R * B, G, n), x_ctx.reshape(R * B, n, d)).view(R, B, G * d)
        gM = torch.matmul(r.transpose(1, 2), x_q).view(R, G, d, d)
        return gM, None, None, None, None


def predict(kind: str, x_ctx, y_ctx, x_q, M) -> torch.Tensor:
    """Prediction of the label at the query, (R, G, B) (differentiable in M)."""
    check_kind(kind)
    return _Readout.apply(M, x_ctx, y_ctx, x_q, kind)


def predict_reference(kind: str, x_ctx, y_ctx, x_q, M) -> torch.Tensor:
    """Same as :func:`predict`, written plainly with autograd (the tests compare the two)."""
    check_kind(kind)
    s = torch.einsum("rbnd,rgde,rbe->rgbn", x_ctx, M, x_q)
    a = torch.softmax(s, dim=-1) if kind == "softmax" else s / s.shape[-1]
    return (a * y_ctx).sum(-1)


def mse_loss(kind: str, batch, M) -> torch.Tensor:
    """Per-configuration training loss (R, G): the mean over tasks of ``(f_hat(x_q) - f(x_q))^2``, for units with
    key-query matrices ``M`` (R, G, d, d) on ``batch``; differentiable in ``M``. (The CPU trainer computes the same
    loss fused with the sampling of its tasks: :class:`softmax_icl.engine.regression.FusedProgram`.)"""
    return ((predict(kind, batch.x_ctx, batch.y_ctx, batch.x_q, M) - batch.f_q) ** 2).mean(dim=-1)


def predict_full(kind: str, x_ctx, y_ctx, x_q, WK, WQ, WV) -> torch.Tensor:
    """Prediction of units with full key/query/value matrices (R, G, d+1, d+1) on raw tokens [x; y]."""
    check_kind(kind)
    R, G = y_ctx.shape[:2]
    z = torch.cat([x_ctx.unsqueeze(1).expand(R, G, *x_ctx.shape[1:]), y_ctx.unsqueeze(-1)], dim=-1)  # (R,G,B,n,d+1)
    zq = torch.cat([x_q, torch.zeros_like(x_q[..., :1])], dim=-1)                                   # (R, B, d+1)
    keys = torch.einsum("rgef,rgbnf->rgbne", WK, z)
    query = torch.einsum("rgef,rbf->rgbe", WQ, zq)
    s = torch.einsum("rgbne,rgbe->rgbn", keys, query)
    a = torch.softmax(s, dim=-1) if kind == "softmax" else s / s.shape[-1]
    value_label = torch.einsum("rgf,rgbnf->rgbn", WV[..., -1, :], z)                              # label row of W_V z_i
    return (a * value_label).sum(-1)


class AttentionUnit(torch.nn.Module):
    """C independent attention units held as stacked tensors.

    ``param``: "M" trains M directly; "KQ" trains M = M_K^T M_Q; "full" trains W_K, W_Q, W_V.
    ``init`` (S, ...) per-seed initial values are broadcast to configurations by ``seed_idx``.
    ``init_identity`` = w0 > 0 adds w0 I to the initial M (for "KQ": sqrt(w0) I to M_K and M_Q; for "full": to the
    x-blocks of W_K and W_Q), i.e. starts from a positive-definite window M ~ w0 I instead of M ~ 0; 0 (the default)
    leaves the random initialisation unchanged.
    ``inner_dim`` = r > 0 ("KQ" only) makes M_K, M_Q r x d instead of d x d (M = M_K^T M_Q is still d x d); their
    entries are drawn with scale ``init_scale / (r d)^(1/4)``, so the initial M has the same entry scale as with
    r = d. 0 (the default) means r = d.
    """

    def __init__(self, kind: str, param: str, d: int, seed_idx: torch.Tensor, init_seeds: list[int],
                 init_scale: float, device, init_identity: float = 0.0, inner_dim: int = 0):
        super().__init__()
        if kind not in MODEL_KINDS:
            raise ValueError(f"model={kind!r} is not one of {MODEL_KINDS}")
        if param not in PARAMETERISATIONS:
            raise ValueError(f"param={param!r} is not one of {PARAMETERISATIONS}")
        self.kind, self.param, self.d = kind, param, d
        names = {"M": ["M"], "KQ": ["MK", "MQ"], "full": ["WK", "WQ", "WV"]}[param]
        size = d + 1 if param == "full" else d
        if inner_dim and (param != "KQ" or int(inner_dim) < d):
            raise ValueError(f"inner_dim={inner_dim!r} needs param='KQ' and an integer >= d = {d} (or 0 for d)")
        rows = int(inner_dim) if inner_dim else size
        scale = init_scale / math.sqrt(size) if rows == size else init_scale / (rows * size) ** 0.25
        per_seed = []
        for s in init_seeds:
            g = torch.Generator().manual_seed(int(s))
            per_seed.append(torch.randn(len(names), rows, size, generator=g) * scale)
        init = torch.stack(per_seed).to(device)[seed_idx]                            # (C, P, rows, size)
        if init_identity:
            if init_identity < 0:
                raise ValueError(f"init_identity={init_identity!r} must be >= 0")
            eye = torch.zeros(rows, size, device=device)
            eye[range(d), range(d)] = 1.0
            shift = torch.zeros(len(names), rows, size, device=device)
            if param == "M":
                shift[0] = init_identity * eye
            else:                                                                # M_K, M_Q (or W_K, W_Q)
                shift[:2] = math.sqrt(init_identity) * eye
            init = init + shift
        for j, name in enumerate(names):
            self.register_parameter(name, torch.nn.Parameter(init[:, j].clone()))

    def matrix(self) -> torch.Tensor:
        """The key-query matrix M (C, d, d) (for "full": the x-block of W_K^T W_Q)."""
        if self.param == "M":
            return self.M
        if self.param == "KQ":
            return self.MK.transpose(1, 2) @ self.MQ
        return (self.WK.transpose(1, 2) @ self.WQ)[:, : self.d, : self.d]

    def _block(self, tensor: torch.Tensor, start: int, R: int, G: int) -> torch.Tensor:
        return tensor[start:start + R * G].view(R, G, *tensor.shape[1:])


    def forward(self, batch, start: int = 0) -> torch.Tensor:
        """Predictions (R, G, B) on ``batch`` of the R x G units held from position ``start`` on."""
        R, G = batch.y_ctx.shape[:2]
        if self.param == "full":
            WK, WQ, WV = (self._block(w, start, R, G) for w in (self.WK, self.WQ, self.WV))
            return predict_full(self.kind, batch.x_ctx, batch.y_ctx, batch.x_q, WK, WQ, WV)
        return predict(self.kind, batch.x_ctx, batch.y_ctx, batch.x_q, self._block(self.matrix(), start, R, G))

    def loss(self, batch, start: int = 0) -> torch.Tensor:
        """Training loss (R, G) of the R x G units held from position ``start`` on: mean squared error of their
        query predictions against ``f(x_q)``."""
        if self.param == "full":
            return ((self(batch, start) - batch.f_q) ** 2).mean(dim=-1)
        R, G = batch.y_ctx.shape[:2]
        return mse_loss(self.kind, batch, self._block(self.matrix(), start, R, G))
