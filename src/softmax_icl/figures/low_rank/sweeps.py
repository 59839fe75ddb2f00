"""Low rank (Collins et al. 2024, Fig. 4 / Appendix Fig. 10, Theorem 4.4): what is pretrained.

Tasks depend on the input only through a k-dimensional projection: f(x) = g(a^T B^T x) with a fixed orthonormal
B in R^(d x k), a ~ U^k, and the links g (linear, affine +2, quadratic, cos(4 .)). One softmax and one
linear unit are pretrained per class and seed (two batched sweeps); their M is logged during pretraining. A window
sweep trains softmax units on the cosine link cos(omega a^T B^T x) at several omega and noise levels.
"""

from __future__ import annotations

import numpy as np

from ...book.run import Run
from ...tasks import InputSpec, low_rank_basis
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")


def basis(cfg: dict) -> np.ndarray:
    return low_rank_basis(cfg["d"], cfg["k"], cfg["basis_seed"]).numpy()


def input_spec(cfg: dict) -> InputSpec:
    return InputSpec(d=cfg["d"], k=cfg["k"], task_seed=cfg["basis_seed"])


def _common(cfg: dict, steps: int, schedule: str) -> dict:
    return dict(L=(cfg["L"],), seeds=cfg["seeds"], d=cfg["d"], k=cfg["k"], param=cfg["param"], steps=steps,
                batch_size=cfg["batch_size"], lr=cfg["lr"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                task_seed=cfg["basis_seed"], log_every=max(1, steps // cfg["snapshots"]), lr_schedule=schedule)


def sweep_for(cfg: dict, model: str) -> Sweep:
    return Sweep(model=model, classes=tuple(cfg["classes"]), sigma=(cfg["sigma"],), n=(cfg["n"],),
                 **_common(cfg, cfg["steps"], cfg["lr_schedule"]))


def theory_sweep(cfg: dict) -> Sweep:
    """Theorem 4.4 on the linear class: n in {theory_n, n} x sigma in {0, theory_sigma} (softmax)."""
    return Sweep(model="softmax", classes=("lowrank_linear",), sigma=(0.0, cfg["theory_sigma"]),
                 n=(cfg["theory_n"], cfg["n"]), **_common(cfg, cfg["steps"], cfg["lr_schedule"]))


FLOOR_SCHEDULES = ("constant", "cosine")


def floor_sweep(cfg: dict, steps: int, schedule: str) -> Sweep:
    """The rho floor: the linear class at the chapter's n and sigma, trained for ``steps`` with ``schedule``."""
    return Sweep(model="softmax", classes=("lowrank_linear",), sigma=(cfg["sigma"],), n=(cfg["n"],),
                 **_common(cfg, steps, schedule))


def window_settings(cfg: dict) -> tuple:
    """The (L, sigma) settings of the window sweep, as pairs: the cosine link cos(4 L a^T B^T x) has Lipschitz
    constant omega = 4 L. First every omega of ``link_omegas`` at ``link_sigma``, then every sigma of
    ``noise_sigmas`` at ``noise_omega`` (a setting already listed is not repeated)."""
    pairs = [(om / 4.0, cfg["link_sigma"]) for om in cfg["link_omegas"]]
    pairs += [(cfg["noise_omega"] / 4.0, s) for s in cfg["noise_sigmas"]]
    return tuple(dict.fromkeys((float(L), float(s)) for L, s in pairs))


def window_sweep(cfg: dict) -> Sweep:
    """Softmax units on the cosine link at the settings of :func:`window_settings` (the chapter's n, steps, batch
    and learning-rate schedule: nothing tuned for this sweep)."""
    pairs = window_settings(cfg)
    common = {**_common(cfg, cfg["steps"], cfg["lr_schedule"]), "L": tuple(sorted({L for L, _ in pairs}))}
    return Sweep(model="softmax", classes=("lowrank_cosine",), pairs=pairs, n=(cfg["n"],),
                 sigma=tuple(sorted({s for _, s in pairs})), **common)


def train(run: Run) -> dict[str, SweepResult]:
    """The two main sweeps (softmax, linear), the Theorem 4.4 sweep, the window sweep and the rho-floor sweeps (one
    program each), through the cache."""
    cfg = run.cfg
    out = {m: run.train(f"train_{m}", sweep_for(cfg, m)) for m in MODELS}
    out["theory"] = run.train("train_theory", theory_sweep(cfg))
    out["window"] = run.train("train_window", window_sweep(cfg))
    for sch in FLOOR_SCHEDULES:
        for T in cfg["floor_steps"]:
            out[f"floor_{sch}_{T}"] = run.train(f"train_floor_{sch}_{T}", floor_sweep(cfg, T, sch))
    return out
