"""In-context classification: sampler, attention models, GD constructions, search, alignment metrics, trainer."""

import math

import numpy as np
import pytest
import torch

from softmax_icl.classification import algorithms as calg
from softmax_icl.classification import metrics as cmetrics
from softmax_icl.classification import models as cmodels
from softmax_icl.classification import tasks as ctasks

D64 = torch.float64


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


def test_padded_draws_give_smaller_tasks_exactly():
    g = torch.Generator().manual_seed(3)
    raw = ctasks.draw_raw_cls(50, 20, 6, 2, 5, g, "cpu")
    raw = {k: v.unsqueeze(0).double() for k, v in raw.items()}
    b = ctasks.make_cls_batch(raw, C=3, P=1, d=2, n=12, dtype=D64)
    assert torch.all(b.x_ctx[..., 2:] == 0) and torch.all(b.x_q[..., 2:] == 0)
    torch.testing.assert_close(b.x_q.norm(dim=-1), torch.ones_like(b.x_q[..., 0]))
    assert int(b.label_q.max()) <= 2 and int(b.label_ctx.max()) <= 2
    assert b.ctx_mask is not None and int(b.ctx_mask.sum()) == 12
    assert b.class_mask is not None and b.class_mask[0, 0].tolist() == [True] * 3 + [False] * 3
    # the first d coordinates of a Gaussian, normalised: exactly the d-dimensional task
    zx = raw["zx"][..., :2]
    torch.testing.assert_close(b.x_q[..., :2], (zx / zx.norm(dim=-1, keepdim=True))[:, :, -1])


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
    raw = ctasks.draw_raw_cls(6, 15, 5, 1, 4, g, "cpu")
    raw = {k: v.unsqueeze(0).double() for k, v in raw.items()}
    pad = ctasks.make_cls_batch(raw, C=3, P=1, d=2, n=9, dtype=D64)
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



def test_stream_reads_each_seed_row_exactly_as_a_gathered_batch():
    """ClsStream builds its tasks from per-seed draws read through ``source`` (no per-task copy of the draws): the
    same bits as gathering each task's draws first, for every reading, padding and the class-balanced pool."""
    dims, seeds = (12, 4, 2, 3), [11, 12]
    configs = [dict(seed=s, reading=r, P=P, tau=0.5, k=2, C=C, d=d, n=12, n_min=0)
               for s in (0, 1) for r, P in (("uniform", 1), ("uniform", 2), ("balanced", 1), ("clustered", 1),
                                           ("subspace", 1)) for C, d in ((4, 3), (3, 2))]
    for padded in (True, False):
        cfgs = configs if padded else [c for c in configs if c["d"] == 3]
        stream = ctasks.ClsStream(cfgs, dims, seeds, "cpu")
        got = stream.sample(5)
        # the reference: the same generators, each task's draws gathered per task before building it
        gens = [torch.Generator().manual_seed(s) for s in seeds]
        pool_gens = [torch.Generator().manual_seed(ctasks.derive_seed(s, 1)) for s in seeds]
        raws = [ctasks.draw_raw_cls(5, 12, 4, 2, 3, g, "cpu", stream.pool, pg) for g, pg in zip(gens, pool_gens)]
        raw = {k: torch.stack([r[k] for r in raws])[stream.g_seed] for k in raws[0]}
        ref = ctasks.make_cls_batch(raw, stream.g_C, stream.g_P, stream.g_d, 12, reading=stream.g_code,
                                    tau=stream.g_tau, k=stream.g_k)
        i = stream.group_idx
        for name in ("x_ctx", "y_ctx", "x_q", "label_q", "label_ctx", "protos"):
            assert torch.equal(getattr(got, name), getattr(ref, name)[i]), (padded, name)
        # every reading is present, so the check covers each branch of the builder
        assert set(stream.g_code.tolist()) == set(ctasks.READINGS.values())

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


def test_training_improves_on_chance():
    sw = cmodels.ClsSweep(models=("linear",), n=(40,), shapes=((3, 2),), steps=150, batch_size=32, lr=0.05, log_every=50)
    res = cmodels.train_cls_sweep(sw, "cpu", progress=False)
    assert res.loss_history[-1, 0] < 0.8 * math.log(3)


# -- readings of the task -----------------------------------------------------------------------

def _raw(B=40, n=30, C=4, d=3, pool=0, seed=0):
    g = torch.Generator().manual_seed(seed)
    raw = ctasks.draw_raw_cls(B, n, C, 1, d, g, "cpu", pool=pool)
    return {k: v.unsqueeze(0).double() if v.is_floating_point() else v.unsqueeze(0) for k, v in raw.items()}


def test_clustered_inputs_are_normalised_class_vectors_plus_noise():
    C, d, tau = 4, 3, 0.7
    raw = _raw(C=C, d=d)
    b = ctasks.make_cls_batch(raw, C, 1, d, 30, D64, reading=ctasks.READINGS["clustered"], tau=tau)
    k = torch.floor(raw["zu"] * C).long()                                              # the drawn class
    c = raw["zp"][:, :, :, 0] / raw["zp"][:, :, :, 0].norm(dim=-1, keepdim=True)        # (1, B, C, d)
    cx = c.gather(2, k.unsqueeze(-1).expand(*k.shape, d))
    x = cx + tau * raw["zx"] / math.sqrt(d)
    x = x / x.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(b.x_ctx, x[:, :, :-1])
    torch.testing.assert_close(b.x_q, x[:, :, -1])
    assert torch.equal(b.label_ctx, k[:, :, :-1]) and torch.equal(b.label_q, k[:, :, -1])


def test_balanced_inputs_lie_in_their_class_cell_with_equal_class_frequencies():
    C, d, n = 4, 3, 30
    raw = _raw(B=200, n=n, C=C, d=d, pool=ctasks.pool_size(n))
    b = ctasks.make_cls_batch(raw, C, 1, d, n, D64, reading=ctasks.READINGS["balanced"])
    c = b.protos[0, :, :, 0]                                                            # (B, C, d)
    x = torch.cat([b.x_ctx[0], b.x_q[0].unsqueeze(1)], 1)
    lab = torch.cat([b.label_ctx[0], b.label_q[0].unsqueeze(1)], 1)
    assert torch.equal(torch.einsum("bnd,bcd->bnc", x, c).argmax(-1), lab)            # the label is the argmax
    torch.testing.assert_close(x.norm(dim=-1), torch.ones_like(x[..., 0]))
    drawn = torch.minimum(torch.floor(raw["zu"][0] * C).long(), torch.tensor(C - 1))
    assert (lab == drawn).float().mean() > 0.99                                          # the drawn class, bar empty cells
    freq = torch.nn.functional.one_hot(lab, C).double().mean((0, 1))
    assert torch.all((freq - 1 / C).abs() < 0.02)
    # uniform argmax from the same draws has unequal cells: its per-context class counts vary far more
    u = ctasks.make_cls_batch(raw, C, 1, d, n, D64)
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


def test_crossover_and_t_interval():
    from softmax_icl.figures.classification_kernel_gd import analysis

    taus = np.array([0.25, 0.5, 1.0, 2.0])
    ratio = np.array([[0.5, 0.9], [0.8, 0.95], [1.25, 0.99], [1.5, 0.98]])
    cross = analysis.crossover(taus, ratio)
    # log ratio -0.223 at tau 0.5 and +0.223 at tau 1: the crossing is halfway in log tau
    np.testing.assert_allclose(cross[0], math.sqrt(0.5), rtol=1e-12)
    assert np.isnan(cross[1])
    m, lo, hi = analysis.t_interval([1.0, 2.0, 3.0], 0.0)
    assert m == 2.0 and abs(hi - m - 4.303 * 1.0 / math.sqrt(3)) < 1e-12 and abs(m - lo - (hi - m)) < 1e-12
    assert analysis.t_interval([1.5], 0.25) == (1.5, 1.25, 1.75)
