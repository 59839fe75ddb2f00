"""Counter-based random numbers: the same draws on every device and in every packing of a sweep.

Every random number of the training and evaluation tasks is a pure function of *where* it is used, never of
the order in which a program asks for it: Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy
as 1, 2, 3"; the Random123 generator, the one behind ``jax.random`` and cuRAND's Philox) maps a 64-bit key and a
128-bit counter to four 32-bit words. There is no generator state to carry, so a configuration trained alone
draws what it draws inside any sweep, a CPU run draws what a CUDA run draws, and any range of tasks can be drawn
by itself (in chunks, in parallel, in any order).

**Key.** Two 32-bit words from a 64-bit seed (:func:`key_words`): ``(seed mod 2^32, floor(seed / 2^32) mod 2^32)``.
Paper 1 keys each seed index ``s`` of a sweep by ``derive_seed(data_seed, s)`` (its evaluation sets by
``derive_seed(eval_seed, 7919)``); :func:`fold_in` derives a further key from a key and integers (JAX's
``fold_in``), for draws that need another axis than the counter has.

**Counter layout** (four 32-bit words) of value ``f`` of the sequence ``(key, tag, step, task)``::

    word 0   block = f // 4     f: the value's index in its task's sequence (point * count + coordinate)
    word 1   task               the task's index within its step (or within an evaluation set)
    word 2   step               the training step (1, 2, ...; 0 for evaluation sets and one-off draws)
    word 3   tag                what is drawn (:data:`TAGS`): inputs, queries, noise, ... are independent

so a block of four words serves four consecutive values. A per-point draw of ``count`` values per point (the
``d`` coordinates of an input, one noise value) puts point ``i``'s values at ``f = i * count + k``: a point's
draws do not depend on how many points the context has, so a context of length ``n`` and one of length ``n'``
with the same key, tag, step and task share their first ``min(n, n')`` points.

**Values.** Word ``w`` (an integer in [0, 2^32)) of value ``f`` is word ``f % 4`` of block ``f // 4``. One
convention converts words to floats for both papers, here and in the C engines' header (``engine/philox.h``):

* uniform on [0, 1):  ``u_f = floor(w_f / 2^8) * 2^-24`` (exact in float32);
* standard normal (Box-Muller on the pairs of words (0, 1) and (2, 3) of a block): for ``j = f // 2``,
  ``r = sqrt(-2 ln v_{2j})``, ``z_{2j} = r cos(2 pi u_{2j+1})``, ``z_{2j+1} = r sin(2 pi u_{2j+1})``, with
  ``v = (2 floor(w / 2^9) + 1) 2^-24`` an odd multiple of 2^-24 in (0, 1) (exact in float32): the logarithm is finite
  and never 0, so ``0 < r <= sqrt(2 ln 2^24) = 5.77`` and no pair of normals is (0, 0) (a d = 2 input never has
  length 0). The angle is reduced in turns: ``t = 4 u`` (exact), ``q = round(t)`` (to even), ``a = (t - q) pi/2`` in
  [-pi/4, pi/4] (one rounding, of the product), and ``cos``, ``sin`` of ``2 pi u = q pi/2 + a`` are those of ``a``
  swapped and signed by the quadrant ``q mod 4``: no argument of ``cos`` or ``sin`` is larger than pi/4, and none is
  the rounded ``2 pi u``.

Integers are the same bits on every device. Floats are computed in float32 by each device's ``log``, ``sqrt``,
``cos``, ``sin`` (the C engines by the header's polynomials): equal to rounding (a few units in the last place), not
bit for bit.

**Implementation.** Words live in int64 tensors holding values in [0, 2^32): a product of two such values wraps
modulo 2^64 on every device, its low word is ``p & 0xFFFFFFFF`` and its high word ``(p >> 32) & 0xFFFFFFFF``. All
functions are vectorised over keys (rows), tasks and values, work on any device, and can write into caller-owned
buffers (``out=``). This module is the reference: the C engines (:mod:`softmax_icl.engine.regression`,
:mod:`softmax_icl.engine.classification`, through ``philox.h``) implement the same scheme, and the tests hold them
and this module against a NumPy reference and Random123's known-answer vectors. On a CUDA GPU :func:`blocks`
computes the words in one Triton kernel (:mod:`softmax_icl.engine.philox_triton`, where Triton imports) instead of
a hundred passes of int64 tensors through memory: the same integers, so the same numbers.
"""

from __future__ import annotations

import math
import warnings

import torch

MASK32 = 0xFFFFFFFF
#: Philox4x32 multipliers and Weyl key increments (Random123).
PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
ROUNDS = 10

#: What is drawn: the counter's word 3. Every kind of draw has its own number; add new kinds here with a number
#: never used before (a reused number would make two kinds of draws the same numbers).
TAGS = {
    # paper 1 (regression tasks, softmax_icl.tasks)
    "x": 1,             # context inputs: d normals per point (f = point * d + coordinate)
    "query": 2,         # the query input: d normals
    "direction": 3,     # the task direction u: d normals
    "lowrank": 4,       # the low-rank coefficients a: k normals
    "coef": 5,          # the task coefficients: 3 uniforms
    "phase": 6,         # the cosine phase: 1 uniform
    "noise": 7,         # label noise: 1 normal per point (f = point)
    # paper 2 (classification tasks, softmax_icl.classification.tasks; keys per coordinate by fold_in)
    "cls_x": 0x201,       # input normals of one coordinate: 1 per point (f = point; point 0 is the query)
    "cls_proto": 0x202,   # prototype normals of one coordinate and prototype: 1 per class (f = class)
    "cls_class": 0x203,   # the drawn class of a point: 1 word per point (f = point)
    "cls_length": 0x204,  # the context length of a mixture: 1 word (f = 0)
    "cls_pool": 0x205,    # class-balanced candidates, one coordinate: 1 normal per candidate (f = candidate)
    # derived keys (fold_in)
    "fold": 0xF01D,
}

_HALF_PI = math.pi / 2
_U24 = 2.0 ** -24


def key_words(seed: int) -> tuple[int, int]:
    """The key (k0, k1) of a seed in [0, 2^64)."""
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"a stream seed must be an integer in [0, 2^64), got {seed}")
    return seed & MASK32, (seed >> 32) & MASK32


def keys(seeds, device) -> torch.Tensor:
    """Keys of several seeds as an int64 tensor (S, 2) on ``device`` (one row per seed)."""
    return torch.tensor([key_words(s) for s in seeds], dtype=torch.int64, device=device).view(-1, 2)


def philox(key, counter, rounds: int = ROUNDS) -> tuple[torch.Tensor, ...]:
    """Philox4x32: the four output words of ``counter`` under ``key``.

    ``key``: two int64 tensors (or ints) and ``counter``: four int64 tensors (or ints), all broadcastable, with
    values in [0, 2^32). Returns four int64 tensors of the broadcast shape, values in [0, 2^32).
    """
    c = [torch.as_tensor(w, dtype=torch.int64) for w in counter]
    k = [torch.as_tensor(w, dtype=torch.int64) for w in key]
    device = next((t.device for t in c + k if t.dim() > 0), c[0].device)
    shape = torch.broadcast_shapes(*(t.shape for t in c + k))
    words = [t.to(device).expand(shape).clone() for t in c]
    return _rounds(words, k[0].to(device), k[1].to(device), rounds)


def _rounds(c: list[torch.Tensor], k0: torch.Tensor, k1: torch.Tensor, rounds: int = ROUNDS,
            scratch: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
    """Philox rounds on the counter words ``c`` (four int64 tensors of one shape, overwritten), keys broadcastable.

    Ten ops per round, in place: the low words of the products are kept unmasked between rounds (their high bits
    are garbage that the next round's mask of the xor removes), and the buffers rotate instead of being copied.
    """
    c0, c1, c2, c3 = c
    p0, p1 = scratch if scratch is not None else (torch.empty_like(c0), torch.empty_like(c0))
    for r in range(rounds):
        if r:
            k0 = (k0 + PHILOX_W[0]) & MASK32
            k1 = (k1 + PHILOX_W[1]) & MASK32
        torch.mul(c0, PHILOX_M[0], out=p0)
        torch.mul(c2, PHILOX_M[1], out=p1)
        # new c0 = hi(M1 c2) ^ c1 ^ k0,  new c2 = hi(M0 c0) ^ c3 ^ k1,  new c1 = lo(M1 c2),  new c3 = lo(M0 c0)
        torch.bitwise_right_shift(p1, 32, out=c0)
        c0.bitwise_xor_(c1).bitwise_xor_(k0).bitwise_and_(MASK32)
        torch.bitwise_right_shift(p0, 32, out=c2)
        c2.bitwise_xor_(c3).bitwise_xor_(k1).bitwise_and_(MASK32)
        c1, p1 = p1, c1
        c3, p0 = p0, c3
    c1.bitwise_and_(MASK32)
    c3.bitwise_and_(MASK32)
    return c0, c1, c2, c3


def _task_tensor(tasks, device) -> torch.Tensor:
    if isinstance(tasks, range):
        return torch.arange(tasks.start, tasks.stop, tasks.step, dtype=torch.int64, device=device)
    if isinstance(tasks, torch.Tensor):
        return tasks.to(device=device, dtype=torch.int64).reshape(-1)
    return torch.as_tensor(tasks, dtype=torch.int64, device=device).reshape(-1)


def blocks(key: torch.Tensor, step, tasks, block: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
    """Philox blocks with counters ``(block[j], task, step, tag[j])`` for every key, task and j: int64 (R, T, J, 4).

    ``key`` (R, 2) (:func:`keys`); ``step`` an int or a 0-dim int64 tensor on the key's device; ``tasks`` a range or a
    1-D tensor of T task indices; ``block``, ``tag`` (J,) int64 on the key's device: several sequences' blocks (e.g.
    every kind of draw of a task) in one pass of the generator. On a CUDA GPU the Triton kernel computes them where
    Triton imports (:func:`_triton_blocks`), elsewhere PyTorch's operations (:func:`torch_blocks`): the same integers.
    """
    key = key.view(-1, 2)
    t = _task_tensor(tasks, key.device)
    triton_blocks = _triton_blocks(key.device)
    if triton_blocks is not None:
        return triton_blocks(key, step, t, block, tag)
    return _torch_blocks(key, step, t, block, tag)


def torch_blocks(key: torch.Tensor, step, tasks, block: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
    """:func:`blocks` in PyTorch's operations on any device (what the Triton kernel is held against)."""
    key = key.view(-1, 2)
    return _torch_blocks(key, step, _task_tensor(tasks, key.device), block, tag)


def _torch_blocks(key: torch.Tensor, step, t: torch.Tensor, block: torch.Tensor, tag: torch.Tensor) -> torch.Tensor:
    dev = key.device
    R, T, J = key.shape[0], t.numel(), block.numel()
    shape = (R, T, J)
    c = [torch.empty(shape, dtype=torch.int64, device=dev) for _ in range(4)]
    c[0].copy_(block.view(1, 1, J).expand(shape))
    c[1].copy_(t.view(1, T, 1).expand(shape))
    if isinstance(step, torch.Tensor):
        c[2].copy_(step.expand(shape))
    else:
        c[2].fill_(int(step))
    c[3].copy_(tag.view(1, 1, J).expand(shape))
    return torch.stack(_rounds(c, key[:, 0].view(R, 1, 1), key[:, 1].view(R, 1, 1)), dim=-1)


_triton: list = []        # [function or None], once per process


def _triton_blocks(device: torch.device):
    """The Triton kernel's :func:`blocks` (:mod:`softmax_icl.engine.philox_triton`) for a CUDA device where Triton
    imports; None elsewhere (then PyTorch's operations draw the same words)."""
    if device.type != "cuda":
        return None
    if not _triton:
        try:
            from .engine import philox_triton
            _triton.append(philox_triton.blocks)
        except ImportError as err:
            warnings.warn(f"Triton is not available ({err}); CUDA draws run as PyTorch operations (the same "
                          "numbers, slower)", stacklevel=3)
            _triton.append(None)
    return _triton[0]


def words(key: torch.Tensor, tag: int, step, tasks, count: int) -> torch.Tensor:
    """The first ``count`` words of the sequences ``(key[r], tag, step, task)`` for every key and task.

    ``key``: (R, 2) int64 (:func:`keys`); ``step``: an int or a 0-dim int64 tensor on the key's device; ``tasks``: a
    range or a 1-D tensor of T task indices. Returns int64 (R, T, count), values in [0, 2^32).
    """
    key = key.view(-1, 2)
    nb = -(-int(count) // 4)
    block = torch.arange(nb, dtype=torch.int64, device=key.device)
    w = blocks(key, step, tasks, block, torch.full_like(block, int(tag)))
    return w.view(*w.shape[:2], nb * 4)[..., :count]


def uniform_from_words(w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Uniform floats on [0, 1) from words: ``floor(w / 2^8) * 2^-24`` (float32, exact)."""
    u = torch.bitwise_right_shift(w, 8).to(torch.float32)
    return u.mul_(_U24) if out is None else torch.mul(u, _U24, out=out)


def normal_from_words(w: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Standard normals from words (Box-Muller on consecutive pairs, the angle reduced in turns: the module's
    convention; the last axis must have even length)."""
    if w.shape[-1] % 2:
        raise ValueError(f"normals come in pairs of words; got {w.shape[-1]} words on the last axis")
    v = torch.bitwise_right_shift(w[..., 0::2], 9).mul_(2).add_(1).to(torch.float32).mul_(_U24)   # odd / 2^24
    radius = v.log_().mul_(-2.0).sqrt_()
    t = uniform_from_words(w[..., 1::2]).mul_(4.0)                     # 2 pi u in quarter turns (exact)
    q = torch.round(t)                                                 # the quadrant, to even as C's rintf
    a = t.sub_(q).mul_(_HALF_PI)                                       # in [-pi/4, pi/4]
    k = q.to(torch.int32)
    swap = k.bitwise_and(1).bool()
    sin_a, cos_a = torch.sin(a), torch.cos(a)
    cos_t = torch.where(swap, sin_a, cos_a)
    sin_t = torch.where(swap, cos_a, sin_a)
    cos_t = torch.where(k.add(1).bitwise_and_(2).bool(), -cos_t, cos_t)
    sin_t = torch.where(k.bitwise_and(2).bool(), -sin_t, sin_t)
    z = torch.empty(w.shape, dtype=torch.float32, device=w.device) if out is None else out
    torch.mul(radius, cos_t, out=z[..., 0::2])
    torch.mul(radius, sin_t, out=z[..., 1::2])
    return z


def values(key: torch.Tensor, step, tasks, block: torch.Tensor, tag: torch.Tensor, normals: int) -> torch.Tensor:
    """The blocks of :func:`blocks` as floats: (R, T, J, 4) float32, the first ``normals`` of the J blocks as four
    standard normals each (:func:`normal_from_words` on its words), the others as four uniforms on [0, 1)
    (:func:`uniform_from_words`): every kind of draw of a task from one pass of the generator (paper 1's PyTorch
    draws, :func:`softmax_icl.tasks.draw_rows`).
    """
    key = key.view(-1, 2)
    dev = key.device
    J = block.numel()
    if not 0 <= int(normals) <= J:
        raise ValueError(f"normals={normals} must be between 0 and the number of blocks J={J}")
    w = blocks(key, step, tasks, block, tag)
    out = torch.empty(w.shape, dtype=torch.float32, device=dev)
    if normals:
        normal_from_words(w[:, :, :normals], out=out[:, :, :normals])
    if normals < J:
        uniform_from_words(w[:, :, normals:], out=out[:, :, normals:])
    return out


def uniform(key: torch.Tensor, tag: int, step, tasks, count: int) -> torch.Tensor:
    """Uniforms on [0, 1): (R, T, count) float32 from the sequences ``(key[r], tag, step, task)``."""
    return uniform_from_words(words(key, tag, step, tasks, count))


def normal(key: torch.Tensor, tag: int, step, tasks, count: int) -> torch.Tensor:
    """Standard normals: (R, T, count) float32 from the sequences ``(key[r], tag, step, task)`` (paper 2's PyTorch
    draws)."""
    padded = count + count % 2
    return normal_from_words(words(key, tag, step, tasks, padded))[..., :count]


def fold_in(seed: int, *data: int) -> int:
    """A new 64-bit seed from ``seed`` and non-negative integers ``data`` (each below 2^64), one after the
    other: the first two words of Philox(key(seed), (lo, hi, 0, TAGS['fold'])) for each datum, as JAX's
    ``fold_in``. Use it for draws that need an axis the counter does not have."""
    for x in data:
        lo, hi = key_words(x)
        k0, k1 = key_words(seed)
        w = philox((k0, k1), (lo, hi, 0, TAGS["fold"]))
        seed = int(w[0]) | (int(w[1]) << 32)
    return seed
