"""Window adaptation (Collins et al. 2024, Figure 1): what is pretrained.

Settings: tasks of two families (the paper's cosine class, and the same tasks less their mean over x) on the
sphere with a small, medium and large Lipschitz constant at noise ``sigma``,
plus a noisier variant at the medium L. For each setting, context length ``n`` and seed a linear unit is pretrained
on each family and a softmax unit on the paper's family (two batched sweeps over family x (L, sigma) x n x seeds):
the softmax unit serves both families, since a per-task constant added to the labels shifts a softmax prediction by
that constant and leaves its loss, gradients and trained M unchanged (the tasks of both families are drawn from the
same numbers: a seed's configurations share one row of draws).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...book.run import Run
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")


@dataclass(frozen=True)
class Setting:
    L: float
    sigma: float

    @property
    def label(self) -> str:
        return f"L = {self.L:g}, σ = {self.sigma:g}"


def settings(cfg: dict) -> list[Setting]:
    small, medium, large = cfg["L_values"]
    return [Setting(small, cfg["sigma"]), Setting(medium, cfg["sigma"]), Setting(large, cfg["sigma"]),
            Setting(medium, cfg["sigma_noisy"])]


def families(cfg: dict) -> tuple[str, str]:
    """The two task families: the paper's (with its random offset) and the zero-mean one."""
    return (cfg["function_class"], cfg["zero_mean_class"])


def trained_families(cfg: dict, model: str) -> tuple[str, ...]:
    """The families a model's units are pretrained on: both for linear attention, the paper's for softmax (its units
    serve the zero-mean family too: :func:`unit_index`)."""
    return families(cfg) if model == "linear" else families(cfg)[:1]


def sweep_for(cfg: dict, model: str) -> Sweep:
    """The sweep of ``model``: its families x settings x ``n_values`` x ``seeds``, logged every ``steps // 50``."""
    pairs = tuple((s.L, s.sigma) for s in settings(cfg))
    return Sweep(model=model, classes=trained_families(cfg, model), pairs=pairs, n=tuple(cfg["n_values"]),
                 seeds=cfg["seeds"], d=cfg["d"], param=cfg["param"], steps=cfg["steps"], batch_size=cfg["batch_size"],
                 lr=cfg["lr"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                 log_every=max(1, cfg["steps"] // 50))


def train(run: Run) -> dict[str, SweepResult]:
    """Both sweeps (softmax, linear), each one batched program, through the cache."""
    return {m: run.train(f"train_{m}", sweep_for(run.cfg, m)) for m in MODELS}


def unit_index(res: SweepResult, s: Setting, n: int, family: str) -> np.ndarray:
    """Positions of the units that serve task family ``family`` at setting ``s`` and context length ``n`` (one per
    seed, in seed order): the family's own units, or, in a sweep trained on one family only (softmax), that family's
    units (the same M on both families)."""
    classes = res.grid.classes
    return res.select(function_class=family if family in classes or len(classes) != 1 else classes[0], L=s.L,
                      sigma=s.sigma, n=n)
