"""Input distributions and function classes: Lipschitz constants, shapes, covariance."""

import numpy as np
import pytest
import torch

from softmax_icl import streams
from softmax_icl.engine import regression
from softmax_icl.tasks import (FUNCTION_CLASSES, InputSpec, class_blocks, draw_raw, draw_rows, evaluate_class,
                               lipschitz_constant, low_rank_basis, make_batch, nonisotropic_covariance)


def _difference_quotients(function_class, L, d=3, tasks=64, seed=0):
    """Largest |f(x) - f(x')| / dist(x, x') per task, over random and very close pairs on the sphere; dist is the
    great-circle distance (the chord of a far pair is shorter than the path along the sphere: with it a quotient of
    the low-rank cosine class can exceed the derivative's bound along the sphere)."""
    spec = InputSpec(d=d, k=2, task_seed=1)
    g = torch.Generator().manual_seed(seed)
    raw = draw_raw(spec, tasks, 2000, g, "cpu")
    raw = {k: v.double() for k, v in raw.items()}
    x = raw["x"] / raw["x"].norm(dim=-1, keepdim=True)          # on the sphere in float64 (not only to float32's 1e-7)
    # close pairs: small rotations of each point (the quotient overshoots the derivative by ~ step x curvature);
    # plus random pairs
    step = torch.randn(x.shape, generator=g, dtype=torch.float64) * 1e-4     # curvature overshoots by ~ step
    x2 = x + step
    x2 = x2 / x2.norm(dim=-1, keepdim=True)
    x3 = x.roll(1, dims=1)
    raw1 = {k: v.unsqueeze(0) for k, v in raw.items()}
    Lt = torch.tensor([float(L)], dtype=torch.float64)
    basis = spec.basis("cpu").double()
    f = lambda z: evaluate_class(function_class, z.unsqueeze(0), raw1, Lt, basis)[0]  # noqa: E731
    q_close = (f(x) - f(x2)).abs() / (x - x2).norm(dim=-1)
    arc = torch.arccos(((x / x.norm(dim=-1, keepdim=True)) * (x3 / x3.norm(dim=-1, keepdim=True))).sum(-1)
                       .clamp(-1, 1))
    q_far = (f(x) - f(x3)).abs() / arc.clamp_min(1e-9)
    return torch.maximum(q_close.max(-1).values, q_far.max(-1).values)


@pytest.mark.parametrize("function_class", sorted(FUNCTION_CLASSES))
@pytest.mark.parametrize("L", [0.3, 1.0, 4.0])
def test_empirical_lipschitz_constant_is_at_most_L_and_close_to_it(function_class, L):
    lip = lipschitz_constant(function_class, L)
    q = _difference_quotients(function_class, L)
    assert q.max().item() <= lip * (1 + 2e-3), (function_class, L, q.max().item(), lip)
    # some task of the class comes close to the constant (coefficients near +-L, steepest direction sampled)
    assert q.max().item() >= 0.85 * lip, (function_class, L, q.max().item(), lip)


def test_lipschitz_constant_rejects_unknown_class():
    with pytest.raises(ValueError, match="function_class"):
        lipschitz_constant("sine", 1.0)


def test_nonisotropic_covariance_spreads_an_order_of_magnitude_with_trace_d():
    for d in (2, 5, 10):
        eig = nonisotropic_covariance(d)
        assert eig.sum().item() == pytest.approx(d)
        assert eig.max() / eig.min() == pytest.approx(10.0)


def test_low_rank_basis_is_orthonormal_and_seeded():
    B = low_rank_basis(10, 2, 3)
    np.testing.assert_allclose(B.T @ B, np.eye(2), atol=1e-12)
    torch.testing.assert_close(B, low_rank_basis(10, 2, 3))
    with pytest.raises(ValueError, match="rank"):
        low_rank_basis(3, 4, 0)


def test_make_batch_shares_a_rows_draws_across_its_configurations():
    spec = InputSpec(d=3)
    raw = {k: torch.stack([v, w]) for (k, v), w in zip(draw_raw(spec, 8, 20, 0, "cpu").items(),
                                                        draw_raw(spec, 8, 20, 1, "cpu").values())}   # R = 2 rows
    blocks = class_blocks(["cosine", "relu"], torch.tensor([[0, 1, 0], [0, 1, 0]]))
    assert [b.name for b in blocks] == ["cosine", "relu"] and blocks[0].cols.tolist() == [0, 2]
    assert blocks[1].cols == slice(1, 2)                                                   # contiguous: a view
    L = torch.tensor([[1.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    sigma = torch.tensor([[0.0, 0.5, 1.0], [0.0, 0.5, 1.0]])
    b = make_batch(spec, raw, blocks, L, sigma, 20)
    assert b.x_ctx.shape == (2, 8, 20, 3) and b.x_q.shape == (2, 8, 3)
    assert b.y_ctx.shape == (2, 3, 8, 20) and b.f_q.shape == (2, 3, 8)
    for r in range(2):
        one = {k: v[r:r + 1] for k, v in raw.items()}
        for gi, (name, s) in enumerate(zip(["cosine", "relu", "cosine"], sigma[r].tolist())):
            f = evaluate_class(name, raw["x"][r:r + 1], one, L[r, gi:gi + 1])[0]
            torch.testing.assert_close(b.f_q[r, gi], f[:, 20])
            torch.testing.assert_close(b.y_ctx[r, gi], f[:, :20] + s * raw["noise"][r])   # common noise draws
    short = b.prefix(5)
    assert short.x_ctx.shape == (2, 8, 5, 3) and short.y_ctx.shape == (2, 3, 8, 5)
    torch.testing.assert_close(short.f_q, b.f_q)


def test_class_blocks_by_rows_and_mixed_columns():
    blocks = class_blocks(["affine", "relu"], torch.tensor([[1], [0], [1]]))
    assert [(b.name, b.rows.tolist()) for b in blocks] == [("affine", [1]), ("relu", [0, 2])]
    assert class_blocks(["relu"], torch.zeros(2, 4, dtype=torch.long))[0].cols is None
    with pytest.raises(ValueError, match="column"):
        class_blocks(["affine", "relu"], torch.tensor([[0, 1], [1, 0]]))


def test_inputs_lie_on_the_sphere_or_its_ellipsoid():
    g = torch.Generator().manual_seed(0)
    x = draw_raw(InputSpec(d=4), 16, 30, g, "cpu")["x"]
    torch.testing.assert_close(x.norm(dim=-1), torch.ones(16, 31))
    xn = draw_raw(InputSpec(d=4, input_dist="nonisotropic"), 16, 30, g, "cpu")["x"]
    inv = 1 / nonisotropic_covariance(4).float()
    torch.testing.assert_close((xn**2 * inv).sum(-1), torch.ones(16, 31), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("input_dist", ["isotropic", "nonisotropic_whitened"])
def test_a_rows_draws_depend_only_on_its_key_step_and_task(input_dist):
    """Drawing several streams together equals drawing each alone; any range of tasks draws those tasks; another
    step draws other tasks; the first n points of a longer context are the shorter context (with the same query,
    task and noise)."""
    from same_draws import SameDraws

    spec = InputSpec(d=3, k=2, input_dist=input_dist)
    same = SameDraws(compiled=regression.usable(torch.device("cpu"), spec.d, spec.k))
    rows = draw_rows(spec, streams.keys([5, 9], "cpu"), 11, range(6), step=3)
    alone = [draw_raw(spec, 6, 11, s, "cpu", step=3) for s in (5, 9)]
    assert set(rows) == set(alone[0])
    for key in rows:
        same(rows[key], torch.stack([a[key] for a in alone]), f"two rows vs each alone: {key}")
    assert not torch.equal(rows["x"][0], rows["x"][1])
    part = draw_raw(spec, 2, 11, 9, "cpu", step=3, first_task=4)
    for key in part:
        same(part[key], rows[key][1, 4:6], f"tasks 4-5 vs all six: {key}")
    assert not torch.equal(draw_raw(spec, 6, 11, 5, "cpu", step=4)["x"], alone[0]["x"])
    with pytest.raises(ValueError, match="consecutive"):
        draw_rows(spec, streams.keys([5], "cpu"), 11, range(0, 6, 2))
    long = draw_raw(spec, 6, 30, 5, "cpu", step=3)
    same(long["x"][:, :11], alone[0]["x"][:, :11], "n = 30 vs n = 11: context points")
    same(long["x"][:, 30], alone[0]["x"][:, 11], "n = 30 vs n = 11: the query")
    same(long["noise"][:, :11], alone[0]["noise"], "n = 30 vs n = 11: noise")
    for key in ("u", "a", "coef", "phase"):
        same(long[key], alone[0][key], f"n = 30 vs n = 11: {key}")
    same.finish()


def test_a_generator_stands_for_its_initial_seed():
    spec = InputSpec(d=2)
    g = torch.Generator().manual_seed(123)
    torch.testing.assert_close(draw_raw(spec, 3, 4, g, "cpu")["x"], draw_raw(spec, 3, 4, 123, "cpu")["x"])


@pytest.mark.parametrize("engine", [True, False], ids=["engine", "torch"])
def test_draws_follow_the_documented_counter_layout(engine, monkeypatch):
    """A task built by hand from the NumPy reference of the streams (tests/test_streams.py) and the layout of
    draw_rows's docstring: the draws of either implementation are those numbers, so no speed change can move them."""
    from softmax_icl.engine import regression
    from test_streams import ref_normal, ref_uniform, ref_words

    if not engine:
        monkeypatch.setattr(regression, "usable", lambda *a, **k: False)
    elif not regression.available():
        pytest.skip(regression.backend())
    spec, seed, step, task, n, d = InputSpec(d=3, k=2, input_dist="nonisotropic"), 2**40 + 5, 7, 3, 5, 3
    got = draw_raw(spec, 1, n, seed, "cpu", step=step, first_task=task)
    tags = streams.TAGS

    def normals(tag, count):
        return ref_normal(ref_words(seed, tags[tag], step, task, count + count % 2))[:count]

    def unit(v):
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    sq = np.sqrt(nonisotropic_covariance(d).numpy())
    x = np.concatenate([unit(normals("x", n * d).reshape(n, d)), unit(normals("query", d))[None]]) * sq
    np.testing.assert_allclose(got["x"][0].numpy(), x, atol=3e-6)
    np.testing.assert_allclose(got["u"][0].numpy(), unit(normals("direction", d)), atol=3e-6)
    np.testing.assert_allclose(got["a"][0].numpy(), unit(normals("lowrank", 2)), atol=3e-6)
    np.testing.assert_allclose(got["noise"][0].numpy(), normals("noise", n), atol=3e-6)
    np.testing.assert_allclose(got["coef"][0].numpy(), 2 * ref_uniform(ref_words(seed, tags["coef"], step, task, 3)) - 1,
                               atol=1e-7)
    np.testing.assert_allclose(got["phase"][0].numpy(), 2 * np.pi * ref_uniform(ref_words(seed, tags["phase"], step,
                                                                                          task, 1)), atol=1e-6)
