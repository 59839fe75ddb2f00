"""Generalisation: what is pretrained (Collins et al. 2024, Figure 5 and Theorem 3.5).

* Figure 5: one softmax unit for every pretraining class x Lipschitz constant (one batched sweep), and one linear
  unit per class at the test L (a second sweep), all at the context length ``n_train``.
* Theorem 3.5, quantitatively: softmax units on the theorem's class (ReLU, F_L^+) pretrained at L_test (matched)
  and at the smallest pretraining L (a control), one unit per context length, at the chapter's d and at a larger
  d with longer contexts.
"""

from __future__ import annotations

from ...book.run import Run
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")


def _common(cfg: dict) -> dict:
    return dict(seeds=cfg["seeds"], param=cfg["param"], steps=cfg["steps"], batch_size=cfg["batch_size"],
                lr=cfg["lr"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                log_every=max(1, cfg["steps"] // 50), init_identity=cfg["init_identity"],
                lr_schedule=cfg["lr_schedule"])


def sweep_for(cfg: dict, model: str) -> Sweep:
    """Softmax: every pretraining class x L; linear: every class at the test L (the linear reference)."""
    Ls = tuple(cfg["L_pretrain"]) if model == "softmax" else (cfg["L_test"],)
    return Sweep(model=model, classes=tuple(cfg["pretrain_classes"]), L=Ls, sigma=(cfg["sigma"],),
                 n=(cfg["n_train"],), d=cfg["d"], **_common(cfg))


def theory_dims(cfg: dict) -> list[tuple[int, list[int]]]:
    """(d, context lengths) of the Theorem 3.5 sweeps."""
    out = [(cfg["d"], list(cfg["theory_n"]))]
    if cfg["large_d"]:
        out.append((cfg["large_d"], list(cfg["large_d_n"])))
    return out


def theory_sweep(cfg: dict, d: int, ns: list[int]) -> Sweep:
    """Theorem 3.5's class at the matched L (L_test) and the smallest pretraining L, one unit per n and seed."""
    return Sweep(model="softmax", classes=(cfg["theory_class"],), L=(cfg["L_pretrain"][0], cfg["L_test"]),
                 sigma=(cfg["sigma"],), n=tuple(ns), d=d, **_common(cfg))


def train(run: Run) -> dict[str, SweepResult]:
    """The sweeps (softmax, linear, and one per dimension of the Theorem 3.5 checks), each one batched program,
    through the cache."""
    out = {m: run.train(f"train_{m}", sweep_for(run.cfg, m)) for m in MODELS}
    for d, ns in theory_dims(run.cfg):
        out[f"theory_d{d}"] = run.train(f"train_theory_d{d}", theory_sweep(run.cfg, d, ns))
    return out
