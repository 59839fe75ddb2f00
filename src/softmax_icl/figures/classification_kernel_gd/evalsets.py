"""The chapter's fixed evaluation sets: one batch of contexts per distinct (task, C, d) of a training programme, drawn
from ``eval_seed`` (every unit of every seed meets the same contexts, so units compared on one seed are paired)."""

from __future__ import annotations

import numpy as np
import torch

from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run
from .sweeps import task_of


def tensor(x, run: Run) -> torch.Tensor:
    """``x`` as a float32 tensor on the run's device."""
    return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=run.device)


def setting_key(c: dict) -> tuple:
    """A configuration's evaluation setting: (task, C, d)."""
    return (task_of(c), c["C"], c["d"])


def eval_batch(run: Run, res: cmodels.ClsResult, n_max: int | None = None, contexts: int | None = None):
    """One fixed evaluation batch per distinct (task, C, d) of a programme, at its padded sizes (or with ``n_max``
    context slots): the evaluation set, or its first ``contexts`` contexts. Returns the settings (S,) and the batch
    (S, B, ...)."""
    cfg = run.cfg
    keys = list(dict.fromkeys(setting_key(c) for c in res.configs))
    dims = tuple(res.dims)
    if n_max is not None:
        dims = (n_max,) + dims[1:]
    sets = [dict(reading=t[0], P=t[1], tau=t[2], k=t[3], C=C, d=d, n=dims[0]) for t, C, d in keys]
    return keys, ctasks.fixed_batch(sets, dims, cfg["eval_seed"], contexts or cfg["eval_contexts"], run.device)
