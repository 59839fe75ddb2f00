"""What both papers' C engines share: their build (the system C compiler, once per machine, into the engine cache)
and a training step's update (``adam.h``: Adam and the gradient through a key-query pair).

Each engine's source is compiled with the system C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``) into
``<cache>/kernels`` under a hash of its sources, compiler, flags and CPU, and loaded with :mod:`ctypes`; it needs no
Python headers. Where no compiler works, or with ``SOFTMAX_ICL_KERNEL=torch``, the same computation runs in PyTorch.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..base import KERNEL_ENV, PROGRESS_FILE_ENV, atomic_write_bytes, cache_dir

HERE = Path(__file__).parent
#: A training step's update (Adam, a key-query pair's gradient), shared by both engines.
ADAM = HERE / "adam.h"
#: The counter-based generator and its float conversions, shared by both engines.
PHILOX = HERE / "philox.h"

#: Flag sets tried in order: tuned for this CPU first, then portable.
FLAG_SETS = (["-O3", "-march=native", "-ffast-math"], ["-O3", "-ffast-math"])
#: ``SOFTMAX_ICL_KERNEL``: ``auto`` (default: the fused engine where it builds) or ``torch``.
ENV = KERNEL_ENV


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


def _say_compiling(what: str, source: Path) -> None:
    """One line saying that an engine is being compiled (the first run on a machine waits for it without a word
    otherwise): in the status file of the runner that shows this kernel's progress in its terminal
    (``$SOFTMAX_ICL_PROGRESS_FILE``, a line with no step count), else on stderr, except inside a notebook kernel,
    whose stderr would land in the notebook's stored outputs."""
    text = f"softmax-icl: compiling the {what} ({source.name}) for this machine: once, up to a minute"
    status = os.environ.get(PROGRESS_FILE_ENV)
    try:
        if status:
            atomic_write_bytes(Path(status), f"{text}\t0\t0\n".encode())
        elif not type(sys.stderr).__module__.startswith("ipykernel"):        # not a notebook kernel's output
            print(text, file=sys.stderr, flush=True)
    except OSError:                 # a message must never stop a build
        pass


def _compile(cc: str, name: str, source: Path, deps=(), what: str = "engine") -> tuple[Path | None, str]:
    """Compile ``source`` (including the headers ``deps``, found beside it) into ``<name>-<key>.so`` in the build
    directory, or reuse an earlier build with the same sources, compiler, flags and CPU. Returns the library's path
    (None if no flag set compiles) and how it was built (or why not)."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
    errors = []
    text = "\n".join(p.read_text() for p in (source, *deps))
    for flags in FLAG_SETS:
        key = hashlib.sha256("\n".join([text, cc, version, " ".join(flags), platform.machine(),
                                        _cpu_id()]).encode()).hexdigest()[:16]
        out = _build_dir() / f"{name}-{key}.so"
        if out.exists():
            return out, f"{Path(cc).name} {' '.join(flags)}"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not errors:
            _say_compiling(what, source)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{name}-", suffix=".so")
        os.close(fd)
        cmd = [cc, *flags, "-fPIC", "-shared", f"-I{source.parent}", str(source), "-o", tmp, "-lm", "-lpthread"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if res.returncode == 0:
                os.replace(tmp, out)          # atomic: a concurrent or interrupted build never leaves half a file
                return out, f"{Path(cc).name} {' '.join(flags)}"
            errors.append(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"exit {res.returncode}")
        finally:
            Path(tmp).unlink(missing_ok=True)
    return None, "; ".join(errors)


def build_library(name: str, source: Path, what: str, deps=(), chosen_by_env: bool = True
                  ) -> tuple[ctypes.CDLL | None, str]:
    """Build (once per machine) and load a C engine: ``(library, how it was built)``, or ``(None, why not)`` as
    ``"torch (...)"``: with ``SOFTMAX_ICL_KERNEL=torch``, without a C compiler, or when it does not compile or load.
    ``what`` names the engine in those reasons; ``deps`` are the headers it includes (they key the build with the
    source). Paper 1's engine (:mod:`.regression`) and paper 2's (:mod:`.classification`) are built by this one
    function; ``chosen_by_env=False`` builds one whatever ``SOFTMAX_ICL_KERNEL`` says (the benchmarks' A/B builds)."""
    if chosen_by_env:
        choice = os.environ.get(ENV, "auto")
        if choice not in ("auto", "torch"):
            raise ValueError(f"{ENV}={choice!r} is not allowed; allowed values: 'auto', 'torch'")
        if choice == "torch":
            return None, f"torch ({ENV}=torch)"
    cc = _compiler()
    if cc is None:
        return None, f"torch (no C compiler found; set CC to use the {what})"
    try:
        path, how = _compile(cc, name, source, deps, what)
        if path is None:
            return None, f"torch (the {what} did not compile: {how})"
        return ctypes.CDLL(str(path)), how
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"torch (the {what} could not be built or loaded: {exc})"



class _Update(ctypes.Structure):
    """``update_t`` of engine.c."""

    _fields_ = [("U", ctypes.c_int64), ("r", ctypes.c_int64), ("d", ctypes.c_int64), ("kq", ctypes.c_int64),
                ("P", ctypes.c_void_p), ("Q", ctypes.c_void_p), ("gM", ctypes.c_void_p), ("g", ctypes.c_void_p),
                ("m", ctypes.c_void_p), ("v", ctypes.c_void_p), ("M", ctypes.c_void_p), ("step", ctypes.c_int64),
                ("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double)]


def declare_update(lib: ctypes.CDLL) -> None:
    """The signature of ``unit_update`` (``adam.h``), which both engines export."""
    lib.unit_update.restype = ctypes.c_int
    lib.unit_update.argtypes = [ctypes.POINTER(_Update)]


class Update:
    """A training step's update in an engine (``unit_update``, ``adam.h``): one step of PyTorch's default Adam
    (``torch.optim.Adam(params, lr)``: betas 0.9, 0.999, eps 1e-8) on units' parameters, from the loss's gradient in
    their ``M`` (what :meth:`FusedProgram.run` returns, or paper 2's engine writes). ``params``: ``[M]`` (C, d, d), or
    a key-query pair ``[P, Q]`` (C, r, d) each with ``M = P^T Q``, whose gradients come from the one in ``M`` and
    whose :attr:`M` is written for the next step. What autograd's backward pass and ``torch.optim.Adam`` compute, to
    float rounding, in one call instead of PyTorch's dozens of small operations (up to a millisecond a step once an
    engine has swept the caches). ``lib``: the engine that runs it (:func:`softmax_icl.engine.regression.library` or
    :func:`softmax_icl.engine.classification.library`: both export the same function)."""

    def __init__(self, params: list[torch.Tensor], lib: ctypes.CDLL, betas=(0.9, 0.999), eps: float = 1e-8):
        if len(params) not in (1, 2):
            raise ValueError(f"an update takes [M] or a key-query pair [P, Q]; got {len(params)} parameters")
        P = params[0].detach()
        U, r, d = P.shape
        for t in params:
            if t.shape != P.shape or t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous():
                raise ValueError(f"the update takes contiguous float32 CPU parameters of one shape; got "
                                 f"{[(tuple(p.shape), p.dtype, str(p.device)) for p in params]}")
        kq = len(params) == 2
        if not kq and r != d:
            raise ValueError(f"M must be square; got {tuple(P.shape)}")
        self.lib, self.params, self.kq = lib, list(params), kq
        self.grad = torch.zeros(len(params), U, r, d)
        self.m, self.v = torch.zeros_like(self.grad), torch.zeros_like(self.grad)
        self.M = (P.transpose(1, 2) @ params[1].detach()).contiguous() if kq else P
        self.steps = 0
        self.spec = _Update(U=U, r=r, d=d, kq=int(kq), P=P.data_ptr(), Q=params[1].data_ptr() if kq else None,
                            g=self.grad.data_ptr(), m=self.m.data_ptr(), v=self.v.data_ptr(),
                            M=self.M.data_ptr() if kq else None, beta1=float(betas[0]), beta2=float(betas[1]),
                            eps=float(eps))

    def __call__(self, grad_M: torch.Tensor, lr: float) -> None:
        """One step at learning rate ``lr`` with the loss's gradient ``grad_M`` (C, d, d) in M."""
        U, d = self.grad.shape[1], self.grad.shape[3]
        if grad_M.shape != (U, d, d) or grad_M.dtype != torch.float32 or not grad_M.is_contiguous():
            raise ValueError(f"grad_M must be a contiguous float32 tensor of shape {(U, d, d)}; got "
                             f"{tuple(grad_M.shape)} {grad_M.dtype}")
        self.steps += 1
        self.spec.gM, self.spec.step, self.spec.lr = grad_M.data_ptr(), self.steps, float(lr)
        if not self.lib.unit_update(ctypes.byref(self.spec)):
            raise RuntimeError("unit_update refused its arguments")
