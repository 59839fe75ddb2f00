"""The batched trainer: a configuration trained inside a sweep matches it trained alone; determinism."""

import dataclasses

import numpy as np
import pytest
import torch

from softmax_icl.engine import regression
from softmax_icl.base import derive_seed, resolve_device
from softmax_icl.training import Sweep, SweepResult, task_streams, train_sweep

SWEEP = Sweep(model="softmax", classes=("relu", "cosine"), L=(0.5, 3.0), sigma=(0.0, 0.3), n=(6, 12), seeds=2, d=3,
              steps=25, batch_size=16, lr=0.05, log_every=5)


def test_sweep_grid_is_the_full_product_with_seed_fastest():
    cfgs = SWEEP.configs()
    assert len(cfgs) == 2 * 2 * 2 * 2 * 2
    assert [c["seed"] for c in cfgs[:4]] == [0, 1, 0, 1]
    pairs = dataclasses.replace(SWEEP, pairs=((1.0, 0.1), (2.0, 0.5))).configs()
    assert {(c["L"], c["sigma"]) for c in pairs} == {(1.0, 0.1), (2.0, 0.5)}


def test_the_grid_finds_each_unit_by_position_or_exact_grid_value_and_refuses_values_off_the_grid():
    """The analyses select units through the sweep's grid: by positions along its axes or by a grid value, looked up
    exactly in maps built from the sweep's own axes; a value off the grid is an error, never the nearest unit."""
    cfgs, grid = SWEEP.configs(), SWEEP.grid()
    assert len(grid) == len(cfgs)
    for c_pos, cls in enumerate(SWEEP.classes):
        for s_pos, (L, s) in enumerate(grid.settings):
            for n_pos, n in enumerate(SWEEP.n):
                for seed in range(SWEEP.seeds):
                    c = cfgs[grid.index(c_pos, s_pos, n_pos, seed)]
                    assert (c["function_class"], c["L"], c["sigma"], c["n"], c["seed"]) == (cls, L, s, n, seed)
    picked = grid.units(function_class="cosine", L=3.0, n=12)
    assert [(cfgs[i]["L"], cfgs[i]["n"]) for i in picked] == [(3.0, 12)] * 4          # two sigmas x two seeds
    assert list(picked) == sorted(picked) and list(grid.at(1, [2, 3], 1)) == list(picked)
    assert len(grid.units(sigma=0.3, seed=1)) == 2 * 2 * 2
    with pytest.raises(KeyError, match="L = 0.5000001 is not on the sweep's grid; its values: 0.5, 3.0"):
        grid.units(L=0.5000001)
    with pytest.raises(KeyError, match="not on the sweep's grid"):
        grid.units(sigma=0.1 + 0.2)                                                   # 0.30000000000000004
    with pytest.raises(KeyError, match="seed = 2"):
        grid.units(seed=2)
    paired = dataclasses.replace(SWEEP, pairs=((1.0, 0.1), (2.0, 0.5), (1.0, 0.5))).grid()
    assert list(paired.positions("L", 1.0)) == [0, 2] and list(paired.positions("setting", (1.0, 0.5))) == [2]
    part = SweepResult(sweep=SWEEP.to_dict(), configs=cfgs[:3], log_steps=np.zeros(1), M_history=np.zeros((1, 3)),
                       loss_history=np.zeros((1, 3)), final_state={})
    with pytest.raises(ValueError, match="3 of the sweep's 32 configurations"):
        part.select(n=6)                                       # a subset is not laid out on the grid


@pytest.fixture(params=["engine", "torch"])
def path(request, monkeypatch):
    """Both computations: the CPU engine (where it builds) and the PyTorch path (what runs on a GPU)."""
    if request.param == "torch":
        monkeypatch.setattr(regression, "usable", lambda *a, **k: False)
    elif not regression.available():
        pytest.skip(regression.backend())
    return request.param


@pytest.mark.parametrize("model", ["softmax", "linear"])
def test_configuration_in_sweep_matches_configuration_trained_alone(model, path):
    """A configuration draws the same tasks alone and in the sweep (its seed's stream, whatever else is packed with
    it) and trains to the same weights: bit for bit on the engine (every configuration's sums are its own, in a
    fixed order), to rounding in PyTorch (its matrix products take other shapes)."""
    sweep = dataclasses.replace(SWEEP, model=model)
    full = train_sweep(sweep, "cpu", progress=False)
    check = (np.testing.assert_array_equal if path == "engine"
             else lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6))
    for i in (0, 5, 13, len(full.configs) - 1):                 # mixed classes, L, sigma, n and seeds
        alone = train_sweep(sweep, "cpu", configs=[full.configs[i]], progress=False)
        check(alone.M_history[:, 0], full.M_history[:, i])
        check(alone.loss_history[:, 0], full.loss_history[:, i])


def test_a_configuration_draws_the_same_tasks_alone_and_in_a_sweep(path):
    configs = SWEEP.configs()
    seeds = [derive_seed(SWEEP.data_seed, s) for s in range(SWEEP.seeds)]
    full = task_streams(SWEEP.input_spec, configs, list(SWEEP.classes), seeds, "cpu")
    for i in (3, 17, 30):
        (alone,) = task_streams(SWEEP.input_spec, [configs[i]], list(SWEEP.classes), seeds, "cpu")
        st = next(s for s in full if s.n == configs[i]["n"])
        r, g = (int(v) for v in (st.index == i).nonzero()[0])
        a, b = alone.sample(8, step=5), st.sample(8, step=5)
        for name in ("x_ctx", "x_q"):
            torch.testing.assert_close(getattr(a, name)[0], getattr(b, name)[r], rtol=0, atol=0)
        torch.testing.assert_close(a.y_ctx[0, 0], b.y_ctx[r, g], rtol=0, atol=0)
        torch.testing.assert_close(a.f_q[0, 0], b.f_q[r, g], rtol=0, atol=0)


def test_same_seed_same_numbers_and_seeds_matter():
    a = train_sweep(SWEEP, "cpu", progress=False)
    b = train_sweep(SWEEP, "cpu", progress=False)
    np.testing.assert_array_equal(a.M_history, b.M_history)
    c = train_sweep(dataclasses.replace(SWEEP, data_seed=5), "cpu", progress=False)
    assert not np.allclose(a.M, c.M)
    i0, i1 = a.select(function_class="relu", L=0.5, sigma=0.0, n=6, seed=0)[0], a.select(
        function_class="relu", L=0.5, sigma=0.0, n=6, seed=1)[0]
    assert not np.allclose(a.M[i0], a.M[i1])                   # seeds are independent replicates


def test_training_reduces_the_loss_and_larger_L_gives_a_larger_window_scale():
    sweep = Sweep(classes=("cosine",), L=(0.5, 6.0), sigma=(0.05,), n=(32,), d=2, steps=300, batch_size=64, lr=0.1)
    r = train_sweep(sweep, "cpu", progress=False)
    assert (r.loss_history[-1] < r.loss_history[1]).all()
    norms = np.linalg.norm(r.M, ord=2, axis=(1, 2))
    assert norms[1] > 2 * norms[0]


def test_derive_seed_is_stable_and_distinct():
    assert derive_seed(0, 1) == derive_seed(0, 1)
    assert len({derive_seed(0, s) for s in range(50)}) == 50
    assert 0 <= derive_seed(3, 4) < 2**63


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in ("cpu", "cuda")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            resolve_device("cuda")


def test_a_subset_that_is_not_a_full_grid_trains_as_inside_the_full_sweep():
    """Uneven seeds or class patterns give every configuration a row of its own: same data, same numbers."""
    full = train_sweep(SWEEP, "cpu", progress=False)
    subset = full.configs[::3]
    streams = task_streams(SWEEP.input_spec, subset, list(SWEEP.classes), [1, 2], "cpu")
    assert any(st.index.shape[1] == 1 for st in streams)           # the one-row-per-configuration layout
    part = train_sweep(SWEEP, "cpu", configs=subset, progress=False)
    idx = [full.configs.index(c) for c in subset]
    np.testing.assert_allclose(part.M_history, full.M_history[:, idx], rtol=2e-4, atol=2e-6)
    np.testing.assert_allclose(part.loss_history, full.loss_history[:, idx], rtol=2e-4, atol=1e-7)


def test_streams_share_a_seeds_inputs_across_its_configurations():
    configs = SWEEP.configs()
    streams = task_streams(SWEEP.input_spec, configs, list(SWEEP.classes), [11, 12], "cpu")
    assert [st.n for st in streams] == [6, 12]
    for st in streams:
        assert st.index.shape == (2, 8)                            # rows = seeds, 8 configurations each
        assert {configs[i]["seed"] for i in st.index[0].tolist()} == {0}
        b = st.sample(4)
        assert b.x_ctx.shape == (2, 4, st.n, 3) and b.y_ctx.shape == (2, 8, 4, st.n)
