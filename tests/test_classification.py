"""In-context classification: sampler, attention models, GD constructions, search, alignment metrics, trainer."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from softmax_icl import stats, streams
from softmax_icl.classification import algorithms as calg
from softmax_icl.classification import metrics as cmetrics
from softmax_icl.classification import models as cmodels
from softmax_icl.engine import classification as cls_engine
from softmax_icl.engine import common
from softmax_icl.classification import builder as cbuilder
from softmax_icl.classification import plan as cplan
from softmax_icl.classification import tasks as ctasks
from test_device import traffic  # noqa: F401  (the fixture that records host traffic in a training loop)
from test_streams import ref_normal, ref_philox, ref_words

D64 = torch.float64
#: The sampler's implementations: the compiled CPU engine where it builds, and the PyTorch builder (the GPU's).
PATHS = [pytest.param(True, id="compiled", marks=pytest.mark.skipif(not cls_engine.available(), reason=cls_engine.backend())),
         pytest.param(False, id="torch")]


def _contexts(B=7, n=23, C=4, d=3, P=1, seed=0):
    return ctasks.sample_contexts(B, n, C, d, P, seed=seed, dtype=D64)


# -- sampler ------------------------------------------------------------------------------------

@pytest.mark.parametrize("P", [1, 3])
def test_labels_are_the_argmax_over_class_prototypes(P):
    C, d = 5, 4
    b = ctasks.sample_contexts(64, 30, C, d, P, seed=1, dtype=D64)
    x = torch.cat([b.x_ctx[0], b.x_q[0].unsqueeze(1)], 1)                           # (B, n+1, d)
    torch.testing.assert_close(x.norm(dim=-1), torch.ones(x.shape[:2], dtype=D64))
    pr = b.protos[0]                                                                 # (B, C, P, d)
    torch.testing.assert_close(pr.norm(dim=-1), torch.ones(pr.shape[:3], dtype=D64))
    scores = torch.einsum("bmd,bcpd->bmcp", x, pr).amax(-1)                          # best prototype per class
    expected = scores.argmax(-1)
    assert torch.equal(b.label_ctx[0], expected[:, :-1])
    assert torch.equal(b.label_q[0], expected[:, -1])
    assert torch.equal(b.y_ctx[0].argmax(-1), b.label_ctx[0])
    assert torch.equal(b.y_ctx[0].sum(-1), torch.ones_like(b.y_ctx[0][..., 0]))
    if P == 1:   # the paper's rule y = argmax_k c_k^T x with the class vectors c_k
        c = pr[:, :, 0]
        assert torch.equal(b.label_q[0], torch.einsum("bd,bcd->bc", b.x_q[0], c).argmax(-1))


def _stream(configs, dims, seeds, native_path, **kw):
    return ctasks.ClsStream(configs, dims, seeds, "cpu", native=native_path, **kw)


@pytest.mark.parametrize("native_path", PATHS)
@pytest.mark.parametrize("reading, d, D, P, Pm", [("uniform", 2, 5, 1, 2), ("uniform", 5, 9, 2, 3),
                                                  ("clustered", 4, 7, 1, 2)])
def test_padded_draws_give_smaller_tasks_exactly(native_path, reading, d, D, P, Pm):
    """Every coordinate, prototype and point has its own stream: a task padded to larger sizes is the small task
    with zeros, the same numbers (also where the norms' sums run over more coordinates than a vector's width)."""
    from same_draws import SameDraws

    same = SameDraws(compiled=native_path)
    cfg = dict(seed=0, reading=reading, P=P, tau=0.5 if reading == "clustered" else 0.0, k=0, C=3, d=d, n=12)
    small = _stream([cfg], (12, 3, P, d), [3], native_path).sample(50)
    pad = _stream([cfg, dict(cfg, C=6, d=D, P=Pm, n=20)], (20, 6, Pm, D), [3], native_path).sample(50)
    assert torch.all(pad.x_ctx[0, ..., d:] == 0) and torch.all(pad.x_q[0, ..., d:] == 0)
    same(pad.x_ctx[0, :, :12, :d], small.x_ctx[0], "padded vs small: context inputs")
    same(pad.x_q[0, :, :d], small.x_q[0], "padded vs small: queries")
    assert torch.equal(pad.label_ctx[0, :, :12], small.label_ctx[0]) and torch.equal(pad.label_q[0], small.label_q[0])
    assert int(pad.label_q[0].max()) <= 2 and int(pad.label_ctx[0].max()) <= 2
    assert pad.ctx_mask is not None and int(pad.ctx_mask[0].sum()) == 12
    assert pad.class_mask is not None and pad.class_mask[0, 0].tolist() == [True] * 3 + [False] * 3
    same.finish()


# -- the streams behind the tasks: a NumPy reference of the counter scheme ------------------------------------

def ref_fold(seed: int, *data: int) -> int:
    """``streams.fold_in`` from the reference Philox."""
    for x in data:
        w = ref_philox([x & 0xFFFFFFFF, x >> 32, 0, streams.TAGS["fold"]], [seed & 0xFFFFFFFF, seed >> 32])
        seed = int(w[0]) | (int(w[1]) << 32)
    return seed


def ref_context(seed, step, task, reading, n, C, d, P=1, tau=0.0, k=0):
    """One context of one task in NumPy float64, from the module docstring of ``classification.tasks``: inputs
    (n + 1, d) with the query first, labels (n + 1,), prototypes (C, P, d); the class-balanced points by the
    definition (every candidate of the pool labelled, then taken in point order)."""
    tag = streams.TAGS
    n1 = n + 1

    def normals(key, t, count):
        return ref_normal(ref_words(key, tag[t], step, task, count + count % 2))[:count]

    def unit(z):
        return z / np.maximum(np.linalg.norm(z, axis=-1, keepdims=True), 1e-30)

    z = np.stack([normals(ref_fold(seed, c), "cls_x", n1) for c in range(d)], -1)                  # (n1, d)
    zp = np.stack([np.stack([normals(ref_fold(seed, c, q), "cls_proto", C) for c in range(d)], -1)
                   for q in range(P)], 1)                                                          # (C, P, d)
    if reading == "subspace":
        zp[..., k:] = 0
    pr = unit(zp)
    m24 = ref_words(seed, tag["cls_class"], step, task, n1) >> np.uint64(8)
    kc = ((m24 * np.uint64(C)) >> np.uint64(24)).astype(np.int64)
    if reading in ("uniform", "subspace"):
        x = unit(z)
        return x, np.einsum("pd,cqd->pcq", x, pr).max(-1).argmax(-1), pr
    if reading == "clustered":
        return unit(pr[kc, 0] + tau * z / math.sqrt(d)), kc, pr
    R = 16 * n1
    cand = unit(np.stack([normals(ref_fold(seed, c), "cls_pool", R) for c in range(d)], -1))
    lp = (cand @ pr[:, 0].T).argmax(-1)
    members = [np.flatnonzero(lp == c) for c in range(C)]
    x, lab = np.zeros((n1, d)), np.zeros(n1, dtype=np.int64)
    for p in range(n1):
        r = int((kc[:p] == kc[p]).sum())                    # earlier points of the same class
        cls = kc[p]
        if members[cls].size == 0:                          # an empty class borrows the next one's first candidate
            cls = next(c % C for c in range(kc[p] + 1, kc[p] + C) if members[c % C].size)
            r = 0
        x[p], lab[p] = cand[members[cls][r % members[cls].size]], cls
    return x, lab, pr


REF_TASKS = [("uniform", 20, 4, 3, 2, 0.0, 0), ("subspace", 20, 4, 3, 1, 0.0, 2), ("clustered", 20, 4, 3, 1, 0.7, 0),
             ("balanced", 30, 5, 3, 1, 0.0, 0), ("balanced", 6, 8, 2, 1, 0.0, 0),
             ("balanced", 5, 20, 2, 1, 0.0, 0)]


@pytest.mark.parametrize("native_path", PATHS)
def test_contexts_equal_a_numpy_reference_of_the_streams(native_path):
    """Every reading, by the streams' definition in NumPy: labels bit for bit, inputs to float32 rounding. The
    class-balanced tasks include pools with too few candidates of a class (reused) and with none (borrowed)."""
    seed, step = 2**40 + 17, 3
    borrowed = reused = 0
    for reading, n, C, d, P, tau, k in REF_TASKS:
        b = ctasks.sample_contexts(12, n, C, d, P, seed=seed, reading=reading, tau=tau, k=k, step=step,
                                   native=native_path)
        for t in range(12):
            x, lab, pr = ref_context(seed, step, t, reading, n, C, d, P, tau, k)
            got = torch.cat([b.x_q[0, t, None], b.x_ctx[0, t]]).double().numpy()
            np.testing.assert_allclose(got, x, rtol=0, atol=2e-5)
            np.testing.assert_array_equal(torch.cat([b.label_q[0, t, None], b.label_ctx[0, t]]).numpy(), lab)
            np.testing.assert_allclose(b.protos[0, t].double().numpy(), pr, rtol=0, atol=2e-5)
            if reading == "balanced":
                drawn = ((ref_words(seed, streams.TAGS["cls_class"], step, t, n + 1) >> np.uint64(8))
                         * np.uint64(C) >> np.uint64(24)).astype(np.int64)
                borrowed += int((lab != drawn).sum())
                reused += len({tuple(v) for v in x}) < n + 1
    assert borrowed > 0 and reused > 0                       # both fallbacks of the balanced pool were exercised


#: Configurations that take every branch of the builder: each reading, prototypes, padded C and d, two n.
ALL_READINGS = [dict(seed=s, reading=r, P=P, tau=0.5, k=2, C=C, d=d, n=n)
                for s in (0, 1) for r, P in (("uniform", 1), ("uniform", 2), ("balanced", 1), ("clustered", 1),
                                            ("subspace", 1)) for C, d in ((4, 3), (3, 2)) for n in (12, 7)]


def test_the_compiled_engine_draws_the_torch_builders_tasks():
    """Same streams, two implementations (the engine stops scanning the balanced pool early): integers bit for
    bit, floats to rounding, for every reading, padding, a mixture of lengths, and on any number of threads."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    cfgs = ALL_READINGS + [dict(ALL_READINGS[3], n=12, n_min=4, seed=1)]
    stream = _stream(cfgs, (12, 4, 2, 3), [11, 12], True)
    got = stream.draw(5, 40, first=7, protos=True)
    ref = cbuilder.draw_torch(stream.keys, stream.plan, 5, 7, 40)
    assert torch.all(got.xs[..., 12:] == 0) and torch.all(got.lab[..., 12:] == 0)      # rows padded to whole blocks
    for name in ("lab", "lq", "length_words"):
        assert torch.equal(getattr(got, name)[..., :getattr(ref, name).shape[-1]], getattr(ref, name)), name
    # unit vectors from normals equal to a few units in the last place (the header's polynomials and PyTorch's log,
    # cos, sin); a clustered point c_k + tau z / sqrt(d) near the origin divides that rounding by its small length
    for name in ("xs", "xq", "protos"):
        torch.testing.assert_close(getattr(got, name)[..., :getattr(ref, name).shape[-1]], getattr(ref, name),
                                   rtol=0, atol=5e-6)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _stream(cfgs, (12, 4, 2, 3), [11, 12], True).draw(5, 40, first=7, protos=True)
    finally:
        torch.set_num_threads(threads)
    for name in ("xs", "xq", "lab", "lq", "protos", "length_words"):
        assert torch.equal(getattr(one, name), getattr(got, name)), name


@pytest.mark.parametrize("pool_factor", [16, 1])
def test_the_balanced_pool_scanned_in_chunks_gives_the_tasks_of_the_whole_pool(monkeypatch, pool_factor):
    """The PyTorch sampler scans the class-balanced pool in chunks on the CPU and stops once every point has its
    candidate: the same tasks, bit for bit, as one pass over the whole pool (a GPU's way), whatever the chunk, with
    padded rows of other lengths, and where the pool runs short (one candidate per point: classes reuse or borrow
    candidates, and the chunks must read the whole pool)."""
    monkeypatch.setattr(cbuilder, "POOL_FACTOR", pool_factor)
    cfgs = [dict(seed=s, reading="balanced", P=1, tau=0.0, k=0, C=C, d=d, n=n)
            for s in (0, 1) for C, d in ((4, 3), (3, 2), (2, 5)) for n in (12, 40)]
    stream = _stream(cfgs, (40, 4, 1, 5), [11, 12], False)
    original = cbuilder._balanced_torch

    def draw(devices, chunk=None):
        monkeypatch.setattr(cbuilder, "CHUNKED_POOL_DEVICES", devices)
        monkeypatch.setattr(cbuilder, "_balanced_torch", lambda *a, **kw: original(*a, chunk=chunk, **kw))
        return cbuilder.draw_torch(stream.keys, stream.plan, 5, 7, 40)

    whole = draw(())
    for chunk in (None, 4, 24, 128):
        got = draw(("cpu",), chunk)
        for name in ("xs", "xq", "lab", "lq"):
            assert torch.equal(getattr(got, name), getattr(whole, name)), (chunk, name)
    with pytest.raises(ValueError, match="chunk=6 must be a positive multiple of 4"):
        draw(("cpu",), 6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_draws_the_cpus_classification_tasks():
    """The PyTorch builder on the GPU draws the CPU's tasks from the same seeds: integers (labels, classes, lengths)
    bit for bit, floats to rounding, for every reading, padding and a mixture of lengths."""
    cfgs = ALL_READINGS + [dict(ALL_READINGS[3], n=12, n_min=4, seed=1)]
    cpu = ctasks.ClsStream(cfgs, (12, 4, 2, 3), [11, 12], "cpu", native=False)
    gpu = ctasks.ClsStream(cfgs, (12, 4, 2, 3), [11, 12], "cuda", native=False)
    ref = cbuilder.draw_torch(cpu.keys, cpu.plan, 5, 7, 40)
    got = cbuilder.draw_torch(gpu.keys, gpu.plan, 5, 7, 40)
    for name in ("lab", "lq", "length_words"):
        assert torch.equal(getattr(got, name).cpu(), getattr(ref, name)), name
    for name in ("xs", "xq"):
        torch.testing.assert_close(getattr(got, name).cpu(), getattr(ref, name), rtol=0, atol=2e-6)


@pytest.mark.parametrize("native_path", PATHS)
def test_a_configuration_draws_the_same_contexts_alone_and_in_any_sweep(native_path):
    """Nothing a configuration draws depends on its company: other seeds, readings and sizes, larger padding, or
    which contexts of the step are drawn together."""
    from same_draws import SameDraws

    same = SameDraws(compiled=native_path)
    whole = _stream(ALL_READINGS, (12, 4, 2, 3), [11, 12], native_path)
    batch = whole.sample(10, step=4)
    for i, cfg in enumerate(ALL_READINGS):
        alone = _stream([dict(cfg, seed=0)], (cfg["n"], cfg["C"], cfg["P"], cfg["d"]), [[11, 12][cfg["seed"]]],
                        native_path)
        b = alone.batch(alone.draw(4, 6, first=4))
        n, C, d = cfg["n"], cfg["C"], cfg["d"]
        assert torch.equal(b.label_ctx[0], batch.label_ctx[i, 4:, :n])
        assert torch.equal(b.label_q[0], batch.label_q[i, 4:])
        same(b.x_ctx[0], batch.x_ctx[i, 4:, :n, :d], f"configuration {i} alone vs in the sweep: context inputs")
        same(b.x_q[0], batch.x_q[i, 4:, :d], f"configuration {i} alone vs in the sweep: queries")
        assert torch.equal(b.y_ctx[0], batch.y_ctx[i, 4:, :n, :C])
    same.finish()


# -- models and the GD constructions ------------------------------------------------------------

@pytest.mark.parametrize("kind", ["softmax", "linear"])
def test_fast_forward_matches_the_token_level_transformer(kind):
    b = _contexts()
    D = 3 + 4
    g = torch.Generator().manual_seed(5)
    WK, WQ, WV = (torch.randn(2, D, D, generator=g, dtype=D64) for _ in range(3))
    x, y, xq = (t.expand(2, *t.shape[1:]) for t in (b.x_ctx, b.y_ctx, b.x_q))
    fast = cmodels.sa_logits(torch.tensor([kind == "softmax"] * 2), WK, WQ, WV, x, y, xq)
    ref = cmodels.sa_logits_reference(kind, WK, WQ, WV, x, y, xq)
    torch.testing.assert_close(fast, ref, rtol=1e-12, atol=1e-12)


def test_linear_sa_with_constructed_weights_is_one_gd_step():
    C, d = 4, 3
    b = _contexts(C=C, d=d)
    for a_, b_ in [(0.7, 3.0), (-2.0, -5.0), (10.0, 0.4)]:
        WK, WQ, WV = cmodels.construct_weights("linear", d, C, a_, b_)
        sa = cmodels.sa_logits_reference("linear", WK[None], WQ[None], WV[None], b.x_ctx, b.y_ctx, b.x_q)
        gd = calg.algorithm_logits("gd", b.x_ctx, b.y_ctx, b.x_q, 0.0, a_ * b_)
        torch.testing.assert_close(sa, gd, rtol=1e-13, atol=1e-13)


def test_gd_step_formula_is_one_gradient_step_on_the_in_context_ce():
    """W_1 = -eta grad L(0) of the context's mean CE; its logits differ from the formula by a class constant."""
    C, d, eta = 4, 3, 7.5
    b = _contexts(B=5, C=C, d=d)
    for j in range(5):
        x, y, xq = b.x_ctx[0, j], b.y_ctx[0, j], b.x_q[0, j]
        W = torch.zeros(C, d, dtype=D64, requires_grad=True)
        loss = torch.nn.functional.cross_entropy(x @ W.T, y.argmax(-1))
        (grad,) = torch.autograd.grad(loss, W)
        step = (-eta * grad) @ xq
        formula = calg.algorithm_logits("gd", x, y, xq, 0.0, eta)
        diff = step - formula
        torch.testing.assert_close(diff, diff.mean().expand(C), rtol=0, atol=1e-13)


def test_softmax_sa_with_constructed_weights_is_the_kernel_gd_step():
    C, d = 4, 3
    b = _contexts(C=C, d=d)
    for beta, gamma in [(0.5, 2.0), (5.0, 9.0), (40.0, 1.5)]:
        WK, WQ, WV = cmodels.construct_weights("softmax", d, C, beta, gamma)
        sa = cmodels.sa_logits_reference("softmax", WK[None], WQ[None], WV[None], b.x_ctx, b.y_ctx, b.x_q)
        k = torch.exp(beta * torch.einsum("kbnd,kbd->kbn", b.x_ctx, b.x_q))          # k_beta(x_i, x_q)
        rate = gamma * b.x_ctx.shape[2] / k.sum(-1, keepdim=True)                      # adaptive rate eta(x_q)
        kernel_gd = rate / b.x_ctx.shape[2] * torch.einsum("kbn,kbnc->kbc", k, b.y_ctx)
        torch.testing.assert_close(sa, kernel_gd, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(sa, calg.algorithm_logits("kernel_gd", b.x_ctx, b.y_ctx, b.x_q, beta, gamma),
                                   rtol=1e-13, atol=1e-13)


def test_read_off_recovers_constructed_hyperparameters_and_ignores_class_constants():
    C, d = 5, 4
    WK, WQ, WV = cmodels.construct_weights("softmax", d, C, 3.5, 6.0)
    WV[d:, d:] += 2.0                                  # adds the same number to every logit
    ro = cmodels.read_off((WK.T @ WQ).numpy(), WV.numpy(), d, C)
    assert ro["scale"] == pytest.approx(3.5) and ro["value"] == pytest.approx(6.0)
    assert ro["product"] == pytest.approx(21.0)
    assert ro["xx_dev"] == pytest.approx(0, abs=1e-12) and ro["yy_dev"] == pytest.approx(0, abs=1e-12)


def test_padding_and_masks_are_exact():
    """A (C=3, d=2, n=9) model embedded in padded (C=5, d=4, n=15) tensors gives the unpadded logits."""
    g = torch.Generator().manual_seed(2)
    cfg = dict(seed=0, reading="uniform", P=1, tau=0.0, k=0, C=3, d=2, n=9)
    stream = ctasks.ClsStream([cfg], (15, 5, 1, 4), [2], "cpu", dtype=D64)
    pad = stream.sample(6)
    small = ctasks.ClsBatch(pad.x_ctx[..., :9, :2], pad.y_ctx[..., :9, :3], pad.x_q[..., :2], pad.label_q,
                        pad.label_ctx[..., :9], None, None, pad.protos)
    Ws = [torch.randn(1, 5, 5, generator=g, dtype=D64) for _ in range(3)]              # D = 2 + 3
    idx = torch.tensor([0, 1, 4, 5, 6])                                                 # their slots in D = 4 + 5
    unused = torch.tensor([2, 3, 7, 8])
    Wp = []
    for j, W in enumerate(Ws):
        P_ = torch.zeros(1, 9, 9, dtype=D64)
        P_[0][idx[:, None], idx[None, :]] = W[0]
        P_[0][:, unused] = torch.randn(9, 4, generator=g, dtype=D64)   # columns that only meet zero inputs
        if j == 2:                                                      # W_V rows of unused or x outputs
            P_[0][torch.tensor([0, 1, 2, 3, 7, 8])] = torch.randn(6, 9, generator=g, dtype=D64)
        Wp.append(P_)
    for soft in (True, False):
        k = torch.tensor([soft])
        ls = cmodels.sa_logits(k, *Ws, small.x_ctx, small.y_ctx, small.x_q)
        lp = cmodels.sa_logits(k, *Wp, pad.x_ctx, pad.y_ctx, pad.x_q, pad.ctx_mask)
        torch.testing.assert_close(lp[..., :3], ls, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(cmetrics.masked_ce(lp, pad.label_q, pad.class_mask), cmetrics.masked_ce(ls, small.label_q),
                                   rtol=1e-12, atol=1e-12)
    for name in calg.ALGORITHMS:
        za = calg.algorithm_features(name, pad.x_ctx, pad.y_ctx, pad.x_q, 0.7, pad.ctx_mask)
        zs = calg.algorithm_features(name, small.x_ctx, small.y_ctx, small.x_q, 0.7)
        torch.testing.assert_close(za[..., :3], zs, rtol=1e-12, atol=1e-12)


# -- search -------------------------------------------------------------------------------------

def test_rate_search_finds_the_brute_force_minimum():
    b = ctasks.sample_contexts(400, 40, 4, 3, 1, seed=4, dtype=D64)
    found = calg.search_hyperparameters("gd", b)
    z = calg.algorithm_features("gd", b.x_ctx, b.y_ctx, b.x_q, 0.0)
    etas = np.geomspace(1, 1000, 4001)
    ce = [float(cmetrics.masked_ce(e * z, b.label_q).mean()) for e in etas]
    assert found["rate"][0] == pytest.approx(etas[int(np.argmin(ce))], rel=3e-3)
    assert min(ce) - 1e-6 <= found["ce"][0] <= min(ce) + 1e-12


def test_unit_rows_of_the_pytorch_sampler_equal_dividing_by_the_norm():
    """The PyTorch sampler scales rows to unit length with a multiply-add loop over the few coordinates on the CPU
    (a norm over a short last axis is slow there): the same rows as ``z / |z|`` to float rounding, zero rows kept
    finite, and more than 16 coordinates (a plain sum of squares there)."""
    g = torch.Generator().manual_seed(5)
    for d in (1, 2, 5, 16, 17, 40):
        for dtype in (torch.float32, D64):
            z = torch.randn(3, 7, d, generator=g, dtype=dtype)
            z[0, 0] = 0.0
            got = cbuilder._normalise(z)
            torch.testing.assert_close(got, z / z.norm(dim=-1, keepdim=True).clamp_min(1e-30))
            assert bool(torch.isfinite(got).all())
            torch.testing.assert_close(got[1:].norm(dim=-1), torch.ones(2, 7, dtype=dtype))


def test_the_searchs_cross_entropy_from_margins_is_masked_ce():
    """The search evaluates CE(t z) as t top + log sum exp(t e) from margins computed once: the same numbers as
    masked_ce (with a class mask, at rates from tiny to huge, where logsumexp of the raw logits loses digits)."""
    g = torch.Generator().manual_seed(3)
    z = torch.randn(2, 50, 4, generator=g, dtype=D64) * 3
    label = torch.randint(0, 3, (2, 50), generator=g)
    mask = torch.tensor([True, True, True, False])
    margin, top = calg._margins(z, label, mask)
    for t in (1e-3, 0.5, 7.0, 300.0):
        tt = torch.full((2,), t, dtype=D64)
        torch.testing.assert_close(calg._ce_of_margins(margin, top, tt), cmetrics.masked_ce(t * z, label, mask).mean(-1),
                                   rtol=1e-12, atol=1e-12)


def test_searching_each_length_on_its_prefix_is_searching_the_padded_stack():
    """The figure's search reads every context length on the first n points of one draw (no padding to compute):
    the same hyperparameters and cross-entropies as the stack of all lengths, padded and masked, in one search."""
    from softmax_icl.classification.tasks import prefix
    from softmax_icl.figures.classification_kernel_gd.sweeps import at_lengths

    b = ctasks.sample_contexts(300, 40, 4, 3, 1, seed=8, dtype=D64)
    ns = [10, 25, 40]
    for name in calg.ALGORITHMS:
        stacked = calg.search_hyperparameters(name, at_lengths(b, ns))
        for i, n in enumerate(ns):
            alone = calg.search_hyperparameters(name, prefix(b, n))
            for key in ("beta", "rate", "ce"):
                assert alone[key][0] == pytest.approx(stacked[key][i], rel=1e-9), (name, n, key)
            np.testing.assert_allclose(alone["grid_ce"][0], stacked["grid_ce"][i], rtol=1e-9)
    with pytest.raises(ValueError, match="not all in use"):
        prefix(at_lengths(b, [10]), 20)


def test_kernel_search_beats_every_grid_point_and_is_interior():
    b = ctasks.sample_contexts(400, 40, 4, 3, 1, seed=6, dtype=D64)
    found = calg.search_hyperparameters("kernel_gd", b)
    assert found["ce"][0] <= found["grid_ce"][0].min() + 1e-12
    assert found["grid"][0] < found["beta"][0] < found["grid"][-1]


# -- alignment metrics --------------------------------------------------------------------------

def test_alignment_metrics_on_known_cases():
    g = torch.Generator().manual_seed(0)
    la = torch.randn(10, 4, generator=g, dtype=D64)
    same = cmetrics.alignment_metrics(la, la + 3.0)          # a class-constant shift changes nothing
    assert torch.allclose(same["logit_cosine"], torch.ones(10, dtype=D64))
    assert torch.allclose(same["prob_l2"], torch.zeros(10, dtype=D64), atol=1e-15)
    assert torch.all(same["argmax_agreement"] == 1)
    opp = cmetrics.alignment_metrics(la, -la)
    assert torch.allclose(opp["logit_cosine"], -torch.ones(10, dtype=D64))
    assert torch.all(opp["argmax_agreement"] == 0)
    lb = torch.tensor([[0.0, 0.0]], dtype=D64)
    lc = torch.tensor([[math.log(3.0), 0.0]], dtype=D64)       # probabilities (3/4, 1/4) vs (1/2, 1/2)
    assert float(cmetrics.alignment_metrics(lb, lc)["prob_l2"]) == pytest.approx(math.sqrt(2) / 4)
    ja = torch.randn(10, 4, 3, generator=g, dtype=D64)
    m = cmetrics.alignment_metrics(la, la, ja, 2.0 * ja)
    assert torch.allclose(m["jacobian_cosine"], torch.ones(10, dtype=D64))
    m = cmetrics.alignment_metrics(la, la, ja, -ja)
    assert torch.allclose(m["jacobian_cosine"], -torch.ones(10, dtype=D64))


def test_prob_jacobian_matches_finite_differences():
    b = _contexts(B=4)

    def probs(xq):
        return torch.softmax(calg.algorithm_logits("kernel_gd", b.x_ctx, b.y_ctx, xq, 3.0, 5.0), -1)

    jac = cmetrics.prob_jacobian(probs, b.x_q.clone())                                     # (1, B, C, d)
    eps = 1e-6
    for j in range(3):
        e = torch.zeros_like(b.x_q)
        e[..., j] = eps
        fd = (probs(b.x_q + e) - probs(b.x_q - e)) / (2 * eps)
        torch.testing.assert_close(jac[..., j], fd, rtol=1e-6, atol=1e-8)



# -- trainer ------------------------------------------------------------------------------------

def test_a_configuration_trained_alone_matches_it_inside_the_sweep():
    tasks = (ctasks.task_spec("uniform"), ctasks.task_spec("uniform", P=2), ctasks.task_spec("balanced"),
             ctasks.task_spec("clustered", tau=0.5))
    sw = cmodels.ClsSweep(models=("softmax", "linear"), tasks=tasks, shapes=((3, 2), (4, 3)), n=(6, 10), seeds=2,
                          steps=12, batch_size=8, lr=0.05, log_every=4)
    full = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    assert full.A_history.shape == (4, len(sw.configs()), 7, 7)
    for pick in ({"model": "softmax", "reading": "uniform", "P": 2, "C": 3, "d": 2, "n": 6, "seed": 1},
                 {"model": "linear", "reading": "uniform", "P": 1, "C": 4, "d": 3, "n": 10, "seed": 0},
                 {"model": "softmax", "reading": "balanced", "P": 1, "C": 3, "d": 2, "n": 10, "seed": 1},
                 {"model": "linear", "reading": "clustered", "P": 1, "C": 4, "d": 3, "n": 6, "seed": 0}):
        i = full.select(**pick)[0]
        alone = cmodels.train_cls_sweep(sw, "cpu", configs=[full.configs[i]], progress=False)
        for k in ("WK", "WQ", "WV"):
            np.testing.assert_allclose(alone.final[k][0], full.final[k][i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(alone.loss_history[:, 0], full.loss_history[:, i], rtol=1e-5, atol=1e-6)
    # and the weights did move (the test could not pass trivially)
    assert np.abs(full.final["WV"] - full.WV_history[0]).max() > 1e-3


@pytest.mark.parametrize("name", ["readings", "shapes", "large", "mixture"])
def test_the_compiled_loss_and_gradient_equal_pytorchs(name):
    """The engine's per-configuration CE and its gradient in W_K, W_Q, W_V are sa_logits + masked_ce's, to rounding:
    every model (softmax, linear 1/n, linear unnormalised), padded C and d, C or d above 6, a mixture of lengths,
    n < n_max."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    sw = {"readings": cmodels.ClsSweep(tasks=(ctasks.task_spec("uniform"), ctasks.task_spec("balanced"),
                                              ctasks.task_spec("clustered", tau=0.5)), n=(9, 14), seeds=2),
          "shapes": cmodels.ClsSweep(shapes=((2, 3), (4, 2), (3, 3)), n=(10,), seeds=2),
          # beyond the engine's programs for fixed 2 <= d, C <= 6: its generic loop, beside a fixed one
          "large": cmodels.ClsSweep(shapes=((9, 3), (3, 10), (4, 4)), n=(11,), seeds=2),
          "mixture": cmodels.ClsSweep(models=("softmax", "linear", "linear_sum"), n=(12,), n_min=3, seeds=2)}[name]
    configs = sw.configs()
    stream = ctasks.ClsStream(configs, sw.dims, [5, 6], "cpu")
    plan, tasks = stream.plan, stream.draw(2, 16)
    W = cmodels.init_weights(configs, sw.dims, 1, 0.8, "cpu")
    fused = cls_engine.FusedLoss(plan.group, cmodels.model_codes(configs), plan.unit_C, [c["d"] for c in configs],
                                 plan.unit_n, sw.dims)
    WK, WQ, WV = (w.detach() for w in W)
    fused.compute((WK.transpose(1, 2) @ WQ).contiguous(), WV.contiguous(), tasks,
                  cplan.context_lengths(plan, tasks.length_words))
    b = stream.batch(tasks)
    ref = cmetrics.masked_ce(cmodels.sa_logits(cmodels.model_codes(configs), *W, b.x_ctx, b.y_ctx, b.x_q, b.ctx_mask),
                             b.label_q, b.class_mask).mean(-1)
    torch.testing.assert_close(fused.loss, ref.detach(), rtol=2e-6, atol=2e-6)
    # the gradient in A = W_K^T W_Q through to W_K and W_Q (as the trainer's update takes it), and in W_V
    got = (WQ @ fused.gA.transpose(1, 2), WK @ fused.gA, fused.gWV)
    for g, r in zip(got, torch.autograd.grad(ref.sum(), W)):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)


def test_the_compiled_and_pytorch_trainers_follow_the_same_trajectory(monkeypatch):
    """The same tasks, the same loss and gradient to rounding: the two trainers' weights after a few steps agree."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    sw = cmodels.ClsSweep(tasks=(ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=0.5)), n=(8,),
                          seeds=2, steps=6, batch_size=8, lr=0.05, log_every=3)
    compiled = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    monkeypatch.setattr(cls_engine, "available", lambda: False)
    plain = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    assert (compiled.timings["engine"], plain.timings["engine"]) == ("compiled", "torch")
    for k in ("WK", "WQ", "WV"):
        np.testing.assert_allclose(compiled.final[k], plain.final[k], rtol=1e-4, atol=1e-5)
    assert np.abs(compiled.final["WV"] - compiled.WV_history[0]).max() > 1e-3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_and_cpu_trainers_follow_the_same_trajectory(monkeypatch):
    """Trained on the GPU and on the CPU (PyTorch path) from the same seeds: the same tasks (counter-based streams),
    the same loss and gradient to rounding, so the weights after a few steps agree to float32 rounding."""
    sw = cmodels.ClsSweep(tasks=(ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=0.5)), n=(8,),
                          seeds=2, steps=6, batch_size=8, lr=0.05, log_every=3)
    gpu = cmodels.train_cls_sweep(sw, "cuda", progress=False)
    monkeypatch.setattr(cls_engine, "available", lambda: False)
    cpu = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    assert gpu.timings["device"].startswith("cuda") and cpu.timings["engine"] == "torch"
    for k in ("WK", "WQ", "WV"):
        np.testing.assert_allclose(gpu.final[k], cpu.final[k], rtol=1e-4, atol=1e-5)
    assert np.abs(cpu.final["WV"] - cpu.WV_history[0]).max() > 1e-3


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "torch"])
def test_neither_trainer_waits_for_the_device_or_allocates_in_its_loop(compiled, monkeypatch, traffic):
    """The PyTorch trainer (a GPU's) reads no value on the host and passes the step as a device tensor; the compiled
    one allocates its buffers before the loop. Every reading, padding and a mixture of lengths."""
    if compiled and not cls_engine.available():
        pytest.skip(cls_engine.backend())
    if not compiled:
        monkeypatch.setattr(cls_engine, "available", lambda: False)
        monkeypatch.setattr(cbuilder, "CHUNKED_POOL_DEVICES", ())   # the CPU as a GPU: the pool in one pass
    for sw in (cmodels.ClsSweep(models=("softmax", "linear_sum"), shapes=((2, 3), (3, 2)), n=(5, 7), seeds=2,
                                tasks=tuple(ctasks.task_spec(*t) for t in (("uniform",), ("balanced",),
                                            ("clustered", 1, 0.5), ("subspace", 1, 0.0, 1), ("uniform", 2)))),
               cmodels.ClsSweep(models=("linear",), tasks=(ctasks.task_spec("balanced"),), n=(9,), n_min=3)):
        res = cmodels.train_cls_sweep(dataclasses.replace(sw, steps=4, batch_size=3, log_every=2), "cpu",
                                      progress=False)
        assert res.timings["engine"] == ("compiled" if compiled else "torch")
    assert traffic.events == []


def test_models_on_the_engines_contexts_equals_the_pytorch_forward_pass():
    """An evaluation set drawn by the engine keeps its contexts as the engine reads them; models_on evaluates units
    there (compiled forward pass) with the logits of sa_logits on the padded tensors, at their own or other lengths."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    settings = [dict(reading="uniform", P=1, tau=0.0, k=0, C=3, d=2, n=9),
                dict(reading="clustered", P=1, tau=0.5, k=0, C=4, d=3, n=14)]
    batch = ctasks.fixed_batch(settings, (14, 4, 1, 3), seed=3, n_contexts=40)
    assert batch.source is not None
    g = torch.Generator().manual_seed(1)
    A, WV = (torch.randn(3, 7, 7, generator=g) for _ in range(2))
    codes, idx = torch.tensor([0, 1, 2]), [0, 1, 1]
    plain = ctasks.take(batch, [0, 1])                                                 # a subset: no source
    assert plain.source is None
    for lengths in (None, [5, 14, 20]):
        got, _ = cmodels.models_on(A, WV, codes, batch, idx, lengths=lengths)
        ref, _ = cmodels.models_on(A, WV, codes, plain, idx, lengths=lengths)
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def _fused_step_setup(configs, dims, T, chunk, threads=None):
    stream = ctasks.ClsStream(configs, dims, [11, 12], "cpu", native=True)
    plan = stream.plan
    loss = cls_engine.FusedLoss(plan.group, cmodels.model_codes(configs), plan.unit_C, [c["d"] for c in configs],
                                plan.unit_n, dims, threads=threads)
    return stream, loss, cls_engine.FusedStep(stream.drawer, loss, T, chunk)


_STEP_SWEEP = cmodels.ClsSweep(models=("softmax", "linear", "linear_sum"), shapes=((3, 2), (2, 4)), n=(6, 11),
                               seeds=2, tasks=tuple(ctasks.task_spec(*t) for t in (
                                   ("uniform",), ("balanced",), ("clustered", 1, 0.5), ("subspace", 1, 0.0, 1),
                                   ("uniform", 2))))


def test_the_fused_step_equals_drawing_then_reading_the_step():
    """cls_step (a chunk of contexts per seed drawn and read in cache) gives the loss and gradient of cls_draw then
    cls_loss to float rounding (sums per chunk), whatever the thread count (bit for bit); every reading and model, a
    last chunk shorter than the others."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    configs, dims, T = _STEP_SWEEP.configs(), _STEP_SWEEP.dims, 10
    stream, loss, step = _fused_step_setup(configs, dims, T, chunk=4)
    K, D = loss.gA.shape[:2]
    g = torch.Generator().manual_seed(2)
    A, WV = (torch.randn(K, D, D, generator=g) for _ in range(2))
    loss.compute(A, WV, stream.draw(5, T), None)
    ref = [t.clone() for t in (loss.loss, loss.gA, loss.gWV)]
    got = {}
    for threads in (1, 3):
        step.spec.d.threads = threads
        step.compute(A, WV, 5)
        got[threads] = [t.clone() for t in (step.loss, step.gA, step.gWV)]
        for a, b in zip(got[threads], ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(got[1], got[3]))
    assert ref[1].abs().max() > 1e-3 and ref[2].abs().max() > 1e-3


def test_a_configuration_has_the_same_fused_step_alone_and_in_a_sweep():
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    configs, dims = _STEP_SWEEP.configs(), _STEP_SWEEP.dims
    rows = [1, 7, len(configs) - 1]
    _, full, step = _fused_step_setup(configs, dims, 9, chunk=4)
    _, part, alone = _fused_step_setup([configs[i] for i in rows], dims, 9, chunk=4)
    D = full.gA.shape[1]
    g = torch.Generator().manual_seed(3)
    A, WV = (torch.randn(len(configs), D, D, generator=g) for _ in range(2))
    step.compute(A, WV, 2)
    alone.compute(A[rows].contiguous(), WV[rows].contiguous(), 2)
    for a, b in ((full.loss, part.loss), (full.gA, part.gA), (full.gWV, part.gWV)):
        assert torch.equal(a[rows], b)


def test_the_fused_step_names_what_it_does_not_take():
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    configs, dims = _STEP_SWEEP.configs(), _STEP_SWEEP.dims
    with pytest.raises(ValueError, match="chunk=0"):
        _fused_step_setup(configs, dims, 8, chunk=0)
    with pytest.raises(ValueError, match="T=0"):
        _fused_step_setup(configs, dims, 0, chunk=4)
    mixed = cmodels.ClsSweep(models=("linear",), tasks=(ctasks.task_spec("balanced"),), n=(9,), n_min=3)
    with pytest.raises(ValueError, match="mixture"):
        _fused_step_setup(mixed.configs(), mixed.dims, 8, chunk=4)


def test_training_improves_on_chance():
    sw = cmodels.ClsSweep(models=("linear",), n=(40,), shapes=((3, 2),), steps=150, batch_size=32, lr=0.05, log_every=50)
    res = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    assert res.loss_history[-1, 0] < 0.8 * math.log(3)


# -- readings of the task -----------------------------------------------------------------------

def test_balanced_inputs_lie_in_their_class_cell_with_equal_class_frequencies():
    C, d, n = 4, 3, 30
    b = ctasks.sample_contexts(200, n, C, d, seed=0, dtype=D64, reading="balanced")
    c = b.protos[0, :, :, 0]                                                            # (B, C, d)
    x = torch.cat([b.x_q[0].unsqueeze(1), b.x_ctx[0]], 1)                              # query first, as drawn
    lab = torch.cat([b.label_q[0].unsqueeze(1), b.label_ctx[0]], 1)
    assert torch.equal(torch.einsum("bnd,bcd->bnc", x, c).argmax(-1), lab)            # the label is the argmax
    torch.testing.assert_close(x.norm(dim=-1), torch.ones_like(x[..., 0]))
    m24 = streams.words(streams.keys([0], "cpu"), streams.TAGS["cls_class"], 0, range(200), n + 1)[0] >> 8
    drawn = cplan.scaled_index(m24, C)
    assert (lab == drawn).float().mean() > 0.99                                          # the drawn class, bar empty cells
    freq = torch.nn.functional.one_hot(lab, C).double().mean((0, 1))
    assert torch.all((freq - 1 / C).abs() < 0.02)
    # uniform argmax from the same draws has unequal cells: its per-context class counts vary far more
    u = ctasks.sample_contexts(200, n, C, d, seed=0, dtype=D64)
    cu = torch.nn.functional.one_hot(u.label_ctx[0], C).double().sum(1).std()
    cb = torch.nn.functional.one_hot(b.label_ctx[0], C).double().sum(1).std()
    assert abs(float(cb) - math.sqrt(n * (1 / C) * (1 - 1 / C))) < 0.3                  # multinomial counts
    assert cb < 0.85 * cu


def test_subspace_class_vectors_live_in_the_first_k_coordinates():
    b = ctasks.sample_contexts(20, 15, 4, 5, seed=3, dtype=D64, reading="subspace", k=2)
    assert torch.all(b.protos[..., 2:] == 0)
    torch.testing.assert_close(b.protos.norm(dim=-1), torch.ones(b.protos.shape[:-1], dtype=D64))


def test_mixture_of_lengths_draws_each_context_length_in_range():
    cfgs = [dict(model="linear", reading="uniform", P=1, tau=0.0, k=0, C=3, d=2, n=20, n_min=5, seed=0)]
    stream = ctasks.ClsStream(cfgs, (20, 3, 1, 2), [7], "cpu")
    b = stream.sample(500)
    L = b.ctx_mask.sum(-1)[0]
    assert b.ctx_mask.shape == (1, 500, 20) and int(L.min()) == 5 and int(L.max()) == 20
    assert torch.all(b.ctx_mask[0] == (torch.arange(20).view(1, -1) < L.view(-1, 1)))


def test_closed_form_probability_jacobian_equals_reverse_mode():
    """models.prob_jacobian (closed form) is metrics.prob_jacobian (jacrev) for every model, with padded classes and
    context slots."""
    stream = ctasks.ClsStream([dict(seed=0, reading="uniform", P=1, tau=0.0, k=0, C=3, d=2, n=9)], (15, 5, 1, 4),
                              [2], "cpu", dtype=D64)
    b = stream.sample(6)
    g = torch.Generator().manual_seed(0)
    A, WV = (torch.randn(3, 9, 9, generator=g, dtype=D64) for _ in range(2))
    x, y, xq = (t.expand(3, *t.shape[1:]) for t in (b.x_ctx, b.y_ctx, b.x_q))
    codes, cls, ctx = torch.tensor([0, 1, 2]), b.class_mask.expand(3, 1, 5), b.ctx_mask.expand(3, 1, 15)

    def probs(q):
        lg = cmodels.model_logits_from(A, WV, codes, x, y, q, ctx)
        return torch.softmax(lg.masked_fill(~cls, float("-inf")), -1)

    torch.testing.assert_close(cmodels.prob_jacobian(codes, A, WV, x, y, xq, ctx, cls),
                               cmetrics.prob_jacobian(probs, xq.clone()), rtol=1e-12, atol=1e-12)


def test_unnormalised_linear_attention_is_n_times_the_normalised_one():
    b = _contexts()
    D = 3 + 4
    g = torch.Generator().manual_seed(2)
    W = [torch.randn(1, D, D, generator=g, dtype=D64) for _ in range(3)]
    lin = cmodels.sa_logits(torch.tensor([1]), *W, b.x_ctx, b.y_ctx, b.x_q)
    raw = cmodels.sa_logits(torch.tensor([2]), *W, b.x_ctx, b.y_ctx, b.x_q)
    torch.testing.assert_close(raw, lin * b.x_ctx.shape[2])
    old = cmodels.sa_logits(torch.tensor([False]), *W, b.x_ctx, b.y_ctx, b.x_q)
    torch.testing.assert_close(old, lin)


def test_crossover_interpolates_in_log_tau():
    from softmax_icl.figures.classification_kernel_gd import analysis

    taus = np.array([0.25, 0.5, 1.0, 2.0])
    ratio = np.array([[0.5, 0.9], [0.8, 0.95], [1.25, 0.99], [1.5, 0.98]])
    cross = analysis.crossover(taus, ratio)
    # log ratio -0.223 at tau 0.5 and +0.223 at tau 1: the crossing is halfway in log tau
    np.testing.assert_allclose(cross[0], math.sqrt(0.5), rtol=1e-12)
    assert np.isnan(cross[1])


def _unit_table(models=("softmax", "linear"), seeds=(2, 0, 1), B=5, test_n=()):
    """A synthetic unit table: every model x seed of one task, configurations in a shuffled seed order, and CE
    ``(1 + seed) * factor[model]`` on every context (so the paired log ratio is log(factor_a / factor_b))."""
    from softmax_icl.figures.classification_kernel_gd import analysis

    factor = {"softmax": 2.0, "linear": 1.0, "untrained": 3.0}
    cf = tuple(dict(model=m, reading="uniform", P=1, tau=0.0, k=0, C=5, d=5, n=10, seed=s) for m in models
               for s in seeds)
    shape = (len(cf), len(test_n), B) if test_n else (len(cf), B)
    ce = np.stack([np.full(shape[1:], (1 + c["seed"]) * factor[c["model"]]) for c in cf])
    if test_n:
        ce = ce * np.arange(1, len(test_n) + 1)[None, :, None]
    return analysis.UnitTable(cf, ce, np.ones(shape), tuple(test_n))


def test_softmax_against_linear_pairs_units_by_seed():
    """The comparison and the design's statistic share one pairing: per seed, log of the two units' mean CE; a seed
    one model lacks is left out, and a mixture table gives one pair per test length."""
    from softmax_icl.figures.classification_kernel_gd import analysis

    table = _unit_table()
    (p,) = analysis.paired(table)
    assert p.seeds == (0, 1, 2) and p.ce_a[:, 0].tolist() == [2.0, 4.0, 6.0] and p.ce_b[:, 0].tolist() == [1, 2, 3]
    np.testing.assert_allclose(p.log_ratio, np.log(2.0))
    (r,) = analysis.compare(table)
    assert r.seeds == 3 and r.ce_a == pytest.approx(4.0) and r.ce_b == pytest.approx(2.0)
    assert r.ratio == pytest.approx(2.0) and r.ratio_lo == pytest.approx(2.0) and r.ratio_hi == pytest.approx(2.0)
    # the design's bounds, as ratios: a spread of the per-seed log ratios widens them by its t-bound
    ce = table.ce.copy()
    ce[[i for i, c in enumerate(table.configs) if c["model"] == "softmax" and c["seed"] == 1]] *= 1.5
    (r,) = analysis.compare(dataclasses.replace(table, ce=ce))
    lr = np.log([2.0, 3.0, 2.0])
    half = stats.t_quantile(0.95, 2) * lr.std(ddof=1) / math.sqrt(3)
    assert r.ratio == pytest.approx(math.exp(lr.mean())) and r.ratio_hi == pytest.approx(math.exp(lr.mean() + half))
    assert list(analysis.log_ratios(table)) == [(ctasks.task_spec("uniform"), 5, 5, 10)]
    one_missing = analysis.UnitTable(table.configs[:-1], table.ce[:-1], table.correct[:-1])
    assert analysis.paired(one_missing)[0].seeds == (0, 2)                 # the linear unit of seed 1 is missing
    assert analysis.paired(table, "softmax", "untrained") == []
    mix = analysis.paired(_unit_table(test_n=(5, 20)))
    assert [q.n for q in mix] == [5, 20]
    np.testing.assert_allclose(mix[1].ce_a[:, 0], 2 * np.array([2.0, 4.0, 6.0]))


def test_block_means_and_the_ablation_cost_keep_the_mean():
    from softmax_icl.figures.classification_kernel_gd import analysis

    x = np.arange(130, dtype=np.float64)
    b = analysis.block_means(x, 64)
    assert b.size == 64 and b.mean() == pytest.approx(x.mean(), rel=1e-2)
    np.testing.assert_allclose(analysis.block_means(np.arange(128.0), 64), np.arange(128.0).reshape(64, 2).mean(1))
    assert analysis.block_means(np.ones(10), 64).tolist() == [1.0] * 10


def test_learned_hyperparameters_deviation_is_symmetric_in_log_and_counts_a_wrong_sign_as_far():
    from softmax_icl.figures.classification_kernel_gd.claims import log_deviation

    np.testing.assert_allclose(log_deviation([1.25, 0.8, -3.0], 1.0), [math.log(1.25), math.log(1.25), math.log(1e6)])


def test_a_metric_measured_in_several_cells_is_decided_per_cell(tmp_path):
    """Run.decide takes cells labelled "<metric>: <cell>" of a check that decides on several metrics: every cell
    with its metric's test (the crossover check: softmax better at the tight end, worse at the loose end, per n)."""
    from softmax_icl.book.run import Run
    from softmax_icl.figures import FIGURES

    run = Run(FIGURES["classification_kernel_gd"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    tight, loose = stats.synthetic(15, -0.2, 0.02), stats.synthetic(15, 0.2, 0.02)
    kw = dict(source="test")
    c = run.decide("clustered-crossover-within-sweep", "x", {"tight_end: n = 10": tight, "loose_end: n = 10": loose,
                                                             "tight_end: n = 30": tight, "loose_end: n = 30": loose},
                   **kw)
    assert c.status == "pass" and [x["test"] for x in c.decision["cells"]] == ["below", "above"] * 2
    c = run.decide("clustered-crossover-within-sweep", "x", {"tight_end: n = 10": tight, "loose_end: n = 10": loose,
                                                             "tight_end: n = 30": tight, "loose_end: n = 30": tight},
                   **kw)
    assert c.status == "fail"
    with pytest.raises(ValueError, match="decides on the metrics"):
        run.decide("clustered-crossover-within-sweep", "x", {"tight_end: n = 10": tight}, **kw)


def test_the_engines_update_is_autograd_through_A_and_pytorchs_adam():
    """The trainer's update in paper 2's engine (common.Update on its unit_update): the gradients in W_K, W_Q from
    the one in A = W_K^T W_Q, one step of Adam on W_K, W_Q, W_V, and the next A, as autograd and torch.optim.Adam
    compute them, to float rounding."""
    if not cls_engine.available():
        pytest.skip(cls_engine.backend())
    g = torch.Generator().manual_seed(1)
    K, D = 5, 6
    init = [torch.randn(K, D, D, generator=g) for _ in range(3)]
    mine, ref = [p.clone() for p in init], [torch.nn.Parameter(p.clone()) for p in init]
    kq, wv = common.Update(mine[:2], lib=cls_engine.library()), common.Update(mine[2:], lib=cls_engine.library())
    opt = torch.optim.Adam(ref, lr=0.1)
    for lr in (0.1, 0.03, 0.07):
        gA, gWV = torch.randn(K, D, D, generator=g), torch.randn(K, D, D, generator=g)
        A = ref[0].transpose(1, 2) @ ref[1]
        torch.testing.assert_close(kq.M, A.detach(), rtol=1e-5, atol=1e-6)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        ((A * gA).sum() + (ref[2] * gWV).sum()).backward()
        opt.step()
        kq(gA, lr)
        wv(gWV, lr)
        for a, b in zip(mine, ref):
            torch.testing.assert_close(a, b.detach(), rtol=1e-5, atol=1e-6)


def test_the_loosest_learnable_tau_is_read_per_length():
    from softmax_icl.figures.classification_kernel_gd import analysis

    def row(tau, n, acc):
        return analysis.Comparison(ctasks.task_spec("clustered", tau=tau), 5, 5, n, "softmax", "linear", 1.0, 1.0,
                                   acc, acc / 2, np.zeros(2), 1.0, 1.0, 1.0, 2)

    rows = [row(0.25, 10, 0.9), row(1.0, 10, 0.5), row(4.0, 10, 0.25), row(0.25, 30, 0.95), row(1.0, 30, 0.7),
            row(4.0, 30, 0.61)]
    # halfway from chance 0.2 to 1 is 0.6
    assert analysis.loosest_learnable(rows, [0.25, 1.0, 4.0], 10, 0.2, 0.5) == (0.25, [0.25])
    assert analysis.loosest_learnable(rows, [0.25, 1.0, 4.0], 30, 0.2, 0.5) == (4.0, [0.25, 1.0, 4.0])
    assert analysis.loosest_learnable(rows, [0.25, 1.0, 4.0], 100, 0.2, 0.5) == (0.25, [])


def test_softmax_ge_linear_is_decided_in_each_training_basin(tmp_path):
    """Planted: softmax units in two basins (learned beta > 0: far better than linear; beta <= 0: twice as bad). The
    reading is decided per basin, each basin's seeds on their own (a pooled t-bound over a two-point mixture describes
    no trained model): the good basin passes, the bad one fails, so the reading fails; the basin shares come with
    their intervals. One basin alone decides as before."""
    from softmax_icl import stats
    from softmax_icl.book.run import Run
    from softmax_icl.figures import FIGURES
    from softmax_icl.figures.classification_kernel_gd import analysis as an
    from softmax_icl.figures.classification_kernel_gd import claims as cl
    S, steps = 15, np.arange(0, 1001, 250)
    good = np.arange(S) % 5 != 0                                           # seeds 0, 5, 10 in the bad basin
    x = np.where(good, np.log(0.08), np.log(2.0)) + np.linspace(-0.01, 0.01, S)
    hist = np.tile(x, (len(steps), 1))
    cells, words = cl._basin_cells(x, good, hist, steps, 100)
    assert len(cells) == 2 and "3 of 15 seeds" in words and "12 of 15 seeds" in words
    run = Run(FIGURES["classification_kernel_gd"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    c = run.decide("softmax-ge-linear-clustered-tight", "x", cells, source="t")
    assert [x["verdict"] for x in c.decision["cells"]] == ["pass", "fail"] and c.status == "fail"
    pooled = stats.decide(stats.Test("below", np.log(1.05), np.log(1.05)), x)
    assert pooled.verdict == "pass"                      # the pooled bound would have called the mixture a pass
    one, _ = cl._basin_cells(x[good], good[good], hist[:, good], steps, 100)
    assert run.decide("softmax-ge-linear-clustered-tight", "x", one, source="t").status == "pass"
    # the basin of a seed: the sign of its softmax unit's learned kernel scale, paired by seed with the linear unit
    cfg = [dict(reading="uniform", P=1, tau=0.0, k=0, C=5, d=5, n=100, model=m, seed=s)
           for m in ("softmax", "linear") for s in range(3)]
    table = an.UnitTable(tuple(cfg), np.ones((6, 4)), np.ones((6, 4)),
                         scale=np.array([2.0, -1.0, 3.0, -5.0, -5.0, -5.0]))
    monkey = {k: v.tolist() for k, v in an.basins(table).items()}
    assert list(monkey.values()) == [[True, False, True]]


def test_label_noise_flips_each_label_to_another_class_at_its_rate():
    """The label-noise process: at p = 0 the labels are the uniform task's argmax labels; at p the share of labels
    that differ from the argmax label is p (within sampling error), a flipped label is never the true class, and the
    other classes share the flips evenly."""
    from softmax_icl.figures.classification_kernel_gd.expectation import LabelNoise
    C, d, n, B = 5, 5, 50, 400
    clean_x, clean = LabelNoise(0.0)(torch.Generator().manual_seed(3), B, n, C, d)
    x, noisy = LabelNoise(0.3)(torch.Generator().manual_seed(3), B, n, C, d)
    assert clean_x.shape == (B, n + 1, d) and clean.shape == (B, n + 1) and x.dtype == torch.float32
    torch.testing.assert_close(x, clean_x)                            # the same inputs and class vectors
    flipped = noisy != clean
    assert abs(flipped.float().mean().item() - 0.3) < 0.01
    shift = ((noisy - clean) % C)[flipped]
    counts = torch.bincount(shift, minlength=C).float()
    assert counts[0] == 0 and (counts[1:] / counts[1:].sum() - 0.25).abs().max() < 0.02
    with pytest.raises(ValueError, match="flip"):
        LabelNoise(1.0)


def test_label_noise_and_prototype_grids_are_validated_before_any_compute():
    from softmax_icl.book.run import Run
    from softmax_icl.figures import FIGURES
    from softmax_icl.profiles import ParameterError
    fig = FIGURES["classification_kernel_gd"]
    for bad, match in (({"label_noise": [0.0, 0.9]}, "label_noise"), ({"label_noise": [0.4, 0.2]}, "label_noise"),
                       ({"prototypes": [2]}, "prototypes"), ({"prototypes": [2, 1]}, "prototypes")):
        with pytest.raises(ParameterError, match=match):
            Run(fig, "smoke", "cpu", use_cache=False, output_dir="/nonexistent/never-written", overrides=bad)


def test_the_window_findings_tell_a_widening_window_from_none(tmp_path):
    """The statistic of the label-noise and Lipschitzness findings on planted units: beta falling by 1.5 per level
    (a window that widens by half) passes the design's test, a constant beta fails it, as the untrained units (one
    initial weight per seed at every level) do. A unit with beta <= 0 (no window) leaves its seed out of the cells
    it touches, which say how many seeds they hold; a cell with one seed left cannot be decided."""
    from softmax_icl.book.run import Run
    from softmax_icl.figures import FIGURES
    from softmax_icl.figures.classification_kernel_gd import claims as cl
    rng = np.random.default_rng(1)
    S, levels, steps = 15, (0.0, 0.2, 0.4), np.arange(0, 1001, 100)
    grow = np.linspace(0.05, 1.0, len(steps))[:, None, None]               # beta grows from init to its end value
    start = 0.01 * rng.standard_normal((1, 1, S))                          # one initial weight per seed
    noise = np.exp(0.1 * rng.standard_normal((1, 3, S)))
    widening = start + grow * (3.0 * 1.5 ** -np.arange(3.0))[None, :, None] * noise
    flat = start + grow * 3.0 * np.exp(0.1 * rng.standard_normal((1, 3, S)))
    widening[0] = flat[0] = start[0]
    run = Run(FIGURES["classification_kernel_gd"], "smoke", "cpu", use_cache=False, output_dir=str(tmp_path))
    cid = cl.KERNEL_WIDENS_WITH_LABEL_NOISE
    cells, rival = cl.scale_cells(levels, widening, steps, False, "p")
    assert run.decide(cid, "x", cells, source="t").status == "pass"
    assert run.decide(cid + "-untrained", "x", rival, source="t").status == "fail"
    cells, _ = cl.scale_cells(levels, flat, steps, False, "p")
    assert run.decide(cid, "x", cells, source="t").status == "fail"
    widening[-1, 2, 4] = -0.5                                              # seed 4 ends far-attending at p = 0.4
    cells, _ = cl.scale_cells(levels, widening, steps, False, "p")
    assert [k.split(", ")[1] for k in cells] == ["15 of 15 seeds", "14 of 15 seeds"]
    assert run.decide(cid, "x", cells, source="t").status == "pass"
    widening[-1, 2, 1:] = -0.5                                             # one seed keeps its window at p = 0.4
    cells, _ = cl.scale_cells(levels, widening, steps, False, "p")
    assert "undecidable" in list(cells)[1]
    assert run.decide(cid, "x", cells, source="t").status == "inconclusive"
    # the Lipschitzness axis reads the ratio the other way: beta growing with P passes
    up = widening[:, ::-1].copy()
    up[-1] = np.abs(up[-1])
    cells, _ = cl.scale_cells((1, 2, 4), up, steps, True, "P")
    assert run.decide(cl.KERNEL_NARROWS_WITH_LABEL_LIPSCHITZNESS, "x", cells, source="t").status == "pass"
