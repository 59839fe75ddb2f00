"""Plots of the classification chapter (plots only: excluded from the cache fingerprint)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...base import derive_seed
from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import tasks as ctasks
from ...plotting import MODEL_COLORS
from ...records import Run
from .analysis import Evaluation, ablation, compare, hyperparameters, ratio_maps
from .sweeps import ALG, ALG_LABEL, CONTROL_ALG, ETA_GRID, MIX_MODELS, Search, label, uniform_task

ALG_COLORS = {"gd": MODEL_COLORS["gd"], "kernel_gd": MODEL_COLORS["kernel_gd"], "exp_fixed": "#ff7f0e",
              "linear_norm": "#8c564b"}
MIX_COLORS = {"softmax": MODEL_COLORS["softmax"], "linear": MODEL_COLORS["linear"], "linear_sum": "#7f7f7f"}
METRIC_LABEL = {"logit_cosine": "cosine of centred logits", "prob_l2": "L2 distance of probabilities",
                "jacobian_cosine": "cosine of Jacobians ∂ŷ/∂x_q", "argmax_agreement": "argmax agreement"}


def task_columns(cfg: dict) -> list[tuple]:
    taus = cfg["taus"]
    return [uniform_task(), ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=taus[0]),
            ctasks.task_spec("clustered", tau=1.0), ctasks.task_spec("clustered", tau=taus[-1]),
            ctasks.task_spec("uniform", P=cfg["local_prototypes"]), ctasks.task_spec("subspace", k=1)]


def plot_tasks(run: Run):
    """Paper Figs 1-2 for each reading: one context (C, n_main) for d = 2 (top) and d = 3 (bottom)."""
    cfg = run.cfg
    C, n = cfg["C"], cfg["n_main"]
    cols = task_columns(cfg)
    fig = plt.figure(figsize=(3.1 * len(cols), 6.4))
    colors = plt.cm.tab10(np.arange(C) % 10)
    for col, task in enumerate(cols):
        for row, d in enumerate((2, 3)):
            b = ctasks.sample_contexts(1, n, C, d, task[1], seed=derive_seed(cfg["eval_seed"], 101 + row),
                                       reading=task[0], tau=task[2], k=task[3])
            x, lab, pr = b.x_ctx[0, 0].numpy(), b.label_ctx[0, 0].numpy(), b.protos[0, 0].numpy()
            title = f"{label(task)}\nd = {d}"
            if d == 2:
                ax = fig.add_subplot(2, len(cols), col + 1)
                th = np.linspace(0, 2 * np.pi, 721)
                ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.6)
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], s=9, color=colors[k], label=f"class {k + 1}")
                    for p in pr[k]:
                        ax.annotate("", xy=p * 0.85, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=colors[k],
                                                                                   lw=1.4))
                ax.set(aspect="equal", xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), xlabel="x₁", ylabel="x₂", title=title)
                ax.title.set_fontsize("small")
                if col == 0:
                    ax.legend(fontsize="xx-small", loc="upper left", framealpha=0.6)
            else:
                ax = fig.add_subplot(2, len(cols), len(cols) + col + 1, projection="3d")
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], x[sel, 2], s=6, color=colors[k])
                    for p in pr[k]:
                        ax.quiver(0, 0, 0, *(p * 0.9), color=colors[k], lw=1.4, arrow_length_ratio=0.15)
                ax.set(xlabel="x₁", ylabel="x₂", zlabel="x₃", title=title, xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1),
                       xticks=[-1, 0, 1], yticks=[-1, 0, 1], zticks=[-1, 0, 1])
                ax.title.set_fontsize("small")
                ax.set_box_aspect((1, 1, 1))
    fig.suptitle(f"One context per reading (C = {C}, n = {n}): arrows are the class vectors (prototypes), dots the "
                 "context inputs coloured by label", fontsize="small")
    return fig


def plot_alignment(run: Run, ev: Evaluation, model: str, seed: int = 0):
    """Paper Fig. 4 (linear) / Fig. 5 (softmax): alignment through training (with the control algorithm, grey)
    and per-context scatter plots against the model's own algorithm."""
    main = ev.main
    ks = [k for k, c in enumerate(main.configs) if c["model"] == model]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    ax = axes[0]
    steps = main.log_steps
    for m, ls in zip(cmetrics.METRICS, ("-", "--", "-.", ":")):
        v = main.align[m][:, ks]
        ax.plot(steps, v.mean(1), ls, label=METRIC_LABEL[m])
        if v.shape[1] > 1:
            ax.fill_between(steps, v.min(1), v.max(1), alpha=0.2, lw=0)
    ax.plot(steps, main.control["logit_cosine"][:, ks].mean(1), color="0.5", lw=1.2,
            label=f"logit cosine vs {CONTROL_ALG[model]} (control)")
    ax.set(xlabel="training step", ylabel="alignment", title=f"(a) {model} SA vs {ALG_LABEL[ALG[model]]}",
           ylim=(-0.05, 1.05))
    ax.title.set_fontsize("small")
    ax.legend(fontsize="xx-small", loc="center right")
    k = ks[min(seed, len(ks) - 1)]
    st_m, st_a = main.per_context[k]
    rng = np.random.default_rng(0)
    B = st_m["ce"].size
    sel = rng.choice(B, size=min(B, 1500), replace=False)
    for ax, key, lab, lo in zip(axes[1:], ("ce", "p_correct", "entropy"),
                                ("CE loss (nats)", "probability of the correct class", "entropy of ŷ (nats)"),
                                ("(b)", "(c)", "(d)")):
        xm, ya = st_a[key], st_m[key]
        ax.scatter(ya[sel], xm[sel], s=4, alpha=0.35, color=MODEL_COLORS[model], rasterized=True)
        hi = max(np.percentile(xm, 99.5), np.percentile(ya, 99.5)) if key == "ce" else max(xm.max(), ya.max())
        hi = hi * 1.05 if key != "p_correct" else 1.0
        ax.plot([0, hi], [0, hi], color="0.3", lw=0.8, label="diagonal")
        ax.axvline(ya.mean(), color=MODEL_COLORS[model], ls=":", lw=1.2, label=f"mean, {model} SA")
        ax.axhline(xm.mean(), color=ALG_COLORS[ALG[model]], ls=":", lw=1.2, label=f"mean, {ALG[model]}")
        ax.set(xlim=(0, hi), ylim=(0, hi), xlabel=f"{lab}, trained {model} SA", ylabel=f"{lab}, {ALG[model]}",
               title=f"{lo} per context")
        ax.legend(fontsize="x-small", loc="upper left" if key != "p_correct" else "lower right")
    return fig


def plot_hyperparameters(run: Run, ev: Evaluation, found: Search):
    """The searches: CE of the GD step against eta, and of kernel GD against beta (best gamma per beta)."""
    hp = hyperparameters(run, ev, found)
    i = found.index(uniform_task(), run.cfg["n_main"])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    ax = axes[0]
    ax.plot(ETA_GRID, found.gd_eta_profile[i], color=ALG_COLORS["gd"], label="one GD step")
    ax.axvline(hp.eta_searched, color=ALG_COLORS["gd"], ls="--", lw=1, label="searched η")
    for j, v in enumerate(hp.eta_learned):
        ax.axvline(v, color=MODEL_COLORS["linear"], ls=":", lw=1.2, label="learned η = a·b" if j == 0 else None)
    ax.set(xscale="log", xlabel="learning rate η", ylabel="expected CE (nats)", title="GD step: CE vs η")
    ax.legend(fontsize="x-small")
    g = found.algs["kernel_gd"]
    ax = axes[1]
    ax.plot(g.grid, g.grid_ce[i], "o-", ms=3, color=ALG_COLORS["kernel_gd"], label="kernel GD, best γ per β")
    ax.axvline(hp.beta_searched, color=ALG_COLORS["kernel_gd"], ls="--", lw=1, label="searched β")
    for j, v in enumerate(hp.beta_learned):
        ax.axvline(v, color=MODEL_COLORS["softmax"], ls=":", lw=1.2, label="learned β" if j == 0 else None)
    ax.set(xscale="log", xlabel="kernel parameter β", ylabel="expected CE (nats)", title="kernel GD: CE vs β",
           ylim=(min(g.grid_ce[i]) - 0.05, min(g.grid_ce[i]) + 0.6))
    ax.legend(fontsize="x-small")
    ax = axes[2]
    ax.plot(g.grid, g.grid_rate[i], color=ALG_COLORS["kernel_gd"], label="best γ for each β")
    ax.scatter([hp.beta_searched], [hp.gamma_searched], marker="*", s=140, color=ALG_COLORS["kernel_gd"], zorder=3,
               label="searched (β, γ)")
    ax.scatter(hp.beta_learned, hp.gamma_learned, marker="o", s=30, color=MODEL_COLORS["softmax"], zorder=4,
               label="learned (β, γ), one per seed")
    ax.set(xscale="log", yscale="log", xlabel="kernel parameter β", ylabel="rate γ", title="kernel GD: the (β, γ) valley")
    ax.legend(fontsize="x-small")
    return fig


def _ratio_panel(ax, rows, title):
    for task in dict.fromkeys(r.task for r in rows):
        rs = [r for r in rows if r.task == task]
        x = [r.n for r in rs]
        y = np.array([r.ratio for r in rs])
        err = np.array([[r.ratio - r.ratio_lo for r in rs], [r.ratio_hi - r.ratio for r in rs]])
        ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=3, label=label(task))
    ax.axhline(1.0, color="0.3", lw=0.8)
    ax.set(xscale="log", xlabel="context length n", ylabel="test CE ratio softmax / linear", title=title)
    ns = sorted({r.n for r in rows})
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.minorticks_off()
    ax.title.set_fontsize("small")
    ax.legend(fontsize="x-small")


def plot_readings(run: Run, ev: Evaluation):
    """Softmax/linear test-CE ratio (95% t-interval over seeds) per reading across n, and at other (C, d)."""
    cfg = run.cfg
    rows = compare(ev.readings)
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), layout="constrained")
    _ratio_panel(axes[0], [r for r in rows if r.task[0] != "clustered"], "uniform and class-balanced readings")
    _ratio_panel(axes[1], [r for r in rows if r.task[0] == "clustered"], "class-clustered reading, each tau")
    ax = axes[2]
    rs = compare(ev.shapes) + compare(ev.extras)
    xs = np.arange(len(rs))
    err = np.array([[r.ratio - r.ratio_lo for r in rs], [r.ratio_hi - r.ratio for r in rs]])
    ax.bar(xs, [r.ratio for r in rs], yerr=err, capsize=3, color=[MODEL_COLORS["softmax"]] * len(rs), alpha=0.7)
    ax.axhline(1.0, color="0.3", lw=0.8)
    ax.set_xticks(xs, [f"{label(r.task).split(' (')[0]}\nC={r.C} d={r.d}" for r in rs], fontsize="x-small")
    ax.set(ylabel="test CE ratio softmax / linear", title=f"n = {cfg['n_main']}: other (C, d); local; subspace")
    ax.title.set_fontsize("small")
    return fig


def plot_maps(run: Run, ev: Evaluation):
    """The tau x n maps of the clustered reading: trained softmax/linear ratio, and each step over the GD step;
    'x' marks cells whose interval includes 1, the line the crossover tau per n."""
    maps = ratio_maps(run, ev)
    fig, axes = plt.subplots(1, len(maps), figsize=(4.2 * len(maps), 3.8), layout="constrained")
    titles = ["trained softmax SA / linear SA", "kernel GD / GD step (searched)",
              "exp kernel, fixed rate / GD step", "linear kernel, adaptive rate / GD step"]
    for ax, m, title in zip(axes, maps, titles):
        lr = np.log2(m.ratio)
        vmax = max(0.5, float(np.abs(lr).max()))
        im = ax.imshow(lr, origin="lower", cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.grid(False)
        for i in range(len(m.taus)):
            for j in range(len(m.ns)):
                tie = m.lo[i, j] <= 1 <= m.hi[i, j]
                dark = abs(lr[i, j]) > 0.6 * vmax
                ax.text(j, i, f"{m.ratio[i, j]:.2f}" + (" ×" if tie else ""), ha="center", va="center",
                        fontsize="small", color="white" if dark else "black")
        lt = np.log(m.taus)
        cy = [np.interp(np.log(c), lt, np.arange(len(m.taus))) if np.isfinite(c) else np.nan for c in m.crossover]
        ax.plot(np.arange(len(m.ns)), cy, "k--", lw=1.5, label="crossover")
        ax.set_xticks(range(len(m.ns)), [str(n) for n in m.ns])
        ax.set_yticks(range(len(m.taus)), [f"{t:g}" for t in m.taus])
        ax.set(xlabel="context length n", ylabel="cluster spread τ", title=title)
        ax.title.set_fontsize("small")
        fig.colorbar(im, ax=ax, label="log₂ CE ratio (blue: numerator better)")
    axes[0].legend(fontsize="x-small", loc="upper left")
    return fig


def plot_mixture(run: Run, ev: Evaluation):
    """Units trained over a mixture of lengths: test CE at seen and unseen lengths."""
    lo, hi = run.cfg["mix_lengths"]
    t = ev.mixture
    tasks = list(dict.fromkeys((c["reading"], c["P"], c["tau"], c["k"]) for c in t.configs))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 3.6), layout="constrained")
    for ax, task in zip(np.atleast_1d(axes), tasks):
        for m in MIX_MODELS:
            ks = [i for i, c in enumerate(t.configs) if c["model"] == m and (c["reading"], c["P"], c["tau"], c["k"]) == task]
            ce = t.ce[ks].mean(-1)                                                  # (seeds, N_test)
            ax.plot(t.test_n, ce.mean(0), "o-", color=MIX_COLORS[m], label={"softmax": "softmax SA", "linear":
                    "linear SA (1/n)", "linear_sum": "linear SA, unnormalised"}[m])
            ax.fill_between(t.test_n, ce.min(0), ce.max(0), color=MIX_COLORS[m], alpha=0.2, lw=0)
        ax.axvspan(lo, hi, color="0.9", zorder=0, label="training lengths")
        ax.set(xscale="log", xlabel="test context length n", ylabel="test CE (nats)", title=label(task))
        ax.set_xticks(t.test_n, [str(n) for n in t.test_n])
        ax.minorticks_off()
        ax.legend(fontsize="x-small")
    return fig


def plot_kernel_shape(run: Run, ev: Evaluation):
    """(W_K^T W_Q)_xx of a softmax unit on the subspace task and on the uniform task (seed 0)."""
    k = ev.kernel
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6), layout="constrained")
    for ax, A, title in ((axes[0], k.A_sub[0], f"subspace task (class vectors in x₁..x{k.k})"),
                         (axes[1], k.A_uni[0], "uniform task (control)")):
        v = float(np.abs(A).max())
        im = ax.imshow(A, cmap="RdBu_r", vmin=-v, vmax=v)
        ax.grid(False)
        ax.set(title=title, xlabel="query coordinate", ylabel="key coordinate")
        ax.set_xticks(range(A.shape[0]), [f"x{i + 1}" for i in range(A.shape[0])])
        ax.set_yticks(range(A.shape[0]), [f"x{i + 1}" for i in range(A.shape[0])])
        ax.title.set_fontsize("small")
        fig.colorbar(im, ax=ax)
    return fig


def plot_ablation(run: Run, ev: Evaluation):
    """The four steps (kernel shape x rate) at their searched hyperparameters across n, uniform and clustered."""
    cfg = run.cfg
    ab = ablation(ev)
    shown = [uniform_task(), ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=cfg["taus"][0])]
    fig, axes = plt.subplots(1, len(shown), figsize=(4.6 * len(shown), 3.5), layout="constrained")
    for ax, task in zip(axes, shown):
        rs = [r for r in ab if r.task == task]
        ns = [r.n for r in rs]
        for name, mk in zip(calg.ALGORITHMS, ("o", "s", "^", "v")):
            ax.plot(ns, [r.ce[name] for r in rs], marker=mk, color=ALG_COLORS[name], label=ALG_LABEL[name])
        ax.set(xscale="log", xlabel="context length n", ylabel="test CE (nats)", title=label(task))
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
    axes[0].legend(fontsize="x-small")
    return fig
