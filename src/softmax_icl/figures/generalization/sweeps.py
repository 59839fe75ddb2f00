"""Generalisation: what is pretrained (Collins et al. 2024, Figure 5 and Theorem 3.5).

One softmax unit for every pretraining class x Lipschitz constant (one batched sweep), and one linear unit per
class at the test L (a second sweep).
"""

from __future__ import annotations

from ...records import Run
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")


def sweep_for(cfg: dict, model: str) -> Sweep:
    """Softmax: every pretraining class x L; linear: every class at the test L (the linear reference)."""
    Ls = tuple(cfg["L_pretrain"]) if model == "softmax" else (cfg["L_test"],)
    return Sweep(model=model, classes=tuple(cfg["pretrain_classes"]), L=Ls, sigma=(cfg["sigma"],),
                 n=(cfg["n_train"],), seeds=cfg["seeds"], d=cfg["d"], param=cfg["param"], steps=cfg["steps"],
                 batch_size=cfg["batch_size"], lr=cfg["lr"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                 log_every=max(1, cfg["steps"] // 50))


def train(run: Run) -> dict[str, SweepResult]:
    """Both sweeps (softmax, linear), each one batched program, through the cache."""
    return {m: run.train(f"train_{m}", sweep_for(run.cfg, m)) for m in MODELS}
