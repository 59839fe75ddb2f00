"""The CPU engine of paper 1's trainer: tasks drawn, labelled and consumed by the readout while they are in cache.

On the CPU a training step of PyTorch code writes every task to memory (inputs, labels, noise: hundreds of MB a step
at the paper profile) and reads it back in a dozen separate passes; drawing the random numbers alone is most of the
step. ``regression.c`` does the whole step of a sweep's task streams (one per context length) in one call
(``fused_steps``, :meth:`FusedProgram.run`): it draws each task from the counter-based streams (``philox.h``, the
scheme of :mod:`softmax_icl.streams` in C), labels it for every configuration of its row, and runs the readout's
forward and backward pass on it while it is in cache, every stream's tasks shared out over
``torch.get_num_threads()`` threads together (each task's results in its own slot, summed in a fixed order: no number
depends on the thread count). The buffers it works in are made once per stream (:class:`FusedStream`), never in the
training loop. :func:`sample_raw` draws the same tasks into tensors (the evaluation sets on the CPU);
:func:`stream_values` exposes the counter scheme itself, for the tests; :func:`window_sums` is the inner loop of
:func:`softmax_icl.theory.relu_window_scan`, :func:`segment_exp` the softmax weights of an evaluation at several
prefix lengths (:func:`softmax_icl.models.segment_weights`).

The C source is compiled once per machine with the system C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``)
into the result cache directory and loaded with :mod:`ctypes`; it needs no Python headers. Where no compiler works,
or with ``SOFTMAX_ICL_KERNEL=torch``, the same draws and the same computation run in PyTorch
(:mod:`softmax_icl.streams`, :mod:`softmax_icl.models`), equal to rounding; the tests check that. :func:`backend`
says which one runs (recorded in every notebook's provenance and in the cache keys, since the two round
differently).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import torch

from .common import ADAM, ENV, PHILOX, Update, build_library, declare_update

HERE = Path(__file__).parent
SOURCE = HERE / "regression.c"
SOURCES = (SOURCE, PHILOX, ADAM)
#: The engine's codes of the function classes (regression.c's ``labels``).
CLASS_CODES = {"affine": 0, "relu": 1, "cosine": 2, "cosine_centered": 3, "lowrank_linear": 4, "lowrank_affine": 5,
               "lowrank_quadratic": 6, "lowrank_cosine": 7}
INPUT_CODES = {"isotropic": 0, "nonisotropic": 1, "nonisotropic_whitened": 2}
#: Largest input dimension (and low-rank rank) the engine takes; larger ones run in PyTorch.
DMAX = 64
#: Largest ``|L|`` of the cosine classes: their argument ``L p + phase`` must stay within the range reduction's
#: (8192).
COSINE_L_MAX = 1000.0

_lib: ctypes.CDLL | None = None
_status: str | None = None


class _Spec(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("R", "B", "n", "d", "k", "first_task", "step", "input_dist",
                                                     "nthreads")] + [(name, ctypes.c_void_p) for name in
                                                                     ("keys", "sqrt_cov", "basis")]


class _Step(ctypes.Structure):
    _fields_ = [("G", ctypes.c_int64), ("softmax", ctypes.c_int64)] + [
        (name, ctypes.c_void_p) for name in ("cls", "L", "sigma", "cmean", "M", "results", "queries", "scratch",
                                             "loss", "grad")]


class _Scan(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("B", "n", "W", "K")] + [
        (name, ctypes.c_void_p) for name in ("bounds", "w", "c", "pp", "pm", "out")]


class _SegExp(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("rows", "n", "K")] + [
        (name, ctypes.c_void_p) for name in ("bounds", "s", "stats")]



def _load() -> ctypes.CDLL | None:
    """Build and load the engine once per process; remember why not if it cannot be."""
    global _lib, _status
    if _status is not None:
        return _lib
    lib, how = build_library("engine", SOURCE, "fused kernel", SOURCES[1:])
    if lib is None:
        _status = how
        return None
    spec, step = ctypes.POINTER(_Spec), ctypes.POINTER(_Step)
    lib.sample_raw.restype = lib.fused_steps.restype = ctypes.c_int
    lib.fused_steps.argtypes = [spec, step, ctypes.c_int64, ctypes.c_int64]
    lib.sample_raw.argtypes = [spec] + [ctypes.c_void_p] * 7
    lib.scratch_floats.restype = ctypes.c_int64
    lib.scratch_floats.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.window_sums.restype = ctypes.c_int
    lib.window_sums.argtypes = [ctypes.POINTER(_Scan), ctypes.c_int64]
    lib.segment_exp.restype = ctypes.c_int
    lib.segment_exp.argtypes = [ctypes.POINTER(_SegExp), ctypes.c_int64]
    declare_update(lib)
    lib.stream_values.restype = None
    lib.stream_values.argtypes = [ctypes.c_uint32] * 5 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                                           ctypes.c_void_p]
    _lib, _status = lib, f"fused C kernel ({how})"
    return _lib


def backend() -> str:
    """Which implementation the CPU trainer uses, and why."""
    _load()
    return str(_status)


def available() -> bool:
    """Whether the engine is built and chosen (``SOFTMAX_ICL_KERNEL`` is not ``torch``)."""
    return _load() is not None


def _require() -> ctypes.CDLL:
    if _load() is None:
        raise RuntimeError(f"the fused kernel is not available: {_status}")
    return _lib


def library() -> ctypes.CDLL:
    """The loaded engine (for :class:`softmax_icl.engine.common.Update`); RuntimeError naming why when it is not
    available."""
    return _require()


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _keys_u32(keys: torch.Tensor) -> torch.Tensor:
    """Stream keys (R, 2) int64 in [0, 2^32) as the (R, 2) uint32 words the engine reads (an int32 tensor)."""
    k = keys.detach().cpu().numpy().astype(np.uint32)
    return torch.from_numpy(k.view(np.int32).copy())


def stream_values(seed: int, tag: int, step: int, task: int, first: int, count: int, kind: str) -> torch.Tensor:
    """Values ``first`` to ``first + count - 1`` of the sequence (key(seed), tag, step, task) computed by the engine:
    ``kind`` ``words`` (int64), ``uniform`` or ``normal`` (float32). For the tests."""
    lib = _require()
    kinds = {"words": 0, "uniform": 1, "normal": 2}
    if kind not in kinds:
        raise ValueError(f"kind={kind!r} is not one of {tuple(kinds)}")
    out = torch.empty(count, dtype=torch.int32 if kind == "words" else torch.float32)
    k0, k1 = int(seed) & 0xFFFFFFFF, (int(seed) >> 32) & 0xFFFFFFFF
    lib.stream_values(k0, k1, int(tag), int(step), int(task), int(first), int(count), kinds[kind], out.data_ptr())
    return out.to(torch.int64) & 0xFFFFFFFF if kind == "words" else out


def window_sums(w: torch.Tensor, c: torch.Tensor, pp: torch.Tensor, pm: torch.Tensor, bounds) -> torch.Tensor:
    """For every task b, segment k (points ``bounds[k]`` to ``bounds[k + 1] - 1``) and window ``w[j]``: the sums over
    the segment of ``e_i = exp(w_j (c_i - max c))``, ``e_i pp_i``, ``e_i pm_i`` and ``e_i^2``, as a (B, K, W, 4) float32
    tensor. ``w`` (W,), ``c``, ``pp``, ``pm`` (B, n): contiguous float32 CPU tensors. The engine's version of the
    PyTorch loop in :func:`softmax_icl.theory.relu_window_scan` (equal to rounding; a test holds them together)."""
    lib = _require()
    for name, t in (("w", w), ("c", c), ("pp", pp), ("pm", pm)):
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
            raise ValueError(f"window_sums reads contiguous float32 CPU tensors; {name!r} is not one")
    B, n = c.shape
    if pp.shape != c.shape or pm.shape != c.shape or w.dim() != 1:
        raise ValueError(f"window_sums: c, pp, pm must share one (B, n) shape and w be 1-d; got {tuple(c.shape)}, "
                         f"{tuple(pp.shape)}, {tuple(pm.shape)}, {tuple(w.shape)}")
    bnd = torch.tensor([int(v) for v in bounds], dtype=torch.int64)
    K, W = bnd.numel() - 1, w.numel()
    out = torch.empty(B, K, W, 4, dtype=torch.float32)
    spec = _Scan(B=B, n=n, W=W, K=K, bounds=_ptr(bnd), w=_ptr(w), c=_ptr(c), pp=_ptr(pp), pm=_ptr(pm),
                 out=_ptr(out))
    if not lib.window_sums(ctypes.byref(spec), torch.get_num_threads()):
        raise ValueError(f"window_sums: bounds {list(bounds)} are not increasing segments of 0..{n}")
    return out


def segment_exp(s: torch.Tensor, bounds) -> torch.Tensor:
    """Rows of scores ``s`` (..., n), a contiguous float32 CPU tensor, cut into the segments ``bounds[k]`` to
    ``bounds[k + 1] - 1``: every score is replaced, in place, by its weight ``exp(s_i - max)`` relative to its
    segment's largest score (0 below exp(-40)); returns (..., K, 3): each segment's largest score, sum of weights and
    sum of squared weights."""
    lib = _require()
    if s.dtype != torch.float32 or s.device.type != "cpu" or not s.is_contiguous():
        raise ValueError("segment_exp works on a contiguous float32 CPU tensor")
    bnd = torch.tensor([int(v) for v in bounds], dtype=torch.int64)
    n, K = s.shape[-1], bnd.numel() - 1
    stats = torch.empty(*s.shape[:-1], K, 3, dtype=torch.float32)
    spec = _SegExp(rows=s.numel() // max(n, 1), n=n, K=K, bounds=_ptr(bnd), s=_ptr(s), stats=_ptr(stats))
    if not lib.segment_exp(ctypes.byref(spec), torch.get_num_threads()):
        raise ValueError(f"segment_exp: bounds {list(bounds)} are not increasing segments of 0..{n}")
    return stats


def usable(device, d: int, k: int) -> bool:
    """Whether the engine draws (and trains on) tasks of this shape on ``device``: the CPU, d and k at most DMAX,
    the engine built and chosen. The one switch between the engine and PyTorch (the tests turn it off)."""
    return torch.device(device).type == "cpu" and 1 <= d <= DMAX and 1 <= k <= DMAX and available()


def _spec(R: int, B: int, n: int, d: int, k: int, first_task: int, step: int, input_dist: str, keys: torch.Tensor,
          sqrt_cov: torch.Tensor | None, basis: torch.Tensor | None) -> _Spec:
    return _Spec(R=R, B=B, n=n, d=d, k=k, first_task=first_task, step=step, input_dist=INPUT_CODES[input_dist],
                 nthreads=torch.get_num_threads(), keys=_ptr(keys), sqrt_cov=_ptr(sqrt_cov), basis=_ptr(basis))


def sample_raw(input_dist: str, keys: torch.Tensor, n: int, first_task: int, step: int, out: dict,
               sqrt_cov: torch.Tensor | None = None) -> dict:
    """Draw tasks ``first_task`` to ``first_task + B - 1`` of every key at ``step`` into ``out``: contiguous float32 CPU
    tensors ``x`` (R, B, n + 1, d), ``u`` (R, B, d), ``a`` (R, B, k), ``coef`` (R, B, 3), ``phase`` (R, B), ``noise``
    (R, B, n), and ``x_task`` (R, B, n + 1, d) for whitened inputs (see :func:`softmax_icl.tasks.draw_rows`;
    ``coef`` and ``phase`` already scaled to [-1, 1) and [0, 2 pi)). ``sqrt_cov`` (d,) float32, or None."""
    lib = _require()
    R, B, n1, d = out["x"].shape
    k = out["a"].shape[-1]
    names = ("x", "u", "a", "coef", "phase", "noise") + (("x_task",) if input_dist == "nonisotropic_whitened" else ())
    for name in names:
        t = out[name]
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
            raise ValueError(f"sample_raw writes contiguous float32 CPU tensors; {name!r} is not one")
    spec = _spec(R, B, n1 - 1, d, k, first_task, step, input_dist, _keys_u32(keys), sqrt_cov, None)
    ok = lib.sample_raw(ctypes.byref(spec), *(_ptr(out.get(name)) for name in ("x", "x_task", "u", "a", "coef",
                                                                                  "phase", "noise")))
    if not ok:
        raise ValueError(f"the engine takes 1 <= d, k <= {DMAX}; got d = {d}, k = {k}")
    return out


class FusedStream:
    """One task stream of a fused training step (R rows x G configurations at context length n), with every buffer
    the engine needs for it, made once; :class:`FusedProgram` runs the step of a sweep's streams.

    ``keys`` (R, 2) the rows' stream keys; ``classes`` (R, G) class names, ``L``, ``sigma``, ``cos_mean`` (R, G)
    (``cos_mean``: E_x cos(L w^T x), used by the centred cosine class); ``sqrt_cov`` (d,) or None, ``basis`` (d, k)
    or None, float32.
    """

    def __init__(self, input_dist: str, keys: torch.Tensor, n: int, batch: int, d: int, k: int, classes,
                 L: torch.Tensor, sigma: torch.Tensor, cos_mean: torch.Tensor, softmax: bool,
                 sqrt_cov: torch.Tensor | None, basis: torch.Tensor | None):
        lib = _require()
        R, G = L.shape
        self.R, self.G, self.n, self.B, self.d, self.k = R, G, int(n), int(batch), int(d), int(k)
        self.input_dist, self.softmax = input_dist, bool(softmax)
        self.keys = _keys_u32(keys)
        self.cls = torch.tensor([[CLASS_CODES[c] for c in row] for row in classes], dtype=torch.int32)
        self.L, self.sigma, self.cmean = (t.detach().to("cpu", torch.float32).contiguous()
                                          for t in (L, sigma, cos_mean))
        self.sqrt_cov = None if sqrt_cov is None else sqrt_cov.to("cpu", torch.float32).contiguous()
        self.basis = None if basis is None else basis.to("cpu", torch.float32).contiguous()
        self.results = torch.empty(R, G, self.B, d + 1)
        self.queries = torch.empty(R, self.B, d)
        self.slots = min(64, max(torch.get_num_threads(), os.cpu_count() or 1))
        self.per_thread = int(lib.scratch_floats(self.n, d))
        self.scratch = torch.empty(self.slots * self.per_thread)

    @staticmethod
    def usable(classes, L: torch.Tensor, d: int, k: int, device) -> bool:
        """Whether the engine can train these configurations (:func:`usable`, built-in classes only, and cosine
        classes with ``|L| <= COSINE_L_MAX``). Reads ``L`` on the host: call it outside training loops."""
        if not usable(device, d, k) or any(c not in CLASS_CODES for row in classes for c in row):
            return False                         # a class of one's own (softmax_icl.tasks.FunctionClass): PyTorch
        cosine = torch.tensor([[c in ("cosine", "cosine_centered", "lowrank_cosine") for c in row] for row in classes])
        return not (cosine.any() and bool((L.detach().abs().cpu() * cosine).max() > COSINE_L_MAX))


class FusedProgram:
    """The fused training step of several task streams in one call of the engine (``fused_steps``): a sweep's
    streams, one per context length, whose units' matrices lie one after the other in one (C, d, d) tensor, stream
    ``i`` at rows ``starts[i]`` to ``starts[i] + R_i G_i``.

    One call per step instead of one per stream: the engine cuts every stream's tasks over the threads by their work
    (short contexts share the threads with long ones) and starts its threads twice a step, not twice per stream, and
    the numbers are each stream's alone, bit for bit (every task's results in its own slot, summed in task order).
    """

    def __init__(self, streams: list[FusedStream], starts: list[int]):
        lib = _require()
        if not streams or len(streams) != len(starts) or len(streams) > 256:
            raise ValueError(f"a fused program takes 1 to 256 streams with one start each; got {len(streams)} "
                             f"streams and {len(starts)} starts")
        d = streams[0].d
        if any(f.d != d for f in streams):
            raise ValueError("the streams of a fused program must share the input dimension d")
        self.streams, self.d, self._lib = list(streams), d, lib
        self.starts = [int(s) for s in starts]
        self.size = max(s + f.R * f.G for s, f in zip(self.starts, self.streams))
        self.specs = (_Spec * len(streams))()
        self.steps = (_Step * len(streams))()
        for i, f in enumerate(streams):
            self.specs[i] = _spec(f.R, f.B, f.n, f.d, f.k, 0, 0, f.input_dist, f.keys, f.sqrt_cov, f.basis)
            self.steps[i] = _Step(G=f.G, softmax=int(f.softmax), cls=_ptr(f.cls), L=_ptr(f.L), sigma=_ptr(f.sigma),
                                  cmean=_ptr(f.cmean), results=_ptr(f.results), queries=_ptr(f.queries),
                                  scratch=_ptr(f.scratch))

    def run(self, M: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss (C,) and its gradient in M (C, d, d) at training step ``step``, for matrices ``M`` (C, d, d)."""
        M = M.detach().contiguous()
        if M.shape != (self.size, self.d, self.d) or M.dtype != torch.float32 or M.device.type != "cpu":
            raise ValueError(f"M must be a float32 CPU tensor of shape {(self.size, self.d, self.d)}; got "
                             f"{tuple(M.shape)}, {M.dtype}, {M.device}")
        loss = torch.empty(self.size)
        grad = torch.empty(self.size, self.d, self.d)
        threads = min([torch.get_num_threads()] + [f.slots for f in self.streams])
        dd = self.d * self.d * 4
        for i, start in enumerate(self.starts):
            self.specs[i].step, self.specs[i].nthreads = int(step), threads
            st = self.steps[i]
            st.M, st.loss, st.grad = M.data_ptr() + start * dd, loss.data_ptr() + start * 4, grad.data_ptr() + start * dd
        if not self._lib.fused_steps(self.specs, self.steps, len(self.streams), threads):
            raise ValueError(f"the engine takes 1 <= d, k <= {DMAX} and at most 256 streams")
        return loss, grad
