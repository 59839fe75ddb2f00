"""The in-context classification task (Dragutinovic, Saxe, Singh 2025): context sampler.

Each context draws its own class prototypes on the sphere ``U^d``: ``P`` prototypes per class, ``C`` classes;
inputs ``x_i ~ U^d``; the label of ``x`` is the class owning the prototype with the largest ``p^T x``. With
``P = 1`` the prototypes are the class vectors ``c_k`` and ``y = argmax_k c_k^T x`` (linearly separable: the
classes are the Voronoi cells of the ``c_k`` on the sphere). With ``P >= 2`` each class is a union of ``P`` cells
around its own prototypes: local, and not linearly separable (the book's own "local" task).

The sources do not fix the data model, so the sampler draws every reading a careful reproducer would
(:data:`READINGS`): **uniform** (above); **balanced** (each class equally likely, ``x`` uniform within its class's
cell: drawn without replacement from a pool of ``16 (n + 1)`` uniform candidates); **clustered** (``k ~ U{1..C}``,
``x = normalise(c_k + tau g / sqrt(d))``, label ``k``: tight clusters for small ``tau``, nearly uniform inputs with
noisy labels for large ``tau``); **subspace** (as uniform, with the class vectors in a ``k``-dimensional coordinate
subspace: the class structure lives there). Contexts can also draw their length uniformly from a range (training
over a mixture of lengths).

**Random numbers** come from the counter-based streams of :mod:`softmax_icl.streams`, so a context is a pure
function of where it is used: (seed, step, context, point, coordinate). A context's ``n + 1`` points are numbered
with the query first (point 0) and its examples after it (example ``i`` is point ``i + 1``). Per seed (its key
``K = key(seed)``) and context ``t`` (the task word) of training step ``s`` (0 for evaluation sets):

=================  ======================================  ===================================================
draw               stream (key, tag)                        value ``f``
=================  ======================================  ===================================================
input normals      ``fold_in(K, c)``, ``cls_x``             ``f = point``; one stream per coordinate ``c``
prototype normals  ``fold_in(K, c, p)``, ``cls_proto``      ``f = class``; per coordinate and prototype ``p``
drawn class        ``K``, ``cls_class``                     ``f = point``: a word ``w``, class ``(m C) >> 24``
context length     ``K``, ``cls_length``                    ``f = 0``: length ``lo + ((m (hi - lo + 1)) >> 24)``
pool candidates    ``fold_in(K, c)``, ``cls_pool``          ``f = candidate``; per coordinate
=================  ======================================  ===================================================

with ``m = w >> 8`` (24 bits; ``(m C) >> 24 = floor(u C)`` for ``u = m 2^-24``, exactly, in integers). Each
coordinate and prototype has its own stream, so a context of ``n`` points in ``d`` dimensions is the prefix of any
larger one: nothing a configuration draws depends on the sizes (``n_max``, ``C_max``, ``P_max``, ``d_max``) a sweep
pads it to, on the other configurations it is trained with, or on the device (the integers are the same bits
everywhere; floats equal to rounding). Configurations that share a seed share every raw draw (common random
numbers): the readings differ only in what they make of them.

**Readings from the draws** (``z`` the input normals of a point, first ``d`` coordinates; ``pr`` the prototypes,
``normalise(z_proto)`` over the first ``d`` coordinates, the first ``k`` for the subspace task):

* uniform, subspace: ``x = normalise(z)``, label ``argmax_k max_p pr_{k,p}^T x``;
* clustered: ``k`` the drawn class, ``x = normalise(c_k + tau z / sqrt(d))`` (``c_k = pr_{k,0}``), label ``k``;
* balanced: ``k`` the drawn class; candidate ``j`` is ``normalise(z_pool_j)`` labelled by the argmax over the class
  vectors, for ``j < R = 16 (n + 1)``. The points draw their candidates in point order, without replacement: a
  point of class ``k`` that is the ``r``-th point of its class (counting from 0, query first) takes the ``r``-th
  candidate of class ``k`` in pool order. A class with fewer candidates than points reuses them (``r mod count``);
  a class with none gives its points the pool's first candidate of the next class that has one (cyclically), with
  that class's label. The distribution is exactly "class uniform, ``x`` uniform in its cell" whenever the pool
  holds enough candidates of every class (all but a vanishing fraction of contexts at the book's settings).

**Implementations.** :class:`ClsStream` draws the distinct tasks of a sweep (:class:`.plan.TaskPlan`) once per step
into buffers it owns (:class:`.plan.Tasks`); every configuration reads its task's rows through an index (no
per-configuration copies). On the CPU with float32 the compiled engine (:mod:`softmax_icl.engine.classification`)
draws and builds a context while it is in cache, on every thread, and stops scanning the class-balanced pool as soon
as every class has the candidates its points take (the same candidates as the whole pool gives); elsewhere (CUDA,
float64, no C compiler) the PyTorch builder (:mod:`.builder`) builds the same tasks from the same streams,
vectorised over tasks and contexts (on the CPU it too reads the pool in chunks until every point has its candidate;
a GPU's captured step reads it in one pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import derive_seed
from ..engine import classification as _engine
from ..tasks import register_named
from .builder import draw_torch
from .plan import POOL_FACTOR, READINGS, Keys, TaskPlan, Tasks, context_lengths


class ContextProcess:
    """A classification task of one's own: subclass it, give it a ``name`` and a ``__call__`` that draws contexts, and
    the batched trainer (:class:`.models.ClsSweep`), the evaluation sets (:func:`fixed_batch`) and the algorithms
    (:mod:`.algorithms`: one GD step, kernel GD) take it::

        class Halfspaces(ContextProcess):
            name = "halfspaces"
            def __call__(self, gen, contexts, n, C, d):
                x = torch.nn.functional.normalize(torch.randn(contexts, n + 1, d, generator=gen), dim=-1)
                w = torch.randn(contexts, 1, d, generator=gen)          # one random direction per context
                labels = ((x * w).sum(-1) > 0).long() % C
                return x, labels

    ``__call__(gen, contexts, n, C, d)`` draws ``contexts`` independent contexts of ``n`` examples and one query each
    from the CPU generator ``gen`` and returns ``x`` (contexts, n + 1, d), float, and ``labels`` (contexts, n + 1),
    integers in ``0 .. C - 1``: the first ``n`` points are the examples, the last one the query. The generator is
    seeded from the sweep's data seed, the seed index and the step (:func:`process_generator`), so a run is
    reproducible and configurations that share a seed share their contexts. Processes of one's own run on the
    PyTorch path (the compiled engine draws the paper's readings only).
    """

    name: str = ""
    description: str = ""

    def __call__(self, gen: torch.Generator, contexts: int, n: int, C: int, d: int):
        raise NotImplementedError(f"{type(self).__name__} must define __call__(gen, contexts, n, C, d)")


#: Context processes of one's own, by name (:func:`register_process`).
_PROCESSES: dict[str, ContextProcess] = {}


def register_process(proc: ContextProcess) -> str:
    """Make a :class:`ContextProcess` instance known by its ``name`` (returned); the same name again replaces it.
    A name of the paper's readings, an empty name or an object that is not a ContextProcess is a ValueError."""
    return register_named(proc, ContextProcess, _PROCESSES, tuple(READINGS), "softmax_icl.classification.tasks")


def custom_process(reading: str) -> ContextProcess | None:
    """The registered process called ``reading`` (None for the paper's readings)."""
    return _PROCESSES.get(reading)


def process_generator(stream_seed: int, step: int) -> torch.Generator:
    """The CPU generator a process of one's own draws step ``step`` of a seed's stream from (step 0: evaluation sets)."""
    return torch.Generator().manual_seed(derive_seed(int(stream_seed), int(step)))


def task_spec(reading="uniform", P: int = 1, tau: float = 0.0, k: int = 0) -> tuple:
    """A task as a hashable tuple ``(reading, P, tau, k)`` (the form sweeps and cache keys carry). ``reading`` is one
    of the paper's readings or a registered :class:`ContextProcess` (an instance is registered here)."""
    if isinstance(reading, ContextProcess):
        return (register_process(reading), 1, 0.0, 0)
    if reading not in READINGS and reading not in _PROCESSES:
        raise ValueError(f"reading={reading!r} is not one of {(*READINGS, *_PROCESSES)} (a process of one's own: "
                         "subclass softmax_icl.classification.tasks.ContextProcess and pass the instance)")
    return (reading, int(P), float(tau), int(k))


def task_label(reading: str, P: int = 1, tau: float = 0.0, k: int = 0) -> str:
    """Short human-readable name of a task."""
    if reading == "uniform":
        return "uniform argmax" if P == 1 else f"local (P = {P})"
    if reading == "clustered":
        return f"clustered, tau = {tau:g}"
    if reading == "subspace":
        return f"subspace (k = {k})"
    return "class-balanced"


def pool_size(n: int) -> int:
    """Candidates per context of the class-balanced reading (16 per point, the query included)."""
    return POOL_FACTOR * (n + 1)



# -- streams of a sweep -----------------------------------------------------------------------------------------

@dataclass
class ClsBatch:
    """Contexts for K configurations, padded to common sizes.

    ``x_ctx`` (K, B, n, d_max), ``y_ctx`` (K, B, n, C_max) one-hot, ``x_q`` (K, B, d_max), ``label_q`` (K, B),
    ``label_ctx`` (K, B, n), ``ctx_mask`` (K, 1, n) or (K, B, n) or None (context slots in use), ``class_mask``
    (K, 1, C_max) or None (classes in use), ``protos`` (K, B, C_max, P_max, d_max) or None. ``source``: for a set
    drawn by the compiled engine (:func:`fixed_batch` on the CPU), the same contexts as the engine reads them
    (:class:`TaskSource`), so that :func:`.models.models_on` can evaluate units there; views and subsets of the
    batch drop it.
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    label_q: torch.Tensor
    label_ctx: torch.Tensor
    ctx_mask: torch.Tensor | None
    class_mask: torch.Tensor | None
    protos: torch.Tensor | None
    source: "TaskSource | None" = None

    def chunk(self, sl: slice) -> "ClsBatch":
        """The contexts ``sl`` of the batch axis."""
        m = self.ctx_mask
        m = None if m is None else (m if m.shape[1] == 1 else m[:, sl])
        return ClsBatch(self.x_ctx[:, sl], self.y_ctx[:, sl], self.x_q[:, sl], self.label_q[:, sl],
                        self.label_ctx[:, sl], m, self.class_mask, None if self.protos is None else self.protos[:, sl])


@dataclass(frozen=True)
class TaskSource:
    """The contexts of a :class:`ClsBatch`'s K settings as the compiled engine reads them: ``tasks``
    (:class:`Tasks` of the stream's G tasks), and per setting (K,) its task ``group``, ``C``, ``d`` and ``n``
    (host lists); ``dims = (n_max, C_max, P_max, d_max)``."""

    tasks: Tasks
    group: list
    C: list
    d: list
    n: list
    dims: tuple


def _one_hot(lab: torch.Tensor, m: int, dtype) -> torch.Tensor:
    """``one_hot(lab, m).to(dtype)`` for labels known to lie in ``0..m-1``, without its range check over every label
    (a pass over the labels and a device sync)."""
    return (lab.unsqueeze(-1) == torch.arange(m, device=lab.device)).to(dtype)


class ClsStream:
    """The task streams of a stack of configurations: their distinct tasks drawn once per step (common random
    numbers), into buffers the stream owns.

    ``configs``: dicts with ``seed`` (an index into ``seeds``), ``reading``, ``P``, ``tau``, ``k``, ``C``, ``d``,
    ``n`` (and optionally ``n_min``); ``dims = (n_max, C_max, P_max, d_max)``; ``seeds``: the 64-bit stream seed of
    each seed index (only those the configurations read are drawn). ``native``: draw with the compiled CPU kernel (default: on the CPU with float32 where it
    builds, :func:`softmax_icl.engine.classification.available`).
    """

    def __init__(self, configs: list[dict], dims, seeds: list[int], device, dtype=torch.float32,
                 native: bool | None = None):
        self.device, self.dtype = torch.device(device), dtype
        used = sorted({int(c["seed"]) for c in configs})            # only the seeds some configuration reads
        self.plan = TaskPlan.of([dict(c, seed=used.index(int(c["seed"]))) for c in configs], dims, self.device)
        self.keys = Keys.of([seeds[i] for i in used], dims[3], dims[2], self.device)
        if native is None:
            native = self.device.type == "cpu" and dtype == torch.float32 and _engine.available()
        self.native = bool(native)
        self.threads = torch.get_num_threads()              # the compiled engine's threads
        self._drawer = _engine.Drawer(self.keys, self.plan, self.threads) if self.native else None
        self._buffers: Tasks | None = None
        # the step, as the streams take it (a trainer writes it, then draws with ``step=step_tensor``)
        self.step_tensor = torch.zeros((), dtype=torch.int64, device=self.device)

    @property
    def drawer(self):
        """The compiled engine's :class:`softmax_icl.engine.classification.Drawer` of this stream (None on the PyTorch path)."""
        return self._drawer

    @property
    def S(self) -> int:
        return self.keys.seed.shape[0]

    def buffers(self, T: int, protos: bool = False) -> Tasks:
        """The stream's own buffers for ``T`` contexts per task, made on the first call and reused while ``T`` stays
        the same (a trainer makes them before its loop)."""
        b = self._buffers
        if b is None or b.xq.shape[1] != T or (protos and b.protos is None):
            b = self._buffers = Tasks.empty(self.plan, self.S, T, self.device, self.dtype, protos)
        return b

    def draw(self, step, T: int, first: int = 0, out: Tasks | None = None, protos: bool = False) -> Tasks:
        """Contexts ``first .. first + T - 1`` of ``step`` of every task, into ``out`` (or :meth:`buffers`). ``step``:
        an int, or (PyTorch path) :attr:`step_tensor` holding it."""
        if out is None:
            out = self.buffers(T, protos)
        if self._drawer is not None:
            self._drawer.draw(step, first, out)
        else:
            if step is not self.step_tensor:
                self.step_tensor.fill_(int(step))
            t = draw_torch(self.keys, self.plan, self.step_tensor, first, T, self.dtype)
            n_max = self.plan.dims[0]
            out.xs[..., :n_max].copy_(t.xs)
            out.lab[..., :n_max].copy_(t.lab)
            for name in ("xq", "lq", "protos", "length_words"):
                dst = getattr(out, name)
                if dst is not None:
                    dst.copy_(getattr(t, name))
        return out

    def masks(self, tasks: Tasks) -> tuple:
        """Per configuration ``ctx_mask`` ((K, 1, n_max), (K, T, n_max) for a mixture, or None) and ``class_mask``
        ((K, 1, C_max) or None)."""
        plan = self.plan
        n_max, C_max = plan.dims[0], plan.dims[1]
        slots = torch.arange(n_max, device=self.device)
        lengths = context_lengths(plan, tasks.length_words)
        if lengths is not None:
            ctx = slots.view(1, 1, -1) < lengths.unsqueeze(-1)
        else:
            ctx = (slots.view(1, 1, -1) < plan.unit_n.view(-1, 1, 1)) if plan.short else None
        cls = (torch.arange(C_max, device=self.device).view(1, 1, -1) < plan.unit_C.view(-1, 1, 1)
               if plan.mask_classes else None)
        return ctx, cls

    def batch(self, tasks: Tasks, rows=None) -> ClsBatch:
        """The contexts of every configuration (or of the configurations ``rows``) as a :class:`ClsBatch` (gathered
        from their tasks' rows: a copy per configuration)."""
        ctx, cls = self.masks(tasks)
        g = self.plan.group
        if rows is not None:
            rows = torch.as_tensor(rows, device=self.device)
            g = g[rows]
            ctx = None if ctx is None else ctx[rows]
            cls = None if cls is None else cls[rows]
        n_max, C_max = self.plan.dims[:2]
        lab = tasks.lab[g][..., :n_max].long()
        return ClsBatch(tasks.xs[g][..., :n_max].transpose(-1, -2), _one_hot(lab, C_max, tasks.xs.dtype), tasks.xq[g],
                        tasks.lq[g].long(), lab, ctx, cls, None if tasks.protos is None else tasks.protos[g])

    def sample(self, batch_size: int, step: int = 1) -> ClsBatch:
        """The contexts of ``step`` (``batch_size`` per configuration) as a :class:`ClsBatch`."""
        return self.batch(self.draw(step, batch_size))


#: Most values a chunk of an evaluation set draws at once in PyTorch (the class-balanced pool is the large one).
_CHUNK_VALUES = 1 << 24


class ProcessStream:
    """:class:`ClsStream`'s interface for configurations whose task is a process of one's own
    (:class:`ContextProcess`), on the PyTorch path: every step, each distinct (seed, process, C, d, n) draws its
    contexts once from :func:`process_generator` (configurations that share them read the same contexts), padded to
    the sweep's ``dims``."""

    native = False
    drawer = None

    def __init__(self, configs: list[dict], dims, seeds: list[int], device, dtype=torch.float32):
        self.device, self.dtype, self.dims = torch.device(device), dtype, tuple(dims)
        if any(int(c.get("n_min", 0) or 0) > 0 for c in configs):
            raise ValueError("n_min (a mixture of context lengths) is not available with a process of one's own")
        unknown = sorted({c["reading"] for c in configs if c["reading"] not in _PROCESSES})
        if unknown:
            raise ValueError(f"reading(s) {unknown} are not registered processes; a sweep mixes the paper's readings "
                             "with processes of one's own only in separate sweeps")
        self.configs, self.seeds = configs, seeds
        self.groups: dict[tuple, list[int]] = {}
        for i, c in enumerate(configs):
            key = (int(c["seed"]), c["reading"], int(c["C"]), int(c["d"]), int(c["n"]))
            self.groups.setdefault(key, []).append(i)
        self.step_tensor = torch.zeros((), dtype=torch.int64)

    def draw_batch(self, step: int, T: int, first: int = 0) -> ClsBatch:
        """Contexts ``first .. first + T - 1`` of ``step`` of every configuration, as a :class:`ClsBatch`."""
        n_max, C_max, P_max, d_max = self.dims
        K = len(self.configs)
        x_ctx = torch.zeros(K, T, n_max, d_max, dtype=self.dtype)
        x_q = torch.zeros(K, T, d_max, dtype=self.dtype)
        lab_ctx = torch.zeros(K, T, n_max, dtype=torch.long)
        lab_q = torch.zeros(K, T, dtype=torch.long)
        for (seed, reading, C, d, n), idx in self.groups.items():
            proc = _PROCESSES[reading]
            gen = process_generator(self.seeds[seed], step)
            x, lab = proc(gen, first + T, n, C, d)
            x, lab = torch.as_tensor(x)[first:], torch.as_tensor(lab)[first:]
            if tuple(x.shape) != (T, n + 1, d) or tuple(lab.shape) != (T, n + 1):
                raise ValueError(f"{type(proc).__name__}.__call__ returned x {tuple(x.shape)} and labels "
                                 f"{tuple(lab.shape)}; expected ({first + T}, {n + 1}, {d}) and ({first + T}, {n + 1})")
            lab = lab.long()
            if lab.numel() and (int(lab.min()) < 0 or int(lab.max()) >= C):
                raise ValueError(f"{type(proc).__name__} returned labels outside 0 .. C - 1 = {C - 1}")
            x_ctx[idx, :, :n, :d] = x[:, :n].to(self.dtype)
            x_q[idx, :, :d] = x[:, n].to(self.dtype)
            lab_ctx[idx, :, :n] = lab[:, :n]
            lab_q[idx] = lab[:, n]
        ns = torch.tensor([int(c["n"]) for c in self.configs])
        Cs = torch.tensor([int(c["C"]) for c in self.configs])
        ctx_mask = (torch.arange(n_max).view(1, 1, -1) < ns.view(-1, 1, 1)) if bool((ns < n_max).any()) else None
        cls_mask = (torch.arange(C_max).view(1, 1, -1) < Cs.view(-1, 1, 1)) if bool((Cs < C_max).any()) else None
        dev = self.device
        to = lambda t: None if t is None else t.to(dev)  # noqa: E731
        return ClsBatch(to(x_ctx), to(_one_hot(lab_ctx, C_max, self.dtype)), to(x_q), to(lab_q), to(lab_ctx),
                        to(ctx_mask), to(cls_mask), None)

    def sample(self, batch_size: int, step=1) -> ClsBatch:
        return self.draw_batch(int(step), batch_size)


def uses_process(configs: list[dict]) -> bool:
    """Whether any configuration's task is a process of one's own."""
    return any(c.get("reading", "uniform") not in READINGS for c in configs)


def fixed_batch(settings: list[dict], dims, seed: int, n_contexts: int, device="cpu", dtype=torch.float32) -> ClsBatch:
    """A fixed set of contexts for each setting (dicts with reading, P, tau, k, C, d, n), all from one seed
    (common random numbers across settings): the evaluation and search sets. Contexts ``0 .. n_contexts - 1`` of
    step 0 of the stream of ``derive_seed(seed, 0)``, drawn in chunks (every context is its own stream)."""
    if uses_process(settings):
        return ProcessStream([dict(s, seed=0) for s in settings], dims, [derive_seed(seed, 0)], device,
                             dtype).draw_batch(0, int(n_contexts))
    stream = ClsStream([dict(s, seed=0) for s in settings], dims, [derive_seed(seed, 0)], device, dtype)
    plan, T = stream.plan, int(n_contexts)
    n_max, C_max, _, d_max = plan.dims
    per_context = plan.G * d_max * (POOL_FACTOR * (n_max + 1) if plan.has("balanced") else n_max + 1)
    chunk = T if stream.native else max(1, min(T, _CHUNK_VALUES // per_context))
    full = Tasks.empty(plan, 1, T, device, dtype, protos=True)
    for t0 in range(0, T, chunk):
        stream.draw(0, min(chunk, T - t0), first=t0, out=full.rows(slice(t0, t0 + chunk)))
    b = stream.batch(full)
    source = None
    if stream.native:
        source = TaskSource(full, plan.group.tolist(), plan.unit_C.tolist(), [int(s_["d"]) for s_ in settings],
                            plan.unit_n.tolist(), plan.dims)
    return ClsBatch(b.x_ctx.contiguous(), b.y_ctx, b.x_q, b.label_q, b.label_ctx, b.ctx_mask, b.class_mask, b.protos,
                    source)


def sample_contexts(batch: int, n: int, C: int, d: int, P: int = 1, seed: int = 0, device="cpu",
                    dtype=torch.float32, reading: str = "uniform", tau: float = 0.0, k: int = 0,
                    step: int = 0, native: bool | None = None) -> ClsBatch:
    """``batch`` contexts of one setting (K = 1): contexts ``0 .. batch - 1`` of ``step`` of the stream ``seed``
    (``native``: as :class:`ClsStream`)."""
    cfg = dict(seed=0, reading=reading, P=P, tau=tau, k=k, C=C, d=d, n=n)
    stream = ClsStream([cfg], (n, C, P, d), [int(seed)], device, dtype, native)
    return stream.batch(stream.draw(step, batch, protos=True))


def with_length(batch: ClsBatch, n: int) -> ClsBatch:
    """The same contexts read at length ``n``: only their first ``n`` examples are in use."""
    n_ctx = batch.x_ctx.shape[2]
    mask = None if n >= n_ctx else torch.arange(n_ctx, device=batch.x_ctx.device).view(1, 1, -1) < n
    if mask is not None:
        mask = mask.expand(batch.x_ctx.shape[0], 1, n_ctx)
    return ClsBatch(batch.x_ctx, batch.y_ctx, batch.x_q, batch.label_q, batch.label_ctx, mask, batch.class_mask,
                    batch.protos)


def prefix(batch: ClsBatch, n: int) -> ClsBatch:
    """The first ``n`` points of every context of ``batch`` (tasks drawn at a longer length, read at ``n``), cut
    rather than masked (:func:`with_length` masks): the batch's first ``n`` context slots must all be in use."""
    m = batch.ctx_mask
    if m is not None and not bool(m[..., :n].all()):
        raise ValueError(f"prefix: the batch's first n = {n} context slots are not all in use")
    return ClsBatch(batch.x_ctx[:, :, :n], batch.y_ctx[:, :, :n], batch.x_q, batch.label_q, batch.label_ctx[:, :, :n],
                    None, batch.class_mask, batch.protos)


def take(batch: ClsBatch, idx, sl: slice = slice(None)) -> ClsBatch:
    """Settings ``idx`` (and contexts ``sl``) of a batch."""
    idx = torch.as_tensor(idx, device=batch.x_ctx.device)
    m = batch.ctx_mask
    m = None if m is None else (m[idx] if m.shape[1] == 1 else m[idx, sl])
    return ClsBatch(batch.x_ctx[idx, sl], batch.y_ctx[idx, sl], batch.x_q[idx, sl], batch.label_q[idx, sl],
                    batch.label_ctx[idx, sl], m, None if batch.class_mask is None else batch.class_mask[idx],
                    None if batch.protos is None else batch.protos[idx, sl])
