"""Philox blocks on the CPU in compiled C: the words of :func:`softmax_icl.streams.blocks`, bit for bit, and the
normals and uniforms of :func:`softmax_icl.streams.values` drawn from them.

PyTorch's implementation of the counter scheme (:func:`softmax_icl.streams._rounds`) passes int64 tensors of every
block's four words through memory a hundred times (ten rounds of ten elementwise operations) and then stacks the
words: on the CPU that was about two thirds of a training step of the PyTorch path (one default ``train_theory_d5``
step on one thread: ~50 % rounds, ~15 % stacking). ``philox_cpu.c`` computes each block's ten rounds in registers,
sixteen blocks at a time, and writes its four words once, into the (R, T, J, 4) tensor :func:`blocks` returns. It is
to the CPU what :mod:`softmax_icl.engine.philox_triton` is to CUDA: the same integers as PyTorch (32 x 32 -> 64-bit
products, the same key schedule), so every number drawn from its words is the same bits; switching between the two
changes speed, never a number (a test holds them together bit for bit).

:func:`values` goes one step further on the CPU: it converts the words to floats in the same pass (Box-Muller and
uniforms by ``philox.h``, as the compiled engine does), instead of handing PyTorch int64 words to shift, convert and
pass through ``log``, ``cos`` and ``sin`` in a dozen elementwise operations (a default generalization run on one
thread, profiled: 52 of its 113 s of sampling, with compiled words; with this, sampling took 53 s and the whole
training 134 s instead of 206). Its uniforms are PyTorch's bit for bit; its normals are the engine's, which differ
from PyTorch's ``log`` / ``cos`` / ``sin`` by a few units in the last place (a test holds them to 2e-6, as the Triton
words' normals on a GPU are held to the CPU's). Paper 1's draws take them (:func:`softmax_icl.streams.values`);
paper 2's keep PyTorch's conversion, which its engine (libm's) is held against.

It is used by the PyTorch path on the CPU (``SOFTMAX_ICL_KERNEL=torch``, or where the fused engine does not build)
whenever it compiles; ``SOFTMAX_ICL_WORDS=torch`` turns it (and the Triton kernel) off. It is compiled once per
machine with the system C compiler by the engines' :func:`softmax_icl.engine.common.build_library`, but does not depend on
``SOFTMAX_ICL_KERNEL``: the words are integers, the same whichever computes them.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

SOURCE = Path(__file__).parent / "philox_cpu.c"
_lib: list = []          # [library or None], once per process
_why: list = []


def _load():
    if not _lib:
        from .common import build_library
        lib, how = build_library("philox", SOURCE, "compiled Philox words", (SOURCE.parent / "philox.h",),
                                 chosen_by_env=False)
        if lib is not None:
            lib.philox_blocks.restype = None
            lib.philox_blocks.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                          ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                          ctypes.c_void_p]
            lib.philox_values.restype = None
            lib.philox_values.argtypes = [*lib.philox_blocks.argtypes[:-1], ctypes.c_int64, ctypes.c_void_p]
        _lib.append(lib)
        _why.append(how)
    return _lib[0]


def available() -> bool:
    """Whether the compiled words are built and loaded on this machine."""
    return _load() is not None


def status() -> str:
    """How the library was built, or why it is not available."""
    _load()
    return _why[0]


def _arguments(key, step, tasks, block, tag):
    lib = _load()
    if lib is None:
        raise RuntimeError(f"the compiled Philox words are not available: {status()}")
    step = int(step.reshape(-1)[0]) if isinstance(step, torch.Tensor) else int(step)
    key, tasks, block, tag = (t.to(torch.int64).contiguous() for t in (key.reshape(-1, 2), tasks.reshape(-1),
                                                                        block.reshape(-1), tag.reshape(-1)))
    if block.shape != tag.shape:
        raise ValueError(f"block and tag must have one shape, got {tuple(block.shape)} and {tuple(tag.shape)}")
    return lib, key, step, tasks, block, tag


def blocks(key: torch.Tensor, step, tasks: torch.Tensor, block: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
    """:func:`softmax_icl.streams.blocks` for CPU tensors: keys (R, 2), task indices (T,), blocks and tags (J,), int64;
    ``step`` an int or a one-element int64 tensor. Returns int64 (R, T, J, 4), values in [0, 2^32)."""
    lib, key, step, tasks, block, tag = _arguments(key, step, tasks, block, tag)
    R, T, J = key.shape[0], tasks.numel(), block.numel()
    out = torch.empty(R, T, J, 4, dtype=torch.int64)
    if out.numel():
        lib.philox_blocks(key.data_ptr(), R, step, tasks.data_ptr(), T, block.data_ptr(), tag.data_ptr(), J,
                          out.data_ptr())
    return out


def values(key: torch.Tensor, step, tasks: torch.Tensor, block: torch.Tensor, tag: torch.Tensor,
           normals: int) -> torch.Tensor:
    """:func:`softmax_icl.streams.values` for CPU tensors (the arguments of :func:`blocks`, and ``normals``: how many
    of the J blocks, the first ones, are normals). Returns float32 (R, T, J, 4), converted from the words by
    ``philox.h`` (the compiled engine's polynomials: uniforms bit for bit PyTorch's, normals to a few units in the
    last place)."""
    lib, key, step, tasks, block, tag = _arguments(key, step, tasks, block, tag)
    R, T, J = key.shape[0], tasks.numel(), block.numel()
    if not 0 <= int(normals) <= J:
        raise ValueError(f"normals={normals} must be between 0 and the number of blocks J={J}")
    out = torch.empty(R, T, J, 4, dtype=torch.float32)
    if out.numel():
        lib.philox_values(key.data_ptr(), R, step, tasks.data_ptr(), T, block.data_ptr(), tag.data_ptr(), J,
                          int(normals), out.data_ptr())
    return out
