"""One-layer, one-head attention units for in-context classification, and their batched trainer.

Tokens ``e_i = [x_i; y_i] in R^{d+C}`` (one-hot ``y_i``), query ``e_q = [x_q; 0]``; full ``W_K, W_Q, W_V``;
scores ``s_i = e_i^T W_K^T W_Q e_q`` over the context only (the query does not attend to itself); linear SA
weights ``s_i / n``, softmax SA weights ``softmax_i(s)``; the prediction is the softmax of the y-slot of the
query's attention update ``sum_i a_i W_V e_i``; the loss is cross-entropy. :func:`construct_weights` builds the
weights of the paper's Propositions 3.1-3.2; :func:`read_off` reads the implied GD hyperparameters back.
Training is one batched program over a stack of configurations (:func:`train_cls_sweep`, via ``base.optimise``).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..base import derive_seed, optimise, resolve_device
from ..engine.common import Update
from .metrics import masked_ce
from ..engine import classification as engine
from ..engine.classification import FusedLoss, FusedStep, library
from .plan import context_lengths
from .tasks import ClsBatch, ClsStream, ContextProcess, ProcessStream, task_spec, take, uses_process


MODELS = ("softmax", "linear")
#: Integer codes of the attention units: softmax; linear normalised by 1/n (the paper's); linear unnormalised
#: (weights s_i, the standard form, which cannot adapt to the context length).
MODEL_CODES = {"softmax": 0, "linear": 1, "linear_sum": 2}


def model_codes(configs: list[dict], device="cpu") -> torch.Tensor:
    """(K,) codes of the configurations' models."""
    return torch.tensor([MODEL_CODES[c["model"]] for c in configs], device=device)


def model_kind(configs: list[dict], device="cpu") -> torch.Tensor | str:
    """The configurations' models as :func:`sa_logits` takes them in a training loop: the model's name when every
    configuration uses the same one, else their codes. Decided on the host, so the forward pass never reads a
    tensor to choose a branch."""
    names = {c["model"] for c in configs}
    return names.pop() if len(names) == 1 else model_codes(configs, device)


def _masked_weights(kind, s: torch.Tensor, ctx_mask) -> torch.Tensor:
    """Attention weights for a stack: ``kind`` a model name of :data:`MODEL_CODES` (every configuration), or per
    configuration (K,) model codes or a bool tensor (true: softmax, false: linear ``s / n``). A tensor selects
    elementwise, without reading its values on the host."""
    if ctx_mask is None:
        n = s.shape[-1]
        raw = s
        soft = torch.softmax(s, dim=-1)
    else:
        n = ctx_mask.sum(-1, keepdim=True).to(s.dtype)
        raw = s.masked_fill(~ctx_mask, 0.0)
        soft = torch.softmax(s.masked_fill(~ctx_mask, float("-inf")), dim=-1)
    lin = raw / n
    if isinstance(kind, str):
        if kind not in MODEL_CODES:
            raise ValueError(f"model={kind!r} is not one of {tuple(MODEL_CODES)}")
        return (soft, lin, raw)[MODEL_CODES[kind]]
    code = torch.where(kind, 0, 1) if kind.dtype == torch.bool else kind
    c = code.view(s.shape[0], 1, 1)
    return torch.where(c == 0, soft, torch.where(c == 1, lin, raw))


def sa_logits(kind_softmax, WK: torch.Tensor, WQ: torch.Tensor, WV: torch.Tensor, x_ctx, y_ctx, x_q,
              ctx_mask=None) -> torch.Tensor:
    """Logits (K, B, C_max): the y-slot of the query's attention update.

    ``WK, WQ, WV`` (K, D, D) with ``D = d_max + C_max``; ``kind_softmax`` a model name, or (K,) bool or model codes
    (:func:`_masked_weights`). Only the x-columns of
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


@dataclass(frozen=True)
class ClsSweep:
    """A grid of classification pretraining configurations: models x tasks x (C, d) x n x seeds."""

    models: tuple = ("softmax", "linear")
    tasks: tuple = (("uniform", 1, 0.0, 0),)  # task specs (reading, P, tau, k): tasks.task_spec
    shapes: tuple = ((5, 5),)                # (C, d) pairs
    n: tuple = (100,)
    n_min: int = 0                           # > 0: each context's length is uniform in n_min..n
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

    def __post_init__(self):
        # a process of one's own may be given as its ContextProcess instance: registered here, kept as a task spec
        tasks = (self.tasks,) if isinstance(self.tasks, ContextProcess) else self.tasks
        object.__setattr__(self, "tasks", tuple(task_spec(t) if isinstance(t, ContextProcess) else t for t in tasks))

    def configs(self) -> list[dict]:
        """Flattened grid, seed varying fastest."""
        rows = itertools.product(self.models, self.tasks, self.shapes, self.n, range(self.seeds))
        return [dict(model=m, reading=t[0], P=int(t[1]), tau=float(t[2]), k=int(t[3]), C=int(c), d=int(d), n=int(n),
                     n_min=int(self.n_min), seed=int(s)) for m, t, (c, d), n, s in rows]

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """Padding sizes (n_max, C_max, P_max, d_max) shared by every configuration of the sweep."""
        return (max(self.n), max(c for c, _ in self.shapes), max(t[1] for t in self.tasks),
                max(d for _, d in self.shapes))

    def to_dict(self) -> dict:
        return asdict(self)

    def train(self, device="auto", desc: str = "training", progress=None) -> "ClsResult":
        """Train the whole grid (:func:`train_cls_sweep`; ``progress`` as :meth:`softmax_icl.training.Sweep.train`)."""
        return train_cls_sweep(self, device, desc=desc, progress=progress)


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


@contextlib.contextmanager
def torch_threads(n: int):
    """PyTorch's intra-op thread count set to ``n`` for the block, then restored."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def train_cls_sweep(sweep: ClsSweep, device="auto", configs: list[dict] | None = None, progress=None,
                    desc: str = "training") -> ClsResult:
    """Train every configuration of ``sweep`` (or the subset ``configs``) as one batched program.

    The loss is the *sum* over configurations of each one's mean CE, Adam is elementwise, and each seed index has
    its own task streams (step ``t`` of training draws contexts ``0 .. batch_size - 1`` of step ``t``) and initial
    weights: a configuration trained alone (same sweep, subset ``configs``) follows exactly the trajectory it
    follows inside the sweep. On the CPU (float32, with a C compiler) the tasks and the loss and its gradient in
    ``A = W_K^T W_Q`` and ``W_V`` come from the compiled engine (:mod:`.native`; a chunk of contexts per seed drawn
    and read while in cache, :class:`.engine.FusedStep`, or with a mixture of context lengths the step's tasks
    drawn to buffers reused every step, then read), on ``torch.get_num_threads()`` threads of its own, and so do the
    gradients in ``W_K``, ``W_Q``, Adam's update (PyTorch's, to float rounding) and the next step's ``A``
    (:class:`softmax_icl.engine.common.Update`: PyTorch's forty-odd small operations for them cost a millisecond a step
    once the engine has swept the caches). PyTorch's few operations of the loop (the logged snapshots) run on one
    thread: its OpenMP workers spin after each parallel region and would take the cores from the engine's threads.
    Elsewhere everything is PyTorch (:func:`sa_logits`, :func:`.metrics.masked_ce`, ``torch.optim.Adam``).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    configs = sweep.configs() if configs is None else configs
    dims = sweep.dims
    for t in sweep.tasks:                        # an unknown reading fails here, before any compute
        task_spec(*t)
    seeds = [derive_seed(sweep.data_seed, s) for s in range(sweep.seeds)]
    stream = (ProcessStream(configs, dims, seeds, dev) if uses_process(configs) else ClsStream(configs, dims, seeds, dev))
    WK, WQ, WV = init_weights(configs, dims, sweep.init_seed, sweep.init_scale, dev)
    if sweep.lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule={sweep.lr_schedule!r} is not one of ('constant', 'cosine')")
    step = 0
    if stream.native:
        plan = stream.plan
        fused = FusedLoss(plan.group, model_codes(configs), plan.unit_C, [c["d"] for c in configs], plan.unit_n, dims,
                          threads=stream.threads)
        # the backward pass through A = W_K^T W_Q and Adam, in the engine too (kq.M is the next step's A)
        kq, wv = Update([WK, WQ], lib=library()), Update([WV], lib=library())
        if plan.mixture:                 # the lengths come from the drawn tasks: draw the step, then read it
            stream.buffers(sweep.batch_size)

            def compute():
                tasks = stream.draw(step, sweep.batch_size)
                fused.compute(kq.M, WV, tasks, context_lengths(plan, tasks.length_words))
        else:                            # drawn and read a chunk of contexts at a time, in cache
            fused_step = FusedStep(stream.drawer, fused, sweep.batch_size)

            def compute():
                fused_step.compute(kq.M, WV, step)

        def update(lr):
            nonlocal step
            step += 1
            compute()
            kq(fused.gA, lr)
            wv(fused.gWV, lr)
            return fused.loss
    else:
        is_soft = model_kind(configs, dev)

        def step_loss():                  # the step optimise writes into the stream's step tensor
            b = stream.sample(sweep.batch_size, stream.step_tensor)
            logits = sa_logits(is_soft, WK, WQ, WV, b.x_ctx, b.y_ctx, b.x_q, b.ctx_mask)
            return masked_ce(logits, b.label_q, b.class_mask).mean(-1)

    def cosine(step):
        return sweep.lr_final_frac + (1 - sweep.lr_final_frac) * 0.5 * (1 + math.cos(math.pi * (step - 1) / sweep.steps))

    def snapshot():            # stays on the device; optimise copies the history to the host once, at the end
        return {"A": WK.transpose(1, 2) @ WQ, "WV": WV}

    with torch_threads(1 if stream.native else torch.get_num_threads()):
        hist, seconds = optimise([WK, WQ, WV], None if stream.native else step_loss, sweep.steps, sweep.lr,
                                 sweep.log_every, snapshot, lr_factor=cosine if sweep.lr_schedule == "cosine" else None,
                                 progress=progress, desc=desc, update=update if stream.native else None,
                                 step_tensor=None if stream.native else stream.step_tensor)
    K = len(configs)
    final = {k: v.detach().cpu().numpy() for k, v in zip(("WK", "WQ", "WV"), (WK, WQ, WV))}
    return ClsResult(sweep=sweep.to_dict(), configs=configs, dims=dims, log_steps=hist["steps"],
                     A_history=hist["A"], WV_history=hist["WV"], loss_history=hist["loss"],
                     final=final, timings={"train_seconds": seconds, "configs": K, "device": str(dev),
                                           "engine": "compiled" if stream.native else "torch",
                                           "cuda_graph": hist["graph"]})


def model_logits_from(A: torch.Tensor, WV: torch.Tensor, is_soft: torch.Tensor, x_ctx, y_ctx, x_q, ctx_mask=None):
    """Logits of trained models given ``A = W_K^T W_Q`` (K, D, D) and ``W_V`` (W_K = I, W_Q = A gives the same
    scores as the trained pair)."""
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device).expand_as(A)
    return sa_logits(is_soft, eye, A, WV, x_ctx, y_ctx, x_q, ctx_mask)


def prob_jacobian(kind, A: torch.Tensor, WV: torch.Tensor, x_ctx, y_ctx, x_q, ctx_mask=None,
                  class_mask=None) -> torch.Tensor:
    """``d softmax(logits) / d x_q`` (K, B, C_max, d_max) of attention units given ``A = W_K^T W_Q`` and ``W_V``
    (K, D, D), in closed form (what :func:`.metrics.prob_jacobian` computes by reverse passes).

    With tokens ``e_i = [x_i; y_i]`` and ``M = A[:, :d_max]``, the scores are ``s_i = e_i^T M x_q``, so
    ``ds_i/dx_q = M^T e_i``, and the update ``h = sum_i a_i e_i`` has ``dh/dx_q = (S - [softmax] h h^T) M`` with
    ``S = sum_i w_i e_i e_i^T``: ``w = a`` for softmax (``da_i = a_i (ds_i - sum_j a_j ds_j)``), ``w = 1/n`` for
    linear ``s/n`` and ``1`` for unnormalised linear (over the context slots in use). The logits ``z = W_V[y] h`` and
    the probabilities ``p = softmax(z)`` over the classes in use give ``dp_c = p_c (dz_c - sum_c' p_c' dz_c')``.
    ``kind``: as :func:`sa_logits`.
    """
    dm = x_ctx.shape[-1]
    E = torch.cat([x_ctx, y_ctx], dim=-1)                                          # (K, B, n, D)
    M = A[:, :, :dm]                                                               # (K, D, dm)
    s = torch.matmul(E, torch.einsum("kef,kbf->kbe", M, x_q).unsqueeze(-1)).squeeze(-1)
    a = _masked_weights(kind, s, ctx_mask)                                         # (K, B, n)
    ones = torch.ones_like(s) if ctx_mask is None else ctx_mask.expand_as(s).to(s.dtype)
    w = _masked_weights(kind, ones, ctx_mask)                                      # 1/n or 1 (linear kinds)
    code = torch.full((s.shape[0],), MODEL_CODES[kind], device=s.device) if isinstance(kind, str) else (
        torch.where(kind, 0, 1) if kind.dtype == torch.bool else kind)
    soft = (code == 0).view(-1, 1, 1).to(s.dtype)
    w = torch.where(soft.bool(), a, w)
    h = torch.matmul(a.unsqueeze(-2), E).squeeze(-2)                               # (K, B, D)
    S = torch.matmul((E * w.unsqueeze(-1)).transpose(-1, -2), E)                   # (K, B, D, D)
    dh = S - soft.unsqueeze(-1) * h.unsqueeze(-1) * h.unsqueeze(-2)
    dz = torch.einsum("kcd,kbde,kef->kbcf", WV[:, dm:, :], dh, M)                  # (K, B, C_max, dm)
    z = torch.einsum("kcd,kbd->kbc", WV[:, dm:, :], h)
    if class_mask is not None:
        z = z.masked_fill(~class_mask, float("-inf"))
    p = torch.softmax(z, -1).unsqueeze(-1)                                         # (K, B, C_max, 1)
    return p * (dz - (p * dz).sum(-2, keepdim=True))


def models_on(A, WV, is_soft, batch: ClsBatch, idx, chunk: int = 512, jacobian: bool = False, lengths=None):
    """Logits (K, B, C_max) (and probability Jacobians (K, B, C_max, d_max), :func:`prob_jacobian`) of K models on
    their settings ``idx`` (K,) of ``batch``, in chunks of contexts. ``is_soft``: (K,) model codes or softmax flags.
    ``lengths`` (K,): read each model's contexts at this length (their first examples) instead."""
    B = batch.x_ctx.shape[1]
    src = batch.source
    if (src is not None and not jacobian and A.device.type == "cpu" and A.dtype == torch.float32
            and engine.available()):
        # the compiled forward pass, on the contexts as the engine drew them (no per-model copies)
        idx = torch.as_tensor(idx).reshape(-1).tolist()
        codes = torch.as_tensor(is_soft).reshape(-1)
        codes = (torch.where(codes, 0, 1) if codes.dtype == torch.bool else codes).expand(len(idx))
        n = [src.n[i] for i in idx] if lengths is None else torch.as_tensor(lengths).reshape(-1).tolist()
        lg = engine.unit_logits(A, WV, codes, [src.group[i] for i in idx], [src.C[i] for i in idx],
                                [src.d[i] for i in idx], [min(int(v), src.dims[0]) for v in n], src.tasks, src.dims)
        return lg, None
    outs, jacs = [], []
    with torch.no_grad():
        for b0 in range(0, B, chunk):
            sub = take(batch, idx, slice(b0, b0 + chunk))
            if lengths is not None:
                L = torch.as_tensor(lengths, device=sub.x_ctx.device).view(-1, 1, 1)
                sub = ClsBatch(sub.x_ctx, sub.y_ctx, sub.x_q, sub.label_q, sub.label_ctx,
                               torch.arange(sub.x_ctx.shape[2], device=L.device).view(1, 1, -1) < L, sub.class_mask,
                               sub.protos)
            outs.append(model_logits_from(A, WV, is_soft, sub.x_ctx, sub.y_ctx, sub.x_q, sub.ctx_mask))
            if jacobian:
                jacs.append(prob_jacobian(is_soft, A, WV, sub.x_ctx, sub.y_ctx, sub.x_q, sub.ctx_mask,
                                          sub.class_mask))
    return torch.cat(outs, 1), (torch.cat(jacs, 1) if jacobian else None)
