"""Plots of the classification chapter (plots only: excluded from the cache fingerprint)."""

from __future__ import annotations

import numpy as np
from matplotlib import ticker
from matplotlib.lines import Line2D

from ... import plotting
from ...base import derive_seed
from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import tasks as ctasks
from ...plotting import MODEL_COLORS, QUALITATIVE
from ...book.run import Run
from .analysis import Evaluation, ablation, compare, hyperparameters, loosest_learnable, paired, ratio_maps
from .sweeps import ALG, ALG_LABEL, CONTROL_ALG, ETA_GRID, MIX_MODELS, Search, task_of, uniform_task
from .sweeps import label as _task_label

ALG_COLORS = {"gd": MODEL_COLORS["gd"], "kernel_gd": MODEL_COLORS["kernel_gd"], "exp_fixed": QUALITATIVE[1],
              "linear_norm": QUALITATIVE[5]}
MIX_COLORS = {"softmax": MODEL_COLORS["softmax"], "linear": MODEL_COLORS["linear"], "linear_sum": QUALITATIVE[4]}
MIX_LABEL = {"softmax": "softmax SA", "linear": "linear SA (1/n)", "linear_sum": "linear SA, unnormalised"}
METRIC_LABEL = {"logit_cosine": "cosine of centred logits", "prob_l2": r"$\ell_2$ distance of probabilities",
                "jacobian_cosine": r"cosine of Jacobians $\partial\hat y/\partial x_q$",
                "argmax_agreement": "argmax agreement"}
RATIO_LABEL = "test CE, softmax / linear SA"
CE_LABEL = "test CE (nats)"
#: Short names of the algorithms for axis labels and legends (the keys are code names, not for a reader).
ALG_SHORT = {"gd": "one GD step", "kernel_gd": "kernel GD", "exp_fixed": "exp kernel, fixed rate",
             "linear_norm": "linear kernel, adaptive rate"}


def label(task: tuple) -> str:
    """A task's name as a figure shows it: the sweep's label with its symbols typeset (mathtext)."""
    return _task_label(task).replace("tau", r"$\tau$")


def task_columns(cfg: dict) -> list[tuple]:
    taus = cfg["taus"]
    return [uniform_task(), ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=taus[0]),
            ctasks.task_spec("clustered", tau=1.0), ctasks.task_spec("clustered", tau=taus[-1]),
            ctasks.task_spec("uniform", P=cfg["local_prototypes"]), ctasks.task_spec("subspace", k=1)]


#: How many of :func:`task_columns` are the papers' readings (the rest are the book's own tasks).
PAPER_READINGS = 5


def _task_grid(run: Run, d: int, cols: list[tuple] | None = None, **kwargs):
    """One context per reading (C classes, n_main points) in input dimension ``d``, three readings a row; ``cols``:
    the readings (default: every one of :func:`task_columns`)."""
    cfg = run.cfg
    C, n, cols = cfg["C"], cfg["n_main"], cols or task_columns(cfg)
    rows = -(-len(cols) // 3)
    fig, axes = plotting.subplots(rows, 3, row_height=2.3, **kwargs)
    colors = plotting.qualitative(C)
    for ax, task in zip(axes.flat, cols):
        b = ctasks.sample_contexts(1, n, C, d, task[1], seed=derive_seed(cfg["eval_seed"], 99 + d),
                                   reading=task[0], tau=task[2], k=task[3])
        x, lab, pr = b.x_ctx[0, 0].numpy(), b.label_ctx[0, 0].numpy(), b.protos[0, 0].numpy()
        for k in range(C):
            pts = x[lab == k].T
            if d == 2:
                ax.scatter(*pts, s=7, color=colors[k], label=f"class {k + 1}")
                for p in pr[k]:
                    ax.annotate("", xy=p * 0.85, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=colors[k],
                                                                               lw=1.4))
            else:
                ax.scatter(*pts, s=5, color=colors[k], label=f"class {k + 1}")
                for p in pr[k]:
                    ax.quiver(0, 0, 0, *(p * 0.9), color=colors[k], lw=1.4, arrow_length_ratio=0.15)
        ax.set_title(label(task))
    for ax in axes.flat[len(cols):]:
        ax.remove()
    return fig, axes.flat[:len(cols)]


def plot_tasks(run: Run):
    """Paper Fig. 1 for each of the papers' readings: one context in d = 2 (C classes, n = n_main); arrows: the class
    vectors (prototypes); dots: the context inputs, coloured by label."""
    fig, axes = _task_grid(run, 2, task_columns(run.cfg)[:PAPER_READINGS])
    th = np.linspace(0, 2 * np.pi, 721)
    for ax in axes:
        ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.6, zorder=0)
        ax.set(aspect="equal", xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), xticks=[-1, 0, 1], yticks=[-1, 0, 1],
               xlabel="x₁", ylabel="x₂")
    plotting.figure_legend(fig)
    return fig


def plot_tasks_3d(run: Run):
    """Paper Fig. 2 for each reading: one context in d = 3, as :func:`plot_tasks`."""
    fig, axes = _task_grid(run, 3, subplot_kw={"projection": "3d"})
    for ax in axes:
        ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), xticks=[-1, 0, 1], yticks=[-1, 0, 1], zticks=[-1, 0, 1],
               xlabel="x₁", ylabel="x₂", zlabel="x₃")
        ax.set_box_aspect((1, 1, 1))
    plotting.figure_legend(fig)
    return fig


def plot_alignment_curves(run: Run, ev: Evaluation):
    """The mechanism: through training, trained linear SA comes to compute one GD step and trained softmax SA kernel
    GD with an adaptive rate (solid: cosine of their centred logits, main setting, seed mean and min-max band), each
    more closely than the other algorithm (dashed, the control)."""
    main = ev.main
    fig, axes = plotting.subplots(1, 2, row_height=3.0, sharey=True)
    for ax, model in zip(axes[0], ("linear", "softmax")):
        ks = [k for k, c in enumerate(main.configs) if c["model"] == model]
        for values, alg, ls in ((main.align, ALG[model], "-"), (main.control, CONTROL_ALG[model], "--")):
            plotting.band(ax, main.log_steps, values["logit_cosine"][:, ks], ALG_COLORS[alg], ls=ls)
        ax.set(title=f"trained {model} SA", xlabel="training step", ylim=(0.5, 1.01))
    axes[0, 0].set_ylabel("cosine of centred logits")
    plotting.figure_legend(fig, ncols=2, extra=[Line2D([], [], color=ALG_COLORS[a], label=f"vs {ALG_LABEL[a]}")
                                                for a in ("gd", "kernel_gd")]
                           + [Line2D([], [], color="0.3", ls="-", label="the model's own algorithm"),
                              Line2D([], [], color="0.3", ls="--", label="the other one (control)")])
    return fig


def _scatter_panel(ax, model: str, st_m: dict, st_a: dict, key: str, name: str, sel) -> None:
    """One per-context statistic of the trained model (x) against its algorithm's (y), with both means."""
    xm, ya = st_a[key], st_m[key]
    alg = ALG[model]
    ax.scatter(ya[sel], xm[sel], s=3, alpha=0.35, color=MODEL_COLORS[model], rasterized=True)
    if key == "p_correct":
        hi = 1.0
    elif key == "ce":
        hi = 1.05 * max(np.percentile(xm, 99.5), np.percentile(ya, 99.5))
    else:
        hi = 1.05 * max(xm.max(), ya.max())
    ax.plot([0, hi], [0, hi], color="k", lw=0.7, label="diagonal")
    ax.axvline(ya.mean(), color=MODEL_COLORS[model], ls=":", lw=1.2, label=f"mean, {model} SA")
    ax.axhline(xm.mean(), color=ALG_COLORS[alg], ls=":", lw=1.2, label=f"mean, {ALG_SHORT[alg]}")
    ax.set(xlim=(0, hi), ylim=(0, hi), xlabel=f"{model} SA", ylabel=ALG_SHORT[alg], title=name)


def plot_alignment(run: Run, ev: Evaluation, model: str, seed: int = 0):
    """Paper Fig. 4 (linear) / Fig. 5 (softmax). (a) Alignment of the trained model with its algorithm through
    training, four measures (seed mean, min-max band), and the logit cosine with the other algorithm (grey, the
    control). (b-d) Per context of the evaluation set (1500 drawn; one seed): the CE loss, the probability of the
    correct class and the entropy of the prediction, trained model (x) against the algorithm (y)."""
    main = ev.main
    ks = [k for k, c in enumerate(main.configs) if c["model"] == model]
    fig, axes = plotting.subplots(2, 2, row_height=2.4)
    ax = axes[0, 0]
    for (m, ls), color in zip(zip(cmetrics.METRICS, ("-", "--", "-.", ":")), QUALITATIVE):
        plotting.band(ax, main.log_steps, main.align[m][:, ks], color, label=METRIC_LABEL[m], ls=ls)
    ax.plot(main.log_steps, main.control["logit_cosine"][:, ks].mean(1), color="0.5", lw=1.2,
            label=f"logit cosine vs {ALG_SHORT[CONTROL_ALG[model]]} (control)")
    ax.set(xlabel="training step", ylabel="alignment", title=f"(a) vs {ALG_SHORT[ALG[model]]} in training",
           ylim=(-0.05, 1.05))
    st_m, st_a = main.per_context[ks[min(seed, len(ks) - 1)]]
    sel = np.random.default_rng(0).choice(st_m["ce"].size, size=min(st_m["ce"].size, 1500), replace=False)
    for ax, key, name in zip(axes.flat[1:], ("ce", "p_correct", "entropy"),
                             ("(b) CE loss (nats)", "(c) p(correct class)", "(d) entropy of ŷ (nats)")):
        _scatter_panel(ax, model, st_m, st_a, key, name, sel)
    plotting.figure_legend(fig, ncols=2)
    return fig


def plot_hyperparameters(run: Run, ev: Evaluation, found: Search):
    """The searches (uniform reading, n_main): CE of the GD step against eta, of kernel GD against beta (best gamma
    per beta), and the best gamma per beta; the searched values and those read off the trained units (one per
    seed)."""
    hp = hyperparameters(run, ev, found)
    i = found.index(uniform_task(), run.cfg["n_main"])
    g = found.algs["kernel_gd"]
    fig, axes = plotting.subplots(1, 3, row_height=2.9)
    ax = axes[0, 0]
    ax.plot(ETA_GRID, found.gd_eta_profile[i], color=ALG_COLORS["gd"], label="one GD step")
    ax.axvline(hp.eta_searched, color=ALG_COLORS["gd"], ls="--", lw=1, label="searched η, β")
    for v in hp.eta_learned:
        ax.axvline(v, color=MODEL_COLORS["linear"], ls=":", lw=1.2, label="η = a·b of linear SA")
    ax.set(xscale="log", xlabel="learning rate η", ylabel="expected CE (nats)", title="GD step")
    ax = axes[0, 1]
    ax.plot(g.grid, g.grid_ce[i], "o-", ms=3, color=ALG_COLORS["kernel_gd"], label="kernel GD, best γ per β")
    ax.axvline(hp.beta_searched, color=ALG_COLORS["kernel_gd"], ls="--", lw=1)
    for v in hp.beta_learned:
        ax.axvline(v, color=MODEL_COLORS["softmax"], ls=":", lw=1.2, label="β of softmax SA")
    ax.set(xscale="log", xlabel="kernel parameter β", ylabel="expected CE (nats)", title="kernel GD",
           ylim=(min(g.grid_ce[i]) - 0.05, min(g.grid_ce[i]) + 0.6))
    ax = axes[0, 2]
    ax.plot(g.grid, g.grid_rate[i], color=ALG_COLORS["kernel_gd"])
    ax.scatter([hp.beta_searched], [hp.gamma_searched], marker="*", s=110, color=ALG_COLORS["kernel_gd"], zorder=3,
               label="searched (β, γ)")
    ax.scatter(hp.beta_learned, hp.gamma_learned, marker="o", s=24, color=MODEL_COLORS["softmax"], zorder=4,
               label="(β, γ) of softmax SA")
    ax.set(xscale="log", xlabel="kernel parameter β", ylabel="rate γ", title="best γ per β")
    plotting.log_axis(ax)
    plotting.figure_legend(fig, ncols=3)
    return fig


def _ratio_panel(ax, rows, colors: dict) -> None:
    """Softmax/linear test-CE ratio against n (geometric seed mean, one-sided 95 % t-bounds over paired seeds), one
    line per reading."""
    for task, color in colors.items():
        rs = [r for r in rows if r.task == task]
        err = np.array([[r.ratio - r.ratio_lo for r in rs], [r.ratio_hi - r.ratio for r in rs]])
        ax.errorbar([r.n for r in rs], [r.ratio for r in rs], yerr=err, marker="o", ms=3, capsize=2, color=color,
                    label=label(task))
    ax.axhline(1.0, color="0.3", lw=0.8)
    ax.set(xscale="log", xlabel="context length n")
    plotting.value_ticks(ax, sorted({r.n for r in rows}))


def plot_readings(run: Run, ev: Evaluation):
    """Softmax/linear test-CE ratio (geometric seed mean, one-sided 95 % t-bounds over paired seeds) across n: the
    uniform and class-balanced readings (left), the class-clustered reading at each spread tau (right, in order of
    tau). Below 1: softmax SA better."""
    rows = compare(ev.readings)
    plain = [r for r in rows if r.task[0] != "clustered"]
    clustered = [r for r in rows if r.task[0] == "clustered"]
    plain_tasks = list(dict.fromkeys(r.task for r in plain))
    taus = sorted(dict.fromkeys(r.task for r in clustered), key=lambda t: t[2])
    fig, axes = plotting.subplots(1, 2, row_height=3.2)
    _ratio_panel(axes[0, 0], plain, dict(zip(plain_tasks, QUALITATIVE)))
    _ratio_panel(axes[0, 1], clustered, dict(zip(taus, plotting.sequential(len(taus)))))
    axes[0, 0].set(ylabel=RATIO_LABEL, title="uniform and class-balanced")
    axes[0, 1].set_title("class-clustered, each τ")
    plotting.figure_legend(fig, ncols=3)
    return fig


def plot_shapes(run: Run, ev: Evaluation):
    """Softmax/linear test-CE ratio (geometric seed mean, one-sided 95 % t-bounds over paired seeds) at n = n_main
    for other numbers of classes C and input dimensions d (uniform reading), the local (P prototypes) and the
    subspace readings. Left of 1: softmax SA better."""
    rs = compare(ev.shapes) + compare(ev.extras)
    ys = np.arange(len(rs))[::-1]
    err = np.array([[r.ratio - r.ratio_lo for r in rs], [r.ratio_hi - r.ratio for r in rs]])
    fig, axes = plotting.subplots(1, 1, width=0.8, row_height=0.3 * len(rs) + 1.0)
    ax = axes[0, 0]
    ax.barh(ys, [r.ratio for r in rs], xerr=err, capsize=3, color=MODEL_COLORS["softmax"], alpha=0.7)
    ax.axvline(1.0, color="0.3", lw=0.8)
    ax.set_yticks(ys, [f"{label(r.task)}, C = {r.C}, d = {r.d}" for r in rs])
    ax.set(xlabel=RATIO_LABEL, title=f"n = {run.cfg['n_main']}")
    ax.grid(axis="y", visible=False)
    return fig


def plot_maps(run: Run, ev: Evaluation):
    """The tau x n maps of the clustered reading: trained softmax/linear test-CE ratio, and each step's over the GD
    step's (colour: log2 of the ratio, one scale for all; '×' marks cells whose bounds include 1; dashed: the
    crossover tau per n)."""
    maps = ratio_maps(run, ev)
    titles = ["trained softmax / linear SA", "kernel GD / GD step", "exp kernel, fixed rate / GD step",
              "linear kernel, adaptive rate / GD step"]
    vmax = max(0.5, max(float(np.abs(np.log2(m.ratio)).max()) for m in maps))
    fig, axes = plotting.subplots(-(-len(maps) // 2), 2, row_height=2.8)
    for ax, m, title in zip(axes.flat, maps, titles):
        lr = np.log2(m.ratio)
        im = ax.imshow(lr, origin="lower", cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.grid(False)
        for (i, j), r in np.ndenumerate(m.ratio):
            tie = m.lo[i, j] <= 1 <= m.hi[i, j]
            ax.text(j, i, f"{r:.2f}" + (" ×" if tie else ""), ha="center", va="center",
                    color="white" if abs(lr[i, j]) > 0.6 * vmax else "black")
        lt = np.log(m.taus)
        cy = [np.interp(np.log(c), lt, np.arange(len(m.taus))) if np.isfinite(c) else np.nan for c in m.crossover]
        ax.plot(np.arange(len(m.ns)), cy, "k--", lw=1.5, label="crossover τ")
        ax.set_xticks(range(len(m.ns)), [str(n) for n in m.ns])
        ax.set_yticks(range(len(m.taus)), [f"{t:g}" for t in m.taus])
        ax.set(xlabel="context length n", ylabel="cluster spread τ", title=title)
    for ax in axes.flat[len(maps):]:
        ax.remove()
    fig.colorbar(im, ax=axes, shrink=0.6, label="log₂ CE ratio (blue: numerator better)")
    plotting.figure_legend(fig)
    return fig


def plot_mixture(run: Run, ev: Evaluation):
    """Units trained over a mixture of context lengths (shaded): test CE at seen and unseen lengths (seed mean,
    min-max band), one panel per reading."""
    lo, hi = run.cfg["mix_lengths"]
    t = ev.mixture
    key = lambda c: (c["reading"], c["P"], c["tau"], c["k"])  # noqa: E731
    tasks = list(dict.fromkeys(key(c) for c in t.configs))
    fig, axes = plotting.subplots(1, len(tasks), row_height=3.0, sharey=True)
    for ax, task in zip(axes[0], tasks):
        for m in MIX_MODELS:
            ks = [i for i, c in enumerate(t.configs) if c["model"] == m and key(c) == task]
            plotting.band(ax, t.test_n, t.ce[ks].mean(-1), MIX_COLORS[m], label=MIX_LABEL[m], axis=0, marker="o",
                          ms=3)
        ax.axvspan(lo, hi, color="0.9", zorder=0, label="training lengths")
        ax.set(xscale="log", xlabel="test context length n", title=label(task))
        plotting.value_ticks(ax, t.test_n)
    axes[0, 0].set_ylabel(CE_LABEL)
    plotting.figure_legend(fig, ncols=2)
    return fig


def plot_kernel_shape(run: Run, ev: Evaluation):
    """(W_K^T W_Q)_xx of a softmax unit (seed 0) on the subspace task (class vectors in the first k coordinates)
    and on the uniform task (the control)."""
    k = ev.kernel
    fig, axes = plotting.subplots(1, 2, row_height=3.0)
    for ax, A, title in ((axes[0, 0], k.A_sub[0], f"subspace task (k = {k.k})"),
                         (axes[0, 1], k.A_uni[0], "uniform task (control)")):
        v = float(np.abs(A).max())
        im = ax.imshow(A, cmap="RdBu_r", vmin=-v, vmax=v)
        ax.grid(False)
        ticks = [f"x{i + 1}" for i in range(A.shape[0])]
        ax.set(title=title, xlabel="query coordinate", ylabel="key coordinate")
        ax.set_xticks(range(len(ticks)), ticks)
        ax.set_yticks(range(len(ticks)), ticks)
        fig.colorbar(im, ax=ax, shrink=0.8)
    return fig


def plot_ablation(run: Run, ev: Evaluation):
    """The four steps (kernel shape x rate) at their searched hyperparameters across n: uniform, class-balanced
    and the most clustered reading."""
    ab = ablation(ev)
    shown = [uniform_task(), ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=run.cfg["taus"][0])]
    fig, axes = plotting.subplots(1, len(shown), row_height=2.9)
    for ax, task in zip(axes[0], shown):
        rs = [r for r in ab if r.task == task]
        ns = [r.n for r in rs]
        for name, mk in zip(calg.ALGORITHMS, ("o", "s", "^", "v")):
            ax.plot(ns, [r.ce[name] for r in rs], marker=mk, ms=4, color=ALG_COLORS[name], label=ALG_LABEL[name])
        ax.set(xscale="log", xlabel="context length n", title=label(task))
        plotting.value_ticks(ax, ns)
    axes[0, 0].set_ylabel(CE_LABEL)
    plotting.figure_legend(fig, ncols=2)
    return fig


def plot_basins(run: Run, ev: Evaluation):
    """The two training basins of the softmax units at the captions' n: per seed, the softmax/linear test-CE ratio
    against the softmax unit's learned kernel scale beta (its sign is the basin), one panel per reading of the task.
    Right of zero: the kernel-GD basin (attention to the points nearest the query); left: attention to far points."""
    from .claims import LEARNABLE

    cfg, n0 = run.cfg, ev.trajectory.n
    loose, _ = loosest_learnable(compare(ev.readings), cfg["taus"], n0, 1.0 / cfg["C"], LEARNABLE)
    readings = [uniform_task(), ctasks.task_spec("balanced"), ctasks.task_spec("clustered", tau=cfg["taus"][0]),
                ctasks.task_spec("clustered", tau=loose)]
    at = {(task_of(c), c["C"], c["d"], c["n"], c["model"], c["seed"]): i for i, c in enumerate(ev.readings.configs)}
    pairs = {p.key: p for p in paired(ev.readings)}
    fig, axes = plotting.subplots(2, 2, row_height=2.1)
    for ax, task in zip(axes.ravel(), readings):
        p = pairs.get((task, cfg["C"], cfg["d"], n0))
        if p is None or ev.readings.scale is None:
            ax.set_axis_off()
            continue
        beta = np.array([ev.readings.scale[at[(*p.key, "softmax", s)]] for s in p.seeds])
        ratio = np.exp(p.log_ratio)
        ax.scatter(beta, ratio, s=18, color=np.where(beta > 0, MODEL_COLORS["softmax"], QUALITATIVE[3]).tolist(),
                   zorder=3)
        ax.axvline(0.0, color="0.5", lw=0.8, ls=":")
        ax.axhline(1.05, color="0.3", lw=0.8, ls="--")
        ax.set(xscale="symlog", yscale="log", xlabel=r"learned kernel scale $\beta$ (symmetric log scale)",
               ylabel=RATIO_LABEL, title=label(task))
        top = 2.0 * max(1.0, float(np.abs(beta).max()))
        ax.set_xlim(-top, top)
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%.3g"))
        ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%.3g") if ratio.max() < 3 * ratio.min() else
                                     ticker.NullFormatter())
    return fig


def plot_expectation(run: Run, sc):
    """The rebuttal's expectation, one factor at a time: the softmax units' learned kernel scale beta (the inverse
    width of their window) against the label-flip probability p (left) and against the prototypes per class P (right).
    Each seed's unit a thin line (kernel-GD basin) or a cross (beta <= 0, far-attending basin, drawn at the axis
    floor); the geometric mean of the kernel-GD units in colour."""
    from .expectation import AXES

    fig, axes = plotting.subplots(1, 2, row_height=2.6)
    for ax, tag in zip(axes[0], ("noise", "lipschitz")):
        levels, beta = np.asarray(sc.levels[tag], dtype=float), sc.beta[tag][-1]          # (L, S)
        good = np.all(beta > 0, axis=0)
        pos = beta[beta > 0]
        floor = 0.5 * float(pos.min()) if pos.size else 1e-3
        for s in np.nonzero(good)[0]:
            ax.plot(levels, beta[:, s], color="0.65", lw=0.7, zorder=1)
        bad = beta <= 0
        if bad.any():
            ax.scatter(np.broadcast_to(levels[:, None], beta.shape)[bad], np.full(int(bad.sum()), floor), marker="x",
                       color=QUALITATIVE[3], s=22, zorder=3, label=r"a unit with $\beta \leq 0$ (no window)")
        if good.any():
            ax.plot(levels, np.exp(np.log(beta[:, good]).mean(1)), color=MODEL_COLORS["softmax"], lw=2.0,
                    marker="o", zorder=2, label=r"softmax SA, geometric mean over seeds with $\beta > 0$")
        plotting.log_axis(ax)
        ax.set(xlabel=AXES[tag][1], title="label noise grows" if tag == "noise" else "labels change faster")
        plotting.value_ticks(ax, levels)
    axes[0, 0].set_ylabel(r"learned kernel scale $\beta$ (1 / window)")
    plotting.figure_legend(fig)
    return fig
