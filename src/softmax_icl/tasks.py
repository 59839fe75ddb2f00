"""Input distributions and function classes, sampled as batched tensors.

A *task* is a function ``f`` drawn from a function class; a *context* is ``n`` noisy
evaluations ``y_i = f(x_i) + eps_i`` plus a query ``x_q``. Everything here works on a layout of
R rows of shared draws x G configurations per row, so that one call samples a whole sweep.

Randomness is split in two steps so that sweeps use common random numbers:

* :func:`draw_rows` (:func:`draw_raw` for one stream) draws the *raw* randomness of a range of tasks (inputs on the
  sphere, task directions, uniform coefficients, phases, standard-normal noise) from the counter-based streams
  (:mod:`softmax_icl.streams`), one row per stream key: every number is a function of (key, step, task, point,
  coordinate), never of the device, of the other rows drawn with it or of the order of the calls;
* :func:`task_values` and :func:`make_batch` turn a row's raw draws into labels for any function
  class, Lipschitz constant ``L`` and noise level ``sigma`` of the configurations that share it.

Configurations that share a seed therefore see the same inputs and the same task
coefficients, and differ only in what their class, ``L`` and ``sigma`` make of them. A
configuration trained alone draws exactly what it draws inside a sweep, and a context of length ``n`` is the first
``n`` points of a longer one (with the same query, task and noise).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from . import streams

INPUT_DISTRIBUTIONS = ("isotropic", "nonisotropic", "nonisotropic_whitened")

# the function classes' names and descriptions live in the torch-free profiles module (the registry reads them)
from .profiles import FUNCTION_CLASSES, LOW_RANK_CLASSES  # noqa: E402


class FunctionClass:
    """A function class of one's own: subclass it, give it a ``name`` and a ``__call__``, and every part of the package
    that takes a class name takes it (the batched trainer :class:`softmax_icl.training.Sweep`, the evaluation
    :mod:`softmax_icl.metrics`, the Nadaraya-Watson oracle :mod:`softmax_icl.baselines`)::

        class Kink(FunctionClass):
            name = "kink"
            def __call__(self, x, task, L):
                t = (x * task.u).sum(-1)              # the input's projection on the task's direction
                return L * task.coef[..., 0] * (t - 0.5 * task.coef[..., 2]).abs() + task.coef[..., 1]

    ``__call__(x, task, L)`` evaluates a batch of tasks at their inputs, with broadcasting: ``x`` (..., m, d) the
    inputs (m points per task), ``task`` a :class:`TaskDraws` whose tensors broadcast against (..., m) (``task.u``
    (..., 1, d), ``task.coef`` (..., 1, 3), ``task.phase`` (..., 1), ``task.a`` (..., 1, k) and, for a class with
    ``low_rank = True``, ``task.w = B a`` (..., 1, d) with the run's fixed basis ``B``), ``L`` (..., 1) the Lipschitz
    constant of each configuration. It returns ``f(x)`` (..., m). The draws are the built-in classes' own (the same
    counter-based streams), so a class of one's own shares the inputs, tasks and noise of the built-in classes at the
    same seed: comparisons across classes are on common random numbers.

    ``lipschitz(L)`` is the class's Lipschitz constant on the sphere at parameter ``L`` (default: ``L``); the tests
    and the oracle's reading of a window against ``L`` use it. Classes of one's own run on the PyTorch training path
    (the compiled CPU engine knows the built-in classes by code): the draws still come from the engine, the readout
    and its gradient from PyTorch.
    """

    name: str = ""
    low_rank: bool = False
    description: str = ""

    def __call__(self, x: torch.Tensor, task: "TaskDraws", L: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define __call__(x, task, L)")

    def lipschitz(self, L: float) -> float:
        return float(L)


@dataclass(frozen=True)
class TaskDraws:
    """One batch of tasks' random draws, shaped to broadcast against the inputs' leading axes (see
    :class:`FunctionClass`): ``u`` a unit direction, ``coef`` three uniforms on [-1, 1), ``phase`` a uniform on
    [0, 2 pi), ``a`` a unit vector of the rank-k space, ``w = B a`` (None unless the class is ``low_rank``)."""

    u: torch.Tensor
    coef: torch.Tensor
    phase: torch.Tensor
    a: torch.Tensor
    w: torch.Tensor | None = None


#: Function classes of one's own, by name (:func:`register_class`).
_CUSTOM: dict[str, FunctionClass] = {}


def register_named(obj, base: type, registry: dict, builtins, where: str) -> str:
    """Put ``obj``, an instance of ``base`` (``where``: the module that defines it, for the message), in ``registry``
    under its ``name`` (returned), after checking the name: a string without spaces that no built-in (``builtins``)
    has. The same name again replaces the entry (a notebook cell run twice). Any other input is a ValueError."""
    kind = base.__name__
    if not isinstance(obj, base):
        raise ValueError(f"expected a {kind} instance (a subclass of {where}.{kind} with a name and __call__), "
                         f"got {type(obj).__name__}")
    name = getattr(obj, "name", "")
    if not isinstance(name, str) or not name.strip() or any(ch.isspace() for ch in name):
        raise ValueError(f"a {kind} needs a name without spaces (its `name` attribute), got {name!r}")
    if name in builtins:
        raise ValueError(f"name={name!r} is a built-in of {where} ({', '.join(builtins)}); choose another name "
                         f"for {type(obj).__name__}")
    registry[name] = obj
    return name


def register_class(fc: FunctionClass) -> str:
    """Make a :class:`FunctionClass` instance known by its ``name`` (returned) to every part of the package that takes
    a class name. Registering the same name again replaces the class (a notebook cell run twice); a built-in name, an
    empty name or an object that is not a :class:`FunctionClass` is a ValueError."""
    return register_named(fc, FunctionClass, _CUSTOM, tuple(FUNCTION_CLASSES), "softmax_icl.tasks")


def custom_class(name: str) -> FunctionClass | None:
    """The registered class of one's own called ``name`` (None for a built-in or unknown name)."""
    return _CUSTOM.get(name)


def known_classes() -> list[str]:
    """Every class name the package takes now: the built-in classes, then the registered ones."""
    return [*FUNCTION_CLASSES, *_CUSTOM]


def check_class(name) -> str:
    """``name`` itself when it names a built-in or registered class (a :class:`FunctionClass` instance is registered
    and its name returned); else a ValueError naming the classes there are."""
    if isinstance(name, FunctionClass):
        return register_class(name)
    if name not in FUNCTION_CLASSES and name not in _CUSTOM:
        raise ValueError(f"function_class={name!r} is not one of {known_classes()} (a class of one's own: subclass "
                         "softmax_icl.tasks.FunctionClass and pass the instance, or register_class it)")
    return name


def needs_basis(name: str) -> bool:
    """Whether the class reads the run's low-rank basis B."""
    fc = _CUSTOM.get(name)
    return bool(fc.low_rank) if fc is not None else name in LOW_RANK_CLASSES


def lipschitz_constant(function_class: str, L: float) -> float:
    """Lipschitz constant of the class on the unit sphere: the largest derivative along the sphere (w.r.t. the
    great-circle distance, which close pairs' Euclidean distance approaches)."""
    if function_class in _CUSTOM:
        return float(_CUSTOM[function_class].lipschitz(L))
    if function_class not in FUNCTION_CLASSES:
        raise ValueError(f"function_class={function_class!r} is not one of {known_classes()}")
    if function_class == "lowrank_quadratic":
        return L**2  # d/dt (L cos t)^2 on a great circle peaks at L^2
    if function_class == "lowrank_cosine":
        # f = cos(4 L cos t) along a great circle through w: sup_t 4 L sin t |sin(4 L cos t)|, below 4L for every L
        # (the two sines are not both 1 at the same t; about 3.70 at L = 1 and 1.49 at L = 0.5), tending to 4L
        t = torch.linspace(0, math.pi, 200_001, dtype=torch.float64)
        return float((4.0 * L * t.sin() * torch.sin(4.0 * L * t.cos()).abs()).max())
    return float(L)


def sphere_cos_mean(L: torch.Tensor, d: int) -> torch.Tensor:
    """E[cos(L w^T x)] for x ~ U^d and a unit w (any shape of ``L``): with w^T x = cos t, t has density
    proportional to sin^(d-2) t on [0, pi] (J_0(L) for d = 2, sin(L)/L for d = 3). Trapezoid rule in float64."""
    L64 = torch.as_tensor(L, dtype=torch.float64)
    if d == 1:
        return torch.cos(L64)
    t = torch.linspace(0.0, math.pi, 4097, dtype=torch.float64, device=L64.device)
    w = t.sin() ** (d - 2)
    vals = torch.cos(L64.unsqueeze(-1) * t.cos())
    return torch.trapezoid(vals * w, t, dim=-1) / torch.trapezoid(w, t)


def nonisotropic_covariance(d: int) -> torch.Tensor:
    """Fixed diagonal covariance: eigenvalues log-spaced in [0.3, 3], normalised to trace d."""
    if d == 1:
        return torch.ones(1, dtype=torch.float64)
    eig = torch.logspace(math.log10(0.3), math.log10(3.0), d, dtype=torch.float64)
    return eig * d / eig.sum()


def dot_last(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(a * b).sum(-1)`` (broadcasting). For the small input dimensions here, a loop of multiply-adds over the last
    axis is several times faster than a reduction (or a batched matrix-vector product) over an axis of 2 to 10."""
    d = a.shape[-1]
    if d > 16:
        return (a * b).sum(-1)
    out = a[..., 0] * b[..., 0]
    for k in range(1, d):
        out = torch.addcmul(out, a[..., k], b[..., k])
    return out


def _unit(z: torch.Tensor) -> torch.Tensor:
    """Rows of ``z`` scaled to unit length (Gaussian rows become uniform on the sphere)."""
    if z.shape[-1] <= 4:
        return z * dot_last(z, z).clamp_min(1e-24).rsqrt().unsqueeze(-1)
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
        """``Sigma^{1/2}`` (d,) in float32 on ``device`` (made once per device: the sampler asks every step;
        read-only)."""
        if self.input_dist == "isotropic":
            return None
        return _on_device("sqrt_cov", self.d, 0, 0, torch.device(device))

    def basis(self, device) -> torch.Tensor:
        """The low-rank basis B (d, k) in float32 on ``device`` (made once per device; read-only)."""
        return _on_device("basis", self.d, self.k, self.task_seed, torch.device(device))


@functools.lru_cache(maxsize=64)
def _on_device(what: str, d: int, k: int, seed: int, device: torch.device) -> torch.Tensor:
    """The fixed tensors the sampler uses every step, built on the CPU and moved to ``device`` once, not per step."""
    t = nonisotropic_covariance(d).sqrt() if what == "sqrt_cov" else low_rank_basis(d, k, seed)
    return t.to(device=device, dtype=torch.float32)


def raw_buffers(spec: InputSpec, R: int, T: int, n: int, device) -> dict:
    """Empty float32 tensors for the raw draws of R rows x T tasks at context length ``n`` (see :func:`draw_rows`),
    for a caller that draws into the same buffers call after call."""
    d, dev = spec.d, device
    out = {"x": torch.empty(R, T, n + 1, d, device=dev), "u": torch.empty(R, T, d, device=dev),
           "a": torch.empty(R, T, spec.k, device=dev), "coef": torch.empty(R, T, 3, device=dev),
           "phase": torch.empty(R, T, device=dev), "noise": torch.empty(R, T, n, device=dev)}
    if spec.input_dist == "nonisotropic_whitened":
        out["x_task"] = torch.empty(R, T, n + 1, d, device=dev)
    return out


#: The PyTorch sampler draws at most this many Philox blocks per call (per chunk of tasks): on the CPU a working set
#: that stays in cache; elsewhere (a GPU) effectively the whole batch at once.
TORCH_CHUNK_BLOCKS = {"cpu": 1 << 16}
TORCH_CHUNK_BLOCKS_DEFAULT = 1 << 24


def draw_rows(spec: InputSpec, keys: torch.Tensor, n: int, tasks: range, step: int = 0,
              out: dict | None = None) -> dict:
    """Raw randomness of the tasks ``tasks`` (a range of T task indices) at training step ``step`` of R streams.

    ``keys`` (R, 2) are the rows' stream keys (:func:`softmax_icl.streams.keys`, on the device to draw on). Returns a
    dict of float32 tensors with leading dims (R, T) (``out``'s, when given: buffers from :func:`raw_buffers`,
    overwritten):

    * ``x`` (R, T, n + 1, d): the inputs, context points then the query: ``x = Sigma^{1/2} z / |z|`` (``Sigma = I``
      for isotropic inputs) for ``z`` the normals of tag ``x`` (point i: values ``i d .. i d + d - 1``) and, for the
      query, of tag ``query``;
    * ``x_task`` (R, T, n + 1, d), for ``nonisotropic_whitened`` only: the unit vectors ``z / |z|`` the task is
      evaluated at;
    * ``u`` (R, T, d) the unit task direction, ``a`` (R, T, k) the unit low-rank coefficients, ``coef`` (R, T, 3)
      uniform on [-1, 1), ``phase`` (R, T) uniform on [0, 2 pi), ``noise`` (R, T, n) standard normal (one value per
      context point).

    On the CPU, where the fused engine is built (:mod:`softmax_icl.engine.regression`), it makes the draws; elsewhere PyTorch
    does (:mod:`softmax_icl.streams`). The integers are the same bits, the floats equal to rounding.
    """
    from .engine import regression as engine       # here, not at the top: paper 2 imports this module and never uses the engine

    R, T = keys.shape[0], len(tasks)
    if tasks.step != 1:
        raise ValueError(f"tasks must be a range of consecutive indices, got {tasks}")
    out = raw_buffers(spec, R, T, n, keys.device) if out is None else out
    if engine.usable(keys.device, spec.d, spec.k):
        return engine.sample_raw(spec.input_dist, keys, n, tasks.start, step, out, spec.sqrt_cov("cpu"))
    per_task = (n + 3) * spec.d + spec.k + n + 8
    chunk = max(1, TORCH_CHUNK_BLOCKS.get(keys.device.type, TORCH_CHUNK_BLOCKS_DEFAULT) * 4 // (R * per_task))
    for t0 in range(0, T, chunk):
        part = range(tasks.start + t0, tasks.start + min(T, t0 + chunk))
        _draw_torch(spec, keys, n, part, step, {k: v[:, t0:t0 + len(part)] for k, v in out.items()})
    return out


@functools.lru_cache(maxsize=64)
def draw_plan(d: int, k: int, n: int, device: torch.device) -> tuple:
    """The Philox blocks of one task's draws, every kind in one pass: (block, tag) (J,) int64 tensors on ``device``,
    and per kind its (first block, value count, normal or uniform). Made once per shape and device (a stream asks
    for it when it is made, so the training loop never builds it)."""
    kinds = [("x", n * d, True), ("query", d, True), ("direction", d, True), ("lowrank", k, True), ("noise", n, True),
             ("coef", 3, False), ("phase", 1, False)]
    block, tag, where, at = [], [], {}, 0
    for name, count, normal in kinds:
        nb = -(-count // 4)
        block += list(range(nb))
        tag += [streams.TAGS[name]] * nb
        where[name] = (at, count, normal)
        at += nb
    as_t = lambda v: torch.tensor(v, dtype=torch.int64).to(device)  # noqa: E731
    return as_t(block), as_t(tag), where


def _draw_torch(spec: InputSpec, keys: torch.Tensor, n: int, tasks: range, step: int, out: dict) -> None:
    """:func:`draw_rows`'s draws by PyTorch (any device), into ``out``'s tensors: one pass of the generator over
    every kind of draw of the tasks (:func:`softmax_icl.streams.values`: Box-Muller on the normal kinds' words,
    uniforms from the last two kinds' few words)."""
    R, T, d = keys.shape[0], len(tasks), spec.d
    block, tag, where = draw_plan(d, spec.k, n, keys.device)
    normal_blocks = min(at for at, _, normal in where.values() if not normal)        # the uniform kinds come last
    v = streams.values(keys, step, tasks, block, tag, normal_blocks).view(R, T, -1)
    first_uniform = 4 * normal_blocks
    z, u = v[:, :, :first_uniform], v[:, :, first_uniform:]

    def part(name):
        at, count, normal = where[name]
        if normal:
            return z[:, :, 4 * at:4 * at + count]
        return u[:, :, 4 * at - first_uniform:4 * at - first_uniform + count]

    pts = _unit(torch.cat([part("x").view(R, T, n, d), part("query").view(R, T, 1, d)], dim=2))
    sq = spec.sqrt_cov(keys.device)
    torch.mul(pts, sq, out=out["x"]) if sq is not None else out["x"].copy_(pts)
    if "x_task" in out:
        out["x_task"].copy_(pts)
    out["u"].copy_(_unit(part("direction")))
    out["a"].copy_(_unit(part("lowrank")))
    torch.mul(part("coef"), 2, out=out["coef"]).sub_(1)
    torch.mul(part("phase")[..., 0], 2 * math.pi, out=out["phase"])
    out["noise"].copy_(part("noise"))


def draw_raw(spec: InputSpec, batch: int, n: int, seed, device, step: int = 0, first_task: int = 0) -> dict:
    """Raw randomness of tasks ``first_task`` to ``first_task + batch - 1`` with ``n`` context points and one query
    each, from the stream of ``seed`` (an int; a ``torch.Generator`` stands for its initial seed, its state neither read
    nor advanced) at ``step``: the tensors of :func:`draw_rows` without the row axis, e.g. ``x`` (batch, n + 1, d).
    """
    seed = seed.initial_seed() if isinstance(seed, torch.Generator) else int(seed)
    keys = streams.keys([seed], device)
    rows = draw_rows(spec, keys, n, range(first_task, first_task + batch), step)
    return {k: v[0] for k, v in rows.items()}


def task_values(function_class: str, x: torch.Tensor, raw: dict, L: torch.Tensor, basis=None,
                cos_mean: torch.Tensor | None = None) -> torch.Tensor:
    """Noiseless ``f(x)`` of each row's tasks at several Lipschitz constants: (R, G, B, m).

    ``x``: (R, B, m, d) inputs, ``raw``: the tasks' draws with leading dims (R, B), ``L``: (R, G) the
    Lipschitz constants of the G configurations that share row r's tasks. The projection of the inputs on
    the task direction is computed once per row and shared by the G configurations. ``cos_mean`` (R, G): the
    centred cosine class's ``sphere_cos_mean(L, d)``, when the caller keeps it (else computed here).
    """
    Lc = L[:, :, None, None]
    if function_class in _CUSTOM:
        return _custom_values(_CUSTOM[function_class], x, raw, Lc, basis)
    coef = raw["coef"][:, None, :, None, :]                        # (R, 1, B, 1, 3)
    if function_class in ("affine", "relu", "cosine", "cosine_centered"):
        proj = dot_last(x, raw["u"].unsqueeze(-2)).unsqueeze(1)                     # (R, 1, B, m)
        if function_class == "affine":
            return Lc * torch.addcmul(coef[..., 1], coef[..., 0], proj)
        if function_class == "relu":
            pos, neg = proj.clamp_min(0), (-proj).clamp_min(0)
            return Lc * (coef[..., 0] * pos + coef[..., 1] * neg + coef[..., 2])
        f = torch.cos(torch.addcmul(raw["phase"][:, None, :, None], Lc, proj))
        if function_class == "cosine":
            return f
        # the same task less its mean over x ~ U^d: cos(phi) E_x[cos(L w^T x)] (the sine part has mean 0)
        mean = (sphere_cos_mean(L, x.shape[-1]) if cos_mean is None else cos_mean).to(f.dtype)[:, :, None, None]
        return f - torch.cos(raw["phase"])[:, None, :, None] * mean
    if function_class in LOW_RANK_CLASSES:
        if basis is None:
            raise ValueError("low-rank classes need the basis B")
        w = torch.matmul(raw["a"], basis.T)                                         # (R, B, d)
        proj = Lc * dot_last(x, w.unsqueeze(-2)).unsqueeze(1)                       # (R, G, B, m)
        if function_class == "lowrank_linear":
            return proj
        if function_class == "lowrank_affine":
            return proj + 2.0
        if function_class == "lowrank_quadratic":
            return proj**2
        return torch.cos(4.0 * proj)
    raise ValueError(f"function_class={function_class!r} is not one of {known_classes()}")


def _custom_values(fc: FunctionClass, x: torch.Tensor, raw: dict, Lc: torch.Tensor, basis) -> torch.Tensor:
    """A class of one's own at ``x`` (R, B, m, d) for the (R, G) Lipschitz constants ``Lc`` (R, G, 1, 1): its draws laid
    out as (R, 1, B, 1, ...) so that one call evaluates every configuration; returns (R, G, B, m)."""
    if fc.low_rank and basis is None:
        raise ValueError(f"the class {fc.name!r} is low_rank: it needs the basis B")
    row = lambda t: t[:, None, :, None]  # noqa: E731
    w = row(torch.matmul(raw["a"], basis.T)) if fc.low_rank else None
    task = TaskDraws(u=row(raw["u"]), coef=row(raw["coef"]), phase=row(raw["phase"]), a=row(raw["a"]), w=w)
    f = fc(x.unsqueeze(1), task, Lc)
    R, G = Lc.shape[:2]
    shape = (R, G, *x.shape[1:3])
    if not isinstance(f, torch.Tensor):
        raise TypeError(f"{type(fc).__name__}.__call__ must return a tensor, got {type(f).__name__}")
    try:
        return torch.broadcast_to(f.to(x.dtype), shape)
    except RuntimeError as e:
        raise ValueError(f"{type(fc).__name__}.__call__ returned shape {tuple(f.shape)}, which does not broadcast to "
                         f"the batch's {shape} (x (..., m, d) -> f (..., m))") from e


def evaluate_class(function_class: str, x: torch.Tensor, raw: dict, L: torch.Tensor, basis=None) -> torch.Tensor:
    """Noiseless ``f(x)`` with one Lipschitz constant per row: ``x`` (C, B, m, d), ``raw`` leading dims (C, B),
    ``L`` (C,); returns (C, B, m)."""
    return task_values(function_class, x, raw, L.view(-1, 1), basis)[:, 0]


@dataclass
class TaskBatch:
    """A batch of in-context regression prompts for R rows x G slots of configurations.

    The G configurations of a row share its inputs (and task draws): ``x_ctx`` (R, B, n, d) context inputs,
    ``x_q`` (R, B, d) queries; each configuration has its own labels ``y_ctx`` (R, G, B, n) (noisy) and
    noiseless query targets ``f_q`` (R, G, B).
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    f_q: torch.Tensor

    def prefix(self, n: int) -> "TaskBatch":
        """The same tasks with only the first ``n`` context points."""
        return TaskBatch(self.x_ctx[:, :, :n], self.y_ctx[..., :n], self.x_q, self.f_q)


@dataclass(frozen=True)
class ClassBlock:
    """The slots of one function class in an (R, G) layout: whole columns (``cols``, the same in every row; a
    slice when they are contiguous) or, when G = 1, a set of rows (``rows``); ``None`` for both means every slot."""

    name: str
    rows: torch.Tensor | None = None
    cols: torch.Tensor | slice | None = None


def class_blocks(classes: list[str], slot_class: torch.Tensor) -> list[ClassBlock]:
    """Group the slots of an (R, G) layout by class; ``slot_class`` (R, G) indexes ``classes``.

    Raises ValueError unless every column holds one class or G = 1 (the two layouts the trainer builds).
    """
    R, G = slot_class.shape
    present = sorted(set(slot_class.flatten().tolist()))
    if len(present) == 1:
        return [ClassBlock(classes[present[0]])]
    if G == 1:
        return [ClassBlock(classes[j], rows=(slot_class[:, 0] == j).nonzero().flatten()) for j in present]
    if not bool((slot_class == slot_class[:1]).all()):
        raise ValueError("every column of the layout must hold one function class (or G must be 1)")
    blocks = []
    for j in present:
        cols = (slot_class[0] == j).nonzero().flatten()
        contiguous = bool((cols == torch.arange(int(cols[0]), int(cols[0]) + len(cols))).all())
        blocks.append(ClassBlock(classes[j], cols=slice(int(cols[0]), int(cols[0]) + len(cols)) if contiguous else cols))
    return blocks


def make_batch(spec: InputSpec, raw: dict, blocks: list[ClassBlock], L: torch.Tensor, sigma: torch.Tensor,
               n: int, cos_mean: torch.Tensor | None = None) -> TaskBatch:
    """Labels for an (R, G) layout of configurations from raw draws of R rows at context length ``n``.

    ``raw`` tensors have leading dims (R, B); ``L``, ``sigma`` (R, G); ``cos_mean`` (R, G) optional, see
    :func:`task_values`. One batched call per class block (at most a handful), never a loop over configurations.
    The noise draws are shared by a row's slots.
    """
    x = raw["x"]
    xt = raw.get("x_task", x)       # where the task is evaluated (the whitened input, if any)
    basis = spec.basis(x.device) if any(needs_basis(b.name) for b in blocks) else None
    if len(blocks) == 1:
        f = task_values(blocks[0].name, xt, raw, L, basis, cos_mean)
    else:
        R, G = L.shape
        f = torch.empty(R, G, *x.shape[1:3], device=x.device, dtype=x.dtype)
        for blk in blocks:
            if blk.cols is not None:
                cm = None if cos_mean is None else cos_mean[:, blk.cols]
                f[:, blk.cols] = task_values(blk.name, xt, raw, L[:, blk.cols], basis, cm)
            else:
                r = blk.rows
                cm = None if cos_mean is None else cos_mean[r]
                f[r] = task_values(blk.name, xt[r], {k: v[r] for k, v in raw.items()}, L[r], basis, cm)
    y_ctx = torch.addcmul(f[..., :n], sigma[:, :, None, None], raw["noise"].unsqueeze(1))
    return TaskBatch(x[:, :, :n], y_ctx, x[:, :, n], f[..., n])
