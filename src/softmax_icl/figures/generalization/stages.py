"""Generalisation (Collins et al. 2024, Figure 5 and Theorem 3.5): compute, plots and claim checks.

One softmax unit is pretrained for every pretraining class x Lipschitz constant (one batched sweep), and one
linear unit per class at the test L (a second sweep). Every unit is then tested on every class at the test L
and at every test context length. Panel (a): units pretrained at the test L, one curve per pretraining class,
per test class. Panel (b): units pretrained on the mismatch class at a too small and a too large L, next to the
matched reference unit, tested on the mismatch class.

The errors at all test context lengths come from one pass over the evaluation set (:func:`softmax_icl.metrics.icl_error_grid`): the
context is drawn at the largest n, every shorter context is a prefix, and the scores of every unit are computed
once and shared by all test classes and context lengths. These are the tasks :func:`softmax_icl.metrics.icl_error` draws with the same
seed at n = max(n_test) (a test checks the two agree).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...baselines import nadaraya_watson_oracle
from ...metrics import icl_error_grid, spectral_norm
from ...plotting import MODEL_COLORS
from ...records import Run, fmt
from ...tasks import InputSpec
from ...training import Sweep, SweepResult

MODELS = ("softmax", "linear")
#: Nadaraya-Watson bandwidths M = w I scanned for the oracle (tuned per test class and n).
ORACLE_W_GRID = tuple(np.round(np.geomspace(0.1, 1000.0, 24), 6))
#: Signed bandwidths M = w I along which the pretraining loss of the mismatch class is scanned.
LANDSCAPE_W = tuple(np.round(np.concatenate([-np.geomspace(100.0, 0.1, 13), [0.0], np.geomspace(0.1, 1000.0, 17)]), 6))
#: Claim thresholds (stated before the runs; see the notebook's text for why).
SPREAD_TOLERANCE = 0.25       # (a): max relative spread across pretraining classes, every test class and n
MISMATCH_FACTOR = 2.0         # (b): a mismatched-L unit's error over the matched unit's, at n = n_train
BIAS_SLOPE = -0.3             # log-log slope of error vs test n above which the error is bias-dominated
NOISE_SLOPE = -0.7            # ... below which it is noise-dominated (a fixed window: variance ~ 1/n)


# -- evaluation --------------------------------------------------------------------------------

def loglog_slope(ns, err) -> np.ndarray:
    """Least-squares slope of log(err) against log(n) along the last axis."""
    x = np.log(np.asarray(ns, dtype=np.float64))
    y = np.log(np.asarray(err, dtype=np.float64))
    xc = x - x.mean()
    return ((y - y.mean(-1, keepdims=True)) * xc).sum(-1) / (xc**2).sum()


# -- training ----------------------------------------------------------------------------------

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


# -- analysis ----------------------------------------------------------------------------------

def analyse(run: Run, results: dict[str, SweepResult]) -> dict:
    """ICL errors of every unit on every test class and n, the linear and oracle references, window sizes."""
    cfg = run.cfg
    spec = InputSpec(d=cfg["d"])
    classes, Ls, ns = cfg["pretrain_classes"], cfg["L_pretrain"], cfg["n_test"]
    tests = [dict(function_class=c, L=cfg["L_test"], sigma=cfg["sigma"]) for c in classes]
    w_grid = np.asarray(ORACLE_W_GRID)

    def evaluate():
        kw = dict(spec=spec, device=run.device)
        out = {}
        for m in MODELS:
            out[m], out[f"{m}_se"] = icl_error_grid(m, results[m].M, tests, ns, n_tasks=cfg["eval_tasks"],
                                                 eval_seed=cfg["eval_seed"], **kw)
        out["oracle_w"], out["oracle"], _ = nadaraya_watson_oracle(
            tests, ns, spec, w_grid, n_tune=min(4096, cfg["eval_tasks"]), n_eval=cfg["eval_tasks"],
            tune_seed=cfg["eval_seed"] + 100, eval_seed=cfg["eval_seed"], device=run.device)
        # the pretraining objective of the mismatch class along M = w I (w of either sign), at every pretraining L
        pre = [dict(function_class=cfg["mismatch_class"], L=L, sigma=cfg["sigma"]) for L in Ls]
        land, _ = icl_error_grid("softmax", np.asarray(LANDSCAPE_W)[:, None, None] * np.eye(cfg["d"]), pre,
                              [cfg["n_train"]], n_tasks=min(4096, cfg["eval_tasks"]), eval_seed=cfg["eval_seed"] + 200,
                              **kw)
        out["landscape"] = land[..., 0].T                                         # (nL, W)
        return out

    key = {"layout": 3, "train": {m: results[m].sweep for m in MODELS}, "tests": tests, "n_test": ns,
           "eval_tasks": cfg["eval_tasks"], "eval_seed": cfg["eval_seed"], "w_grid": list(ORACLE_W_GRID)}
    ev = run.cached("evaluate", key, evaluate)
    soft, lin = results["softmax"], results["linear"]
    # arrange by (pretraining class, L, seed): selection by value, not by position in the sweep
    a = {"classes": classes, "L": Ls, "n": ns, "tests": tests, "n_train": cfg["n_train"], "L_test": cfg["L_test"]}
    a["softmax"] = np.stack([np.stack([ev["softmax"][soft.select(function_class=c, L=L)] for L in Ls])
                             for c in classes])                                   # (P, nL, S, T, N)
    a["linear"] = np.stack([ev["linear"][lin.select(function_class=c)] for c in classes])   # (P, S, T, N)
    a["oracle"], a["oracle_w"] = ev["oracle"], ev["oracle_w"]                     # (T, N)
    a["M_norm"] = np.stack([np.stack([spectral_norm(soft.M[soft.select(function_class=c, L=L)]) for L in Ls])
                            for c in classes])                                    # (P, nL, S)
    a["M_norm_history"] = np.stack([np.stack([spectral_norm(soft.M_history[:, soft.select(function_class=c, L=L)])
                                              for L in Ls]) for c in classes])    # (P, nL, T, S)
    a["log_steps"] = soft.log_steps
    # signed bandwidth of each unit, tr(M) / d: negative = the unit attends away from the query
    a["w_signed"] = np.stack([np.stack([np.trace(soft.M[soft.select(function_class=c, L=L)], axis1=-2, axis2=-1)
                                        for L in Ls]) for c in classes]) / cfg["d"]   # (P, nL, S)
    a["landscape"], a["landscape_w"] = ev["landscape"], np.asarray(LANDSCAPE_W)
    return a


def _i(seq, v) -> int:
    return int(np.argmin([abs(float(x) - float(v)) for x in seq])) if not isinstance(v, str) else list(seq).index(v)


def check_claims(run: Run, a: dict) -> None:
    """The figure's claims, each computed from the data with a stated threshold."""
    cfg = run.cfg
    classes, Ls, ns = a["classes"], a["L"], np.array(a["n"])
    lt, j_tr = _i(Ls, a["L_test"]), _i(ns, a["n_train"])
    err = a["softmax"].mean(2)                                                # (P, nL, T, N)
    # (a) matched L: the curves coincide whatever the pretraining class
    matched = err[:, lt]                                                      # (P, T, N)
    spread = (matched.max(0) - matched.min(0)) / matched.min(0)               # (T, N)
    run.check("matched-L-curves-coincide",
              f"max relative spread (max-min)/min of ICL error across pretraining classes at L = {a['L_test']:g}, "
              f"over test classes and n = {ns[0]}..{ns[-1]}", spread.max(), spread.max() <= SPREAD_TOLERANCE,
              f"<= {SPREAD_TOLERANCE}")
    # (b) mismatched L: higher error on both sides, at the pretraining context length
    t = _i(classes, cfg["mismatch_class"])
    p_mis, p_ref = _i(classes, cfg["mismatch_class"]), _i(classes, cfg["reference_class"])
    ref = err[p_ref, lt, t, j_tr]
    low, high = err[p_mis, 0, t, j_tr] / ref, err[p_mis, -1, t, j_tr] / ref
    for name, val, L in (("small", low, Ls[0]), ("large", high, Ls[-1])):
        run.check(f"mismatched-L-{name}-worse",
                  f"ICL error on {cfg['mismatch_class']} L = {a['L_test']:g} (n = {a['n_train']}) of the "
                  f"{cfg['mismatch_class']} unit pretrained at L = {L:g} over the {cfg['reference_class']} unit "
                  f"pretrained at L = {a['L_test']:g}", val, val > MISMATCH_FACTOR, f"> {MISMATCH_FACTOR:g}")
    # Theorem 3.5's two regimes: too small L -> wide window, bias-dominated (more context does not help);
    # too large L -> narrow window, noise-dominated (error falls like 1/n as the context grows)
    far = ns >= a["n_train"] / 2
    if far.sum() < 2:
        far = np.arange(len(ns)) >= len(ns) - 2
    slope = loglog_slope(ns[far], err[:, :, t][..., far])                     # (P, nL)
    run.check("small-L-bias-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} unit "
              f"pretrained at L = {Ls[0]:g} (matched unit: {slope[p_ref, lt]:.2f})", slope[p_mis, 0],
              slope[p_mis, 0] > BIAS_SLOPE, f"> {BIAS_SLOPE:g} (error flat in n)")
    run.check("large-L-noise-dominated",
              f"log-log slope of ICL error vs test n (n = {ns[far][0]}..{ns[far][-1]}) of the {cfg['mismatch_class']} unit "
              f"pretrained at L = {Ls[-1]:g}", slope[p_mis, -1], slope[p_mis, -1] < NOISE_SLOPE,
              f"< {NOISE_SLOPE:g} (error falls nearly like 1/n)")
    # the mechanism: the learned window narrows (||M|| grows) with the pretraining L, in every seed
    norms = a["M_norm"][p_mis]                                                # (nL, S)
    increasing = bool(np.all(np.diff(norms, axis=0) > 0))
    run.check("window-set-by-pretraining-L",
              f"||M||_2 of the {cfg['mismatch_class']} units at L = {', '.join(f'{L:g}' for L in Ls)}",
              norms.mean(1), increasing, "strictly increasing in L, in every seed")
    # key numbers
    mis_all = err[:, :, t, j_tr] / ref                                        # every class's mismatch factors
    run.record(seeds_with_negative_window=(a["w_signed"] < 0).sum(-1), w_signed=a["w_signed"],
               spread_by_test_class_and_n=spread, matched_error_at_n_train=matched[:, :, j_tr],
               mismatch_factor_all_classes=mis_all, slope=slope, M_norm=a["M_norm"].mean(-1),
               softmax_over_oracle_at_n_train=matched[:, :, j_tr] / a["oracle"][None, :, j_tr],
               linear_error_at_n_train=a["linear"].mean(1)[:, :, j_tr], oracle_error=a["oracle"],
               oracle_w=a["oracle_w"], classes=classes, L=Ls, n=list(map(int, ns)))


def key_numbers_table(a: dict) -> str:
    """Rounded numbers behind the claims (stable for nbval)."""
    classes, Ls, ns = a["classes"], a["L"], a["n"]
    j_tr = _i(ns, a["n_train"])
    err = a["softmax"].mean(2)
    lines = [f"ICL error at n = {a['n_train']} (pretraining n), test L = {a['L_test']:g}; ||M||_2 = learned inverse "
             "window; w<0 = seeds with tr(M) < 0",
             f"{'pretraining':<18}{'||M||':>8}{'w<0':>5}  " + "".join(f"{'test ' + c:>15}" for c in classes)]
    for p, c in enumerate(classes):
        for li, L in enumerate(Ls):
            lines.append(f"{c + ' L=' + format(L, 'g'):<18}{fmt(a['M_norm'][p, li].mean()):>8}"
                         f"{int((a['w_signed'][p, li] < 0).sum()):>5}  "
                         + "".join(f"{fmt(err[p, li, t, j_tr]):>15}" for t in range(len(classes))))
    lines.append(f"{'linear (matched)':<18}{'':>13}  " + "".join(f"{fmt(a['linear'].mean(1)[t, t, j_tr]):>15}"
                                                              for t in range(len(classes))))
    lines.append(f"{'NW oracle':<18}{'':>13}  " + "".join(f"{fmt(a['oracle'][t, j_tr]):>15}"
                                                       for t in range(len(classes))))
    return "\n".join(lines)


# -- plots --------------------------------------------------------------------------------------

CLASS_COLORS = {"affine": "#0072b2", "relu": "#e69f00", "cosine": "#009e73"}
L_STYLES = {0: (":", "v"), 1: ("-", "o"), 2: ("--", "s")}


def _band(ax, ns, e, color, **kw):
    ax.plot(ns, e.mean(0), color=color, **kw)
    if e.shape[0] > 1:
        ax.fill_between(ns, e.min(0), e.max(0), color=color, alpha=0.18, lw=0)


def _refs(ax, a, t):
    ns = a["n"]
    ax.plot(ns, a["linear"][t, :, t].mean(0), color=MODEL_COLORS["linear"], ls="-.", lw=1.2,
            label="linear attention (matched)")
    ax.plot(ns, a["oracle"][t], color="k", ls="--", lw=1, label="best-bandwidth NW")
    ax.axvline(a["n_train"], color="0.6", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="test context length n", ylabel="ICL error (MSE)")
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()


def plot_figure(run: Run, a: dict):
    """Panel (a): one axis per test class; panel (b): L mismatch on the mismatch class."""
    cfg = run.cfg
    classes, Ls = a["classes"], a["L"]
    lt = _i(Ls, a["L_test"])
    fig, axes = plt.subplots(1, len(classes) + 1, figsize=(3.3 * (len(classes) + 1), 3.5), sharey=True)
    for t, tc in enumerate(classes):
        ax = axes[t]
        for p, pc in enumerate(classes):
            _band(ax, a["n"], a["softmax"][p, lt, :, t], CLASS_COLORS.get(pc, None), marker="o", ms=3,
                  label=f"pretrained on {pc}")
        _refs(ax, a, t)
        ax.set_title(f"(a) test: {tc}, L = {a['L_test']:g}")
    ax = axes[-1]
    t = _i(classes, cfg["mismatch_class"])
    p_ref, p_mis = _i(classes, cfg["reference_class"]), _i(classes, cfg["mismatch_class"])
    _band(ax, a["n"], a["softmax"][p_ref, lt, :, t], CLASS_COLORS.get(cfg["reference_class"]), marker="o", ms=3,
          label=f"{cfg['reference_class']}, L = {a['L_test']:g}")
    colors = plt.cm.plasma(np.linspace(0.1, 0.75, len(Ls)))
    for li, L in enumerate(Ls):
        if li == lt:
            continue
        _band(ax, a["n"], a["softmax"][p_mis, li, :, t], colors[li], marker="s", ms=3,
              label=f"{cfg['mismatch_class']}, L = {L:g}")
    _refs(ax, a, t)
    ax.set_title(f"(b) test: {cfg['mismatch_class']}, L = {a['L_test']:g}")
    axes[0].legend(fontsize="x-small", loc="lower left")
    ax.legend(fontsize="x-small", loc="lower left", title="pretrained on", title_fontsize="x-small")
    fig.suptitle(f"ICL error of pretrained softmax units against the test context length (d = {cfg['d']}, "
                 f"σ = {cfg['sigma']:g}; dotted line: pretraining n = {a['n_train']}; band: min-max over seeds)",
                 fontsize="small")
    return fig


def plot_grid(run: Run, a: dict):
    """Every unit on every test class at n_train (relative to the oracle), ||M|| during pretraining, and the
    mismatch class's pretraining loss along M = w I with the pretrained units marked."""
    classes, Ls = a["classes"], a["L"]
    j_tr = _i(a["n"], a["n_train"])
    err = a["softmax"].mean(2)[..., j_tr]                                      # (P, nL, T)
    ratio = (err / a["oracle"][None, None, :, j_tr]).reshape(len(classes) * len(Ls), len(classes))
    labels = [f"{c}, L = {L:g}" for c in classes for L in Ls]
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.9), gridspec_kw={"width_ratios": [1, 1.2, 1.1]})
    ax = axes[0]
    im = ax.imshow(np.log10(ratio), cmap="magma_r", vmin=0, vmax=max(1.0, np.log10(ratio).max()), aspect="auto")
    for i in range(ratio.shape[0]):
        for j in range(ratio.shape[1]):
            ax.text(j, i, f"{ratio[i, j]:.2g}", ha="center", va="center", fontsize="x-small",
                    color="w" if np.log10(ratio[i, j]) > 0.5 else "k")
    ax.set_xticks(range(len(classes)), [f"test {c}" for c in classes])
    ax.set_yticks(range(len(labels)), [f"pretrained {s}" for s in labels], fontsize="x-small")
    ax.grid(False)
    ax.set_title(f"ICL error / oracle error at n = {a['n_train']}, test L = {a['L_test']:g}")
    fig.colorbar(im, ax=ax, label="log10(error / oracle)")
    ax = axes[1]
    for p, c in enumerate(classes):
        for li, L in enumerate(Ls):
            ls, _ = L_STYLES.get(li, ("-", "o"))
            h = a["M_norm_history"][p, li]                                   # (T, S)
            ax.plot(a["log_steps"], h.mean(-1), color=CLASS_COLORS.get(c), ls=ls, label=f"{c}, L = {L:g}")
    ax.set(yscale="log", xlabel="pretraining step", ylabel="‖M‖₂ (inverse window width)",
           title="Window learned during pretraining")
    ax.legend(fontsize="x-small", ncol=len(classes), loc="lower right")
    ax = axes[2]
    cfg = run.cfg
    p_mis = _i(classes, cfg["mismatch_class"])
    colors = plt.cm.plasma(np.linspace(0.1, 0.75, len(Ls)))
    lo = a["landscape"].min()
    for li, L in enumerate(Ls):
        ax.plot(a["landscape_w"], a["landscape"][li], color=colors[li], label=f"L = {L:g}")
        for w in a["w_signed"][p_mis, li]:                                   # the pretrained units (one per seed)
            ax.plot([w], [lo * 0.8], marker="|", ms=12, mew=2, color=colors[li])
    ax.set(xscale="symlog", yscale="log", xlabel="w in M = w I (signed; ticks: pretrained units, tr(M)/d)",
           ylabel="pretraining loss (MSE)", title=f"{cfg['mismatch_class']} pretraining loss along M = wI "
           f"(n = {a['n_train']})")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.legend(fontsize="x-small")
    return fig
