"""Collins et al.'s expectation for classification, trained: does the softmax unit's kernel widen with the label noise
and narrow as the labels change over shorter distances?

Their rebuttal expects that "the optimal attention weights will again scale with the label noise level and inversely
with the Lipschitzness of the labels". The chapter's clustered readings cannot test it: a larger spread tau makes the
labels noisier and brings the classes closer together at once, and the two predict opposite moves. Two programmes of
softmax units at the main setting (C, d, n_main) move one at a time, each cached:

* ``noise``: the uniform argmax task with every label (context and query) replaced, with probability ``p`` of the
  ``label_noise`` grid, by another class drawn uniformly (:class:`LabelNoise`, a process of one's own, on the
  PyTorch path): the class geometry is fixed, the noise grows;
* ``lipschitz``: the uniform task with ``P`` prototypes per class for ``P`` in ``prototypes`` (no label noise): the
  more prototypes, the closer the cells of different classes, so the labels change over shorter distances (the
  rebuttal's suggested notion, the inverse of the smallest divergence between differently labelled clusters, grows
  with ``P`` too).

The chapter's claims module reads off every unit its learned kernel scale beta = tr((W_K^T W_Q)_xx) / d (the inverse
width of its window) at every logged step.
"""

from __future__ import annotations

import torch

from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run


class LabelNoise(ctasks.ContextProcess):
    """The uniform argmax task (class vectors and inputs uniform on the sphere, label argmax_k c_k^T x) with each
    label replaced, with probability ``flip``, by one of the other C - 1 classes drawn uniformly."""

    description = "uniform argmax task with label noise"

    def __init__(self, flip: float):
        if not 0.0 <= float(flip) < 1.0:
            raise ValueError(f"flip must lie in [0, 1), got {flip!r}")
        self.flip = float(flip)
        self.name = f"uniform-label-noise-{self.flip:g}"

    def __call__(self, gen: torch.Generator, contexts: int, n: int, C: int, d: int):
        unit = torch.nn.functional.normalize
        c = unit(torch.randn(contexts, C, d, generator=gen, dtype=torch.float64), dim=-1)
        x = unit(torch.randn(contexts, n + 1, d, generator=gen, dtype=torch.float64), dim=-1)
        labels = torch.einsum("bnd,bkd->bnk", x, c).argmax(-1)
        flip = torch.rand(contexts, n + 1, generator=gen, dtype=torch.float64) < self.flip
        other = (labels + torch.randint(1, C, (contexts, n + 1), generator=gen)) % C
        return x.float(), torch.where(flip, other, labels)


#: The two programmes: their axis parameter and the axis in words.
AXES = {"noise": ("label_noise", "label-flip probability p"),
        "lipschitz": ("prototypes", "prototypes per class P")}


def sweeps(cfg: dict) -> dict[str, cmodels.ClsSweep]:
    common = dict(models=("softmax",), shapes=((cfg["C"], cfg["d"]),), n=(cfg["n_main"],), steps=cfg["steps"],
                  log_every=max(1, cfg["steps"] // 10), batch_size=cfg["batch_size"], lr=cfg["lr"],
                  init_scale=cfg["init_scale"], data_seed=cfg["data_seed"], init_seed=cfg["init_seed"],
                  seeds=cfg["seeds"])
    return {"noise": cmodels.ClsSweep(tasks=tuple(LabelNoise(p) for p in cfg["label_noise"]), **common),
            "lipschitz": cmodels.ClsSweep(tasks=tuple(ctasks.task_spec("uniform", P=P) for P in cfg["prototypes"]),
                                          **common)}


def train(run: Run) -> dict[str, cmodels.ClsResult]:
    """Both programmes, through the cache."""
    return {tag: run.train(f"train_{tag}", sw, desc=f"train {tag}") for tag, sw in sweeps(run.cfg).items()}
