"""What the classification chapter trains and searches: the three batched training programs and the GD steps'
hyperparameter search (each cached)."""

from __future__ import annotations

import numpy as np

from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...records import Run


MODELS = cmodels.MODELS
ALG = calg.MODEL_ALGORITHM                                    # model -> the algorithm it is compared with


ALG_LABEL = {"gd": "one GD step", "kernel_gd": "kernel GD (exp kernel, adaptive rate)",
             "exp_fixed": "exp kernel, fixed rate", "linear_norm": "linear kernel, adaptive rate"}


def task_name(P: int) -> str:
    return "paper's task (P = 1)" if P == 1 else f"local task (P = {P})"


def sweeps(cfg: dict) -> dict[str, cmodels.ClsSweep]:
    C, d = cfg["C"], cfg["d"]
    common = dict(batch_size=cfg["batch_size"], lr=cfg["lr"], init_scale=cfg["init_scale"], data_seed=cfg["data_seed"],
                  init_seed=cfg["init_seed"])
    shapes = tuple([(c, d) for c in cfg["shape_C"]] + [(C, dd) for dd in cfg["shape_d"]])
    return {
        "main": cmodels.ClsSweep(prototypes=(1,), shapes=((C, d),), n=(cfg["n_main"],), seeds=cfg["seeds"],
                            steps=cfg["steps_main"], log_every=max(1, cfg["steps_main"] // 25), **common),
        "context": cmodels.ClsSweep(prototypes=(1, cfg["local_prototypes"]), shapes=((C, d),), n=tuple(cfg["n_values"]),
                               seeds=cfg["sweep_seeds"], steps=cfg["steps"], log_every=max(1, cfg["steps"] // 10),
                               **common),
        "shapes": cmodels.ClsSweep(prototypes=(1,), shapes=shapes, n=(cfg["n_main"],), seeds=cfg["sweep_seeds"],
                              steps=cfg["steps"], log_every=max(1, cfg["steps"] // 10), **common),
    }


def train(run: Run) -> dict[str, cmodels.ClsResult]:
    """The three training programs, through the cache."""
    out = {}
    for tag, sw in sweeps(run.cfg).items():
        out[tag] = run.cached(f"train_{tag}", sw.to_dict(),
                              lambda sw=sw, tag=tag: cmodels.train_cls_sweep(sw, run.device, desc=f"train {tag}"))
    return out


def settings(cfg: dict) -> list[dict]:
    """(task, n) settings of the search and evaluation sets: both tasks x n_values, plus the main setting."""
    ns = sorted(set(cfg["n_values"]) | {cfg["n_main"]})
    return [dict(C=cfg["C"], P=P, d=cfg["d"], n=n) for P in (1, cfg["local_prototypes"]) for n in ns]


def _dims(cfg: dict) -> tuple:
    return (max(max(cfg["n_values"]), cfg["n_main"]), cfg["C"], cfg["local_prototypes"], cfg["d"])


def _setting_index(sets: list[dict], c: dict) -> int:
    return next(i for i, s in enumerate(sets) if (s["P"], s["n"], s["C"], s["d"]) == (c["P"], c["n"], c["C"], c["d"]))


ETA_GRID = np.geomspace(1.0, 1000.0, 61)


def search(run: Run) -> dict:
    """Searched (beta, rate) of every algorithm at every setting; CE profiles for the plots."""
    cfg = run.cfg
    sets = settings(cfg)

    def compute():
        # one setting at a time (memory); each draws the same raw contexts as a joint draw would
        parts = []
        for s in sets:
            batch = ctasks.fixed_batch([s], _dims(cfg), cfg["search_seed"], cfg["search_contexts"], run.device)
            part = {name: calg.search_hyperparameters(name, batch) for name in calg.ALGORITHMS}
            # CE of the GD step along an eta grid (for the plot of the search)
            z = calg.algorithm_features_grid("gd", batch, [0.0])[:, 0]                       # (1, B, C)
            part["gd_eta_profile"] = np.array([float(cmetrics.masked_ce(e * z, batch.label_q).mean()) for e in ETA_GRID])
            parts.append(part)
        out = {"settings": sets, "gd_eta_profile": np.stack([p["gd_eta_profile"] for p in parts])}
        for name in calg.ALGORITHMS:
            out[name] = {k: (parts[0][name][k] if k == "grid" else np.concatenate([p[name][k] for p in parts]))
                         for k in parts[0][name]}
        return out

    key = {k: cfg[k] for k in ("C", "d", "n_main", "local_prototypes", "n_values", "search_contexts", "search_seed")}
    return run.cached("search", key, compute)
