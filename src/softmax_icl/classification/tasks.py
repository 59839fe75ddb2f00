"""The in-context classification task (SPEC 2.1; Dragutinovic, Saxe, Singh 2025): context sampler.

Each context draws its own class prototypes on the sphere ``U^d``: ``P`` prototypes per class, ``C`` classes;
inputs ``x_i ~ U^d``; the label of ``x`` is the class owning the prototype with the largest ``p^T x``. With
``P = 1`` the prototypes are the class vectors ``c_k`` and ``y = argmax_k c_k^T x`` (linearly separable: the
classes are the Voronoi cells of the ``c_k`` on the sphere). With ``P >= 2`` each class is a union of ``P`` cells
around its own prototypes: local, and not linearly separable.

Everything works on a leading stack of K configurations, like the regression code; configurations that share a
seed share their raw draws (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import derive_seed


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
