"""Batched pretraining of a whole sweep of attention units in one tensor program.

A :class:`Sweep` is a grid  function classes x L x sigma x n x seeds  (plus fixed settings). All
its configurations are stacked along a leading axis C and trained together:

* each seed index ``s`` has its own data stream (a ``torch.Generator`` seeded from
  ``(data_seed, s)``) and its own initial weights (from ``(init_seed, s)``); configurations that
  share a seed use the same raw draws (common random numbers), so a configuration trained alone
  sees exactly the data it sees inside the sweep;
* the loss is the *sum* over configurations of each one's mean squared error, so no configuration's
  gradient is scaled by how many others share the batch; Adam is elementwise, so each keeps its
  own optimiser state.

Pretraining is online (fresh tasks every step) and the target is the noiseless ``f(x_q)``.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from .tasks import InputSpec, TaskBatch, draw_raw, make_batch
from .models import AttentionUnit


def derive_seed(*parts: int) -> int:
    """A 63-bit seed derived from integers (numpy SeedSequence), stable across platforms."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, dtype=np.uint32).astype(
        np.uint64).dot(np.array([1, 2**31], dtype=np.uint64)))


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

    def configs(self) -> list[dict]:
        """Flattened grid, seed varying fastest."""
        Ls = self.pairs or tuple(itertools.product(self.L, self.sigma))
        rows = itertools.product(self.classes, Ls, self.n, range(self.seeds))
        return [dict(function_class=c, L=float(L), sigma=float(s), n=int(n), seed=int(sd))
                for c, (L, s), n, sd in rows]

    @property
    def input_spec(self) -> InputSpec:
        return InputSpec(d=self.d, input_dist=self.input_dist, k=self.k, task_seed=self.task_seed)

    def to_dict(self) -> dict:
        return asdict(self)


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

    def select(self, **where) -> np.ndarray:
        """Indices of configurations matching all ``key=value`` pairs."""
        return np.array([i for i, c in enumerate(self.configs)
                         if all(np.isclose(c[k], v) if isinstance(v, float) else c[k] == v
                                for k, v in where.items())], dtype=int)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SweepResult":
        return cls(**d)


class TaskStream:
    """Per-seed online task streams for a stack of configurations (common random numbers)."""

    def __init__(self, spec: InputSpec, configs: list[dict], classes: list[str], n_draw: int, seeds: list[int],
                 device):
        self.spec, self.n_draw, self.device = spec, n_draw, torch.device(device)
        self.classes = list(classes)
        self.gens = [torch.Generator(device=self.device).manual_seed(s) for s in seeds]
        self.seed_idx = torch.tensor([c["seed"] for c in configs], device=self.device)
        self.cls_idx = torch.tensor([self.classes.index(c["function_class"]) for c in configs], device=self.device)
        self.L = torch.tensor([c["L"] for c in configs], device=self.device)
        self.sigma = torch.tensor([c["sigma"] for c in configs], device=self.device)
        self.n = torch.tensor([c["n"] for c in configs], device=self.device)
        self.shared = len(seeds) == 1

    def sample(self, batch_size: int) -> TaskBatch:
        raws = [draw_raw(self.spec, batch_size, self.n_draw, g, self.device) for g in self.gens]
        if self.shared:
            C = self.seed_idx.numel()
            raw = {k: v.unsqueeze(0).expand(C, *v.shape) for k, v in raws[0].items()}
        else:
            raw = {k: torch.stack([r[k] for r in raws])[self.seed_idx] for k in raws[0]}
        return make_batch(self.spec, raw, self.classes, self.cls_idx, self.L, self.sigma, self.n, self.n_draw)


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else CPU; anything else is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'auto' or 'cpu'")
    return dev


def progress_enabled(progress) -> bool:
    """Progress bars: on when asked, off when asked; ``None`` follows SOFTMAX_ICL_PROGRESS (default on)."""
    if progress is not None:
        return bool(progress)
    return os.environ.get("SOFTMAX_ICL_PROGRESS", "1") not in ("0", "false", "no", "")


def optimise(params: list[torch.Tensor], step_loss: Callable[[], torch.Tensor], steps: int, lr: float,
             log_every: int, snapshot: Callable[[], dict], lr_factor: Callable[[int], float] | None = None,
             progress=None, desc: str = "training") -> tuple[dict, float]:
    """The optimisation loop every batched trainer shares: Adam over stacked parameters.

    ``step_loss()`` samples a fresh batch and returns the per-configuration loss (C,); their *sum* is
    minimised, so no configuration's gradient depends on how many others share the program.
    ``snapshot()`` returns numpy arrays logged at step 0, every ``log_every`` steps and at the end,
    together with each configuration's mean loss since the previous log. ``lr_factor(step)`` scales
    the learning rate of step ``step`` (1-based). Returns the history (``steps``, ``loss``, and the
    snapshot keys, each stacked over log points) and the wall time in seconds.
    """
    opt = torch.optim.Adam(params, lr=lr)
    hist: dict[str, list] = {"steps": [], "loss": []}
    running, since = None, 0

    def log(step):
        nonlocal running, since
        with torch.no_grad():
            for k, v in snapshot().items():
                hist.setdefault(k, []).append(v)
        hist["loss"].append(np.zeros(0) if running is None else (running / max(since, 1)).cpu().numpy().copy())
        hist["steps"].append(step)
        if running is not None:
            running.zero_()
        since = 0

    bar = None
    if progress_enabled(progress):
        from tqdm import tqdm
        bar = tqdm(total=steps, desc=desc, leave=False)
    t0 = time.perf_counter()
    log(0)
    for step in range(1, steps + 1):
        per_config = step_loss()
        opt.zero_grad(set_to_none=True)
        per_config.sum().backward()
        if lr_factor is not None:
            for group in opt.param_groups:
                group["lr"] = lr * lr_factor(step)
        opt.step()
        running = per_config.detach().clone() if running is None else running + per_config.detach()
        since += 1
        if step % log_every == 0 or step == steps:
            log(step)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - t0
    hist["loss"][0] = np.zeros_like(hist["loss"][-1])      # nothing was trained before step 0
    return {k: np.stack(v) if k != "steps" else np.array(v) for k, v in hist.items()}, seconds


def train_sweep(sweep: Sweep, device="auto", configs: list[dict] | None = None, progress=None,
                desc: str = "training") -> SweepResult:
    """Train every configuration of ``sweep`` (or the given subset ``configs``) in one program."""
    dev = resolve_device(device) if isinstance(device, str) else device
    configs = sweep.configs() if configs is None else configs
    n_draw = max(sweep.n)
    data_seeds = [derive_seed(sweep.data_seed, s) for s in range(sweep.seeds)]
    init_seeds = [derive_seed(sweep.init_seed, s) for s in range(sweep.seeds)]
    stream = TaskStream(sweep.input_spec, configs, list(sweep.classes), n_draw, data_seeds, dev)
    unit = AttentionUnit(sweep.model, sweep.param, sweep.d, stream.seed_idx.cpu(), init_seeds, sweep.init_scale, dev)

    def step_loss():
        batch = stream.sample(sweep.batch_size)
        return ((unit(batch) - batch.f_q) ** 2).mean(dim=-1)

    hist, seconds = optimise(list(unit.parameters()), step_loss, sweep.steps, sweep.lr, sweep.log_every,
                             lambda: {"M": unit.matrix().detach().cpu().numpy().copy()}, progress=progress, desc=desc)
    state = {k: v.detach().cpu().numpy() for k, v in unit.state_dict().items()}
    return SweepResult(sweep=sweep.to_dict(), configs=configs, log_steps=hist["steps"], M_history=hist["M"],
                       loss_history=hist["loss"], final_state=state,
                       timings={"train_seconds": seconds, "configs": len(configs), "device": str(dev)})
