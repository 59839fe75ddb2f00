"""Window adaptation (Collins et al. 2024, Figure 1): what is pretrained.

Settings: tasks of two families (the paper's cosine class, and the same tasks less their mean over x) on the
sphere with a small, medium and large Lipschitz constant at noise ``sigma``,
plus a noisier variant at the medium L. For each setting and each context length ``n`` a softmax and a linear
unit are pretrained (two batched sweeps over L x sigma x n x seeds).
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


def sweep_for(cfg: dict, model: str) -> Sweep:
    pairs = tuple((s.L, s.sigma) for s in settings(cfg))
    return Sweep(model=model, classes=families(cfg), pairs=pairs, n=tuple(cfg["n_values"]), seeds=cfg["seeds"], d=cfg["d"],
                 param=cfg["param"], steps=cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                 data_seed=cfg["data_seed"], init_seed=cfg["init_seed"], log_every=max(1, cfg["steps"] // 50))


def train(run: Run) -> dict[str, SweepResult]:
    """Both sweeps (softmax, linear), each one batched program, through the cache."""
    return {m: run.train(f"train_{m}", sweep_for(run.cfg, m)) for m in MODELS}


def unit_index(res: SweepResult, s: Setting, n: int, family: str) -> np.ndarray:
    """Positions of the units of task family ``family`` and setting ``s`` at context length ``n`` (one per seed)."""
    return res.select(function_class=family, L=s.L, sigma=s.sigma, n=n)
