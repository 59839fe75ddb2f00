"""Device hygiene of the PyTorch training path .

* Nothing inside the training loop waits for the device or moves data between host and device: no ``.item()``,
  ``.cpu()``, ``.numpy()``, ``.tolist()``, no Python-side read of a tensor (``bool``, ``float``, ``int``), no tensor
  built from host data or created without a device and moved, no ``.to(device)``. On a CPU-only machine a transfer
  cannot be seen as one (every tensor is on the CPU), so the test intercepts every torch call made in the loop
  (a ``TorchFunctionMode``) and flags the *patterns* that are a sync or a transfer on a GPU.
* The loop gives bit-identical numbers to a plain reference loop (the one :func:`softmax_icl.base.optimise` had
  before it kept its history on the device), and the same numbers for the same seeds.
* The fused CPU engine is never used for tensors that are not on the CPU.
* The same seeds give the same numbers on another device (the counter-based streams draw the same tasks there).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode, resolve_name

from softmax_icl import base, models
from softmax_icl.engine import regression
from softmax_icl.training import Sweep, SweepProgram, task_streams, train_sweep

#: Tensor methods that read a value on the host (a device sync on a GPU) or copy to the host.
SYNC = {f"torch.Tensor.{m}" for m in ("item", "numpy", "tolist", "cpu", "cuda", "__bool__", "__float__", "__int__",
                                      "__index__", "__complex__", "__array__")}
#: Functions that build a tensor from host data (a host-to-device copy when the target is a GPU).
HOST_DATA = {"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy", "torch.Tensor.new_tensor"}
#: Factories: without ``device=`` (or ``out=``) they make a CPU tensor, which a GPU run must then move.
FACTORIES = {f"torch.{f}" for f in ("empty", "zeros", "ones", "full", "arange", "linspace", "logspace", "randn",
                                    "rand", "randint", "randperm", "eye", "normal", "empty_strided")}


class HostTraffic(TorchFunctionMode):
    """Records every sync / transfer pattern made between a loop's :class:`Progress` bar opening and closing,
    with whether it happened inside a log point (``optimise``'s inner ``log``)."""

    def __init__(self):
        super().__init__()
        self.active = False
        self.events: list[tuple[str, str, str]] = []          # (where: "log" | "step", what, caller)

    @staticmethod
    def _caller() -> tuple[str, bool, bool]:
        f = sys._getframe(2)
        from_optim = "torch/optim/" in f.f_code.co_filename.replace("\\", "/")
        in_log, caller = False, None
        while f is not None:
            name = f.f_code.co_filename.replace("\\", "/")
            if caller is None and "/torch/" not in name:
                caller = f"{'/'.join(name.rsplit('/', 2)[-2:])}:{f.f_lineno}"      # e.g. softmax_icl/base.py:140
            if f.f_code.co_name == "log" and name.endswith("softmax_icl/base.py"):
                in_log = True
            f = f.f_back
        return caller or "?", in_log, from_optim

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.active:
            name = resolve_name(func) or getattr(func, "__name__", str(func))
            what = None
            if name in SYNC:
                what = f"{name} (host read / copy)"
            elif name in HOST_DATA and not (args and isinstance(args[0], torch.Tensor)):
                what = f"{name} (tensor from host data)"
            elif name in FACTORIES and "device" not in kwargs and "out" not in kwargs:
                what = f"{name} without device= (a CPU tensor)"
            elif name in ("torch.Tensor.to", "torch.Tensor.copy_") and (
                    "device" in kwargs or any(isinstance(a, (str, torch.device)) for a in args[1:])):
                what = f"{name} to a device (a transfer)"
            if what is not None:
                caller, in_log, from_optim = self._caller()
                # PyTorch's Adam keeps its step count as a host-side CPU scalar on purpose (no device sync)
                if not from_optim:
                    self.events.append(("log" if in_log else "step", what, caller))
        return func(*args, **kwargs)


@pytest.fixture
def traffic(monkeypatch):
    """A :class:`HostTraffic` recorder switched on while a training loop's progress bar is open."""
    rec = HostTraffic()
    init, close = base.Progress.__init__, base.Progress.close

    def opened(self, *a, **k):
        init(self, *a, **k)
        rec.active = True

    def closed(self):
        rec.active = False
        close(self)

    monkeypatch.setattr(base.Progress, "__init__", opened)
    monkeypatch.setattr(base.Progress, "close", closed)
    with rec:
        yield rec


@pytest.fixture
def torch_path(monkeypatch):
    """The PyTorch path (what runs on a GPU), not the fused CPU kernel."""
    monkeypatch.setattr(regression, "usable", lambda *a, **k: False)


SWEEPS = {
    # two context lengths (two streams), two classes laid out as columns, non-isotropic inputs, low-rank basis
    "grid": Sweep(classes=("cosine", "lowrank_linear"), L=(1.0, 2.0), sigma=(0.1,), n=(5, 8), seeds=2, d=3, k=2,
                  input_dist="nonisotropic", steps=6, batch_size=4, log_every=2, param="KQ"),
    "M-linear": Sweep(model="linear", classes=("affine", "relu"), L=(1.0,), sigma=(0.0, 0.5), n=(6,), seeds=2, d=2,
                      input_dist="nonisotropic_whitened", steps=5, batch_size=3, log_every=2, param="M"),
    "full": Sweep(classes=("lowrank_cosine",), L=(0.5,), n=(4,), seeds=1, d=3, k=1, steps=4, batch_size=3,
                  log_every=3, param="full"),
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_train_sweep_loop_never_waits_for_the_device(name, torch_path, traffic):
    train_sweep(SWEEPS[name], "cpu", progress=False)
    assert traffic.events == []


def test_train_sweep_uneven_layout_never_waits_for_the_device(torch_path, traffic):
    """A subset of configurations that is not a full grid: one row per configuration, keyed by its seed."""
    sw = SWEEPS["grid"]
    configs = [c for c in sw.configs() if not (c["seed"] == 1 and c["function_class"] == "cosine")]
    train_sweep(sw, "cpu", configs=configs, progress=False)
    assert traffic.events == []


def test_detector_sees_a_sync_in_the_loop(torch_path, traffic):
    """The recorder is not blind: a loss that reads a value on the host is caught, outside the log points."""
    sw = SWEEPS["full"]
    prog = SweepProgram(sw, torch.device("cpu"))

    def leaky():
        loss = prog.loss()
        float(loss.detach().sum())
        return loss

    base.optimise(list(prog.unit.parameters()), leaky, 3, 0.01, 2, lambda: {"M": prog.matrices().numpy()},
                  progress=False)
    kinds = {(where, what.split(" ")[0]) for where, what, _ in traffic.events}
    assert ("step", "torch.Tensor.__float__") in kinds
    assert ("log", "torch.Tensor.numpy") in kinds
    assert not any(c.startswith("softmax_icl/base.py") for _, _, c in traffic.events), traffic.events


# ---------------------------------------------------------------------------------------------------------------
# The same numbers


def reference_optimise(params, step_loss, steps, lr, log_every, snapshot, update=None):
    """The loop written plainly, copying to the host at every log point (what ``optimise`` does, without its device hygiene). ``update``:
    the engine's whole step (its update in C) instead of autograd and ``torch.optim.Adam``."""
    opt = torch.optim.Adam(params, lr=lr)
    hist = {"steps": [], "loss": []}
    running, since = None, 0

    def log(step):
        nonlocal since
        with torch.no_grad():
            for k, v in snapshot().items():
                hist.setdefault(k, []).append(v.detach().cpu().numpy().copy())
        hist["loss"].append(np.zeros(0) if running is None else (running / max(since, 1)).cpu().numpy().copy())
        hist["steps"].append(step)
        if running is not None:
            running.zero_()
        since = 0

    log(0)
    for step in range(1, steps + 1):
        if update is not None:
            per_config = update(lr)
        else:
            per_config = step_loss()
            opt.zero_grad(set_to_none=True)
            per_config.sum().backward()
            opt.step()
        running = per_config.detach().clone() if running is None else running + per_config.detach()
        since += 1
        if step % log_every == 0 or step == steps:
            log(step)
    hist["loss"][0] = np.zeros_like(hist["loss"][-1])
    return {k: np.stack(v) if k != "steps" else np.array(v) for k, v in hist.items()}


@pytest.mark.parametrize("name", sorted(SWEEPS))
@pytest.mark.parametrize("path", ["torch", "auto"])
def test_train_sweep_matches_the_reference_loop_bit_for_bit(name, path, monkeypatch):
    if path == "torch":
        monkeypatch.setattr(regression, "usable", lambda *a, **k: False)
    sw = SWEEPS[name]
    res = train_sweep(sw, "cpu", progress=False)
    prog = SweepProgram(sw, torch.device("cpu"))
    ref = reference_optimise(list(prog.unit.parameters()), prog.loss, sw.steps, sw.lr, sw.log_every,
                             lambda: {"M": prog.matrices()}, update=prog.updater())
    np.testing.assert_array_equal(res.log_steps, ref["steps"])
    np.testing.assert_array_equal(res.M_history, ref["M"])
    np.testing.assert_array_equal(res.loss_history, ref["loss"][:, prog.back.numpy()])
    assert res.M_history.dtype == ref["M"].dtype and res.loss_history.dtype == np.float32
    state = {k: v.detach()[prog.back].numpy() for k, v in prog.unit.state_dict().items()}
    assert state.keys() == res.final_state.keys()
    for k in state:
        np.testing.assert_array_equal(res.final_state[k], state[k])


def test_same_seeds_same_numbers_other_seeds_other_numbers(torch_path):
    sw = SWEEPS["grid"]
    a, b = train_sweep(sw, "cpu", progress=False), train_sweep(sw, "cpu", progress=False)
    np.testing.assert_array_equal(a.M_history, b.M_history)
    np.testing.assert_array_equal(a.loss_history, b.loss_history)
    c = train_sweep(Sweep(**{**sw.to_dict(), "data_seed": 7}), "cpu", progress=False)
    d = train_sweep(Sweep(**{**sw.to_dict(), "init_seed": 7}), "cpu", progress=False)
    assert not np.array_equal(a.M_history[-1], c.M_history[-1])
    assert not np.array_equal(a.M_history[0], d.M_history[0])


def test_optimise_history_shapes_and_step_zero():
    w = torch.nn.Parameter(torch.ones(3))
    hist, seconds = base.optimise([w], lambda: (w - 2.0) ** 2, 5, 0.1, 2, lambda: {"w": w}, progress=False)
    assert hist["steps"].tolist() == [0, 2, 4, 5]
    assert hist["w"].shape == (4, 3) and hist["loss"].shape == (4, 3)
    np.testing.assert_array_equal(hist["loss"][0], 0.0)
    np.testing.assert_array_equal(hist["w"][0], 1.0)       # a copy at step 0, not the parameter updated later
    assert hist["w"][-1][0] > 1.0 and seconds >= 0


# ---------------------------------------------------------------------------------------------------------------
# Paper 2's trainer goes through the same loop


def _cls():
    """Paper 2's trainer, wherever the classification package keeps it."""
    try:
        from softmax_icl.classification.models import ClsSweep, train_cls_sweep
    except ImportError:
        from softmax_icl.classification import ClsSweep, train_cls_sweep
    sweep = ClsSweep(models=("softmax", "linear"), shapes=((2, 3),), n=(6,), seeds=2, steps=5, batch_size=4,
                     log_every=2)
    return sweep, train_cls_sweep


def test_classification_trainer_same_numbers_for_same_seeds():
    sweep, train = _cls()
    a, b = train(sweep, "cpu", progress=False), train(sweep, "cpu", progress=False)
    np.testing.assert_array_equal(a.A_history, b.A_history)
    np.testing.assert_array_equal(a.loss_history, b.loss_history)
    assert a.A_history.shape[0] == len(a.log_steps) == 4


def test_classification_trainer_loop_adds_no_sync(traffic):
    """What :func:`base.optimise` itself does in paper 2's loop never waits for the device; what the trainer's
    snapshot does happens at log points only."""
    sweep, train = _cls()
    train(sweep, "cpu", progress=False)
    assert not [e for e in traffic.events if e[2].startswith("softmax_icl/base.py")], traffic.events
    assert not [e for e in traffic.events if e[0] == "step" and "numpy" in e[1]], traffic.events


#: Paper 2 sweeps that take every branch of the task builder: padded shapes, each reading, prototypes, lengths.
CLS_SWEEPS = {
    "main": dict(models=("softmax", "linear"), shapes=((2, 3),), n=(6,)),
    "readings": dict(models=("softmax", "linear", "linear_sum"), shapes=((2, 3), (3, 4)), n=(5, 7),
                     tasks=(("uniform", 1, 0.0, 0), ("balanced", 1, 0.0, 0), ("clustered", 1, 0.5, 0),
                            ("subspace", 1, 0.0, 2), ("uniform", 2, 0.0, 0))),
    "mixture": dict(models=("linear",), tasks=(("clustered", 1, 1.0, 0),), shapes=((3, 3),), n=(9,), n_min=3),
}


@pytest.mark.parametrize("name", sorted(CLS_SWEEPS))
def test_classification_trainer_steps_never_wait_for_the_device(name, traffic):
    """Nothing in paper 2's loop waits for the device: the sampler's branches are planned when its stream is made
    (``classification.tasks.BatchPlan``), the model's when the trainer starts, and the snapshots stay on the
    device."""
    _, train = _cls()
    from softmax_icl.classification.models import ClsSweep

    train(ClsSweep(**CLS_SWEEPS[name], seeds=2, steps=4, batch_size=3, log_every=2), "cpu", progress=False)
    assert traffic.events == []


# ---------------------------------------------------------------------------------------------------------------
# The fused CPU kernel is never used for a tensor that is not on the CPU


def test_fused_kernel_is_not_usable_off_the_cpu():
    assert not regression.usable("meta", 3, 1)
    assert not regression.FusedStream.usable([["relu"]], torch.ones(1, 1, device="meta"), 3, 1, "meta")
    if regression.available():
        f = regression.FusedStream("isotropic", torch.zeros(1, 2, dtype=torch.int64), 4, 2, 2, 1, [["relu"]],
                                torch.ones(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), True, None, None)
        with pytest.raises(ValueError, match="CPU"):
            regression.FusedProgram([f], [0]).run(torch.zeros(1, 2, 2, device="meta"), 1)


def test_a_stream_off_the_cpu_never_builds_the_engine():
    sw = SWEEPS["grid"]
    for st in task_streams(sw.input_spec, sw.configs(), list(sw.classes), [1, 2], "meta"):
        assert st.fused(sw.model, sw.batch_size) is None
    R, G, B, n, d = 1, 2, 3, 4, 2
    dev = "meta"
    from softmax_icl.tasks import TaskBatch

    batch = TaskBatch(torch.zeros(R, B, n, d, device=dev), torch.zeros(R, G, B, n, device=dev),
                      torch.zeros(R, B, d, device=dev), torch.zeros(R, G, B, device=dev))
    out = models.mse_loss("softmax", batch, torch.zeros(R, G, d, d, device=dev))
    assert out.shape == (R, G) and out.device.type == "meta"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_training_uses_the_torch_path(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the fused CPU kernel was called in a CUDA run")

    monkeypatch.setattr(regression.FusedProgram, "run", boom)
    res = train_sweep(SWEEPS["grid"], "cuda", progress=False)
    assert res.timings["device"].startswith("cuda") and np.isfinite(res.M_history).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_same_seeds_same_numbers():
    sw = SWEEPS["grid"]
    a, b = train_sweep(sw, "cuda", progress=False), train_sweep(sw, "cuda", progress=False)
    np.testing.assert_array_equal(a.M_history, b.M_history)
    np.testing.assert_array_equal(a.loss_history, b.loss_history)


# ---------------------------------------------------------------------------------------------------------------
# A smoke notebook through the PyTorch backend on the CPU, and the same figure on a GPU against it

#: The figure whose smoke run the notebook tests execute: the chapter with the least compute (12 s at the default
#: profile on two cores with the fused kernel; its smoke profile trains 300 steps).
SMOKE_FIGURE = "generalization"


def _smoke_run(out, cache, device: str, kernel: str) -> dict:
    """Execute ``SMOKE_FIGURE`` at ``--profile smoke`` through the CLI into ``out``; return its record."""
    import json
    import os

    from softmax_icl.figures import main

    saved = {k: os.environ.get(k) for k in ("SOFTMAX_ICL_KERNEL", "SOFTMAX_ICL_CACHE_DIR", "SOFTMAX_ICL_PROGRESS",
                                            "SOFTMAX_ICL_OUTPUT_DIR")}
    os.environ.update(SOFTMAX_ICL_KERNEL=kernel, SOFTMAX_ICL_CACHE_DIR=str(cache), SOFTMAX_ICL_PROGRESS="0")
    os.environ.pop("SOFTMAX_ICL_OUTPUT_DIR", None)
    try:
        assert main(["run", SMOKE_FIGURE, "--profile", "smoke", "--device", device, "--output", str(out)]) == 0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return json.loads((out / "results" / f"{SMOKE_FIGURE}.json").read_text())


@pytest.fixture(scope="module")
def cpu_torch_smoke(tmp_path_factory):
    """The smoke run on the CPU through the PyTorch backend (fresh cache), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("smoke-cpu-torch")
    return _smoke_run(tmp / "out", tmp / "cache", "cpu", "torch")


def test_smoke_notebook_runs_through_the_pytorch_backend_on_the_cpu(cpu_torch_smoke):
    rec = cpu_torch_smoke
    assert rec["profile"] == "smoke" and rec["provenance"]["device"] == "cpu"
    assert rec["provenance"]["kernel"].startswith("torch"), rec["provenance"]["kernel"]
    assert rec["claims"] and all(isinstance(c["passed"], bool) for c in rec["claims"])


def _verdicts(rec: dict) -> dict:
    return {c["id"]: c["passed"] for c in rec["claims"]}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_smoke_notebook_on_the_gpu_gives_the_cpus_verdicts(cpu_torch_smoke, tmp_path):
    """The same figure's smoke run on the GPU: it completes through the PyTorch path and every check has the CPU
    run's verdict. (The tasks are the CPU run's: the counter-based streams draw the same numbers on every device;
    the training itself is held to float rounding by the test below.)"""
    rec = _smoke_run(tmp_path / "out", tmp_path / "cache", "cuda", "auto")
    assert rec["provenance"]["device"].startswith("cuda")
    assert rec["provenance"]["kernel"] == "torch"                  # never the fused CPU kernel
    assert _verdicts(rec) == _verdicts(cpu_torch_smoke)


# ---------------------------------------------------------------------------------------------------------------
# The same seeds on another device (or backend) give the same numbers, up to float rounding


@pytest.mark.parametrize("name", ["grid", "M-linear"])
def test_same_seeds_same_numbers_on_another_device(name, monkeypatch):
    """Trained on the CPU (PyTorch path) and on the other computation this machine has: the GPU where there is one,
    else the fused CPU engine. Both draw the same tasks from the same seeds (the counter-based streams) and compute
    the same function, so the key-query matrices agree to float32 rounding after every step (a wrong kernel, a device
    bug or a draw that depends on the device moves them by the scale of M)."""
    sw = SWEEPS[name]
    other = "cuda" if torch.cuda.is_available() else "cpu"
    if other == "cpu" and not regression.available():
        pytest.skip("neither a GPU nor the fused CPU kernel here: nothing else to compare the PyTorch path with")
    got = train_sweep(dataclasses.replace(sw, log_every=1), other, progress=False).M_history
    with monkeypatch.context() as m:
        m.setattr(regression, "usable", lambda *a, **k: False)
        ref = train_sweep(dataclasses.replace(sw, log_every=1), "cpu", progress=False).M_history
    assert got.shape == ref.shape and not np.array_equal(ref[-1], ref[0])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


# ---------------------------------------------------------------------------------------------------------------
# The PyTorch step as a CUDA graph: a pure function of the parameters and the step tensor, replayed bit for bit


def test_the_torch_step_reads_its_step_from_the_step_tensor_only(torch_path):
    """What a CUDA graph replays must depend on nothing the host changes between steps except what ``optimise``
    writes before each (the step tensor): the same tensor value draws the same tasks, call after call, and the k-th
    step of :meth:`SweepProgram.loss` is :meth:`SweepProgram.step_loss` at ``step_t = k``."""
    sw = SWEEPS["grid"]
    prog = SweepProgram(sw, torch.device("cpu"))
    counted = [prog.loss().detach().clone() for _ in range(3)]
    for k in (3, 1, 3):
        prog.step_t.fill_(k)
        np.testing.assert_array_equal(prog.step_loss().detach(), counted[k - 1])
    assert not torch.equal(counted[0], counted[2])


def test_optimise_writes_each_step_into_the_step_tensor():
    w = torch.nn.Parameter(torch.ones(2))
    step_t = torch.zeros((), dtype=torch.int64)
    seen = []

    def step_loss():
        seen.append(int(step_t))
        return (w - step_t.to(w.dtype)) ** 2

    hist, _ = base.optimise([w], step_loss, 5, 0.1, 2, lambda: {"w": w}, progress=False, step_tensor=step_t)
    assert seen == [1, 2, 3, 4, 5] and hist["graph"] is False        # no graph off a GPU


#: Sweeps the graph tests train: every parameterisation, a cosine schedule (the learning rate a tensor the graph
#: reads), two context lengths, more steps than the eager warm-up.
GRAPH_SWEEPS = {
    "grid-cosine": dataclasses.replace(SWEEPS["grid"], steps=9, lr_schedule="cosine"),
    "M-linear": dataclasses.replace(SWEEPS["M-linear"], steps=8),
    "full": dataclasses.replace(SWEEPS["full"], steps=8),
}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(GRAPH_SWEEPS))
def test_cuda_graph_steps_equal_eager_steps_bit_for_bit(name, monkeypatch):
    """Paper 1's trainer on the GPU: the steps replayed from one captured graph give exactly the numbers of the same
    steps run eagerly (``SOFTMAX_ICL_CUDA_GRAPH=0``), at every log point and at the end."""
    sw = dataclasses.replace(GRAPH_SWEEPS[name], log_every=1)
    graphed = train_sweep(sw, "cuda", progress=False)
    monkeypatch.setenv(base.CUDA_GRAPH_ENV, "0")
    eager = train_sweep(sw, "cuda", progress=False)
    assert graphed.timings["cuda_graph"] is True and eager.timings["cuda_graph"] is False
    assert not np.array_equal(eager.M_history[-1], eager.M_history[base.GRAPH_WARMUP])   # replays moved M
    np.testing.assert_array_equal(graphed.M_history, eager.M_history)
    np.testing.assert_array_equal(graphed.loss_history, eager.loss_history)
    for k in eager.final_state:
        np.testing.assert_array_equal(graphed.final_state[k], eager.final_state[k])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", sorted(CLS_SWEEPS))
def test_cuda_graph_classification_steps_equal_eager_steps_bit_for_bit(name, monkeypatch):
    """Paper 2's trainer on the GPU (every reading, padded shapes, a mixture of lengths, a cosine schedule): graph
    replays and eager steps give the same numbers bit for bit."""
    from softmax_icl.classification.models import ClsSweep, train_cls_sweep

    sw = ClsSweep(**CLS_SWEEPS[name], seeds=2, steps=8, batch_size=3, log_every=1, lr_schedule="cosine")
    graphed = train_cls_sweep(sw, "cuda", progress=False)
    monkeypatch.setenv(base.CUDA_GRAPH_ENV, "0")
    eager = train_cls_sweep(sw, "cuda", progress=False)
    assert graphed.timings["cuda_graph"] is True and eager.timings["cuda_graph"] is False
    np.testing.assert_array_equal(graphed.A_history, eager.A_history)
    np.testing.assert_array_equal(graphed.WV_history, eager.WV_history)
    np.testing.assert_array_equal(graphed.loss_history, eager.loss_history)
