"""Input distributions and function classes (SPEC 1.2-1.3), sampled as batched tensors.

A *task* is a function ``f`` drawn from a function class; a *context* is ``n`` noisy
evaluations ``y_i = f(x_i) + eps_i`` plus a query ``x_q``. Everything here works on a
leading stack of configurations so that one call samples a whole sweep.

Randomness is split in two steps so that sweeps use common random numbers:

* :func:`draw_raw` draws the *raw* randomness of a batch of tasks (inputs on the sphere,
  task directions, uniform coefficients, phases, standard-normal noise) from one
  ``torch.Generator``;
* :func:`labels` turns raw draws into labels for any function class, Lipschitz constant ``L``
  and noise level ``sigma``.

Configurations that share a seed therefore see the same inputs and the same task
coefficients, and differ only in what their class, ``L`` and ``sigma`` make of them. A
configuration trained alone draws exactly what it draws inside a sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

INPUT_DISTRIBUTIONS = ("isotropic", "nonisotropic", "nonisotropic_whitened")

#: Function classes; the value says how ``L`` enters and what the class's Lipschitz constant is.
FUNCTION_CLASSES = {
    "affine": "f(x) = l w^T x + b, l, b ~ U[-L, L], w ~ U^d",
    "relu": "f(x) = l1 (q^T x)_+ + l2 (-q^T x)_+ + b, l1, l2, b ~ U[-L, L], q ~ U^d",
    "cosine": "f(x) = cos(L w^T x + phi), w ~ U^d, phi ~ U[0, 2 pi)",
    "lowrank_linear": "f(x) = L a^T B^T x, a ~ U^k, B in R^{d x k} orthonormal, fixed per run",
    "lowrank_affine": "f(x) = L a^T B^T x + 2",
    "lowrank_quadratic": "f(x) = (L a^T B^T x)^2",
    "lowrank_cosine": "f(x) = cos(4 L a^T B^T x)",
}
LOW_RANK_CLASSES = tuple(c for c in FUNCTION_CLASSES if c.startswith("lowrank_"))


def lipschitz_constant(function_class: str, L: float) -> float:
    """Lipschitz constant of the class on the unit sphere (w.r.t. the Euclidean distance)."""
    if function_class not in FUNCTION_CLASSES:
        raise ValueError(f"function_class={function_class!r} is not one of {sorted(FUNCTION_CLASSES)}")
    if function_class == "lowrank_quadratic":
        return L**2  # d/dt (L cos t)^2 on a great circle peaks at L^2
    if function_class == "lowrank_cosine":
        # f = cos(4 L cos t) along a great circle through w: sup_t 4 L sin t |sin(4 L cos t)| (<= 4L, = 4L once
        # 4L >= pi/2)
        t = torch.linspace(0, math.pi, 200_001, dtype=torch.float64)
        return float((4.0 * L * t.sin() * torch.sin(4.0 * L * t.cos()).abs()).max())
    return float(L)


def nonisotropic_covariance(d: int) -> torch.Tensor:
    """Fixed diagonal covariance: eigenvalues log-spaced in [0.3, 3], normalised to trace d (SPEC 1.2)."""
    if d == 1:
        return torch.ones(1, dtype=torch.float64)
    eig = torch.logspace(math.log10(0.3), math.log10(3.0), d, dtype=torch.float64)
    return eig * d / eig.sum()


def sphere(shape: tuple[int, ...], d: int, generator: torch.Generator, device) -> torch.Tensor:
    """Uniform samples on the unit sphere S^{d-1}, shape ``shape + (d,)``."""
    z = torch.randn(*shape, d, generator=generator, device=device)
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def low_rank_basis(d: int, k: int, seed: int) -> torch.Tensor:
    """Orthonormal ``B in R^{d x k}`` drawn once from ``seed`` (float64, CPU)."""
    if not 1 <= k <= d:
        raise ValueError(f"rank k={k} must satisfy 1 <= k <= d={d}")
    g = torch.Generator().manual_seed(int(seed))
    q, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    return q


@dataclass(frozen=True)
class InputSpec:
    """Where inputs live: ``d``, the input distribution and (for low-rank classes) the basis rank.

    ``nonisotropic`` draws ``x = Sigma^{1/2} u``, ``u ~ U^d``, and evaluates the task at ``x``;
    ``nonisotropic_whitened`` draws the same ``x`` but evaluates the task at the whitened input ``u``
    (``f(x) = g(Sigma^{-1/2} x)``), so the task law is rotation invariant after whitening: the symmetry
    the covariance lemma (``M* = w Sigma^{-1}``) assumes.
    """

    d: int
    input_dist: str = "isotropic"
    k: int = 1
    task_seed: int = 0

    def sqrt_cov(self, device) -> torch.Tensor | None:
        if self.input_dist == "isotropic":
            return None
        return nonisotropic_covariance(self.d).sqrt().to(device=device, dtype=torch.float32)

    def basis(self, device) -> torch.Tensor:
        return low_rank_basis(self.d, self.k, self.task_seed).to(device=device, dtype=torch.float32)


def draw_raw(spec: InputSpec, batch: int, n: int, generator: torch.Generator, device) -> dict:
    """Raw randomness of ``batch`` tasks with ``n`` context points and one query each.

    Returns a dict of tensors with leading dimension ``batch``:
    ``x`` (batch, n + 1, d) inputs (the last row is the query), ``u`` (batch, d) a unit task
    direction, ``a`` (batch, k) a unit low-rank coefficient vector, ``coef`` (batch, 3) uniform on
    [-1, 1], ``phase`` (batch,) uniform on [0, 2 pi), ``noise`` (batch, n) standard normal; for
    ``nonisotropic_whitened`` also ``x_task`` (batch, n + 1, d), the whitened inputs the task is evaluated at.
    """
    u = sphere((batch, n + 1), spec.d, generator, device)
    sq = spec.sqrt_cov(device)
    x = u if sq is None else u * sq
    extra = {"x_task": u} if spec.input_dist == "nonisotropic_whitened" else {}
    return {
        **extra,
        "x": x,
        "u": sphere((batch,), spec.d, generator, device),
        "a": sphere((batch,), spec.k, generator, device),
        "coef": torch.rand(batch, 3, generator=generator, device=device) * 2 - 1,
        "phase": torch.rand(batch, generator=generator, device=device) * (2 * math.pi),
        "noise": torch.randn(batch, n, generator=generator, device=device),
    }


def evaluate_class(function_class: str, x: torch.Tensor, raw: dict, L: torch.Tensor, basis=None):
    """Noiseless ``f(x)`` for a stack of configurations of one class.

    ``x``: (C, B, m, d); ``raw``: dict of tensors with leading dims (C, B); ``L``: (C,).
    Returns (C, B, m).
    """
    Lc = L.view(-1, 1, 1)
    coef = raw["coef"]
    if function_class in ("affine", "relu", "cosine"):
        proj = torch.einsum("cbmd,cbd->cbm", x, raw["u"])
        if function_class == "affine":
            return Lc * (coef[..., 0:1] * proj + coef[..., 1:2])
        if function_class == "relu":
            return Lc * (coef[..., 0:1] * proj.clamp_min(0) + coef[..., 1:2] * (-proj).clamp_min(0) + coef[..., 2:3])
        return torch.cos(Lc * proj + raw["phase"].unsqueeze(-1))
    if function_class in LOW_RANK_CLASSES:
        if basis is None:
            raise ValueError("low-rank classes need the basis B")
        w = torch.einsum("dk,cbk->cbd", basis, raw["a"])
        proj = Lc * torch.einsum("cbmd,cbd->cbm", x, w)
        if function_class == "lowrank_linear":
            return proj
        if function_class == "lowrank_affine":
            return proj + 2.0
        if function_class == "lowrank_quadratic":
            return proj**2
        return torch.cos(4.0 * proj)
    raise ValueError(f"function_class={function_class!r} is not one of {sorted(FUNCTION_CLASSES)}")


@dataclass
class TaskBatch:
    """A batch of in-context regression prompts for a stack of C configurations.

    ``x_ctx`` (C, B, n, d), ``y_ctx`` (C, B, n) noisy labels, ``x_q`` (C, B, d), ``f_q`` (C, B)
    noiseless query target, ``mask`` (C, 1, n) bool or None: which context slots each
    configuration uses (configurations with a shorter context use a prefix).
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    f_q: torch.Tensor
    mask: torch.Tensor | None


def make_batch(spec: InputSpec, raw: dict, classes: list[str], cls_idx: torch.Tensor, L: torch.Tensor,
               sigma: torch.Tensor, n: torch.Tensor, n_draw: int) -> TaskBatch:
    """Labels for C configurations from raw draws already gathered per configuration.

    ``raw`` tensors have leading dims (C, B). ``cls_idx`` (C,) indexes ``classes``; ``L``,
    ``sigma`` (C,) floats; ``n`` (C,) context lengths <= ``n_draw``. One batched call per distinct
    class present (at most a handful), never a loop over configurations.
    """
    x = raw["x"]
    xt = raw.get("x_task", x)       # where the task is evaluated (the whitened input, if any)
    C = x.shape[0]
    f = torch.empty(x.shape[:3], device=x.device, dtype=x.dtype)
    basis = spec.basis(x.device) if any(c in LOW_RANK_CLASSES for c in classes) else None
    for j, name in enumerate(classes):
        sel = (cls_idx == j).nonzero().flatten()
        if sel.numel() == 0:
            continue
        if sel.numel() == C:
            f = evaluate_class(name, xt, raw, L, basis)
        else:
            sub = {k: v[sel] for k, v in raw.items() if k not in ("x", "x_task", "noise")}  # inputs: xt[sel]
            f[sel] = evaluate_class(name, xt[sel], sub, L[sel], basis)
    y_ctx = f[:, :, :n_draw] + sigma.view(-1, 1, 1) * raw["noise"]
    mask = None
    if bool((n < n_draw).any()):
        mask = (torch.arange(n_draw, device=x.device).view(1, 1, -1) < n.view(-1, 1, 1))
    return TaskBatch(x[:, :, :n_draw], y_ctx, x[:, :, n_draw], f[:, :, n_draw], mask)
