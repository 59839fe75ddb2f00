"""Philox blocks on a CUDA GPU in one Triton kernel: the words of :func:`softmax_icl.streams.blocks`, bit for bit.

PyTorch's implementation of the counter scheme (:func:`softmax_icl.streams._rounds`) is a hundred elementwise kernels
per call over int64 tensors of four words per block: on a GPU each one reads and writes the whole counter, so a
paper-profile step with long contexts (norm_scaling's ``train_t34_d8``: 18 million blocks) spends most of its time
moving words through memory, and a step with many short draws (one call per context length) most of it launching
kernels. This kernel computes each block's ten rounds in registers, from the key of its row, its task, the step,
and its (block, tag) pair, and writes the four words once.

It computes the same integers as PyTorch (32-bit products by ``umulhi`` and wrapping multiplication, the same key
schedule), so every number drawn from its words is the same bits as from PyTorch's: switching between the two
changes speed, never a number (a CUDA test holds them together, and on the CPU, where Triton's interpreter runs it,
a test does the same when Triton is installed). Used by :func:`softmax_icl.streams.blocks` on CUDA tensors when
Triton imports (:func:`softmax_icl.streams.torch_blocks` computes the same words in PyTorch's operations).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

#: Blocks per program.
BLOCK = 512


@triton.jit
def _blocks_kernel(key_ptr, step_ptr, task_ptr, block_ptr, tag_ptr, out_ptr, total, T, J, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < total
    j = idx % J
    rt = idx // J
    t = rt % T
    r = rt // T
    k0 = tl.load(key_ptr + 2 * r, mask=mask, other=0).to(tl.uint32)
    k1 = tl.load(key_ptr + 2 * r + 1, mask=mask, other=0).to(tl.uint32)
    c0 = tl.load(block_ptr + j, mask=mask, other=0).to(tl.uint32)
    c1 = tl.load(task_ptr + t, mask=mask, other=0).to(tl.uint32)
    c2 = tl.load(step_ptr + 0 * idx, mask=mask, other=0).to(tl.uint32)
    c3 = tl.load(tag_ptr + j, mask=mask, other=0).to(tl.uint32)
    m0 = tl.full((BLOCK,), 0xD2511F53, tl.uint32)
    m1 = tl.full((BLOCK,), 0xCD9E8D57, tl.uint32)
    w0 = tl.full((BLOCK,), 0x9E3779B9, tl.uint32)
    w1 = tl.full((BLOCK,), 0xBB67AE85, tl.uint32)
    for _ in tl.static_range(10):
        hi0 = tl.umulhi(c0, m0)
        lo0 = c0 * m0
        hi1 = tl.umulhi(c2, m1)
        lo1 = c2 * m1
        c0 = hi1 ^ c1 ^ k0
        c2 = hi0 ^ c3 ^ k1
        c1 = lo1
        c3 = lo0
        k0 = k0 + w0
        k1 = k1 + w1
    low = 0xFFFFFFFF
    base = out_ptr + 4 * idx
    tl.store(base, c0.to(tl.int64) & low, mask=mask)
    tl.store(base + 1, c1.to(tl.int64) & low, mask=mask)
    tl.store(base + 2, c2.to(tl.int64) & low, mask=mask)
    tl.store(base + 3, c3.to(tl.int64) & low, mask=mask)


def blocks(key: torch.Tensor, step, tasks: torch.Tensor, block: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
    """:func:`softmax_icl.streams.blocks` for keys (R, 2), task indices (T,), blocks and tags (J,), all int64 on one
    device; ``step`` an int or a one-element int64 tensor there (read by the kernel, so a CUDA graph that replays
    this call draws the step the tensor holds). Returns int64 (R, T, J, 4), values in [0, 2^32)."""
    dev = key.device
    if not isinstance(step, torch.Tensor):
        step = torch.tensor([int(step)], dtype=torch.int64, device=dev)
    key, tasks, block, tag = (t.to(dev, torch.int64).contiguous() for t in (key.view(-1, 2), tasks, block, tag))
    R, T, J = key.shape[0], tasks.numel(), block.numel()
    out = torch.empty(R, T, J, 4, dtype=torch.int64, device=dev)
    total = R * T * J
    if total:
        _blocks_kernel[(triton.cdiv(total, BLOCK),)](key, step.reshape(1).to(torch.int64), tasks, block, tag, out,
                                                     total, T, J, BLOCK=BLOCK)
    return out
