"""The counter-based streams: Philox4x32-10 against Random123's known answers and a NumPy reference of the whole
counter scheme (integers bit for bit, floats to rounding), and the properties the samplers rely on."""

import math

import numpy as np
import pytest
import torch

from softmax_icl import streams

MASK = np.uint64(0xFFFFFFFF)


def ref_philox(c, k):
    """Philox4x32-10 in NumPy uint64 (Salmon et al. 2011): counter words ``c`` (4 arrays), key words ``k`` (2)."""
    c, k = [np.asarray(w, dtype=np.uint64) for w in c], [np.uint64(w) for w in k]
    for r in range(10):
        if r:
            k = [(k[0] + np.uint64(0x9E3779B9)) & MASK, (k[1] + np.uint64(0xBB67AE85)) & MASK]
        p0, p1 = c[0] * np.uint64(0xD2511F53), c[2] * np.uint64(0xCD9E8D57)        # exact: both factors < 2^32
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k[0], p1 & MASK, (p0 >> np.uint64(32)) ^ c[3] ^ k[1], p0 & MASK]
    return c


def ref_words(seed, tag, step, task, count, first=0):
    """Words first .. first + count - 1 of the sequence (seed, tag, step, task): block f // 4, word f % 4."""
    f = np.arange(first, first + count, dtype=np.uint64)
    out = ref_philox([f // np.uint64(4), np.full_like(f, task), np.full_like(f, step), np.full_like(f, tag)],
                     [seed & 0xFFFFFFFF, seed >> 32])
    return np.choose((f % np.uint64(4)).astype(np.int64), out)


def ref_uniform(w):
    return (w >> np.uint64(8)).astype(np.float64) * 2.0**-24


def ref_normal(w):
    v = (2 * (w[0::2] >> np.uint64(9)) + 1).astype(np.float64) * 2.0**-24        # odd multiples of 2^-24 in (0, 1)
    r, th = np.sqrt(-2 * np.log(v)), 2 * np.pi * ref_uniform(w[1::2])
    return np.stack([r * np.cos(th), r * np.sin(th)], -1).reshape(-1)


KAT = [  # Random123 tests/kat_vectors: counter (4 words), key (2 words) -> output (4 words)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", KAT)
def test_philox_gives_random123s_known_answers(counter, key, expected):
    assert [int(w) for w in streams.philox(key, counter)] == list(expected)
    assert [int(w) for w in ref_philox(counter, key)] == list(expected)


SEEDS = [0, 1, 2**32 - 1, 2**32, 2**63 + 12345, 2**64 - 1]


def test_words_equal_the_reference_counter_scheme_bit_for_bit():
    key = streams.keys(SEEDS, "cpu")
    tasks = torch.tensor([0, 1, 7, 2**31, 2**32 - 1])
    for tag, step, count in [(1, 0, 13), (7, 1, 4), (3, 2**32 - 1, 9), (0xF01D, 123456, 1)]:
        got = streams.words(key, tag, step, tasks, count)
        assert got.shape == (len(SEEDS), len(tasks), count) and got.dtype == torch.int64
        for r, seed in enumerate(SEEDS):
            for t, task in enumerate(tasks.tolist()):
                np.testing.assert_array_equal(got[r, t].numpy().astype(np.uint64), ref_words(seed, tag, step, task, count))


def test_uniforms_and_normals_equal_the_reference_to_rounding():
    key = streams.keys([5, 2**40 + 3], "cpu")
    u = streams.uniform(key, 5, 3, range(4), 11)
    z = streams.normal(key, 1, 3, range(4), 11)                        # an odd count: the pair's second is dropped
    assert u.dtype == z.dtype == torch.float32 and u.shape == z.shape == (2, 4, 11)
    for r, seed in enumerate([5, 2**40 + 3]):
        for t in range(4):
            np.testing.assert_array_equal(u[r, t].numpy(), ref_uniform(ref_words(seed, 5, 3, t, 11)))   # exact
            np.testing.assert_allclose(z[r, t].numpy(), ref_normal(ref_words(seed, 1, 3, t, 12))[:11],
                                       rtol=2e-6, atol=2e-6)


def test_a_task_or_a_point_draws_the_same_whatever_else_is_drawn_with_it():
    """No state: any subset of tasks, keys or a shorter sequence gives the same values (prefixes of points)."""
    key = streams.keys([11, 12, 13], "cpu")
    full = streams.normal(key, 1, 4, range(10), 40)
    torch.testing.assert_close(streams.normal(key[1:2], 1, 4, range(6, 9), 40), full[1:2, 6:9], rtol=0, atol=0)
    torch.testing.assert_close(streams.normal(key, 1, 4, torch.tensor([9, 2]), 40), full[:, [9, 2]], rtol=0, atol=0)
    torch.testing.assert_close(streams.normal(key, 1, 4, range(10), 17), full[..., :17], rtol=0, atol=0)
    for other in (streams.normal(key, 2, 4, range(10), 40), streams.normal(key, 1, 5, range(10), 40)):
        assert not (other == full).any()                              # another tag or step: other numbers
    assert not (full[0] == full[1]).any()                              # another key: other numbers


def test_values_have_the_right_distribution():
    key = streams.keys([3], "cpu")
    u = streams.uniform(key, 5, 0, range(64), 4096).flatten().double()
    z = streams.normal(key, 1, 0, range(64), 4096).flatten().double()
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert abs(float(u.mean()) - 0.5) < 4 * math.sqrt(1 / 12 / u.numel())
    assert abs(float(z.mean())) < 4 / math.sqrt(z.numel()) and abs(float(z.var()) - 1) < 4 * math.sqrt(2 / z.numel())
    assert abs(float((z**3).mean())) < 4 * math.sqrt(15 / z.numel())
    assert float(z.abs().max()) <= math.sqrt(2 * 24 * math.log(2)) + 1e-5
    radius = streams.normal_from_words(torch.tensor([[0, 0], [1, 2**32 - 1]])).norm(dim=-1)   # the extreme words
    assert float(radius.min()) > 3e-4 and float(radius.max()) <= math.sqrt(2 * 24 * math.log(2)) + 1e-5


def test_normals_turn_through_every_quadrant_as_the_reference():
    """The angle reduced in quarter turns: uniforms at and beside every eighth of a turn (the quadrants' edges, where
    the reduction's rounding to even and the swaps and signs of cos and sin act), to float32 rounding."""
    m = torch.tensor([k * 2**21 + e for k in range(8) for e in (-1, 0, 1) if 0 <= k * 2**21 + e < 2**24])
    w1 = (m << 8) | 0x5A                                               # the low 8 bits are not read
    w0 = torch.tensor([0x12345678, 0xFFFFFFFF, 0x00000200])[torch.arange(len(m)) % 3]
    w = torch.stack([w0, w1], -1).reshape(-1)
    z = streams.normal_from_words(w)
    ref = ref_normal(w.numpy().astype(np.uint64))
    np.testing.assert_allclose(z.numpy(), ref, rtol=2e-6, atol=2e-6)
    assert (np.sign(z.numpy()[np.abs(ref) > 1e-3]) == np.sign(ref[np.abs(ref) > 1e-3])).all()


def test_fold_in_is_deterministic_and_separates_streams():
    assert streams.fold_in(7, 1, 2) == streams.fold_in(streams.fold_in(7, 1), 2)
    derived = {streams.fold_in(7, i) for i in range(100)} | {streams.fold_in(8, i) for i in range(100)}
    assert len(derived) == 200 and all(0 <= s < 2**64 for s in derived)
    with pytest.raises(ValueError, match="seed"):
        streams.key_words(-1)
    with pytest.raises(ValueError, match="pairs"):
        streams.normal_from_words(torch.zeros(3, dtype=torch.int64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_draws_the_cpus_numbers():
    key = streams.keys([1, 2**50], "cpu")
    for fn in (streams.words, streams.uniform, streams.normal):
        a = fn(key, 1, 9, range(100, 200), 24)
        b = fn(key.cuda(), 1, 9, range(100, 200), 24).cpu()
        tol = 2e-6 if fn is streams.normal else 0
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)


def _has_triton() -> bool:
    import importlib.util
    return importlib.util.find_spec("triton") is not None


TRITON_CHECK = r"""
import torch
from softmax_icl import streams
from softmax_icl.engine import philox_triton
cases = [([1, 2**50, 2**64 - 1], 9, range(100, 164), [0, 1, 2, 7], [1, 1, 7, 0x205]),
         ([0], 0, range(0, 3), [0], [0]),
         ([12345], torch.tensor(2**32 - 1), torch.tensor([5, 2**31, 2**32 - 1]), list(range(1000)), [3] * 1000)]
for seeds, step, tasks, block, tag in cases:
    key = streams.keys(seeds, "cpu")
    block, tag = torch.tensor(block), torch.tensor(tag)
    t = streams._task_tensor(tasks, "cpu")
    ours = philox_triton.blocks(key, step, t, block, tag)
    ref = streams.blocks(key, step, tasks, block, tag)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, (ours.shape, ref.shape)
    assert torch.equal(ours, ref), (ours - ref).abs().max()
print("triton words equal")
"""


@pytest.mark.skipif(not _has_triton(), reason="Triton is not installed (it comes with CUDA builds of PyTorch)")
def test_the_triton_kernel_draws_pytorchs_words_bit_for_bit_in_the_interpreter():
    """The CUDA kernel of :mod:`softmax_icl.engine.philox_triton`, run by Triton's interpreter on the CPU, against
    PyTorch's words: keys at both ends of 64 bits, tasks and steps up to 2^32 - 1, a step as a tensor, many blocks."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", TRITON_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "triton words equal" in out.stdout


def test_blocks_take_the_triton_words_on_cuda_only():
    """Off CUDA the words come from PyTorch's operations (the reference), the same integers as :func:`torch_blocks`."""
    for dev in ("cpu", "meta"):
        assert streams._triton_blocks(torch.device(dev)) is None
    key = streams.keys([1, 2**50], "cpu")
    block, tag = torch.arange(5), torch.tensor([1, 1, 2, 3, 0x205])
    assert torch.equal(streams.blocks(key, 3, range(4), block, tag), streams.torch_blocks(key, 3, range(4), block, tag))


@pytest.mark.parametrize("T, J, normals", [(1, 1, 1), (3, 5, 2), (7, 16, 16), (5, 17, 3), (40, 3, 0), (2, 300, 150)])
def test_values_convert_each_kind_of_block_as_its_own_draw(T, J, normals):
    """:func:`streams.values`: the first ``normals`` blocks of a task as normals, the others as uniforms, of the same
    words (:func:`streams.blocks`), whatever the number of blocks and tasks; keys at both ends of 64 bits, steps up
    to 2^32 - 1, a step as a tensor."""
    key = streams.keys([1, 2**50, 2**64 - 1], "cpu")
    block = torch.arange(J) * 3 + 1
    tag = torch.arange(J) % 4 + 2**31
    tasks = torch.tensor([2**32 - 1 - t for t in range(T)])
    for step in (0, 2**32 - 1, torch.tensor(77)):
        got = streams.values(key, step, tasks, block, tag, normals)
        w = streams.blocks(key, step, tasks, block, tag)
        assert got.shape == (3, T, J, 4) and got.dtype == torch.float32
        assert torch.equal(got[:, :, normals:], streams.uniform_from_words(w[:, :, normals:]))
        assert torch.equal(got[:, :, :normals], streams.normal_from_words(w[:, :, :normals]))


def test_values_names_the_allowed_number_of_normal_blocks():
    key = streams.keys([1], "cpu")
    block = torch.arange(3)
    for normals in (-1, 4):
        with pytest.raises(ValueError, match=f"normals={normals} must be between 0 and the number of blocks J=3"):
            streams.values(key, 0, range(2), block, block, normals)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.skipif(not _has_triton(), reason="Triton is not installed")
def test_cuda_triton_words_equal_pytorchs_bit_for_bit():
    assert streams._triton_blocks(torch.device("cuda")) is not None
    key = streams.keys([1, 2**50, 2**64 - 1], "cuda")
    block = torch.arange(3000, device="cuda")
    tag = torch.full_like(block, 7)
    step = torch.tensor(2**32 - 1, device="cuda")
    fused = streams.blocks(key, step, range(5, 517), block, tag)
    plain = streams.torch_blocks(key, step, range(5, 517), block, tag)
    assert torch.equal(fused, plain)
    for fn in (streams.words, streams.uniform, streams.normal):         # and the CPU's numbers, as without Triton
        a = fn(key.cpu(), 1, 9, range(100, 200), 24)
        b = fn(key, 1, 9, range(100, 200), 24).cpu()
        tol = 2e-6 if fn is streams.normal else 0
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)


def test_the_engine_switch_and_a_failing_compiler_each_leave_a_reason(monkeypatch):
    """``SOFTMAX_ICL_KERNEL=torch`` builds no engine; a compiler that hangs (``subprocess.TimeoutExpired``) leaves a
    reason, not an exception."""
    import subprocess

    from softmax_icl.engine import common
    from softmax_icl.engine import regression
    monkeypatch.setenv(regression.ENV, "torch")
    assert common.build_library("engine", regression.SOURCE, "fused kernel") == (None, f"torch ({regression.ENV}=torch)")

    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], 30)
    monkeypatch.setattr(common, "_compiler", lambda: "cc")
    monkeypatch.setattr(common.subprocess, "run", hangs)
    monkeypatch.setenv(regression.ENV, "auto")
    lib, how = common.build_library("engine", regression.SOURCE, "fused kernel")
    assert lib is None and how.startswith("torch (the fused kernel could not be built or loaded:")
