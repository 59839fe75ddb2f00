"""Paper 2's compiled CPU engine (``classification.c``): the task sampler and the classifiers' loss and gradient.

On the CPU a PyTorch step of a paper-scale sweep spends most of its time drawing and building tasks in many passes
over large temporaries, and the model's forward and backward passes are a dozen more. ``classification.c`` draws each
(seed, context) from the counter-based streams (``philox.h``, shared with paper 1's engine) and builds every task of
that seed while the context is in cache (:class:`Drawer`, ``cls_draw``: the scheme of
:mod:`softmax_icl.classification.tasks`), computes each configuration's mean cross-entropy and its gradient in
``A = W_K^T W_Q`` and ``W_V`` a context at a time while it is in cache (:class:`FusedLoss`, the function of
:func:`softmax_icl.classification.models.sa_logits` and :func:`softmax_icl.classification.metrics.masked_ce`), and a
training step's draws and loss together, a chunk of contexts of a seed at a time (:class:`FusedStep`, ``cls_step``:
the tasks never go to memory); it exports the step's update too (``unit_update`` of ``adam.h``,
:class:`.common.Update`). Work is split over ``threads`` threads of its own (by default ``torch.get_num_threads()``
when the object is made) by (seed, context) and by configuration, so the numbers do not depend on the thread count.

The source is compiled once per machine with the system C compiler, the flags and the build directory of paper 1's
engine (:mod:`softmax_icl.engine.regression`), and loaded with :mod:`ctypes`. ``SOFTMAX_ICL_KERNEL=torch`` (or no
compiler) selects the PyTorch code instead; :func:`backend` says which one runs. The tests hold the two against each
other.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import torch

from . import common

SOURCE = Path(__file__).with_name("classification.c")
#: What the engine is compiled from (its build and the result cache's fingerprint read them all).
SOURCES = (SOURCE, common.PHILOX, common.ADAM)

#: The engine works on blocks of this many points (``VEC`` in classification.c): a task's rows are padded to whole blocks.
ROW_BLOCK = 8

_lib: ctypes.CDLL | None = None
_status: str | None = None

_P = ctypes.c_void_p
_I = ctypes.c_int64


class DrawSpec(ctypes.Structure):
    """``draw_spec`` of classification.c."""

    _fields_ = [("S", _I), ("T", _I), ("G", _I), ("n_max", _I), ("C_max", _I), ("P_max", _I), ("d_max", _I),
                ("first", _I), ("step", _I), ("key_seed", _P), ("key_coord", _P), ("key_proto", _P),
                ("g_seed", _P), ("g_code", _P), ("g_P", _P), ("g_C", _P), ("g_d", _P), ("g_k", _P), ("g_n", _P),
                ("g_tau", _P), ("need_class", ctypes.c_int32), ("xs", _P), ("xq", _P), ("lab", _P), ("lq", _P),
                ("protos", _P), ("length_words", _P), ("threads", _I), ("work", _P)]


class LossSpec(ctypes.Structure):
    """``loss_spec`` of classification.c."""

    _fields_ = [("K", _I), ("T", _I), ("n_max", _I), ("C_max", _I), ("d_max", _I), ("group", _P), ("code", _P),
                ("C", _P), ("d", _P), ("n", _P), ("lengths", _P), ("A", _P), ("WV", _P), ("xs", _P), ("xq", _P),
                ("lab", _P), ("lq", _P), ("loss", _P), ("gA", _P), ("gWV", _P), ("logits", _P), ("threads", _I),
                ("work", _P)]


class StepSpec(ctypes.Structure):
    """``step_spec`` of classification.c."""

    _fields_ = [("d", DrawSpec), ("l", LossSpec), ("chunk", _I), ("part", _P), ("part_loss", _P), ("work", _P)]


def _load() -> ctypes.CDLL | None:
    """Build and load the engine once per process (:func:`softmax_icl.common.build_library`); remember why not if it
    cannot be."""
    global _lib, _status
    if _status is not None:
        return _lib
    lib, how = common.build_library("cls-engine", SOURCE, "classification engine", deps=SOURCES[1:])
    if lib is None:
        _status = how
        return None
    for name, spec, res in (("cls_draw", DrawSpec, ctypes.c_int), ("cls_draw_workspace", DrawSpec, ctypes.c_int64),
                            ("cls_loss", LossSpec, ctypes.c_int), ("cls_loss_workspace", LossSpec, ctypes.c_int64),
                            ("cls_logits", LossSpec, ctypes.c_int), ("cls_step", StepSpec, ctypes.c_int),
                            ("cls_step_workspace", StepSpec, ctypes.c_int64)):
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = [ctypes.POINTER(spec)]
    common.declare_update(lib)
    _lib, _status = lib, f"compiled engine ({how})"
    return _lib


def library() -> ctypes.CDLL:
    """The engine, built and loaded (for :class:`softmax_icl.engine.common.Update`, whose ``unit_update`` it exports too)."""
    if _load() is None:
        raise RuntimeError(f"the classification engine is not available: {_status}")
    return _lib


def backend() -> str:
    """Which implementation the classification sampler and loss use on the CPU, and why."""
    _load()
    return str(_status)


def available() -> bool:
    return _load() is not None


def row_length(n_max: int) -> int:
    """The padded length of a task's rows (:class:`softmax_icl.classification.plan.Tasks`): ``n_max`` rounded up to a whole block."""
    return -(-int(n_max) // ROW_BLOCK) * ROW_BLOCK


def _u32(words: torch.Tensor) -> torch.Tensor:
    """int64 words in [0, 2^32) as a contiguous int32 tensor of the same bits (what the C code reads as uint32)."""
    return torch.from_numpy(np.ascontiguousarray(words.cpu().numpy().astype(np.uint64).astype(np.uint32).view(np.int32)))


def _i32(v) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int32)


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _check(t: torch.Tensor, shape: tuple, dtype, name: str) -> None:
    if t.shape != shape or t.dtype != dtype or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError(f"the engine writes {name} into a contiguous CPU {dtype} tensor of shape {shape}; got "
                         f"{tuple(t.shape)} {t.dtype} on {t.device} (contiguous: {t.is_contiguous()})")


class _Workspace:
    """A per-thread scratch buffer made before a training loop and kept from one call to the next (it grows only
    if the thread count does)."""

    def __init__(self, size_fn, spec, threads: int):
        self.size_fn, self.buf = size_fn, torch.zeros(0, dtype=torch.uint8, device="cpu")
        self.of(spec, threads)

    def of(self, spec, threads: int) -> int:
        need = int(self.size_fn(ctypes.byref(spec))) * threads
        if self.buf.numel() < need:
            self.buf = torch.zeros(need, dtype=torch.uint8, device="cpu")
        return self.buf.data_ptr()


class Drawer:
    """Draws a :class:`softmax_icl.classification.plan.TaskPlan`'s tasks with ``cls_draw`` on ``threads`` threads: the plan's arrays and keys
    converted once."""

    def __init__(self, keys, plan, threads: int | None = None):
        lib = _load()
        if lib is None:
            raise RuntimeError(f"the classification engine is not available: {_status}")
        self.lib, self.plan = lib, plan
        h = plan.host
        self._keep = [_u32(keys.seed), _u32(keys.coord), _u32(keys.proto)] + [
            _i32(h[name]) for name in ("seed", "code", "P", "C", "d", "k", "n")] + [
            torch.tensor(h["tau"], dtype=torch.float32)]
        n_max, C_max, P_max, d_max = plan.dims
        spec = DrawSpec(S=keys.seed.shape[0], G=plan.G, n_max=n_max, C_max=C_max, P_max=P_max, d_max=d_max,
                        need_class=int(plan.has("clustered") or plan.has("balanced")))
        for name, t in zip(("key_seed", "key_coord", "key_proto", "g_seed", "g_code", "g_P", "g_C", "g_d", "g_k",
                            "g_n", "g_tau"), self._keep):
            setattr(spec, name, t.data_ptr())
        self.spec = spec
        self.threads = torch.get_num_threads() if threads is None else int(threads)
        self.work = _Workspace(lib.cls_draw_workspace, spec, self.threads)

    def draw(self, step: int, first: int, out) -> None:
        """Contexts ``first .. first + T - 1`` of ``step`` into ``out`` (:class:`softmax_icl.classification.plan.Tasks`, contiguous CPU)."""
        s, plan = self.spec, self.plan
        n_max, C_max, P_max, d_max = plan.dims
        G, T, N = plan.G, out.xq.shape[1], row_length(n_max)
        _check(out.xs, (G, T, d_max, N), torch.float32, "xs")
        _check(out.xq, (G, T, d_max), torch.float32, "xq")
        _check(out.lab, (G, T, N), torch.int32, "lab")
        _check(out.lq, (G, T), torch.int32, "lq")
        if out.protos is not None:
            _check(out.protos, (G, T, C_max, P_max, d_max), torch.float32, "protos")
        if plan.mixture:
            _check(out.length_words, (s.S, T), torch.int64, "length_words")
        s.T, s.first, s.step = T, int(first), int(step)
        s.xs, s.xq, s.lab, s.lq = out.xs.data_ptr(), out.xq.data_ptr(), out.lab.data_ptr(), out.lq.data_ptr()
        s.protos = _ptr(out.protos)
        s.length_words = _ptr(out.length_words) if plan.mixture else None
        s.threads = self.threads
        s.work = self.work.of(s, s.threads)
        self.lib.cls_draw(ctypes.byref(s))


class FusedLoss:
    """Per-configuration mean cross-entropy of attention classifiers on a :class:`softmax_icl.classification.plan.Tasks` batch and its gradient
    in ``A = W_K^T W_Q`` and ``W_V`` (K, D, D): :meth:`compute` writes them into :attr:`loss`, :attr:`gA`,
    :attr:`gWV`.

    ``group``, ``code`` (model codes of :data:`.models.MODEL_CODES`), ``C``, ``d``, ``n``: (K,) per configuration,
    fixed for the life of the object (a training program); ``lengths`` (K, T) per call for a mixture of lengths;
    ``threads`` as :class:`Drawer`.
    """

    def __init__(self, group, code, C, d, n, dims, threads: int | None = None):
        lib = _load()
        if lib is None:
            raise RuntimeError(f"the classification engine is not available: {_status}")
        self.lib = lib
        self._keep = [_i32(torch.as_tensor(v).tolist()) for v in (group, code, C, d, n)]
        n_max, C_max, _, d_max = dims
        spec = LossSpec(K=len(self._keep[0]), n_max=n_max, C_max=C_max, d_max=d_max)
        for name, t in zip(("group", "code", "C", "d", "n"), self._keep):
            setattr(spec, name, t.data_ptr())
        self.spec = spec
        D = d_max + C_max
        K = spec.K
        self.loss = torch.empty(K, dtype=torch.float32, device="cpu")
        self.gA = torch.empty(K, D, D, dtype=torch.float32, device="cpu")
        self.gWV = torch.empty(K, D, D, dtype=torch.float32, device="cpu")
        self.threads = torch.get_num_threads() if threads is None else int(threads)
        self.work = _Workspace(lib.cls_loss_workspace, spec, self.threads)

    def compute(self, A: torch.Tensor, WV: torch.Tensor, tasks, lengths: torch.Tensor | None = None) -> None:
        """The loss of ``A``, ``WV`` on ``tasks`` (``lengths`` (K, T): a mixture's context lengths, else None) into
        :attr:`loss`, its gradient into :attr:`gA`, :attr:`gWV`."""
        s = self.spec
        A, WV = A.detach().contiguous(), WV.detach().contiguous()
        for t, name in ((A, "A"), (WV, "WV")):
            _check(t, tuple(self.gA.shape), torch.float32, name)
        T, N = tasks.xq.shape[1], row_length(s.n_max)
        if tasks.xs.shape[1:] != (T, s.d_max, N) or tasks.lab.shape[1:] != (T, N):
            raise ValueError(f"the engine reads tasks of {T} contexts with rows of {N} points (tasks.Tasks)")
        for name in ("xs", "xq", "lab", "lq"):
            if not getattr(tasks, name).is_contiguous():
                raise ValueError(f"the engine reads contiguous tasks; {name} is not")
        if lengths is not None:
            lengths = lengths.to(torch.int64).contiguous()
            _check(lengths, (s.K, T), torch.int64, "lengths")
        s.T = T
        s.lengths = _ptr(lengths)
        s.A, s.WV = A.data_ptr(), WV.data_ptr()
        s.xs, s.xq, s.lab, s.lq = (getattr(tasks, name).data_ptr() for name in ("xs", "xq", "lab", "lq"))
        s.loss, s.gA, s.gWV = self.loss.data_ptr(), self.gA.data_ptr(), self.gWV.data_ptr()
        s.threads = self.threads
        s.work = self.work.of(s, s.threads)
        self.lib.cls_loss(ctypes.byref(s))


#: Contexts per seed a fused step (``cls_step``) draws and then reads while they are in the core's cache: sixteen
#: contexts of the nine tasks of a seed of ``train_readings_n200`` (n = 200, d = 5) are 0.7 MB. Chunks of 8 to 32 ran
#: alike on train_readings_n200; the numbers depend on it (the sums per chunk).
STEP_CHUNK = 16


class FusedStep:
    """The loss and gradient of a :class:`FusedLoss`'s configurations on ``T`` contexts of a :class:`Drawer`'s tasks
    per step, drawn and read a chunk of ``chunk`` contexts of one seed at a time (``cls_step``) instead of drawing every
    task of the step to memory and reading it back once per configuration (:meth:`Drawer.draw`, then
    :meth:`FusedLoss.compute`, which it equals to float rounding: each configuration's contexts are summed per chunk,
    then the chunks in order; the numbers do not depend on the thread count). Not for mixtures of context lengths
    (their lengths come from the drawn tasks)."""

    def __init__(self, drawer: Drawer, loss: FusedLoss, T: int, chunk: int = STEP_CHUNK):
        if drawer.plan.mixture:
            raise ValueError("a fused step does not take a mixture of context lengths (n_min); draw, then compute")
        if int(T) < 1:
            raise ValueError(f"T={T} must be a positive number of contexts")
        if int(chunk) < 1:
            raise ValueError(f"chunk={chunk} must be a positive number of contexts")
        self.lib, self.drawer, self.fused, self.T, self.chunk = drawer.lib, drawer, loss, int(T), int(chunk)
        spec = StepSpec()
        ctypes.memmove(ctypes.byref(spec.d), ctypes.byref(drawer.spec), ctypes.sizeof(DrawSpec))
        ctypes.memmove(ctypes.byref(spec.l), ctypes.byref(loss.spec), ctypes.sizeof(LossSpec))
        spec.d.T, spec.l.T = self.T, self.T
        spec.d.protos = spec.d.length_words = spec.l.lengths = None
        spec.l.loss, spec.l.gA, spec.l.gWV = loss.loss.data_ptr(), loss.gA.data_ptr(), loss.gWV.data_ptr()
        K, D = loss.gA.shape[0], loss.gA.shape[1]
        chunks = -(-self.T // self.chunk)
        self.part = torch.empty(K, chunks, 2, D, D, dtype=torch.float32, device="cpu")
        self.part_loss = torch.empty(K, chunks, dtype=torch.float64, device="cpu")
        spec.chunk, spec.part, spec.part_loss = self.chunk, self.part.data_ptr(), self.part_loss.data_ptr()
        spec.d.threads = drawer.threads
        self.spec = spec
        self.work = _Workspace(self.lib.cls_step_workspace, spec, spec.d.threads)

    loss = property(lambda self: self.fused.loss)
    gA = property(lambda self: self.fused.gA)
    gWV = property(lambda self: self.fused.gWV)

    def compute(self, A: torch.Tensor, WV: torch.Tensor, step: int, first: int = 0) -> None:
        """Contexts ``first .. first + T - 1`` of ``step``: the loss into :attr:`loss`, its gradient into :attr:`gA`,
        :attr:`gWV`."""
        s = self.spec
        A, WV = A.detach().contiguous(), WV.detach().contiguous()
        for t, name in ((A, "A"), (WV, "WV")):
            _check(t, tuple(self.fused.gA.shape), torch.float32, name)
        s.d.step, s.d.first = int(step), int(first)
        s.l.A, s.l.WV = A.data_ptr(), WV.data_ptr()
        s.work = self.work.of(s, s.d.threads)
        if not self.lib.cls_step(ctypes.byref(s)):
            raise RuntimeError("cls_step refused its arguments")


def unit_logits(A: torch.Tensor, WV: torch.Tensor, code, group, C, d, n, tasks, dims,
                threads: int | None = None) -> torch.Tensor:
    """Logits (K, T, C_max) of K attention units on the T contexts of their tasks (``tasks``: :class:`softmax_icl.classification.plan.Tasks`;
    ``group``, ``code``, ``C``, ``d``, ``n``: (K,) each unit's task, model code, sizes and context length), computed
    by the engine's forward pass (:func:`.models.sa_logits`, to rounding). No gradient."""
    lib = _load()
    if lib is None:
        raise RuntimeError(f"the classification engine is not available: {_status}")
    n_max, C_max, _, d_max = dims
    keep = [_i32(torch.as_tensor(v).reshape(-1).tolist()) for v in (group, code, C, d, n)]
    K, T = len(keep[0]), tasks.xq.shape[1]
    A, WV = A.detach().float().contiguous(), WV.detach().float().contiguous()
    D = d_max + C_max
    for t, name in ((A, "A"), (WV, "WV")):
        _check(t, (K, D, D), torch.float32, name)
    out = torch.empty(K, T, C_max, dtype=torch.float32, device="cpu")
    spec = LossSpec(K=K, T=T, n_max=n_max, C_max=C_max, d_max=d_max, A=A.data_ptr(), WV=WV.data_ptr(),
                    xs=tasks.xs.data_ptr(), xq=tasks.xq.data_ptr(), lab=tasks.lab.data_ptr(), lq=tasks.lq.data_ptr(),
                    logits=out.data_ptr(), threads=torch.get_num_threads() if threads is None else int(threads))
    for name, t in zip(("group", "code", "C", "d", "n"), keep):
        setattr(spec, name, t.data_ptr())
    work = _Workspace(lib.cls_loss_workspace, spec, spec.threads)
    spec.work = work.of(spec, spec.threads)
    lib.cls_logits(ctypes.byref(spec))
    return out
