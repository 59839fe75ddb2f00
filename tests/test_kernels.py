"""The CPU engine equals the PyTorch code it stands for: the streams (against the NumPy reference), the raw draws,
the fused step's loss and gradient, trained units; no number depends on the thread count."""

import dataclasses
import shutil

import numpy as np
import pytest
import torch
from test_streams import SEEDS, ref_normal, ref_uniform, ref_words

from softmax_icl import models, streams
from softmax_icl.engine import regression
from softmax_icl.tasks import InputSpec, draw_rows
from softmax_icl.training import Sweep, SweepProgram, train_sweep

needs_kernel = pytest.mark.skipif(regression.backend().startswith("torch"), reason=regression.backend())


@pytest.fixture
def torch_only(monkeypatch):
    """Turn the engine off (what runs off the CPU, or with SOFTMAX_ICL_KERNEL=torch)."""
    monkeypatch.setattr(regression, "usable", lambda *a, **k: False)


def test_the_kernel_builds_where_there_is_a_c_compiler():
    if shutil.which("cc") or shutil.which("gcc"):
        assert regression.backend().startswith("fused C kernel"), regression.backend()


@needs_kernel
@pytest.mark.parametrize("first,count", [(0, 1), (0, 64), (3, 130), (64, 1000), (4 * 2**31 - 2, 9)])
def test_engine_streams_equal_the_reference_counter_scheme(first, count):
    """Words bit for bit, uniforms exactly, normals to float32 rounding, at any offset (ragged ends included)."""
    for seed in SEEDS[::2]:
        for tag, step, task in [(1, 0, 0), (7, 12345, 2**32 - 1)]:
            ref = ref_words(seed, tag, step, task, count, first)
            got = regression.stream_values(seed, tag, step, task, first, count, "words")
            np.testing.assert_array_equal(got.numpy().astype(np.uint64), ref)
            np.testing.assert_array_equal(regression.stream_values(seed, tag, step, task, first, count, "uniform"),
                                          ref_uniform(ref).astype(np.float32))
            lo, hi = first // 2 * 2, (first + count + 1) // 2 * 2          # whole Box-Muller pairs
            z = ref_normal(ref_words(seed, tag, step, task, hi - lo, lo))[first - lo:first - lo + count]
            np.testing.assert_allclose(regression.stream_values(seed, tag, step, task, first, count, "normal"), z,
                                       rtol=2e-6, atol=2e-6)


@needs_kernel
@pytest.mark.parametrize("kind", ["normal", "uniform"])
def test_every_value_has_the_same_bits_whichever_group_width_draws_it(kind):
    """With AVX-512 whole groups of 32 blocks are drawn in two 512-bit vectors, the rest 16 blocks at a time in one,
    or 8 in an AVX2 vector (philox.h's fill): the values 0 .. 1023 drawn in one call (wide groups), one value at a
    time (AVX2) and from odd offsets (one 512-bit vector and its buffer) are the same bits."""
    for seed in SEEDS[:3]:
        whole = regression.stream_values(seed, 7, 12345, 3, 0, 1024, kind).numpy()
        for first, count in [(1, 127), (130, 300), (511, 2), (900, 124)]:
            part = regression.stream_values(seed, 7, 12345, 3, first, count, kind).numpy()
            assert part.tobytes() == whole[first:first + count].tobytes(), (seed, first, count)
        singles = np.concatenate([regression.stream_values(seed, 7, 12345, 3, f, 1, kind).numpy()
                                  for f in range(0, 1024, 37)])
        assert singles.tobytes() == whole[::37].tobytes()


SPECS = [InputSpec(d=3), InputSpec(d=5, input_dist="nonisotropic"), InputSpec(d=2, input_dist="nonisotropic_whitened"),
         InputSpec(d=10, k=2, task_seed=4), InputSpec(d=13)]


@needs_kernel
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.input_dist}-d{s.d}")
def test_engine_draws_the_pytorch_samplers_tasks(spec, monkeypatch):
    keys = streams.keys([3, 2**45 + 7], "cpu")
    tasks = range(5, 12)
    c = draw_rows(spec, keys, 37, tasks, step=4)
    monkeypatch.setattr(regression, "usable", lambda *a, **k: False)
    t = draw_rows(spec, keys, 37, tasks, step=4)
    assert c.keys() == t.keys()
    for k in c:
        if k in ("coef", "phase"):                        # uniforms times exact constants: the same floats
            torch.testing.assert_close(c[k], t[k], rtol=0, atol=0)
        else:
            torch.testing.assert_close(c[k], t[k], rtol=0, atol=3e-6)


SWEEPS = [
    Sweep(model="softmax", classes=("relu", "cosine"), L=(0.5, 3.0), sigma=(0.0, 0.3), n=(6, 70), seeds=2, d=3,
          batch_size=16),
    Sweep(model="linear", classes=("affine", "cosine_centered"), L=(0.5, 3.0), sigma=(0.2,), n=(33,), seeds=2, d=5,
          batch_size=9, input_dist="nonisotropic"),
    Sweep(model="softmax", classes=("lowrank_linear", "lowrank_affine", "lowrank_quadratic", "lowrank_cosine"),
          L=(1.0,), sigma=(0.0,), n=(20,), seeds=3, d=10, k=2, batch_size=8),
    Sweep(model="softmax", classes=("relu", "cosine"), L=(0.3, 10.0), sigma=(0.1,), n=(129,), seeds=2, d=2,
          batch_size=8, input_dist="nonisotropic_whitened"),
    Sweep(model="softmax", classes=("relu",), L=(1.0,), sigma=(0.1,), n=(1, 200), seeds=1, d=13, batch_size=5),
]


@needs_kernel
@pytest.mark.parametrize("sw", SWEEPS, ids=lambda s: f"{s.model}-{s.classes[0]}-d{s.d}")
def test_fused_step_equals_the_pytorch_step(sw, monkeypatch):
    """Loss and gradient of the engine's fused step (the sweep's program, as training runs it) = PyTorch's sampler +
    readout on the same step's tasks, stream by stream, for wide windows and nearly one-hot ones."""
    prog = SweepProgram(sw, torch.device("cpu"))
    assert prog.fused is not None and prog.program is not None
    for scale in (1.0, 30.0):
        M = prog.unit.matrix().detach() * scale
        loss, grad = prog.program.run(M, 7)
        for st, f in zip(prog.streams, prog.fused):
            part = slice(st.start, st.start + f.R * f.G)
            Mb = M[part].view(f.R, f.G, sw.d, sw.d).contiguous()
            with monkeypatch.context() as m:
                m.setattr(regression, "usable", lambda *a, **k: False)
                batch = st.sample(sw.batch_size, 7)
            Mt = Mb.clone().requires_grad_()
            ref = models.mse_loss(sw.model, batch, Mt)
            ref.sum().backward()
            torch.testing.assert_close(loss[part].view(f.R, f.G), ref.detach(), rtol=2e-5, atol=1e-7)
            torch.testing.assert_close(grad[part].view_as(Mt), Mt.grad, rtol=2e-4,
                                       atol=2e-5 * float(Mt.grad.abs().max()))


@needs_kernel
def test_no_number_depends_on_the_thread_count():
    sw = dataclasses.replace(SWEEPS[0], batch_size=256, n=(300,))        # enough work for several threads
    prog = SweepProgram(sw, torch.device("cpu"))
    (st,) = prog.streams
    M = prog.unit.matrix().detach() * 4
    old = torch.get_num_threads()
    out = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            out.append((*prog.program.run(M, 2), draw_rows(sw.input_spec, st.keys, 300, range(256), 2)["x"].clone()))
    finally:
        torch.set_num_threads(old)
    for other in out[1:]:
        for a, b in zip(out[0], other):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_one_call_for_every_stream_equals_a_call_per_stream(threads):
    """The sweep's step in one call of the engine (``fused_steps``: every context length's tasks shared out over the
    threads together) gives each stream's loss and gradient, as a program of that stream alone computes them, bit for
    bit, at any thread count; a stream of very short contexts (n = 1) and one of long ones included."""
    sw = dataclasses.replace(SWEEPS[0], n=(1, 6, 70, 300), batch_size=24)
    prog = SweepProgram(sw, torch.device("cpu"))
    assert prog.program is not None and len(prog.streams) == 4
    M = prog.unit.matrix().detach() * 3
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        loss, grad = prog.program.run(M, 5)
        for st, f in zip(prog.streams, prog.fused):
            part = slice(st.start, st.start + f.R * f.G)
            l1, g1 = regression.FusedProgram([f], [0]).run(M[part], 5)
            torch.testing.assert_close(loss[part], l1, rtol=0, atol=0)
            torch.testing.assert_close(grad[part], g1, rtol=0, atol=0)
    finally:
        torch.set_num_threads(old)
    with pytest.raises(ValueError, match="shape"):
        prog.program.run(M[:-1], 5)


@needs_kernel
@pytest.mark.parametrize("model", ["softmax", "linear"])
def test_training_with_the_engine_matches_training_with_pytorch(model, monkeypatch):
    sw = Sweep(model=model, classes=("relu", "cosine"), L=(0.5, 3.0), sigma=(0.1,), n=(8, 16), seeds=2, d=3,
               steps=30, batch_size=32, lr=0.05, log_every=10)
    fused = train_sweep(sw, "cpu", progress=False)
    monkeypatch.setattr(regression, "usable", lambda *a, **k: False)
    plain = train_sweep(sw, "cpu", progress=False)
    np.testing.assert_allclose(fused.M_history, plain.M_history, rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(fused.loss_history, plain.loss_history, rtol=2e-3, atol=1e-6)


def test_kernel_choice_is_validated_and_can_be_turned_off(monkeypatch):
    monkeypatch.setattr(regression, "_status", None)
    monkeypatch.setattr(regression, "_lib", None)
    monkeypatch.setenv(regression.ENV, "fast")
    with pytest.raises(ValueError, match="SOFTMAX_ICL_KERNEL.*'auto', 'torch'"):
        regression.backend()
    monkeypatch.setenv(regression.ENV, "torch")
    assert regression.backend().startswith("torch")
    assert not regression.usable("cpu", 3, 1)
    with pytest.raises(RuntimeError, match="not available"):
        regression.stream_values(1, 1, 0, 0, 0, 4, "words")
    prog = SweepProgram(SWEEPS[0], torch.device("cpu"))
    assert prog.fused is None and prog.loss().shape == (len(prog.configs),)


@needs_kernel
def test_the_engine_takes_only_what_it_can_compute():
    """Off the CPU, past its largest dimension, cosine tasks past its range reduction: the PyTorch path."""
    L = torch.tensor([[1.0, 2000.0]])
    assert not regression.FusedStream.usable([["relu", "cosine"]], L, 3, 1, "meta")
    assert not regression.FusedStream.usable([["relu", "relu"]], L, regression.DMAX + 1, 1, "cpu")
    assert not regression.FusedStream.usable([["relu", "cosine"]], L, 3, 1, "cpu")
    assert regression.FusedStream.usable([["relu", "relu"]], L, 3, 1, "cpu")
    big = dataclasses.replace(SWEEPS[0], L=(2000.0,))
    assert SweepProgram(big, torch.device("cpu")).fused is None
    with pytest.raises(ValueError, match="kind"):
        regression.stream_values(1, 1, 0, 0, 0, 4, "gaussian")


@needs_kernel
def test_the_step_works_in_buffers_made_once():
    """The engine's per-task results and scratch, and the PyTorch sampler's raw draws, are the same memory at every
    step: nothing of the batch's size is allocated in the loop."""
    prog = SweepProgram(SWEEPS[0], torch.device("cpu"))
    ptrs = [(f.results.data_ptr(), f.scratch.data_ptr(), f.queries.data_ptr()) for f in prog.fused]
    update = prog.updater()
    for _ in range(3):
        update(0.01)
    assert prog.step == 3
    assert ptrs == [(f.results.data_ptr(), f.scratch.data_ptr(), f.queries.data_ptr()) for f in prog.fused]
    st = prog.streams[0]
    first = st.sample(16, 1).x_ctx.data_ptr()
    assert st.sample(16, 2).x_ctx.data_ptr() == first


def _window_sums_reference(w, c, pp, pm, bounds):
    """The PyTorch loop of theory.relu_window_scan, in float64: (B, K, W, 4)."""
    out = []
    for i0, i1 in zip(bounds[:-1], bounds[1:]):
        cs = c[:, i0:i1].double()
        E = torch.exp(w.double()[None, :, None] * (cs[:, None, :] - cs.max(-1).values[:, None, None]))
        G = torch.stack([torch.ones_like(cs), pp[:, i0:i1].double(), pm[:, i0:i1].double()], -1)
        out.append(torch.cat([torch.bmm(E, G), (E * E).sum(-1, keepdim=True)], -1))
    return torch.stack(out, 1)


@needs_kernel
def test_window_sums_equal_pytorch_and_do_not_depend_on_the_thread_count():
    """The engine's inner loop of the Theorem 3.4 scan: ragged segments (not whole vectors of eight), windows from
    0.1 to 1e4 (where most weights are dropped below exp(-40)), to float32 rounding; bit for bit on 1 or 2 threads."""
    g = torch.Generator().manual_seed(5)
    B, n = 6, 203
    c = torch.rand(B, n, generator=g) * 2 - 1
    p = torch.randn(B, n, generator=g)
    pp, pm = p.clamp_min(0), (-p).clamp_min(0)
    w = torch.logspace(-1, 4, 17)
    bounds = [0, 1, 13, 50, 203]
    got = regression.window_sums(w, c, pp, pm, bounds)
    ref = _window_sums_reference(w, c, pp, pm, bounds)
    np.testing.assert_allclose(got.double(), ref, rtol=2e-5, atol=1e-17)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = regression.window_sums(w, c, pp, pm, bounds)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, got)
    with pytest.raises(ValueError, match="bounds"):
        regression.window_sums(w, c, pp, pm, [0, 50, 50, 203])
    with pytest.raises(ValueError, match="float32"):
        regression.window_sums(w.double(), c, pp, pm, bounds)


@needs_kernel
def test_the_theorem34_scan_is_the_same_with_and_without_the_engine(monkeypatch):
    """theory.relu_window_scan with its sums in the engine equals its PyTorch loop (the same draws) to rounding."""
    from softmax_icl import theory as th
    w = np.logspace(-1, 4, 12)
    fused = th.relu_window_scan(5, [50, 200, 900], w, n_tasks=40, seed=2, chunk=16)
    monkeypatch.setattr(regression, "available", lambda: False)
    plain = th.relu_window_scan(5, [50, 200, 900], w, n_tasks=40, seed=2, chunk=16)
    for name in ("bias", "noise", "bias_se"):
        np.testing.assert_allclose(getattr(fused, name), getattr(plain, name), rtol=1e-4, err_msg=name)


@needs_kernel
def test_segment_weights_in_the_engine_equal_pytorch_and_do_not_depend_on_the_thread_count(monkeypatch):
    """models.segment_weights: the engine's one pass (weights over the scores, each segment's max, sum, sum of
    squares) equals the PyTorch loop to float32 rounding, on ragged segments and scores thousands apart; bit for bit
    on 1 or 2 threads; the scores are left alone unless ``inplace``."""
    g = torch.Generator().manual_seed(3)
    s = torch.randn(3, 7, 130, generator=g) * torch.tensor([0.5, 40.0, 3000.0])[:, None, None]
    bounds = [0, 1, 9, 64, 130]
    before = s.clone()
    E, stats = models.segment_weights(s, bounds)
    assert torch.equal(s, before)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        E1, stats1 = models.segment_weights(s, bounds)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(E1, E) and torch.equal(stats1, stats)
    monkeypatch.setattr(regression, "available", lambda: False)
    E_ref, stats_ref = models.segment_weights(s.double(), bounds)
    big = E_ref > 1e-17                                   # the engine drops weights below exp(-40)
    np.testing.assert_allclose(E.double()[big], E_ref[big], rtol=1e-5)
    assert float(E.double()[~big].max()) < 1.1e-17        # dropped (0), or as small as PyTorch's
    np.testing.assert_allclose(stats.double(), stats_ref, rtol=2e-6)
    with pytest.raises(ValueError, match="bounds"):
        regression.segment_exp(s.clone(), [0, 9, 9, 130])


@pytest.mark.parametrize("param", ["M", "KQ"])
def test_the_engines_update_is_autograd_and_pytorchs_adam(param):
    """The engines' update (common.Update, adam.h): a key-query pair's gradients from the one in M (dP = Q G^T, dQ = P G), one step of
    Adam, and the next M, as autograd and torch.optim.Adam compute them, to float rounding, over steps whose
    learning rate changes (a schedule), with r != d for the pair."""
    if not regression.available():
        pytest.skip(regression.backend())
    g = torch.Generator().manual_seed(0)
    U, d = 7, 3
    r = 5 if param == "KQ" else d
    init = [torch.randn(U, r, d, generator=g) for _ in range(2 if param == "KQ" else 1)]
    mine, ref = [p.clone() for p in init], [torch.nn.Parameter(p.clone()) for p in init]
    update, opt = regression.Update(mine, lib=regression.library()), torch.optim.Adam(ref, lr=0.1)
    for lr in (0.1, 0.05, 0.02, 0.08):
        G = torch.randn(U, d, d, generator=g)
        M = ref[0] if param == "M" else ref[0].transpose(1, 2) @ ref[1]
        torch.testing.assert_close(update.M, M.detach(), rtol=1e-5, atol=1e-6)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        (M * G).sum().backward()
        opt.step()
        update(G, lr)
        for a, b in zip(mine, ref):
            torch.testing.assert_close(a, b.detach(), rtol=1e-5, atol=1e-6)
    assert not torch.equal(mine[0], init[0])
