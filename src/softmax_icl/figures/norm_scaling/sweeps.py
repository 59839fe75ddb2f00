"""What the norm-scaling figure trains (Collins et al. 2024, Figure 3; Theorem 3.4; covariance lemma).

The batched pretraining programs (one per input distribution / parameterisation / context grid):

* ``iso``: classes x [(L, sigma) for L in L_values] + [(L_sigma, s) for s in sigma_values] x seeds, n fixed;
* ``n``: ReLU x [(L, sigma) for L in n_sweep_L] x n_values x seeds (one task stream per context length);
* ``noniso``: classes x L_values x seeds with the book's non-isotropic inputs;
* ``whitened``: the same with tasks that are functions of the whitened input (the covariance lemma's symmetry);
* ``full``: classes x full_L x seeds with full W_K, W_Q, W_V on raw tokens, trained by :class:`FullWeights`,
  which logs the full weights at every log point (the block-form checks follow them along training);
* ``full_d<d>``: the same full-weight units on ReLU tasks at a further ambient dimension d, one program per d of
  full_more_d (the rebuttal's "varying ambient dimensions");
* ``inner``: classes x L_values x seeds at sigma, n with M_K, M_Q in R^(r x d), r = inner_factor * d (the
  authors' rebuttal on the inner dimension);
* ``t34_d<d>``: ReLU x t34_train_L x seeds at n = t34_train_n, one program per d of t34_d (Theorem 3.4);
* ``dyn_iso``, ``dyn_noniso``: classes x dyn_L x seeds from a small init with a small Adam step (Figure 3's
  dynamics).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...base import optimise, resolve_device
from ...book.run import Run
from ...training import Sweep, SweepProgram, SweepResult

WHITENED_L = (0.1, 0.3, 1.0, 3.0)                    # L of the whitened-task units (subset of L_values)
DYN_SETTINGS = {"iso": "isotropic", "noniso": "nonisotropic"}      # the dynamics panels' input distributions


@dataclass
class FullWeightsResult(SweepResult):
    """A :class:`SweepResult` of full-weight units with their weights at every log point: ``weights_history`` name ->
    (T, C, d+1, d+1) for ``WK``, ``WQ``, ``WV`` (configurations in the order of ``configs``)."""

    weights_history: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FullWeights:
    """The full W_K, W_Q, W_V units of a :class:`Sweep` (``param="full"``), trained as :func:`train_sweep` trains them
    (the same program, data and steps) while logging the three weight matrices at every log point beside ``M``, so the
    block form can be followed along training. Its cache key is the sweep's with ``"log": "full_weights"``."""

    sweep: Sweep

    def to_dict(self) -> dict:
        return {**self.sweep.to_dict(), "log": "full_weights"}

    def train(self, device="auto", desc: str | None = None) -> FullWeightsResult:
        sw = self.sweep
        if sw.param != "full":
            raise ValueError(f"FullWeights trains full-weight units (param='full'); got param={sw.param!r}")
        dev = resolve_device(device) if isinstance(device, str) else device
        prog = SweepProgram(sw, dev)
        unit, back = prog.unit, prog.back_device

        def snapshot() -> dict:
            return {"M": prog.matrices(), **{k: getattr(unit, k).detach()[back] for k in ("WK", "WQ", "WV")}}

        hist, seconds = optimise(list(unit.parameters()), prog.step_loss, sw.steps, sw.lr, sw.log_every, snapshot,
                                 lr_factor=sw.lr_factor(), desc=desc or "full weights", step_tensor=prog.step_t)
        state = {k: v.detach().cpu()[prog.back].numpy() for k, v in unit.state_dict().items()}
        return FullWeightsResult(sweep=sw.to_dict(), configs=prog.configs, log_steps=hist["steps"],
                                 M_history=hist["M"], loss_history=hist["loss"][:, prog.back.numpy()],
                                 final_state=state, timings={"train_seconds": seconds, "configs": len(prog.configs),
                                                             "device": str(dev), "cuda_graph": hist["graph"]},
                                 weights_history={k: np.asarray(hist[k]) for k in ("WK", "WQ", "WV")})


def _sweep(cfg: dict, **kw) -> Sweep:
    base = dict(d=cfg["d"], seeds=cfg["seeds"], steps=cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                data_seed=cfg["data_seed"], init_seed=cfg["init_seed"], log_every=max(1, cfg["steps"] // 50),
                param="KQ")
    base.update(kw)
    return Sweep(**base)


def iso_pairs(cfg: dict) -> tuple:
    pairs = [(L, cfg["sigma"]) for L in cfg["L_values"]]
    pairs += [(cfg["L_sigma"], s) for s in cfg["sigma_values"] if (cfg["L_sigma"], s) not in pairs]
    return tuple(pairs)


def whitened_L(cfg: dict) -> tuple:
    """The L grid of the whitened-task units: the values of ``L_values`` among :data:`WHITENED_L` (all of them when
    fewer than two are)."""
    Ls = tuple(L for L in cfg["L_values"] if L in WHITENED_L)
    return Ls if len(Ls) >= 2 else tuple(cfg["L_values"])


def sweeps(cfg: dict) -> dict[str, Sweep]:
    classes, n, sigma = tuple(cfg["classes"]), (cfg["n"],), (cfg["sigma"],)
    return {
        "iso": _sweep(cfg, classes=classes, pairs=iso_pairs(cfg), n=n),
        "n": _sweep(cfg, classes=("relu",), pairs=tuple((L, cfg["sigma"]) for L in cfg["n_sweep_L"]),
                    n=tuple(cfg["n_values"])),
        "noniso": _sweep(cfg, classes=classes, L=tuple(cfg["L_values"]), sigma=sigma, n=n,
                         input_dist="nonisotropic"),
        "whitened": _sweep(cfg, classes=classes, L=whitened_L(cfg), sigma=sigma, n=n,
                           input_dist="nonisotropic_whitened"),
        "full": _sweep(cfg, classes=classes, L=tuple(cfg["full_L"]), sigma=sigma, n=n, param="full",
                       lr=cfg["lr_full"]),
        # the rebuttal's block form at further ambient dimensions: ReLU, the same L, sigma, n and learning rate
        **{f"full_d{d}": _sweep(cfg, d=d, classes=("relu",), L=tuple(cfg["full_L"]), sigma=sigma, n=n, param="full",
                                lr=cfg["lr_full"]) for d in cfg["full_more_d"]},
        # the rebuttal's inner dimension: the L grid at sigma again, with M_K, M_Q in R^(r x d), r = inner_factor d
        "inner": _sweep(cfg, classes=classes, L=tuple(cfg["L_values"]), sigma=sigma, n=n,
                        inner_dim=cfg["inner_factor"] * cfg["d"]),
        # Theorem 3.4: ReLU units at the largest n the profile affords, one program per d
        **{f"t34_d{d}": _sweep(cfg, d=d, classes=("relu",), L=tuple(cfg["t34_train_L"]), sigma=sigma,
                               n=(cfg["t34_train_n"],)) for d in cfg["t34_d"]},
        # Figure 3's dynamics: small init, small Adam step, dense logs
        **{f"dyn_{key}": _sweep(cfg, classes=classes, L=tuple(cfg["dyn_L"]), sigma=sigma, n=n, lr=cfg["dyn_lr"],
                                init_scale=cfg["dyn_init"], steps=cfg["dyn_steps"],
                                log_every=max(1, cfg["dyn_steps"] // 100), input_dist=dist)
           for key, dist in DYN_SETTINGS.items()},
    }


def train(run: Run) -> dict[str, SweepResult]:
    """Every sweep of the figure, each one batched program, through the cache (the full-weight units, at every d,
    through :class:`FullWeights`, which logs their weights along training)."""
    return {k: run.train(f"train_{k}", FullWeights(s) if is_full(k) else s) for k, s in sweeps(run.cfg).items()}


def is_full(key: str) -> bool:
    """Whether the sweep ``key`` trains full-weight units (``full`` and ``full_d<d>``)."""
    return key == "full" or key.startswith("full_d")
