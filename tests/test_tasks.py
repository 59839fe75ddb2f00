"""Input distributions and function classes: Lipschitz constants, shapes, covariance."""

import numpy as np
import pytest
import torch

from softmax_icl.tasks import (FUNCTION_CLASSES, InputSpec, class_blocks, draw_raw, draw_rows, evaluate_class,
                               lipschitz_constant, low_rank_basis, make_batch, nonisotropic_covariance)


def _difference_quotients(function_class, L, d=3, tasks=64, seed=0):
    """Largest |f(x) - f(x')| / ||x - x'|| per task, over random and very close pairs on the sphere."""
    spec = InputSpec(d=d, k=2, task_seed=1)
    g = torch.Generator().manual_seed(seed)
    raw = draw_raw(spec, tasks, 2000, g, "cpu")
    raw = {k: v.double() for k, v in raw.items()}
    x = raw["x"]
    # close pairs: small rotations of each point; plus random pairs
    step = torch.randn(x.shape, generator=g, dtype=torch.float64) * 1e-3
    x2 = x + step
    x2 = x2 / x2.norm(dim=-1, keepdim=True)
    x3 = x.roll(1, dims=1)
    raw1 = {k: v.unsqueeze(0) for k, v in raw.items()}
    Lt = torch.tensor([float(L)], dtype=torch.float64)
    basis = spec.basis("cpu").double()
    f = lambda z: evaluate_class(function_class, z.unsqueeze(0), raw1, Lt, basis)[0]  # noqa: E731
    q_close = (f(x) - f(x2)).abs() / (x - x2).norm(dim=-1)
    q_far = (f(x) - f(x3)).abs() / (x - x3).norm(dim=-1).clamp_min(1e-9)
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
    g = torch.Generator().manual_seed(0)
    raw = {k: torch.stack([v, w]) for (k, v), w in zip(draw_raw(spec, 8, 20, g, "cpu").items(),
                                                        draw_raw(spec, 8, 20, g, "cpu").values())}   # R = 2 rows
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
def test_draw_rows_gives_each_generator_its_own_draws(input_dist):
    """Drawing several seeds together equals drawing each alone: a row does not depend on its neighbours."""
    spec = InputSpec(d=3, k=2, input_dist=input_dist)
    gens = lambda: [torch.Generator().manual_seed(s) for s in (5, 9)]  # noqa: E731
    rows = draw_rows(spec, 6, 11, gens(), "cpu")
    alone = [draw_raw(spec, 6, 11, g, "cpu") for g in gens()]
    assert set(rows) == set(alone[0])
    for key in rows:
        torch.testing.assert_close(rows[key], torch.stack([a[key] for a in alone]), rtol=0, atol=0)
    assert not torch.equal(rows["x"][0], rows["x"][1])
