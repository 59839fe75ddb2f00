"""Window-adaptation chapter: the zero-mean task family, the sweeps over two families, and validation."""

import math

import numpy as np
import pytest
import torch

from softmax_icl.figures.window_adaptation.sweeps import families, settings, sweep_for, unit_index
from softmax_icl.metrics import icl_error_of_matrices
from softmax_icl.profiles import ParameterError
from softmax_icl.figures import FIGURES
from softmax_icl.tasks import InputSpec, draw_raw, evaluate_class, sphere_cos_mean


@pytest.mark.parametrize("L", [0.5, 2.0, 8.0])
def test_sphere_cos_mean_matches_closed_forms(L):
    """E[cos(L w^T x)] on S^{d-1}: cos L (d = 1), J_0(L) (d = 2), sin(L) / L (d = 3)."""
    Lt = torch.tensor(L, dtype=torch.float64)
    assert sphere_cos_mean(Lt, 1).item() == pytest.approx(math.cos(L))
    assert sphere_cos_mean(Lt, 2).item() == pytest.approx(torch.special.bessel_j0(Lt).item(), abs=1e-7)
    assert sphere_cos_mean(Lt, 3).item() == pytest.approx(math.sin(L) / L, abs=1e-7)


@pytest.mark.parametrize("d", [2, 5])
@pytest.mark.parametrize("L", [0.5, 8.0])
def test_centered_cosine_tasks_have_zero_mean_and_keep_the_shape(d, L):
    """Every task of cosine_centered has mean ~0 over x ~ U^d (the cosine class does not), and differs from the
    cosine task with the same draws by a constant."""
    spec = InputSpec(d=d)
    raw = {k: v.unsqueeze(0) for k, v in draw_raw(spec, 6, 40000, torch.Generator().manual_seed(1), "cpu").items()}
    Lt = torch.tensor([L])
    f = evaluate_class("cosine_centered", raw["x"], raw, Lt)[0]                   # (6, m)
    f0 = evaluate_class("cosine", raw["x"], raw, Lt)[0]
    assert f.mean(-1).abs().max().item() < 0.02
    diff = f0 - f
    assert (diff - diff[:, :1]).abs().max().item() < 1e-5                         # a per-task constant
    np.testing.assert_allclose(diff[:, 0], torch.cos(raw["phase"][0]) * sphere_cos_mean(Lt, d).float(), atol=1e-5)


def test_linear_attention_cannot_output_the_offset_but_can_on_centered_tasks():
    """Near-constant cosine tasks (L small): predicting 0 (linear attention's only choice for an offset, M = 0 here)
    loses E[cos^2 phi] = 1/2 on the cosine class, nothing comparable on the centered class."""
    spec = InputSpec(d=2)
    rows = [dict(function_class=c, L=0.05, sigma=0.0, n=32) for c in ("cosine", "cosine_centered")]
    err, _ = icl_error_of_matrices("linear", np.zeros((2, 2, 2)), rows, spec, n_tasks=4000, eval_seed=2)
    assert err[0] == pytest.approx(0.5, rel=0.05) and err[1] < 0.01


def test_sweeps_hold_both_families_and_every_setting():
    cfg = FIGURES.resolve("window_adaptation", "smoke")
    sw = sweep_for(cfg, "softmax")
    assert families(cfg) == (cfg["function_class"], cfg["zero_mean_class"])
    confs = sw.configs()
    assert {c["function_class"] for c in confs} == set(families(cfg))
    assert len(confs) == 2 * len(settings(cfg)) * len(cfg["n_values"]) * cfg["seeds"]


def test_validation_names_the_parameter():
    with pytest.raises(ParameterError, match="zero_mean_class"):
        FIGURES.resolve("window_adaptation", "smoke", {"zero_mean_class": "cosine"})
    with pytest.raises(ParameterError, match="L_values"):
        FIGURES.resolve("window_adaptation", "smoke", {"L_values": [1.0, 2.0]})


def test_unit_index_selects_one_unit_per_seed():
    cfg = FIGURES.resolve("window_adaptation", "smoke")

    class _Res:
        grid = sweep_for(cfg, "linear").grid()

        def select(self, **where):
            return self.grid.units(**where)

    s = settings(cfg)[1]
    idx = unit_index(_Res(), s, cfg["n_window"], cfg["zero_mean_class"])
    assert len(idx) == cfg["seeds"]


def test_each_unit_on_its_own_cell_is_the_grids_number():
    """The evaluation reads every pretrained unit on its own test setting and context length only; each number is
    the one the whole grid (every unit on every setting and length, the same tasks) gives for that cell."""
    from softmax_icl.figures.window_adaptation.analysis import own_cell_errors
    from softmax_icl.metrics import icl_error_grid

    spec = InputSpec(d=2)
    tests = [dict(function_class=c, L=L, sigma=0.1) for c in ("cosine", "cosine_centered") for L in (0.5, 8.0)]
    ns = [4, 16, 32]
    cells = [(r, n) for r in range(len(tests)) for n in ns for _ in range(2)]
    rng = np.random.default_rng(0)
    Ms = [rng.standard_normal((len(cells), 2, 2)).astype(np.float32) * s for s in (4.0, 1.0)]
    soft, lin = own_cell_errors(["softmax", "linear"], Ms, cells, tests, ns, spec, n_tasks=700, eval_seed=5,
                                device="cpu", chunk=256)
    for kind, M, got in (("softmax", Ms[0], soft), ("linear", Ms[1], lin)):
        grid, _ = icl_error_grid(kind, M, tests, ns, spec, n_tasks=700, eval_seed=5)
        want = [grid[u, r, ns.index(n)] for u, (r, n) in enumerate(cells)]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="kinds"):
        own_cell_errors(["softmax", "relu"], Ms, cells, tests, ns, spec, n_tasks=10, eval_seed=5, device="cpu")
