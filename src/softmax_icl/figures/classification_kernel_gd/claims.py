"""The classification chapter's checks: thresholds (chosen before the runs) and ``check_claims``.

Softmax >= linear is the title of Dragutinovic et al.: one claim (ledger entry ``softmax-ge-linear``) whose sources
do not fix the data model, so it is tested at the setting of Figs 4-5 (C = 5, n = 100, d = 5) under each reading the
sources allow, and its verdict is the map over the readings (book/claims.yml). Other n, other (C, d), mixtures of
context lengths and a task that is not linearly separable go beyond the sources: findings. The alignment claims, the
readings and the softmax >= linear findings are decided by the statistical design (book/design.yml, ``Run.decide``)
on the pooled seeds: the alignment claims on six match metrics, against rivals that differ only in what the claim names
(the GD step at half and twice its rate; kernel GD with its best fixed rate) and the wrong algorithm; each reading
against the untrained softmax unit. Every rival must fail.
"""

from __future__ import annotations

import numpy as np

from ...classification.metrics import MATCH_METRICS

from ...classification import tasks as ctasks
from ...book.records import BASELINE_SOURCE as BASE
from ...book.run import Run
from .analysis import RIVALS, Evaluation, ablation, compare, hyperparameters, log_ratios, ratio_maps
from .sweeps import ALG, CONTROL_ALG, MODELS, Search, label, mixture_tasks, uniform_task

HYPER_TOL = 0.25              # |learned / searched - 1| for eta, beta, gamma, every seed
PROP31_TOL = 1e-5             # float32 rounding of probabilities

SRC_TITLE = ("Dragutinovic et al., title 'Softmax >= Linear' (and abstract: 'a greater adaptability to context for "
             "softmax attention, which we empirically verify'); setting of the Figs 4-5 captions (C = 5, n = 100, d = 5)")
SRC_TLDR = ("beyond the papers: the machine-written TL;DR's 'context-adaptive learning rate and meta-learned kernel "
            "shape' (not the authors' words), tested as our question")
ENTRY = {"linear": "linear-sa-gd-step", "softmax": "softmax-sa-kernel-gd"}
#: The alignment checks' rivals (analysis.RIVALS) by control id, and in words.
CONTROL_ID = {"linear": {"gd-half-rate": "linear-sa-matches-gd-step-half-rate",
                         "gd-double-rate": "linear-sa-matches-gd-step-double-rate",
                         "kernel_gd": "linear-sa-matches-kernel-gd"},
              "softmax": {"exp_fixed": "softmax-sa-matches-fixed-rate-kernel-gd", "gd": "softmax-sa-matches-gd-step"}}
RIVAL_LABEL = {"gd": "one GD step", "gd-half-rate": "one GD step at half the searched rate",
               "gd-double-rate": "one GD step at twice the searched rate",
               "kernel_gd": "kernel GD (exp kernel, adaptive rate)",
               "exp_fixed": "kernel GD with its best fixed rate (exp kernel, rate searched)"}
LEARNABLE = 0.5               # a clustered tau is in scope when the better model's accuracy is >= halfway from 1/C to 1


#: Short titles of the checks for the book's tables (MyST maths); a baseline is titled after its check.
TITLES = {
    'softmax-ge-linear-uniform-untrained': 'the untrained softmax unit against trained linear',
    'softmax-ge-linear-balanced-untrained': 'the untrained softmax unit against trained linear',
    'softmax-ge-linear-clustered-tight-untrained': 'the untrained softmax unit against trained linear',
    'softmax-ge-linear-clustered-loose-untrained': 'the untrained softmax unit against trained linear',
    'linear-sa-matches-kernel-gd': 'the wrong algorithm (kernel GD)',
    'linear-sa-matches-gd-step-half-rate': 'one GD step at half the rate',
    'linear-sa-matches-gd-step-double-rate': 'one GD step at twice the rate',
    'softmax-sa-matches-gd-step': 'the wrong algorithm (GD step)',
    'softmax-sa-matches-fixed-rate-kernel-gd': 'kernel GD with its best fixed rate',
    'learned-eta-matches-search-other-task': 'the rate searched on another task',
    'learned-beta-gamma-match-search-other-task': 'the values searched on another task',
    'prop31-construction-kernel-gd': 'kernel GD at the same rate',
    'kernel-shape-follows-class-subspace-uniform-task': 'units trained on the uniform task',
    'linear-sa-matches-gd-step': 'linear SA computes one GD step',
    'softmax-sa-matches-kernel-gd': 'softmax SA computes one kernel-GD step',
    'softmax-ge-linear-uniform': 'softmax ≥ linear, uniform argmax',
    'softmax-ge-linear-balanced': 'softmax ≥ linear, class-balanced',
    'softmax-ge-linear-clustered-tight': 'softmax ≥ linear, tight clusters',
    'softmax-ge-linear-clustered-loose': 'softmax ≥ linear, loosest learnable clusters',
    'prop31-construction': 'the construction of Proposition 3.1 is the GD step',
}


def _ge_decide(run: Run, cid: str, cells: dict, what: str, kind: str, source: str, a: str = "softmax SA",
               b: str = "linear SA", **kw) -> None:
    """A softmax >= linear check decided by the statistical design: per cell, the per-seed log of ``a``'s test CE
    over ``b``'s (non-inferiority: the upper 95% bound of the seed mean below log 1.05)."""
    seeds = sorted({len(x[0] if isinstance(x, tuple) else x) for x in cells.values()})
    run.decide(cid, f"{what}: log of {a}'s test CE over {b}'s per seed ({', '.join(map(str, seeds))} seeds), at "
               f"{', '.join(cells)}; upper bound of mean log CE ratio vs log 1.05", cells, kind=kind, source=source,
               **kw)


def _with(table, extra):
    """A unit table with more units appended (the untrained softmax units beside the trained ones)."""
    return type(table)(table.configs + extra.configs, np.concatenate([table.ce, extra.ce]),
                       np.concatenate([table.correct, extra.correct]))


def check_claims(run: Run, ev: Evaluation, found: Search) -> None:
    run.titles.update(TITLES)
    cfg = run.cfg
    main = ev.main
    # -- model-to-algorithm alignment (paper Figs 4-5) on the six match metrics, each against its rivals
    for m, cid in (("linear", "linear-sa-matches-gd-step"), ("softmax", "softmax-sa-matches-kernel-gd")):
        ks = [k for k, c in enumerate(main.configs) if c["model"] == m]
        src = "Dragutinovic et al. Fig. 4 (linear SA ~ GD step)" if m == "linear" else \
            "Dragutinovic et al. Fig. 5 (softmax SA ~ context-adaptive kernel GD)"
        own, *rivals = RIVALS[m]
        what = (f"{len(ks)} seeds, {cfg['eval_contexts']} evaluation contexts of the main setting: centred-logit "
                "cosine, argmax agreement, relative |loss difference|, |difference of the probability of the correct "
                "class|, |entropy difference| / log C, probability L2 distance")
        cells = {mt: (np.array([main.match[k][own][mt] for k in ks]), main.log_steps,
                      main.match_history[mt][:, ks].mean(1)) for mt in MATCH_METRICS}
        run.decide(cid, f"trained {m} SA vs {RIVAL_LABEL[own]} at its searched hyperparameters ({what}); bound of "
                   "the metric nearest its threshold", cells,
                   kind="claim", source=src, ledger=ENTRY[m])
        for r in rivals:
            run.decide(CONTROL_ID[m][r], f"control: trained {m} SA vs {RIVAL_LABEL[r]} ({len(ks)} seeds, the same "
                       "six metrics)", {mt: np.array([main.match[k][r][mt] for k in ks]) for mt in MATCH_METRICS},
                       kind="control", source=f"control of {cid}: {RIVAL_LABEL[r]}", control_of=cid)
        own_end = main.align["logit_cosine"][-1, ks]
        own_init = main.align["logit_cosine"][0, ks]
        ctrl_end = main.control["logit_cosine"][-1, ks]
        spread = float(own_end.max() - own_end.min())
        margin = float(own_end.min() - max(own_init.max(), ctrl_end.max()))
        run.check(f"{m}-alignment-rises", f"{m} SA: worst seed's final logit cosine with {ALG[m]} "
                  f"({own_end.min():.3g}) minus the larger of "
                  f"the best seed's cosine at initialisation ({own_init.max():.3g}) and the best seed's final cosine "
                  f"with the control algorithm {CONTROL_ALG[m]} ({ctrl_end.max():.3g})", margin, margin > spread,
                  f"> the seeds' spread of the final cosine ({spread:.2g})", kind="finding",
                  source="beyond the papers: the caption of panel (a) names 'alignment metrics through transformer "
                  "training' without stating how they move", ledger=ENTRY[m])
    # -- learned vs searched hyperparameters, with the searched values of another task as the control
    hp = hyperparameters(run, ev, found)
    other = label(ctasks.task_spec("clustered", tau=cfg["taus"][0]))
    for tag, eta, beta, gamma in (("", hp.eta_searched, hp.beta_searched, hp.gamma_searched),
                                  ("control", hp.eta_other, hp.beta_other, hp.gamma_other)):
        r_eta = np.abs(hp.eta_learned / eta - 1)
        r_b, r_g = np.abs(hp.beta_learned / beta - 1), np.abs(hp.gamma_learned / gamma - 1)
        worst = float(max(r_b.max(), r_g.max()))
        kind = "control" if tag else "finding"
        where = f"searched on the {other} task (control)" if tag else "searched on the same task"
        id1 = "learned-eta-matches-search" + ("-other-task" if tag else "")
        id2 = "learned-beta-gamma-match-search" + ("-other-task" if tag else "")
        run.check(id1, f"learned eta = a b vs eta {where} ({eta:.3g}): worst relative deviation over seeds",
                  float(r_eta.max()), bool(r_eta.max() <= HYPER_TOL), f"<= {HYPER_TOL}", kind=kind,
                  source="control of learned-eta-matches-search" if tag else "beyond the papers: is the learned step "
                  "the loss-optimal GD step?", control_of="learned-eta-matches-search" if tag else None,
                  ledger=None if tag else "linear-sa-gd-step")
        run.check(id2, f"learned beta, gamma vs ({beta:.3g}, {gamma:.3g}) {where}: worst relative deviation over "
                  f"seeds (beta {r_b.max():.3g}, gamma {r_g.max():.3g})", worst, worst <= HYPER_TOL,
                  f"<= {HYPER_TOL} for both", kind=kind,
                  source="control of learned-beta-gamma-match-search" if tag else "beyond the papers: are the learned "
                  "kernel width and rate the loss-optimal ones?",
                  control_of="learned-beta-gamma-match-search" if tag else None,
                  ledger=None if tag else "softmax-sa-kernel-gd")
    # -- softmax >= linear (the title): one claim, a map over the readings at the captions' setting n = n_main; the
    #    untrained softmax unit must fail each reading; other n, (C, d), lengths and tasks are findings
    rows = compare(ev.readings)
    lr = log_ratios(ev.readings)
    lr_base = log_ratios(_with(ev.readings, ev.readings_untrained), "untrained", "linear")
    # the captions' n = n_main where the profile trains the readings there (smoke does not: its largest n)
    taus = cfg["taus"]
    n0 = ev.trajectory.n
    C, d = cfg["C"], cfg["d"]
    at = lambda rs, t, n=None: [r for r in rs if r.task == t and (n is None or r.n == n)]  # noqa: E731
    chance = 1.0 / cfg["C"]
    learnable = [t for t in taus if max(max(r.acc_a, r.acc_b) for r in at(rows, ctasks.task_spec("clustered", tau=t),
                                                                               n0)) >= chance + LEARNABLE * (1 - chance)]
    loose = max(learnable) if learnable else taus[0]
    readings = (("uniform", uniform_task(), "uniform argmax reading"),
                ("balanced", ctasks.task_spec("balanced"), "class-balanced reading"),
                ("clustered-tight", ctasks.task_spec("clustered", tau=taus[0]),
                 f"class-clustered reading, tightest tau = {taus[0]:g}"),
                ("clustered-loose", ctasks.task_spec("clustered", tau=loose),
                 f"class-clustered reading, loosest learnable tau = {loose:g} (accuracy of the better model >= "
                 f"{chance + LEARNABLE * (1 - chance):.2g} at taus {', '.join(f'{t:g}' for t in learnable) or 'none'})"))
    traj = {k: [] for k in lr}
    for table in ev.trajectory.tables:                  # the seed mean of the log ratio at every logged step
        for k, v in log_ratios(table).items():
            traj[k].append(float(v.mean()))
    for tag, task, what in readings:
        cid = f"softmax-ge-linear-{tag}"
        key = (task, C, d, n0)
        _ge_decide(run, cid, {f"n = {n0}": (lr[key], ev.trajectory.steps, np.array(traj[key]))}, what, "claim",
                   SRC_TITLE, ledger="softmax-ge-linear")
        _ge_decide(run, cid + "-untrained", {f"n = {n0}": lr_base[key]}, f"control: {what}", "control", BASE,
                   a="untrained softmax SA", b="trained linear SA", control_of=cid)
    other = {f"{label(t)}, n = {n}": lr[(t, C, d, n)] for _, t, _ in readings for n in cfg["n_values"]
             if n != n0 and (t, C, d, n) in lr}
    if other:
        _ge_decide(run, "softmax-ge-linear-other-n", other, "the same readings at the other context lengths",
                   "finding", "beyond the papers: context lengths other than the captions' n = 100",
                   ledger="softmax-ge-linear")
    shp = compare(ev.shapes)
    _ge_decide(run, "softmax-ge-linear-other-C-d", {f"(C, d) = ({c}, {dd})": v for (_, c, dd, _), v in
                                                    log_ratios(ev.shapes).items()},
               f"uniform argmax reading at n = {n0}, other (C, d)", "finding",
               "beyond the papers: (C, d) other than the captions' (5, 5)", ledger="softmax-ge-linear")
    ext = compare(ev.extras)
    _ge_decide(run, "softmax-ge-linear-local", {f"n = {n}": v for (t, _, _, n), v in log_ratios(ev.extras).items()
                                                if t[0] == "uniform"},
               f"local task (P = {cfg['local_prototypes']}, beyond the papers)", "finding",
               "beyond the papers: a task whose classes are not linearly separable", ledger="softmax-ge-linear")
    for mt in ("uniform", "clustered"):
        task = next(t for t in mixture_tasks(cfg) if t[0] == mt)
        what = f"{label(task)} reading, trained over lengths {cfg['mix_lengths'][0]}..{cfg['mix_lengths'][1]}"
        for suffix, b, lin in (("", "linear", "linear SA normalised by 1/n"),
                               ("-unnormalised", "linear_sum", "unnormalised linear SA")):
            cells = {f"test n = {n}": v for (t, _, _, n), v in log_ratios(ev.mixture, "softmax", b).items()
                     if t == task}
            _ge_decide(run, f"softmax-ge-linear-mixed-lengths-{mt}{suffix}", cells, what, "finding",
                       "beyond the papers: mixtures of context lengths and unseen lengths (no source mentions them)",
                       b=lin, ledger="softmax-ge-linear")
    # -- where the claim holds on the clustered reading: the crossover
    maps = ratio_maps(run, ev)
    cross = maps[0].crossover
    run.check("clustered-crossover-within-sweep", f"class-clustered reading: the trained softmax/linear CE ratio rises "
              f"through 1 within tau in [{taus[0]:g}, {taus[-1]:g}] at every n in {cfg['n_values']} (crossover tau "
              f"per n: {', '.join(f'{c:.3g}' for c in cross)})", float(np.nanmax(cross)) if np.isfinite(cross).any()
              else float("nan"), bool(np.isfinite(cross).all()), "a crossing at every n", kind="finding",
              source="beyond the papers: where the title claim holds", ledger="softmax-ge-linear")
    # -- which ingredient: the two ablated steps, each free to take its best parameters, at every n of the sweep
    ab = {(r.task, r.n): r for r in ablation(ev)}
    for t, tag in ((uniform_task(), "uniform"), (ctasks.task_spec("clustered", tau=taus[0]), "clustered-tight")):
        rs = [ab[(t, n)] for n in cfg["n_values"] if (t, n) in ab]
        for cid, cost, se, what in (
                (f"adaptive-rate-matters-{tag}", "rate_cost", "rate_cost_se",
                 "CE increase when kernel GD's adaptive rate is replaced by a fixed (searched) rate"),
                (f"kernel-shape-matters-{tag}", "kernel_cost", "kernel_cost_se",
                 "CE increase when the exp kernel is replaced by the linear kernel 1 + beta x^T x' (beta free in "
                 "[0.01, 100], searched) with the adaptive rate kept")):
            costs = [getattr(r, cost) for r in rs]
            ok = [getattr(r, cost) > 2 * getattr(r, se) for r in rs]
            run.check(cid, f"{label(t)}, at every n = {[r.n for r in rs]}: {what}; smallest over n (per n: "
                      f"{', '.join(f'{c:.3g}' for c in costs)})", min(costs), all(ok),
                      "> 2 paired s.e. at every n", kind="finding", source=SRC_TLDR, ledger="softmax-ge-linear")
    # -- Proposition 3.1: the construction is the GD step (and not kernel GD at the same rate)
    pc = ev.construction
    for tag, dev, kind in (("", pc["gd"], "claim"), ("-kernel-gd", pc["kernel_gd"], "control")):
        run.check("prop31-construction" + tag, ("control: the same construction against kernel GD at the same rate; "
                  if tag else "") + "linear SA with (W_K^T W_Q)_xx = a I, W_V's label block b I: largest |difference| "
                  f"of class probabilities from the GD step with eta = a b, over {pc['contexts']} evaluation contexts",
                  float(dev), dev <= PROP31_TOL, f"<= {PROP31_TOL:g}", kind=kind,
                  **({"ledger": "proposition-3-1", "source": "Dragutinovic et al. Proposition 3.1"} if not tag else
                     {"control_of": "prop31-construction", "source": BASE}))
    # -- the meta-learned kernel shape: class structure in a k-dim subspace
    ks = ev.kernel
    iso = ks.k / cfg["d"]
    need = (1 + iso) / 2
    run.check("kernel-shape-follows-class-subspace", f"subspace task (class vectors in {ks.k} of d = {cfg['d']} "
              f"coordinates): worst seed's share tr(A_SS)/tr(A_xx) of the trained softmax kernel on the class subspace "
              f"(isotropic beta I: {iso:.2g})", float(ks.frac_sub.min()), bool(ks.frac_sub.min() >= need),
              f">= {need:.2g} (halfway from isotropic to all on the subspace)", kind="finding",
              source=SRC_TLDR + " (meta-learned kernel shape)", ledger="softmax-ge-linear")
    run.check("kernel-shape-follows-class-subspace-uniform-task", "control: the same share for the softmax units "
              "trained on the uniform task (no class subspace), best seed", float(ks.frac_uni.max()),
              bool(ks.frac_uni.max() >= need), f">= {need:.2g}", kind="control",
              source="control of kernel-shape-follows-class-subspace", control_of="kernel-shape-follows-class-subspace")
    gain_sub = ks.cos_aniso_sub - ks.cos_iso_sub
    gain_uni = ks.cos_aniso_uni - ks.cos_iso_uni
    run.check("anisotropic-kernel-gd-fits-better", "subspace task: gain in logit cosine with the trained softmax "
              "unit when kernel GD read off its weights is anisotropic (beta_S, beta_perp) instead of isotropic, worst "
              f"seed (uniform task, control: best seed {gain_uni.max():.3g})", float(gain_sub.min()),
              bool(gain_sub.min() > max(0.0, float(gain_uni.max()))), "> 0 and > the control's gain", kind="finding",
              source="beyond the papers: is the learned shape what the unit computes")
    run.record(
        hyperparameters=hp.__dict__,
        final_alignment={m: {mm: float(np.mean([main.final[k][mm] for k, c in enumerate(main.configs)
                                                if c["model"] == m])) for mm in main.final[0]} for m in MODELS},
        control_alignment={m: {mm: float(np.mean([main.final_control[k][mm] for k, c in enumerate(main.configs)
                                                  if c["model"] == m])) for mm in main.final_control[0]} for m in MODELS},
        softmax_vs_linear=[r.__dict__ for r in rows], softmax_vs_linear_shapes=[r.__dict__ for r in shp],
        softmax_vs_linear_extras=[r.__dict__ for r in ext],
        mixture=[r.__dict__ for r in compare(ev.mixture, "softmax", "linear")]
        + [r.__dict__ for r in compare(ev.mixture, "softmax", "linear_sum")],
        ratio_maps=[m.__dict__ for m in maps], ablation=[r.__dict__ for r in ablation(ev)],
        kernel_shape=dict(frac_sub=ks.frac_sub, frac_uni=ks.frac_uni, cos_iso_sub=ks.cos_iso_sub,
                          cos_aniso_sub=ks.cos_aniso_sub, cos_iso_uni=ks.cos_iso_uni, cos_aniso_uni=ks.cos_aniso_uni),
    )
    # wall-clock training times depend on the machine and its load: provenance, not results (the regression check
    # compares key_numbers, not timings)
    run.timings.update({f"train_{k}": float(v) for k, v in ev.train_seconds.items()})
