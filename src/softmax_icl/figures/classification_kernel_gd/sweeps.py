"""What the classification chapter trains and searches (each cached).

Five batched training programs, every reading and tau a stacked configuration of one program:

* ``main``: softmax and linear units in the main setting (uniform task, C, d, n_main), weights logged through
  training: alignment with the GD steps (paper Figs 4-5) and the learned hyperparameters;
* ``readings_n<n>``: both models x {uniform, balanced, clustered at every tau} x seeds, one program per n of n_values
  (so short contexts are not padded to the longest): softmax >= linear per reading and the tau x n map;
* ``extras``: both models on the local task and the subspace task at n_main (beyond the papers; kernel shape);
* ``shapes``: both models on the uniform task at n_main for other C and d;
* ``mixture``: softmax, linear (1/n) and unnormalised linear units trained over a mixture of context lengths on the
  uniform task and on the clustered task at mix_tau.

The GD steps' hyperparameters are searched per (task, n) on fresh contexts (one batched search per task and
algorithm over every n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...base import Progress
from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run

MODELS = cmodels.MODELS
MIX_MODELS = ("softmax", "linear", "linear_sum")
ALG = calg.MODEL_ALGORITHM                                    # model -> the algorithm it is compared with
#: The wrong counterpart of each model (the controls of the model-to-algorithm checks).
CONTROL_ALG = {"linear": "kernel_gd", "softmax": "gd"}
ALG_LABEL = {"gd": "one GD step", "kernel_gd": "kernel GD (exp kernel, adaptive rate)",
             "exp_fixed": "exp kernel, fixed rate", "linear_norm": "linear kernel, adaptive rate"}
ETA_GRID = np.geomspace(1.0, 1000.0, 61)


def uniform_task() -> tuple:
    return ctasks.task_spec("uniform")


def reading_tasks(cfg: dict) -> tuple:
    """The readings of the paper's task compared across n: uniform, balanced, clustered at every tau."""
    return (uniform_task(), ctasks.task_spec("balanced")) + tuple(ctasks.task_spec("clustered", tau=t)
                                                                  for t in cfg["taus"])


def extra_tasks(cfg: dict) -> tuple:
    """The local task (beyond the papers) and the subspace task (kernel shape), at n_main."""
    return (ctasks.task_spec("uniform", P=cfg["local_prototypes"]), ctasks.task_spec("subspace", k=cfg["subspace_k"]))


def mixture_tasks(cfg: dict) -> tuple:
    return (uniform_task(), ctasks.task_spec("clustered", tau=cfg["mix_tau"]))


def label(task: tuple) -> str:
    return ctasks.task_label(*task)


def task_of(c: dict) -> tuple:
    return ctasks.task_spec(c["reading"], c["P"], c["tau"], c["k"])


def sweeps(cfg: dict) -> dict[str, cmodels.ClsSweep]:
    C, d = cfg["C"], cfg["d"]
    common = dict(batch_size=cfg["batch_size"], lr=cfg["lr"], init_scale=cfg["init_scale"], data_seed=cfg["data_seed"],
                  init_seed=cfg["init_seed"], seeds=cfg["seeds"])
    shapes = tuple([(c, d) for c in cfg["shape_C"]] + [(C, dd) for dd in cfg["shape_d"]])
    lo, hi = cfg["mix_lengths"]
    every = max(1, cfg["steps"] // 10)
    return {
        "main": cmodels.ClsSweep(tasks=(uniform_task(),), shapes=((C, d),), n=(cfg["n_main"],),
                                 steps=cfg["steps_main"], log_every=max(1, cfg["steps_main"] // 25), **common),
        # one program per n (a short context is not padded to the longest one); readings and taus are stacked
        **{f"readings_n{n}": cmodels.ClsSweep(tasks=reading_tasks(cfg), shapes=((C, d),), n=(n,), steps=cfg["steps"],
                                              log_every=every, **common) for n in cfg["n_values"]},
        "extras": cmodels.ClsSweep(tasks=extra_tasks(cfg), shapes=((C, d),), n=(cfg["n_main"],),
                                   steps=cfg["steps"], log_every=every, **common),
        "shapes": cmodels.ClsSweep(tasks=(uniform_task(),), shapes=shapes, n=(cfg["n_main"],), steps=cfg["steps"],
                                   log_every=every, **common),
        "mixture": cmodels.ClsSweep(models=MIX_MODELS, tasks=mixture_tasks(cfg), shapes=((C, d),), n=(hi,), n_min=lo,
                                    steps=cfg["steps"], log_every=every, **common),
    }


def train(run: Run) -> dict[str, cmodels.ClsResult]:
    """The training programs, through the cache."""
    out = {}
    for tag, sw in sweeps(run.cfg).items():
        out[tag] = run.train(f"train_{tag}", sw, desc=f"train {tag}")
    return out


# -- hyperparameter search ------------------------------------------------------------------------

@dataclass(frozen=True)
class Searched:
    """One algorithm's searched hyperparameters per setting (S,), and its CE profile over the beta grid (S, G)."""

    beta: np.ndarray
    rate: np.ndarray
    ce: np.ndarray
    grid: np.ndarray
    grid_ce: np.ndarray
    grid_rate: np.ndarray


@dataclass(frozen=True)
class Search:
    """Searched hyperparameters of every algorithm at every (task, n) setting."""

    settings: tuple                      # (task, n) pairs
    algs: dict                           # algorithm name -> Searched
    gd_eta_profile: np.ndarray           # (S, len(ETA_GRID)): CE of the GD step along ETA_GRID

    def index(self, task: tuple, n: int) -> int:
        return self.settings.index((tuple(task), int(n)))


def search_settings(cfg: dict) -> tuple:
    ns = sorted(set(cfg["n_values"]) | {cfg["n_main"]})
    return tuple((t, n) for t in reading_tasks(cfg) for n in ns) + tuple((t, cfg["n_main"]) for t in extra_tasks(cfg))


def setting_dict(cfg: dict, task: tuple, n: int) -> dict:
    return dict(reading=task[0], P=task[1], tau=task[2], k=task[3], C=cfg["C"], d=cfg["d"], n=n)


def dims(cfg: dict) -> tuple:
    return (max(max(cfg["n_values"]), cfg["n_main"]), cfg["C"], cfg["local_prototypes"], cfg["d"])


def at_lengths(batch: ctasks.ClsBatch, ns) -> ctasks.ClsBatch:
    """One task's contexts (K = 1) stacked once per length in ``ns``, each read at its length."""
    N, n_ctx = len(ns), batch.x_ctx.shape[2]
    ex = lambda t: None if t is None else t.expand(N, *t.shape[1:])  # noqa: E731
    mask = np.arange(n_ctx)[None, None, :] < np.asarray(ns)[:, None, None]
    return ctasks.ClsBatch(ex(batch.x_ctx), ex(batch.y_ctx), ex(batch.x_q), ex(batch.label_q), ex(batch.label_ctx),
                           torch.as_tensor(mask, device=batch.x_ctx.device), ex(batch.class_mask), ex(batch.protos))


def search(run: Run) -> Search:
    """Searched (beta, rate) of every algorithm at every setting; CE profiles for the plots."""
    cfg = run.cfg
    sets = search_settings(cfg)

    def compute():
        tasks = list(dict.fromkeys(t for t, _ in sets))
        parts = {name: [] for name in calg.ALGORITHMS}
        order, profiles = [], []
        bar = Progress(len(sets) * len(calg.ALGORITHMS), "search")
        try:
            for task in tasks:                              # one task's contexts, drawn once at its longest n
                ns = [n for t, n in sets if t == task]
                one = ctasks.fixed_batch([setting_dict(cfg, task, max(ns))], dims(cfg), cfg["search_seed"],
                                         cfg["search_contexts"], run.device)
                for n in ns:                                # each n reads their first n points (no padding to compute)
                    batch = ctasks.prefix(one, n)
                    for name in calg.ALGORITHMS:
                        parts[name].append(calg.search_hyperparameters(name, batch))
                        bar.update(sum(len(p) for p in parts.values()))
                    z = calg.algorithm_features_grid("gd", batch, [0.0])[0, 0]                      # (B, C)
                    profiles.append([float(cmetrics.masked_ce(e * z, batch.label_q[0]).mean()) for e in ETA_GRID])
                    order.append((task, n))
        finally:
            bar.close()
        perm = [order.index(s) for s in sets]
        algs = {}
        for name, ps in parts.items():
            cat = {k: np.concatenate([p[k] for p in ps])[perm] for k in ("beta", "rate", "ce")}
            algs[name] = Searched(grid=ps[0]["grid"], grid_ce=np.concatenate([p["grid_ce"] for p in ps])[perm],
                                  grid_rate=np.concatenate([p["grid_rate"] for p in ps])[perm], **cat)
        return Search(settings=sets, algs=algs, gd_eta_profile=np.array(profiles)[perm])

    key = {k: cfg[k] for k in ("C", "d", "n_main", "local_prototypes", "n_values", "taus", "subspace_k",
                               "search_contexts", "search_seed")}
    return run.cached("search", key, compute)
