"""Batched pretraining of a whole sweep of attention units in one tensor program.

A :class:`Sweep` is a grid  function classes x L x sigma x n x seeds  (plus fixed settings). All
its configurations are stacked along a leading axis C and trained together:

* each seed index ``s`` has its own data stream (the counter-based stream keyed by ``derive_seed(data_seed, s)``,
  :mod:`softmax_icl.streams`: step ``t``'s task ``b`` is the same numbers on every device and in every packing)
  and its own initial weights (from ``(init_seed, s)``, drawn on the CPU); configurations that share a seed use
  the same raw draws (common random numbers; a shorter context is the first points of a longer one), so a
  configuration trained alone sees exactly the data it sees inside the sweep;
* configurations are grouped by context length (one :class:`TaskStream` each) and, inside a group, laid
  out as seeds x configurations, so the inputs of a seed are drawn once and shared by its configurations
  (see :mod:`softmax_icl.models` for how their scores become one matrix product);
* the loss is the *sum* over configurations of each one's mean squared error, so no configuration's
  gradient is scaled by how many others share the batch; Adam is elementwise, so each keeps its
  own optimiser state;
* on the CPU a step (draw, label, readout, gradient) of every stream runs fused in the engine of
  :mod:`softmax_icl.engine.regression`, in one call per step and in buffers made once; elsewhere (and with ``SOFTMAX_ICL_KERNEL=torch``) it runs as
  PyTorch code (:func:`softmax_icl.tasks.draw_rows`, :func:`softmax_icl.models.mse_loss`): the same draws, the
  same numbers to float rounding.

Pretraining is online (fresh tasks every step) and the target is the noiseless ``f(x_q)``.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from . import streams
from .engine import regression as engine
from .tasks import (ClassBlock, FunctionClass, InputSpec, TaskBatch, check_class, register_class, class_blocks, draw_plan, draw_rows, make_batch,
                    needs_basis, raw_buffers, sphere_cos_mean)
from .models import AttentionUnit
from .base import derive_seed, optimise, resolve_device


@dataclass(frozen=True)
class Sweep:
    """A grid of pretraining configurations plus the settings they share."""

    model: str = "softmax"                      # softmax | linear
    classes: tuple = ("cosine",)
    L: tuple = (1.0,)
    sigma: tuple = (0.1,)
    n: tuple = (50,)
    seeds: int = 1
    d: int = 2
    input_dist: str = "isotropic"
    k: int = 1                                   # rank of B for the low-rank classes
    param: str = "KQ"                            # M | KQ | full
    steps: int = 500
    batch_size: int = 128
    lr: float = 0.05
    init_scale: float = 0.1
    data_seed: int = 0
    init_seed: int = 1
    task_seed: int = 2                           # draws the low-rank basis B
    log_every: int = 10
    pairs: tuple = ()                            # (L, sigma) pairs replacing the product L x sigma
    init_identity: float = 0.0                   # > 0: start from M ~ init_identity * I (see AttentionUnit)
    lr_schedule: str = "constant"                # constant | cosine (decays to 0 at the last step)
    inner_dim: int = 0                           # "KQ": rows r of M_K, M_Q in R^(r x d); 0 means r = d

    #: fields left out of ``to_dict`` (and so of cache keys) while at their default, so adding them changed no key
    OPTIONAL = {"init_identity": 0.0, "lr_schedule": "constant", "inner_dim": 0}

    def __post_init__(self):
        # a class of one's own may be given as its FunctionClass instance: registered here, the sweep keeps its name
        if isinstance(self.classes, (str, FunctionClass)):
            object.__setattr__(self, "classes", (self.classes,))
        object.__setattr__(self, "classes", tuple(register_class(c) if isinstance(c, FunctionClass) else c
                                                  for c in self.classes))

    def settings(self) -> tuple:
        """The (L, sigma) settings of the grid: ``pairs``, else every L with every sigma."""
        return self.pairs or tuple(itertools.product(self.L, self.sigma))

    def configs(self) -> list[dict]:
        """Flattened grid, seed varying fastest."""
        rows = itertools.product(self.classes, self.settings(), self.n, range(self.seeds))
        return [dict(function_class=c, L=float(L), sigma=float(s), n=int(n), seed=int(sd))
                for c, (L, s), n, sd in rows]

    def grid(self) -> "Grid":
        """Where each configuration of :meth:`configs` sits on the grid (:class:`Grid`)."""
        return Grid(tuple(self.classes), tuple((float(L), float(s)) for L, s in self.settings()),
                    tuple(int(n) for n in self.n), int(self.seeds))

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(d=self.d, input_dist=self.input_dist, k=self.k, task_seed=self.task_seed)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if not (k in self.OPTIONAL and v == self.OPTIONAL[k])}

    def train(self, device="auto", desc: str = "training", progress=None) -> "SweepResult":
        """Train the whole grid (:func:`train_sweep`; ``progress``: True/False shows/hides the progress bar, None
        leaves it to ``SOFTMAX_ICL_PROGRESS`` and whether the output is interactive)."""
        return train_sweep(self, device, desc=desc, progress=progress)

    def lr_factor(self):
        """The learning-rate factor of each step (None: constant)."""
        if self.lr_schedule == "constant":
            return None
        if self.lr_schedule == "cosine":
            return lambda step: 0.5 * (1.0 + math.cos(math.pi * step / self.steps))
        raise ValueError(f"lr_schedule={self.lr_schedule!r} is not one of constant, cosine")


@dataclass(frozen=True)
class Grid:
    """A sweep's grid: its function classes, (L, sigma) settings, context lengths and seeds, and where each point
    sits among the flattened configurations (:meth:`Sweep.configs`: class, then setting, then n, seed fastest).

    The analyses find trained units by grid position (:meth:`index`, :meth:`at`), or by a grid value through index
    maps built once from the sweep's own axes (:meth:`units`): a value is looked up exactly, and a value that is
    not on the grid is an error naming the grid's values, never the nearest configuration."""

    classes: tuple
    settings: tuple              # (L, sigma) of each setting position
    n: tuple
    seeds: int

    def __len__(self) -> int:
        return len(self.classes) * len(self.settings) * len(self.n) * self.seeds

    def index(self, cls: int, setting: int, n: int, seed: int) -> int:
        """The configuration index of one grid point, given by positions along the axes."""
        return ((cls * len(self.settings) + setting) * len(self.n) + n) * self.seeds + seed

    def at(self, cls=None, setting=None, n=None, seed=None) -> np.ndarray:
        """Configuration indices (ascending) of every grid point at the given positions (an int or a list of
        positions per axis; None: the whole axis)."""
        axes = [range(len(self.classes)), range(len(self.settings)), range(len(self.n)), range(self.seeds)]
        picks = [ax if p is None else ([p] if isinstance(p, (int, np.integer)) else list(p))
                 for ax, p in zip(axes, (cls, setting, n, seed))]
        return np.array(sorted(self.index(*pos) for pos in itertools.product(*picks)), dtype=int)

    @functools.cached_property
    def _positions(self) -> dict:
        """Index maps from each axis's values to their positions (L and sigma: to the settings that have them)."""
        maps: dict = {"function_class": {}, "setting": {}, "L": {}, "sigma": {}, "n": {}}
        for i, c in enumerate(self.classes):
            maps["function_class"].setdefault(c, []).append(i)
        for i, (L, s) in enumerate(self.settings):
            maps["setting"].setdefault((L, s), []).append(i)
            maps["L"].setdefault(L, []).append(i)
            maps["sigma"].setdefault(s, []).append(i)
        for i, n in enumerate(self.n):
            maps["n"].setdefault(n, []).append(i)
        return maps

    def positions(self, axis: str, value) -> list[int]:
        """Positions along ``axis`` (``function_class``, ``setting``, ``L``, ``sigma`` or ``n``) of ``value``; a
        KeyError naming the grid's values when it is not on the grid."""
        maps = self._positions[axis]
        key = value if axis == "function_class" else (
            (float(value[0]), float(value[1])) if axis == "setting" else int(value) if axis == "n" else float(value))
        if key not in maps:
            raise KeyError(f"{axis} = {value!r} is not on the sweep's grid; its values: {', '.join(map(str, maps))}")
        return maps[key]

    def units(self, *, function_class=None, setting=None, L=None, sigma=None, n=None, seed=None) -> np.ndarray:
        """Configuration indices (ascending) of the units with these grid values (None: any); ``seed`` is a seed
        index. ``L`` and ``sigma`` pick the settings that have them (both: the setting (L, sigma))."""
        cls = None if function_class is None else self.positions("function_class", function_class)
        settings = None
        for axis, value in (("setting", setting), ("L", L), ("sigma", sigma)):
            if value is not None:
                found = self.positions(axis, value)
                settings = found if settings is None else [p for p in settings if p in found]
        ns = None if n is None else self.positions("n", n)
        if seed is not None and not 0 <= int(seed) < self.seeds:
            raise KeyError(f"seed = {seed!r} is not on the sweep's grid; its seeds: 0 ... {self.seeds - 1}")
        return self.at(cls, settings, ns, None if seed is None else int(seed))


@dataclass
class SweepResult:
    """What training produced: per-configuration history and final weights."""

    sweep: dict
    configs: list[dict]
    log_steps: np.ndarray                         # (T,)
    M_history: np.ndarray                         # (T, C, d, d) key-query matrix over training
    loss_history: np.ndarray                      # (T, C) mean training loss since the previous log
    final_state: dict                             # name -> (C, ...) numpy arrays
    timings: dict = field(default_factory=dict)

    @property
    def M(self) -> np.ndarray:
        return self.M_history[-1]

    @property
    def grid(self) -> Grid:
        """The sweep's :class:`Grid`, over which :attr:`configs` are laid out (the whole grid, in its order)."""
        grid = Sweep(**self.sweep).grid()
        if len(grid) != len(self.configs):
            raise ValueError(f"this result holds {len(self.configs)} of the sweep's {len(grid)} configurations: "
                             "its units are not laid out on the grid")
        return grid

    def select(self, **where) -> np.ndarray:
        """Indices (ascending) of the units with these grid values: :meth:`Grid.units` (``function_class``,
        ``setting``, ``L``, ``sigma``, ``n``, ``seed``)."""
        return self.grid.units(**where)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SweepResult":
        return cls(**d)


class TaskStream:
    """Online tasks for configurations that share a context length ``n``, laid out as R rows x G slots.

    Each row has a stream key (:mod:`softmax_icl.streams`), and configurations with the same seed share its draws
    (common random numbers): inputs, task coefficients and noise. When every seed present holds the same number of
    configurations with the same class pattern (any full grid), the rows are the seeds and a row's inputs are shared
    by its G configurations. Otherwise every configuration gets a row of its own (G = 1) keyed by its seed, which
    draws the same numbers. Either way a configuration sees exactly the draws it would see trained alone.

    ``index`` (R, G) gives the position in ``configs`` of the configuration at each slot. Batches are drawn into
    buffers the stream owns: a batch from :meth:`sample` is valid until the stream's next draw.
    """

    def __init__(self, spec: InputSpec, configs: list[dict], classes: list[str], n: int, seeds: list[int], device):
        self.spec, self.n, self.device = spec, int(n), torch.device(device)
        if any(int(c["n"]) != self.n for c in configs):
            raise ValueError(f"a TaskStream serves one context length; got n = {sorted({c['n'] for c in configs})}")
        by_seed: dict[int, list[int]] = {}
        for i, c in enumerate(configs):
            by_seed.setdefault(int(c["seed"]), []).append(i)
        used = sorted(by_seed)
        cls = [[classes.index(configs[i]["function_class"]) for i in by_seed[s]] for s in used]
        if all(c == cls[0] for c in cls):                          # rows = seeds, inputs shared by the row
            rows = [by_seed[s] for s in used]
            row_seeds = [seeds[s] for s in used]
        else:                                                      # one row per configuration, keyed by its seed
            rows = [[i] for i in range(len(configs))]
            row_seeds = [seeds[int(c["seed"])] for c in configs]
        self.keys = streams.keys(row_seeds, self.device)
        self.index = torch.tensor(rows, device=self.device)
        take = lambda key: torch.tensor([[float(configs[i][key]) for i in r] for r in rows], device=self.device)  # noqa: E731
        self.L, self.sigma = take("L"), take("sigma")
        self.slot_classes = [[configs[i]["function_class"] for i in r] for r in rows]
        slot_class = torch.tensor([[classes.index(c) for c in r] for r in self.slot_classes])
        self.blocks = class_blocks(list(classes), slot_class)
        # the centred cosine class's mean over x, a float64 integral: made here once, not at every step
        self.cos_mean = (sphere_cos_mean(self.L, spec.d).to(self.L.dtype)
                         if any("cosine_centered" in r for r in self.slot_classes) else None)
        spec.sqrt_cov(self.device)                    # the sampler's fixed tensors: made on the device now, once,
        draw_plan(spec.d, spec.k, self.n, self.device)                  # not in the training loop
        if any(needs_basis(b.name) for b in self.blocks):
            spec.basis(self.device)
        if self.device.type != "cpu":
            self.blocks = [ClassBlock(b.name, *(t.to(self.device) if isinstance(t, torch.Tensor) else t
                                                for t in (b.rows, b.cols))) for b in self.blocks]
        self._raw: dict | None = None
        self._fused: dict = {}

    def sample(self, batch_size: int, step: int = 0, first_task: int = 0) -> TaskBatch:
        """Tasks ``first_task`` to ``first_task + batch_size - 1`` of training step ``step`` (step 0: an evaluation
        set), drawn into the stream's buffers."""
        R = self.keys.shape[0]
        if self._raw is None or self._raw["x"].shape[1] != batch_size:
            self._raw = raw_buffers(self.spec, R, batch_size, self.n, self.device)
        raw = draw_rows(self.spec, self.keys, self.n, range(first_task, first_task + batch_size), step, self._raw)
        return make_batch(self.spec, raw, self.blocks, self.L, self.sigma, self.n, self.cos_mean)

    def fused(self, kind: str, batch_size: int) -> "engine.FusedStream | None":
        """The engine's fused step for units of ``kind`` at this batch size (made once), or None where the engine
        cannot take it (off the CPU, ``SOFTMAX_ICL_KERNEL=torch``, shapes or Lipschitz constants out of its range)."""
        key = (kind, int(batch_size))
        if key not in self._fused:
            spec = self.spec
            ok = engine.FusedStream.usable(self.slot_classes, self.L, spec.d, spec.k, self.device)
            self._fused[key] = engine.FusedStream(
                spec.input_dist, self.keys, self.n, batch_size, spec.d, spec.k, self.slot_classes, self.L, self.sigma,
                torch.zeros_like(self.L) if self.cos_mean is None else self.cos_mean, kind == "softmax",
                spec.sqrt_cov("cpu"), spec.basis("cpu") if any(needs_basis(b.name) for b in self.blocks)
                else None) if ok else None
        return self._fused[key]


def task_streams(spec: InputSpec, configs: list[dict], classes: list[str], seeds: list[int], device) -> list:
    """One :class:`TaskStream` per distinct context length (shorter contexts cost only their own length).

    Each stream's ``index`` holds positions in ``configs``; its ``start`` is where its block of R x G slots
    begins when the slots of all streams are concatenated in order (the order :func:`train_sweep` keeps its
    parameters in, so that every stream's weights are a view).
    """
    ns = sorted({int(c["n"]) for c in configs})
    out, start = [], 0
    for n in ns:
        pos = [i for i, c in enumerate(configs) if int(c["n"]) == n]
        st = TaskStream(spec, [configs[i] for i in pos], classes, n, seeds, device)
        st.index = torch.tensor(pos, device=st.device)[st.index]        # positions in ``configs``
        st.start = start
        start += st.index.numel()
        out.append(st)
    return out


class SweepProgram:
    """The tensors of one batched sweep: its task streams (one per context length) and its stacked units.

    The units' parameters are held in slot order (see :func:`task_streams`); ``back`` maps configurations to
    slots. :meth:`loss` draws the tasks of the next training step (1, 2, ...) on every stream and returns every
    configuration's loss in slot order.
    """

    def __init__(self, sweep: Sweep, device, configs: list[dict] | None = None):
        self.sweep, self.device = sweep, device
        self.configs = sweep.configs() if configs is None else configs
        data_seeds = [derive_seed(sweep.data_seed, s) for s in range(sweep.seeds)]
        init_seeds = [derive_seed(sweep.init_seed, s) for s in range(sweep.seeds)]
        self.streams = task_streams(sweep.input_spec, self.configs, list(sweep.classes), data_seeds, device)
        slots = torch.cat([st.index.flatten() for st in self.streams]).cpu()     # slot -> configuration
        self.back = torch.argsort(slots)                                          # configuration -> slot
        self.back_device = self.back.to(device)
        seed_idx = torch.tensor([self.configs[i]["seed"] for i in slots.tolist()])
        self.unit = AttentionUnit(sweep.model, sweep.param, sweep.d, seed_idx, init_seeds, sweep.init_scale, device,
                                  init_identity=sweep.init_identity, inner_dim=sweep.inner_dim)
        self.step = 0
        self.step_t = torch.zeros((), dtype=torch.int64, device=device)      # the step the PyTorch path draws
        # the fused CPU step where the engine takes every stream's units (decided here, on the host, once)
        fused = [None if sweep.param == "full" else st.fused(sweep.model, sweep.batch_size) for st in self.streams]
        self.fused = fused if all(f is not None for f in fused) else None
        # every stream's fused step in one call of the engine
        self.program = None if self.fused is None else engine.FusedProgram(self.fused,
                                                                            [st.start for st in self.streams])

    def sample(self, step: int) -> list[TaskBatch]:
        """Every stream's tasks of training step ``step`` (each valid until that stream's next draw)."""
        return [st.sample(self.sweep.batch_size, step) for st in self.streams]

    def loss(self, batches: list[TaskBatch] | None = None) -> torch.Tensor:
        """Per-configuration loss (C,) in slot order, differentiable in the units' parameters (PyTorch's readout), on
        the next step's tasks (or on the given batches). Where the engine takes the sweep, training runs
        :meth:`updater`'s steps instead."""
        if batches is None:
            self.step += 1
            self.step_t.fill_(self.step)
            batches = self.sample(self.step_t)
        losses = [self.unit.loss(b, st.start).flatten() for st, b in zip(self.streams, batches)]
        return torch.cat(losses) if len(losses) > 1 else losses[0]

    def updater(self):
        """Where the engine runs the step (:attr:`program`) and the parameters are ``M`` or a key-query pair: a
        function ``update(lr)`` that runs a whole training step, the update included (:class:`.engine.Update`, Adam's
        to float rounding), and returns every configuration's loss (C,) in slot order, for
        :func:`softmax_icl.base.optimise`. Else None."""
        if self.program is None or self.sweep.param not in ("M", "KQ"):
            return None
        names = ["M"] if self.sweep.param == "M" else ["MK", "MQ"]
        adam_step = engine.Update([getattr(self.unit, n) for n in names], lib=engine.library())

        def update(lr: float) -> torch.Tensor:
            self.step += 1
            loss, grad = self.program.run(adam_step.M, self.step)
            adam_step(grad, lr)
            return loss
        return update

    def step_loss(self) -> torch.Tensor:
        """:meth:`loss` on the tasks of the step held in ``step_t``, which the caller writes (the PyTorch path as
        :func:`softmax_icl.base.optimise` runs it: a fixed sequence of kernels, which a CUDA graph can replay)."""
        return self.loss(self.sample(self.step_t))

    def matrices(self) -> torch.Tensor:
        """Every configuration's key-query matrix M (C, d, d), in the order of ``configs``, on the device (a copy:
        the optimiser updates the parameters in place)."""
        return self.unit.matrix().detach()[self.back_device]


def train_sweep(sweep: Sweep, device="auto", configs: list[dict] | None = None, progress=None,
                desc: str = "training") -> SweepResult:
    """Train every configuration of ``sweep`` (or the given subset ``configs``) in one program.

    Configurations are grouped by context length; every step draws one batch per group (a handful of
    groups, never a loop over configurations) and sums the per-configuration losses.
    """
    for c in sweep.classes:                      # an unknown class name fails here, before any compute
        check_class(c)
    dev = resolve_device(device) if isinstance(device, str) else device
    prog = SweepProgram(sweep, dev, configs)
    torch_path = prog.fused is None                             # the step optimise may capture as a CUDA graph
    hist, seconds = optimise(list(prog.unit.parameters()), prog.step_loss if torch_path else prog.loss, sweep.steps,
                             sweep.lr, sweep.log_every, lambda: {"M": prog.matrices()}, lr_factor=sweep.lr_factor(),
                             progress=progress, desc=desc, step_tensor=prog.step_t if torch_path else None,
                             update=None if torch_path else prog.updater())
    state = {k: v.detach().cpu()[prog.back].numpy() for k, v in prog.unit.state_dict().items()}
    return SweepResult(sweep=sweep.to_dict(), configs=prog.configs, log_steps=hist["steps"], M_history=hist["M"],
                       loss_history=hist["loss"][:, prog.back.numpy()], final_state=state,
                       timings={"train_seconds": seconds, "configs": len(prog.configs), "device": str(dev),
                                "engine": "torch" if torch_path else "compiled", "cuda_graph": hist["graph"]})
