"""Tasks of one's own: a function class (paper 1) and a context process (paper 2) written by a user, taken by the
batched trainer, the evaluation, the Nadaraya-Watson oracle and the GD baselines without editing the package.

The strongest test of the extension point: a user's class that writes the built-in ReLU class again trains to the
built-in class's weights (the draws are shared, only the readout path differs: PyTorch for the user's class, the
compiled engine for the built-in one) and gets the oracle's numbers exactly."""

import math

import numpy as np
import pytest
import torch

from softmax_icl.baselines import nadaraya_watson_oracle
from softmax_icl.metrics import icl_error_of_matrices, window_halfwidth
from softmax_icl.tasks import (FunctionClass, InputSpec, check_class, draw_raw, evaluate_class, known_classes,
                               lipschitz_constant, register_class)
from softmax_icl.training import Sweep

# --- a new function class, as a user writes it (the whole definition: 12 lines) --------------------------------


class ReluAgain(FunctionClass):
    """The built-in ReLU class written as a user's own: f(x) = L (c0 (u.x)_+ + c1 (-u.x)_+ + c2)."""

    name = "relu_again"

    def __call__(self, x, task, L):
        t = (x * task.u).sum(-1)
        c = task.coef
        return L * (c[..., 0] * t.clamp_min(0) + c[..., 1] * (-t).clamp_min(0) + c[..., 2])


class Sawtooth(FunctionClass):
    """A class no built-in has: a triangle wave along the task direction, f = L |c0| |t - round(t)| / 2 + c1 with
    t = 2 u.x (slope at most L, so Lipschitz L on the sphere)."""

    name = "triangle"

    def __call__(self, x, task, L):
        t = 2.0 * (x * task.u).sum(-1)
        return L * task.coef[..., 0] * (t - torch.round(t)).abs() / 2.0 + task.coef[..., 1]


SMALL = dict(L=(0.5, 3.0), sigma=(0.1,), n=(16,), seeds=2, d=3, steps=120, log_every=40, batch_size=64)


def test_a_users_class_trains_to_the_builtin_classs_weights():
    builtin = Sweep(classes=("relu",), **SMALL).train("cpu", desc="")
    own = Sweep(classes=(ReluAgain(),), **SMALL).train("cpu", desc="")
    assert own.sweep["classes"] == ("relu_again",)                     # the sweep keeps the name (cache keys)
    assert builtin.timings["engine"] == "compiled" and own.timings["engine"] == "torch"
    np.testing.assert_allclose(own.M, builtin.M, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(own.loss_history, builtin.loss_history, rtol=1e-4, atol=1e-6)


def test_a_users_class_gets_the_oracles_and_the_evaluations_numbers():
    spec = InputSpec(d=3)
    register_class(ReluAgain())
    tests = [dict(function_class=c, L=2.0, sigma=0.1) for c in ("relu", "relu_again")]
    w, err, _ = nadaraya_watson_oracle(tests, [8, 32], spec, n_tune=512, n_eval=1024)
    np.testing.assert_array_equal(w[0], w[1])
    np.testing.assert_allclose(err[0], err[1], rtol=1e-6)
    M = np.stack([4.0 * np.eye(3)] * 2)
    rows = [dict(t, n=16) for t in tests]
    e, _ = icl_error_of_matrices("softmax", M, rows, spec, n_tasks=1024)
    assert e[0] == pytest.approx(e[1], rel=1e-6)


def test_a_users_class_is_a_different_task_and_its_window_reads_off():
    res = Sweep(classes=(Sawtooth(),), **{**SMALL, "steps": 200}).train("cpu", desc="")
    hw = window_halfwidth("softmax", res.M)
    assert np.all(np.isfinite(hw)) and np.all((hw > 0) & (hw <= math.pi))
    raw = draw_raw(InputSpec(d=3), 64, 8, seed=0, device="cpu")
    f_tri = evaluate_class("triangle", raw["x"][None], {k: v[None] for k, v in raw.items()}, torch.tensor([1.0]))
    f_relu = evaluate_class("relu", raw["x"][None], {k: v[None] for k, v in raw.items()}, torch.tensor([1.0]))
    assert not torch.allclose(f_tri, f_relu)


@pytest.mark.parametrize("cls", [ReluAgain(), Sawtooth()])
def test_a_users_lipschitz_constant_holds_on_the_sphere(cls):
    """Difference quotients of the user's class along the sphere stay below its declared constant."""
    register_class(cls)
    L = 2.0
    raw = draw_raw(InputSpec(d=3), 256, 64, seed=4, device="cpu")
    raw = {k: v[None] for k, v in raw.items()}
    x = raw["x"]
    step = torch.nn.functional.normalize(torch.randn(x.shape, generator=torch.Generator().manual_seed(0)), dim=-1)
    x2 = torch.nn.functional.normalize(x + 1e-3 * step, dim=-1)
    f1 = evaluate_class(cls.name, x, raw, torch.tensor([L]))
    f2 = evaluate_class(cls.name, x2, raw, torch.tensor([L]))
    q = (f2 - f1).abs() / (x2 - x).norm(dim=-1)
    assert float(q.max()) <= lipschitz_constant(cls.name, L) * 1.01


def test_bad_classes_are_clear_errors_before_any_compute():
    register_class(ReluAgain())                  # a good registration, which the refused ones below must leave be
    with pytest.raises(ValueError, match="function_class='nope' is not one of"):
        Sweep(classes=("nope",), **SMALL).train("cpu")
    with pytest.raises(ValueError, match="is a built-in of softmax_icl.tasks"):
        register_class(type("R", (FunctionClass,), {"name": "relu"})())
    with pytest.raises(ValueError, match="name without spaces"):
        register_class(FunctionClass())
    with pytest.raises(ValueError, match="expected a FunctionClass instance"):
        register_class(lambda x: x)

    class WrongShape(FunctionClass):
        name = "wrong_shape"

        def __call__(self, x, task, L):
            return x                                              # (..., m, d), not (..., m)

    with pytest.raises(ValueError, match="does not broadcast"):
        Sweep(classes=(WrongShape(),), **SMALL).train("cpu", desc="")
    assert "relu_again" in known_classes() and check_class("relu") == "relu"


def test_a_low_rank_class_of_ones_own_reads_the_basis():
    class LowRankAbs(FunctionClass):
        name = "lowrank_abs"
        low_rank = True

        def __call__(self, x, task, L):
            return L * (x * task.w).sum(-1).abs()

    register_class(LowRankAbs())
    spec = InputSpec(d=4, k=2, task_seed=3)
    raw = {k: v[None] for k, v in draw_raw(spec, 32, 8, seed=1, device="cpu").items()}
    f = evaluate_class("lowrank_abs", raw["x"], raw, torch.tensor([1.0]), basis=spec.basis("cpu"))
    lin = evaluate_class("lowrank_linear", raw["x"], raw, torch.tensor([1.0]), basis=spec.basis("cpu"))
    torch.testing.assert_close(f, lin.abs())


# --- a context process of one's own (paper 2) ------------------------------------------------------------------

from softmax_icl.classification.algorithms import search_hyperparameters  # noqa: E402
from softmax_icl.classification.models import ClsSweep  # noqa: E402
from softmax_icl.classification.tasks import ContextProcess, fixed_batch, register_process, task_spec  # noqa: E402


class Halfspaces(ContextProcess):
    """Two classes split by a random hyperplane through the origin, one per context."""

    name = "halfspaces"

    def __call__(self, gen, contexts, n, C, d):
        x = torch.nn.functional.normalize(torch.randn(contexts, n + 1, d, generator=gen), dim=-1)
        w = torch.randn(contexts, 1, d, generator=gen)
        return x, ((x * w).sum(-1) > 0).long()


CLS_SMALL = dict(shapes=((2, 4),), n=(16,), seeds=2, steps=150, log_every=50, batch_size=64)


def test_a_users_process_trains_reproducibly_and_learns():
    a = ClsSweep(tasks=(Halfspaces(),), **CLS_SMALL).train("cpu", desc="")
    b = ClsSweep(tasks=(Halfspaces(),), **CLS_SMALL).train("cpu", desc="")
    assert a.sweep["tasks"] == (("halfspaces", 1, 0.0, 0),) and a.timings["engine"] == "torch"
    np.testing.assert_array_equal(a.final["WV"], b.final["WV"])
    early, late = a.loss_history[1], a.loss_history[-1]
    assert np.all(late < early) and np.all(late < math.log(2))             # below chance (log C) for every unit


def test_a_users_process_makes_evaluation_sets_the_baselines_take():
    setting = dict(reading="halfspaces", P=1, tau=0.0, k=0, C=2, d=4, n=16)
    register_process(Halfspaces())
    b1 = fixed_batch([setting], (16, 2, 1, 4), 5, 256)
    b2 = fixed_batch([setting], (16, 2, 1, 4), 5, 256)
    torch.testing.assert_close(b1.x_ctx, b2.x_ctx)
    assert b1.x_ctx.shape == (1, 256, 16, 4) and b1.y_ctx.shape == (1, 256, 16, 2)
    assert set(b1.label_q.unique().tolist()) <= {0, 1}
    h = search_hyperparameters("gd", b1)
    assert float(h["ce"][0]) < math.log(2)                               # one GD step beats chance on half-spaces


def test_bad_processes_are_clear_errors():
    with pytest.raises(ValueError, match="reading='nope' is not one of"):
        task_spec("nope")
    with pytest.raises(ValueError, match="is a built-in of softmax_icl.classification.tasks"):
        register_process(type("U", (ContextProcess,), {"name": "uniform"})())

    class BadLabels(ContextProcess):
        name = "bad_labels"

        def __call__(self, gen, contexts, n, C, d):
            return torch.zeros(contexts, n + 1, d), torch.full((contexts, n + 1), C)

    with pytest.raises(ValueError, match="labels outside"):
        ClsSweep(tasks=(BadLabels(),), **CLS_SMALL).train("cpu", desc="")
