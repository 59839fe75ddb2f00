"""Input distributions and function classes: Lipschitz constants, shapes, covariance."""

import numpy as np
import pytest
import torch

from softmax_icl.tasks import (FUNCTION_CLASSES, InputSpec, draw_raw, evaluate_class, lipschitz_constant,
                               low_rank_basis, make_batch, nonisotropic_covariance)


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


def test_make_batch_shapes_noise_and_masks():
    spec = InputSpec(d=3)
    raw = draw_raw(spec, 8, 20, torch.Generator().manual_seed(0), "cpu")
    raw = {k: v.unsqueeze(0).expand(3, *v.shape) for k, v in raw.items()}
    b = make_batch(spec, raw, ["cosine", "relu"], torch.tensor([0, 1, 0]), torch.tensor([1.0, 2.0, 1.0]),
                   torch.tensor([0.0, 0.5, 1.0]), torch.tensor([20, 10, 5]), 20)
    assert b.x_ctx.shape == (3, 8, 20, 3) and b.y_ctx.shape == (3, 8, 20) and b.f_q.shape == (3, 8)
    assert b.mask.shape == (3, 1, 20) and b.mask.sum(-1).flatten().tolist() == [20, 10, 5]
    f_ctx = evaluate_class("cosine", b.x_ctx[:1], {k: v[:1] for k, v in raw.items()}, torch.tensor([1.0]))
    torch.testing.assert_close(b.y_ctx[0], f_ctx[0])                       # sigma = 0: labels are noiseless
    torch.testing.assert_close(b.y_ctx[2] - f_ctx[0], raw["noise"][0])     # sigma = 1: common noise draws


def test_inputs_lie_on_the_sphere_or_its_ellipsoid():
    g = torch.Generator().manual_seed(0)
    x = draw_raw(InputSpec(d=4), 16, 30, g, "cpu")["x"]
    torch.testing.assert_close(x.norm(dim=-1), torch.ones(16, 31))
    xn = draw_raw(InputSpec(d=4, input_dist="nonisotropic"), 16, 30, g, "cpu")["x"]
    inv = 1 / nonisotropic_covariance(4).float()
    torch.testing.assert_close((xn**2 * inv).sum(-1), torch.ones(16, 31), rtol=1e-5, atol=1e-5)
