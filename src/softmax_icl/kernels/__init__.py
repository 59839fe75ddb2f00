"""A fused CPU kernel for the trainer's inner loop: attention readout + squared error + gradient in M.

On the CPU, PyTorch runs the forward and backward pass of one attention unit as about seven passes over the
(configurations x tasks x context) tensors, each a separate kernel with its own memory traffic; sampling the
tasks needs about four. ``readout.c`` does the whole forward and backward pass of the loss in three passes
over each context while it is in cache, with the input dimension as a compile-time constant (d <= 12), and
splits the configurations over ``torch.get_num_threads()`` threads (each configuration on one thread, so the
numbers do not depend on the thread count).

The C source is compiled once per machine with the system C compiler (``$CC``, else ``cc``, ``gcc`` or
``clang``) into the result cache directory and loaded with :mod:`ctypes`; it needs no Python headers and
builds in seconds. Where no compiler works, or with ``SOFTMAX_ICL_KERNEL=torch``, the trainer uses the
equivalent PyTorch code (:func:`softmax_icl.models.predict`); the tests check that the two agree.
:func:`backend` says which one runs (it is recorded in every notebook's provenance and in the cache keys,
since the two round differently).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from ..base import KERNEL_ENV, cache_dir

SOURCE = Path(__file__).with_name("readout.c")
#: Flag sets tried in order: tuned for this CPU first, then portable.
FLAG_SETS = (["-O3", "-march=native", "-ffast-math"], ["-O3", "-ffast-math"])
#: ``SOFTMAX_ICL_KERNEL``: ``auto`` (default: the fused kernel where it builds) or ``torch``.
ENV = KERNEL_ENV

_lib: ctypes.CDLL | None = None
_status: str | None = None


def _compiler() -> str | None:
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def _cpu_id() -> str:
    """What ``-march=native`` depends on: the CPU model and its feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags", "Features", "CPU part"))]
        return "\n".join(sorted(set(keep)))
    except OSError:
        return platform.processor()


def _build_dir() -> Path:
    return cache_dir() / "kernels"


def _compile(cc: str) -> tuple[Path | None, str]:
    """Compile ``readout.c`` (or reuse an earlier build with the same source, compiler, flags and CPU)."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    errors = []
    for flags in FLAG_SETS:
        key = hashlib.sha256("\n".join([SOURCE.read_text(), cc, version, " ".join(flags), platform.machine(),
                                        _cpu_id()]).encode()).hexdigest()[:16]
        out = _build_dir() / f"readout-{key}.so"
        if out.exists():
            return out, f"{Path(cc).name} {' '.join(flags)}"
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".readout-", suffix=".so")
        os.close(fd)
        cmd = [cc, *flags, "-fPIC", "-shared", str(SOURCE), "-o", tmp, "-lm", "-lpthread"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if res.returncode == 0:
                os.replace(tmp, out)          # atomic: a concurrent or interrupted build never leaves half a file
                return out, f"{Path(cc).name} {' '.join(flags)}"
            errors.append(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}")
        finally:
            Path(tmp).unlink(missing_ok=True)
    return None, "; ".join(errors)


def _load() -> ctypes.CDLL | None:
    """Build and load the kernel once per process; remember why not if it cannot be."""
    global _lib, _status
    if _status is not None:
        return _lib
    choice = os.environ.get(ENV, "auto")
    if choice not in ("auto", "torch"):
        raise ValueError(f"{ENV}={choice!r} is not allowed; allowed values: 'auto', 'torch'")
    if choice == "torch":
        _status = f"torch ({ENV}=torch)"
        return None
    cc = _compiler()
    if cc is None:
        _status = "torch (no C compiler found; set CC to use the fused kernel)"
        return None
    try:
        path, how = _compile(cc)
        if path is None:
            _status = f"torch (the fused kernel did not compile: {how})"
            return None
        lib = ctypes.CDLL(str(path))
    except (OSError, subprocess.SubprocessError) as exc:
        _status = f"torch (the fused kernel could not be built or loaded: {exc})"
        return None
    fn = lib.readout_mse
    fn.restype = ctypes.c_int
    fn.argtypes = ([ctypes.c_int64] * 5 + [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 4 + [ctypes.c_int64]
                   + [ctypes.c_void_p] * 2)
    _lib, _status = lib, f"fused C kernel ({how})"
    return _lib


def backend() -> str:
    """Which implementation the CPU trainer uses, and why."""
    _load()
    return str(_status)


def usable(kind: str, M: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the fused kernel can compute this loss (CPU, float32, softmax or linear)."""
    return (kind in ("softmax", "linear") and M.device.type == "cpu" and y.device.type == "cpu"
            and M.dtype == torch.float32 and y.dtype == torch.float32 and _load() is not None)


def _inputs(x_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """The (R, B, n + 1, d) inputs with the query last: the tensor ``x_ctx`` and ``x_q`` are views of, as the
    sampler makes them (no copy), else a contiguous copy."""
    R, B, n, d = x_ctx.shape
    full = (R, B, n + 1, d)
    strides = (B * (n + 1) * d, (n + 1) * d, d, 1)
    if (x_ctx.stride() == strides and x_q.stride() == strides[:2] + (1,) and x_ctx.dtype == x_q.dtype
            and x_q.data_ptr() == x_ctx.data_ptr() + n * d * x_ctx.element_size()):
        return x_ctx.as_strided(full, strides)
    return torch.cat([x_ctx, x_q.unsqueeze(2)], dim=2).contiguous()


def _targets(f: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``f`` (R, G, B) and the step between consecutive targets: as it is if its elements sit at a fixed step
    (the sampler's targets are one column of the labels), else a contiguous copy."""
    R, G, B = f.shape
    s = f.stride(2)
    if f.stride() == (G * B * s, B * s, s):
        return f, s
    return f.contiguous(), 1


class _FusedMSE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, M, x_ctx, x_q, y, f, softmax):
        R, G, B, n = y.shape
        d = x_ctx.shape[-1]
        x = _inputs(x_ctx, x_q)
        f, fs = _targets(f)
        M, y = M.detach().contiguous(), y.contiguous()
        loss = torch.empty(R, G, dtype=torch.float32)
        grad = torch.empty(R, G, d, d, dtype=torch.float32)
        ok = _lib.readout_mse(R, G, B, n, d, int(softmax), torch.get_num_threads(), M.data_ptr(), x.data_ptr(),
                              y.data_ptr(), f.data_ptr(), fs, loss.data_ptr(), grad.data_ptr())
        if not ok:
            raise MemoryError("the fused readout kernel could not allocate its buffers")
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx, g):
        (grad,) = ctx.saved_tensors
        return grad * g[..., None, None], None, None, None, None, None


def readout_mse(kind: str, x_ctx, x_q, y_ctx, f_q, M) -> torch.Tensor:
    """Per-configuration mean squared error (R, G) of attention units ``M`` (R, G, d, d) on a task batch,
    differentiable in ``M``. Call only where :func:`usable` is true."""
    if M.device.type != "cpu" or y_ctx.device.type != "cpu":      # the kernel reads host memory: never a GPU tensor
        raise ValueError(f"the fused kernel runs on the CPU only; got tensors on {M.device} and {y_ctx.device}")
    if _load() is None:
        raise RuntimeError(f"the fused kernel is not available: {_status}")
    return _FusedMSE.apply(M, x_ctx, x_q, y_ctx, f_q, kind == "softmax")
