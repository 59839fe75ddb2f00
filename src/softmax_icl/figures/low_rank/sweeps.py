"""Low rank (Collins et al. 2024, Fig. 4 / Appendix Fig. 10, Theorem 4.4): what is pretrained.

Tasks depend on the input only through a k-dimensional projection: f(x) = g(a^T B^T x) with a fixed orthonormal
B in R^{d x k}, a ~ U^k, and the links g of SPEC 1.3 (linear, affine +2, quadratic, cos(4 .)). One softmax and one
linear unit are pretrained per class and seed (two batched sweeps); their M is logged during pretraining.
"""

from __future__ import annotations

import numpy as np

from ...records import Run
from ...tasks import InputSpec, low_rank_basis
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")


def basis(cfg: dict) -> np.ndarray:
    return low_rank_basis(cfg["d"], cfg["k"], cfg["basis_seed"]).numpy()


def input_spec(cfg: dict) -> InputSpec:
    return InputSpec(d=cfg["d"], k=cfg["k"], task_seed=cfg["basis_seed"])


def sweep_for(cfg: dict, model: str) -> Sweep:
    return Sweep(model=model, classes=tuple(cfg["classes"]), L=(cfg["L"],), sigma=(cfg["sigma"],), n=(cfg["n"],),
                 seeds=cfg["seeds"], d=cfg["d"], k=cfg["k"], param=cfg["param"], steps=cfg["steps"],
                 batch_size=cfg["batch_size"], lr=cfg["lr"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                 task_seed=cfg["basis_seed"], log_every=max(1, cfg["steps"] // cfg["snapshots"]))


def train(run: Run) -> dict[str, SweepResult]:
    """Both sweeps (softmax, linear), each one batched program, through the cache."""
    return {m: run.train(f"train_{m}", sweep_for(run.cfg, m)) for m in MODELS}
