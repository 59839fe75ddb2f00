"""In-context classification by (kernel) gradient descent (Dragutinovic, Saxe, Singh 2025): compute, plots, claims.

Three batched training programs (each cached):

* ``main``: softmax and linear units in the main setting (C, d, n_main) on the paper's task, ``seeds`` runs, with
  the weights logged through training: alignment with the GD steps (paper Figs 4-5) and the learned
  hyperparameters;
* ``context``: both models x both tasks (paper's, local) x ``n_values``: softmax vs linear across n;
* ``shapes``: both models on the paper's task at n_main for other C and d: softmax vs linear across (C, d).

The GD steps' hyperparameters are searched on fresh contexts (one batched search per algorithm over every
(task, n) setting), and everything is evaluated on one fixed evaluation set per program.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ... import classification as cl
from ...plotting import MODEL_COLORS
from ...records import Run
from ...base import derive_seed

MODELS = cl.MODELS
ALG = cl.MODEL_ALGORITHM                                    # model -> the algorithm it is compared with
ALG_LABEL = {"gd": "one GD step", "kernel_gd": "kernel GD (exp kernel, adaptive rate)",
             "exp_fixed": "exp kernel, fixed rate", "linear_norm": "linear kernel, adaptive rate"}
ALG_COLORS = {"gd": MODEL_COLORS["gd"], "kernel_gd": MODEL_COLORS["kernel_gd"], "exp_fixed": "#ff7f0e",
              "linear_norm": "#8c564b"}
METRIC_LABEL = {"logit_cosine": "cosine of centred logits", "prob_l2": "L2 distance of probabilities",
                "jacobian_cosine": "cosine of Jacobians ∂ŷ/∂x_q", "argmax_agreement": "argmax agreement"}

# thresholds of the claims (chosen before looking at the results; stated in every verdict line)
ALIGN_COS_MIN = 0.95          # mean cosine of centred logits, trained model vs its algorithm, every seed
ALIGN_ARGMAX_MIN = 0.95       # argmax agreement, every seed
ALIGN_RISE_MIN = 0.5          # rise of the logit cosine from initialisation to the end of training
HYPER_TOL = 0.25              # |learned / searched - 1| for eta, beta, gamma, every seed


def task_name(P: int) -> str:
    return "paper's task (P = 1)" if P == 1 else f"local task (P = {P})"


def sweeps(cfg: dict) -> dict[str, cl.ClsSweep]:
    C, d = cfg["C"], cfg["d"]
    common = dict(batch_size=cfg["batch_size"], lr=cfg["lr"], init_scale=cfg["init_scale"], data_seed=cfg["data_seed"],
                  init_seed=cfg["init_seed"])
    shapes = tuple([(c, d) for c in cfg["shape_C"]] + [(C, dd) for dd in cfg["shape_d"]])
    return {
        "main": cl.ClsSweep(prototypes=(1,), shapes=((C, d),), n=(cfg["n_main"],), seeds=cfg["seeds"],
                            steps=cfg["steps_main"], log_every=max(1, cfg["steps_main"] // 25), **common),
        "context": cl.ClsSweep(prototypes=(1, cfg["local_prototypes"]), shapes=((C, d),), n=tuple(cfg["n_values"]),
                               seeds=cfg["sweep_seeds"], steps=cfg["steps"], log_every=max(1, cfg["steps"] // 10),
                               **common),
        "shapes": cl.ClsSweep(prototypes=(1,), shapes=shapes, n=(cfg["n_main"],), seeds=cfg["sweep_seeds"],
                              steps=cfg["steps"], log_every=max(1, cfg["steps"] // 10), **common),
    }


def train(run: Run) -> dict[str, cl.ClsResult]:
    """The three training programs, through the cache."""
    out = {}
    for tag, sw in sweeps(run.cfg).items():
        out[tag] = run.cached(f"train_{tag}", sw.to_dict(),
                              lambda sw=sw, tag=tag: cl.train_cls_sweep(sw, run.device, desc=f"train {tag}"))
    return out


def settings(cfg: dict) -> list[dict]:
    """(task, n) settings of the search and evaluation sets: both tasks x n_values, plus the main setting."""
    ns = sorted(set(cfg["n_values"]) | {cfg["n_main"]})
    return [dict(C=cfg["C"], P=P, d=cfg["d"], n=n) for P in (1, cfg["local_prototypes"]) for n in ns]


def _dims(cfg: dict) -> tuple:
    return (max(max(cfg["n_values"]), cfg["n_main"]), cfg["C"], cfg["local_prototypes"], cfg["d"])


def _setting_index(sets: list[dict], c: dict) -> int:
    return next(i for i, s in enumerate(sets) if (s["P"], s["n"], s["C"], s["d"]) == (c["P"], c["n"], c["C"], c["d"]))


# -- hyperparameter search ------------------------------------------------------------------------

ETA_GRID = np.geomspace(1.0, 1000.0, 61)


def search(run: Run) -> dict:
    """Searched (beta, rate) of every algorithm at every setting; CE profiles for the plots."""
    cfg = run.cfg
    sets = settings(cfg)

    def compute():
        # one setting at a time (memory); each draws the same raw contexts as a joint draw would
        parts = []
        for s in sets:
            batch = cl.fixed_batch([s], _dims(cfg), cfg["search_seed"], cfg["search_contexts"], run.device)
            part = {name: cl.search_hyperparameters(name, batch) for name in cl.ALGORITHMS}
            # CE of the GD step along an eta grid (for the plot of the search)
            z = cl.algorithm_features_grid("gd", batch, [0.0])[:, 0]                       # (1, B, C)
            part["gd_eta_profile"] = np.array([float(cl.masked_ce(e * z, batch.label_q).mean()) for e in ETA_GRID])
            parts.append(part)
        out = {"settings": sets, "gd_eta_profile": np.stack([p["gd_eta_profile"] for p in parts])}
        for name in cl.ALGORITHMS:
            out[name] = {k: (parts[0][name][k] if k == "grid" else np.concatenate([p[name][k] for p in parts]))
                         for k in parts[0][name]}
        return out

    key = {k: cfg[k] for k in ("C", "d", "n_main", "local_prototypes", "n_values", "search_contexts", "search_seed")}
    return run.cached("search", key, compute)


# -- evaluation -----------------------------------------------------------------------------------

def _t(x, run):
    return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=run.device)


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of a - b over contexts."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size))


def evaluate(run: Run, results: dict, found: dict) -> dict:
    """Everything the figures and claims need, as numpy arrays (cached)."""
    cfg = run.cfg
    sets = found["settings"]

    def compute():
        dev = run.device
        out = {"settings": sets}
        batch = cl.fixed_batch(sets, _dims(cfg), cfg["eval_seed"], cfg["eval_contexts"], dev)
        # algorithms at their searched hyperparameters on every setting: per-context CE and correctness
        alg = {}
        for name in cl.ALGORITHMS:
            lg, _ = cl.algorithm_on(name, found[name]["beta"], found[name]["rate"], batch)
            st = cl.per_context_stats(lg, batch.label_q, batch.class_mask)
            alg[name] = {k: v.cpu().numpy() for k, v in st.items()}                        # (S, B)
        out["alg"] = alg

        # -- main programme: alignment through training and at the end
        res = results["main"]
        K = len(res.configs)
        i_main = _setting_index(sets, res.configs[0])
        is_soft = torch.tensor([c["model"] == "softmax" for c in res.configs], device=dev)
        nA = min(cfg["align_contexts"], cfg["eval_contexts"])
        abatch = cl.take(batch, [i_main], slice(0, nA))
        targets = {}
        for name in ("gd", "kernel_gd"):
            lg, jac = cl.algorithm_on(name, found[name]["beta"][i_main:i_main + 1], found[name]["rate"][i_main:i_main + 1],
                                      abatch, jacobian=True)
            targets[name] = (lg[0], jac[0])
        T = len(res.log_steps)
        hist = {m: np.zeros((T, K)) for m in cl.METRICS}
        Ah, Vh = res.A_history, res.WV_history
        flat = [(t, k) for t in range(T) for k in range(K)]
        step = 16
        for f0 in range(0, len(flat), step):
            tk = flat[f0:f0 + step]
            A = _t(np.stack([Ah[t, k] for t, k in tk]), run)
            V = _t(np.stack([Vh[t, k] for t, k in tk]), run)
            soft = torch.stack([is_soft[k] for _, k in tk])
            lg, jac = cl.models_on(A, V, soft, abatch, [0] * len(tk), chunk=256, jacobian=True)
            for j, (t, k) in enumerate(tk):
                tl, tj = targets[ALG[res.configs[k]["model"]]]
                met = cl.alignment_metrics(lg[j], tl, jac[j], tj)
                for m in cl.METRICS:
                    hist[m][t, k] = float(met[m].mean())
        out["align_history"] = hist
        out["log_steps"] = res.log_steps
        out["main_configs"] = res.configs

        # final models on the whole evaluation set: per-context statistics vs their algorithm
        A, V = _t(res.A_history[-1], run), _t(res.WV_history[-1], run)
        lg_main, _ = cl.models_on(A, V, is_soft, batch, [i_main] * K)
        lb = batch.label_q[i_main]
        per_ctx, final_align, implied = [], [], []
        ro = cl.read_off(res.A_history[-1], res.WV_history[-1], cfg["d"], cfg["C"])
        for k, c in enumerate(res.configs):
            name = ALG[c["model"]]
            st_m = {kk: v.cpu().numpy() for kk, v in cl.per_context_stats(lg_main[k], lb).items()}
            st_a = {kk: v[i_main] for kk, v in alg[name].items()}
            per_ctx.append({"model": st_m, "alg": st_a})
            # the algorithm at the hyperparameters implied by this model's weights
            if name == "gd":
                b_imp, r_imp = 0.0, ro["product"][k]
            else:
                b_imp, r_imp = ro["scale"][k], ro["value"][k]
            lg_imp, _ = cl.algorithm_on(name, [b_imp], [r_imp], cl.take(batch, [i_main]))
            met_imp = cl.alignment_metrics(lg_main[k], lg_imp[0])
            lg_s, _ = cl.algorithm_on(name, found[name]["beta"][i_main:i_main + 1],
                                      found[name]["rate"][i_main:i_main + 1], cl.take(batch, [i_main]))
            met_s = cl.alignment_metrics(lg_main[k], lg_s[0])
            final_align.append({m: float(v.mean()) for m, v in met_s.items()})
            implied.append({m: float(v.mean()) for m, v in met_imp.items()})
            implied[-1]["ce"] = float(cl.per_context_stats(lg_imp[0], lb)["ce"].mean())
        out["per_context"] = per_ctx
        out["final_align"] = final_align
        out["implied_align"] = implied
        out["read_off"] = ro

        # -- context programme: every unit on its setting
        rc = results["context"]
        idx = [_setting_index(sets, c) for c in rc.configs]
        soft_c = torch.tensor([c["model"] == "softmax" for c in rc.configs], device=dev)
        lg_c, _ = cl.models_on(_t(rc.A_history[-1], run), _t(rc.WV_history[-1], run), soft_c, batch, idx)
        st_c = cl.per_context_stats(lg_c, batch.label_q[torch.tensor(idx, device=dev)])
        out["context"] = {"configs": rc.configs, "ce": st_c["ce"].cpu().numpy(), "correct": st_c["correct"].cpu().numpy()}
        # alignment of the context units with their algorithm (all tasks, all n)
        al = []
        for k, c in enumerate(rc.configs):
            i = idx[k]
            name = ALG[c["model"]]
            lg_a, _ = cl.algorithm_on(name, found[name]["beta"][i:i + 1], found[name]["rate"][i:i + 1],
                                      cl.take(batch, [i]))
            met = cl.alignment_metrics(lg_c[k], lg_a[0])
            al.append({m: float(v.mean()) for m, v in met.items()})
        out["context"]["align"] = al

        # -- shapes programme
        rs = results["shapes"]
        sw = rs.sweep
        shape_sets = [dict(C=c, P=1, d=d, n=cfg["n_main"]) for c, d in sw["shapes"]]
        sbatch = cl.fixed_batch(shape_sets, tuple(rs.dims), cfg["eval_seed"], cfg["eval_contexts"], dev)
        sidx = [_setting_index(shape_sets, c) for c in rs.configs]
        soft_s = torch.tensor([c["model"] == "softmax" for c in rs.configs], device=dev)
        lg_s, _ = cl.models_on(_t(rs.A_history[-1], run), _t(rs.WV_history[-1], run), soft_s, sbatch, sidx)
        ti = torch.tensor(sidx, device=dev)
        cm = None if sbatch.class_mask is None else sbatch.class_mask[ti]
        st_s = cl.per_context_stats(lg_s, sbatch.label_q[ti], cm)
        out["shapes"] = {"configs": rs.configs, "ce": st_s["ce"].cpu().numpy(), "correct": st_s["correct"].cpu().numpy()}
        out["train_seconds"] = {k: r.timings["train_seconds"] for k, r in results.items()}
        return out

    key = {"train": {k: r.sweep for k, r in results.items()}, "search": {k: cfg[k] for k in ("search_contexts", "search_seed")},
           "eval": {k: cfg[k] for k in ("eval_contexts", "align_contexts", "eval_seed")}}
    return run.cached("evaluate", key, compute)


# -- summaries ------------------------------------------------------------------------------------

def hyperparameters(run: Run, a: dict, found: dict) -> dict:
    """Searched vs learned hyperparameters in the main setting (per seed)."""
    i = _setting_index(a["settings"], a["main_configs"][0])
    ro = a["read_off"]
    models = np.array([c["model"] for c in a["main_configs"]])
    lin, soft = models == "linear", models == "softmax"
    return {
        "eta_searched": float(found["gd"]["rate"][i]), "eta_learned": ro["product"][lin],
        "beta_searched": float(found["kernel_gd"]["beta"][i]), "beta_learned": ro["scale"][soft],
        "gamma_searched": float(found["kernel_gd"]["rate"][i]), "gamma_learned": ro["value"][soft],
        "ce_gd_searched": float(found["gd"]["ce"][i]), "ce_kernel_searched": float(found["kernel_gd"]["ce"][i]),
        "ce_implied": np.array([x["ce"] for x in a["implied_align"]]), "models": models,
        "deviation": {k: ro[k] for k in ("xx_dev", "yy_dev", "yx_rel", "vx_rel")},
    }


def comparison(a: dict, prog: str = "context") -> list[dict]:
    """Softmax vs linear per setting of a programme: mean CE, accuracy, paired difference (mean over seeds)."""
    e = a[prog]
    cf = e["configs"]
    keys = sorted({(c["P"], c["C"], c["d"], c["n"]) for c in cf})
    rows = []
    for P, C, d, n in keys:
        sel = {m: [k for k, c in enumerate(cf) if (c["P"], c["C"], c["d"], c["n"], c["model"]) == (P, C, d, n, m)]
               for m in MODELS}
        ce = {m: e["ce"][sel[m]].mean(0) for m in MODELS}                                   # per context, seed-mean
        acc = {m: float(e["correct"][sel[m]].mean()) for m in MODELS}
        diff, se = _paired(ce["softmax"], ce["linear"])
        rows.append(dict(P=P, C=C, d=d, n=n, ce_softmax=float(ce["softmax"].mean()), ce_linear=float(ce["linear"].mean()),
                         acc_softmax=acc["softmax"], acc_linear=acc["linear"], diff=diff, se=se,
                         holds=bool(diff <= 2 * se)))
    return rows


def ablation(a: dict) -> list[dict]:
    """CE of the four algorithms per setting, and the paired cost of removing each ingredient."""
    rows = []
    for i, s in enumerate(a["settings"]):
        ce = {name: a["alg"][name]["ce"][i] for name in cl.ALGORITHMS}
        d_rate, se_rate = _paired(ce["exp_fixed"], ce["kernel_gd"])
        d_kern, se_kern = _paired(ce["linear_norm"], ce["kernel_gd"])
        rows.append(dict(P=s["P"], n=s["n"], **{f"ce_{k}": float(v.mean()) for k, v in ce.items()},
                         **{f"acc_{k}": float(a["alg"][k]["correct"][i].mean()) for k in cl.ALGORITHMS},
                         rate_cost=d_rate, rate_se=se_rate, kernel_cost=d_kern, kernel_se=se_kern))
    return rows


def key_numbers_table(run: Run, a: dict, found: dict) -> str:
    """Rounded numbers behind the claims (stable for nbval)."""
    hp = hyperparameters(run, a, found)
    lines = ["Main setting: C = {C}, d = {d}, n = {n_main}; final alignment with the searched algorithm "
             "(mean over seeds)".format(**run.cfg)]
    for m in MODELS:
        ks = [k for k, c in enumerate(a["main_configs"]) if c["model"] == m]
        fa = {mm: np.mean([a["final_align"][k][mm] for k in ks]) for mm in ("logit_cosine", "prob_l2", "argmax_agreement")}
        ja = np.mean(a["align_history"]["jacobian_cosine"][-1, ks])
        lines.append(f"  {m:<8} vs {ALG[m]:<10} logit cos {fa['logit_cosine']:.3f}, prob L2 {fa['prob_l2']:.3f}, "
                     f"Jacobian cos {ja:.3f}, argmax agreement {fa['argmax_agreement']:.3f}")
    for c, al in zip(a["context"]["configs"], a["context"]["align"]):
        if c["n"] == run.cfg["n_main"] and c["P"] != 1 and c["seed"] == 0:
            lines.append(f"  {c['model']:<8} vs {ALG[c['model']]:<10} logit cos {al['logit_cosine']:.3f}, prob L2 "
                         f"{al['prob_l2']:.3f}, argmax agreement {al['argmax_agreement']:.3f}  [{task_name(c['P'])}]")
    lines.append("Hyperparameters (searched | learned per seed):")
    lines.append(f"  eta   {hp['eta_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["eta_learned"]))
    lines.append(f"  beta  {hp['beta_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["beta_learned"]))
    lines.append(f"  gamma {hp['gamma_searched']:.3g} | " + ", ".join(f"{v:.3g}" for v in hp["gamma_learned"]))
    lines.append("Softmax vs linear units, test CE (accuracy):")
    for r in comparison(a, "context"):
        lines.append(f"  {task_name(r['P']):<22} n = {r['n']:<4} softmax {r['ce_softmax']:.3f} ({r['acc_softmax']:.3f})  "
                     f"linear {r['ce_linear']:.3f} ({r['acc_linear']:.3f})  softmax >= linear: {r['holds']}")
    for r in comparison(a, "shapes"):
        lines.append(f"  paper's task, C = {r['C']:<3} d = {r['d']:<3} n = {r['n']:<4} softmax {r['ce_softmax']:.3f} "
                     f"({r['acc_softmax']:.3f})  linear {r['ce_linear']:.3f} ({r['acc_linear']:.3f})  "
                     f"softmax >= linear: {r['holds']}")
    lines.append("Algorithms at searched hyperparameters, test CE: " + ", ".join(cl.ALGORITHMS))
    for r in ablation(a):
        lines.append(f"  {task_name(r['P']):<22} n = {r['n']:<4} " + ", ".join(f"{r['ce_' + k]:.3f}" for k in cl.ALGORITHMS))
    return "\n".join(lines)


# -- claims ---------------------------------------------------------------------------------------

def check_claims(run: Run, a: dict, found: dict) -> None:
    cfg = run.cfg
    hist = a["align_history"]
    hp = hyperparameters(run, a, found)
    for m, cid in (("linear", "linear-sa-matches-gd-step"), ("softmax", "softmax-sa-matches-kernel-gd")):
        ks = [k for k, c in enumerate(a["main_configs"]) if c["model"] == m]
        cos = np.array([a["final_align"][k]["logit_cosine"] for k in ks])
        agree = np.array([a["final_align"][k]["argmax_agreement"] for k in ks])
        run.check(cid, f"trained {m} SA vs {ALG_LABEL[ALG[m]]} at the searched hyperparameters (main setting): "
                  f"worst seed's mean cosine of centred logits (argmax agreement {agree.min():.3g})", cos.min(),
                  cos.min() >= ALIGN_COS_MIN and agree.min() >= ALIGN_ARGMAX_MIN,
                  f">= {ALIGN_COS_MIN} and argmax agreement >= {ALIGN_ARGMAX_MIN}, every seed")
        rise = hist["logit_cosine"][-1, ks] - hist["logit_cosine"][0, ks]
        run.check(f"{m}-alignment-rises", f"{m} SA: rise of the logit cosine with its algorithm from initialisation "
                  "to the end of training (worst seed)", rise.min(), rise.min() >= ALIGN_RISE_MIN,
                  f">= {ALIGN_RISE_MIN}")
    r_eta = np.abs(hp["eta_learned"] / hp["eta_searched"] - 1)
    run.check("learned-eta-matches-search", f"learned eta = a b (searched {hp['eta_searched']:.3g}): worst relative "
              "deviation over seeds", r_eta.max(), r_eta.max() <= HYPER_TOL, f"<= {HYPER_TOL}")
    r_b = np.abs(hp["beta_learned"] / hp["beta_searched"] - 1)
    r_g = np.abs(hp["gamma_learned"] / hp["gamma_searched"] - 1)
    worst = max(r_b.max(), r_g.max())
    run.check("learned-beta-gamma-match-search", f"learned beta, gamma (searched {hp['beta_searched']:.3g}, "
              f"{hp['gamma_searched']:.3g}): worst relative deviation over seeds (beta {r_b.max():.3g}, gamma "
              f"{r_g.max():.3g})", worst, worst <= HYPER_TOL, f"<= {HYPER_TOL} for both")
    rows = comparison(a, "context")
    for P in (1, cfg["local_prototypes"]):
        rs = [r for r in rows if r["P"] == P]
        ratio = max(r["ce_softmax"] / r["ce_linear"] for r in rs)
        fails = [r["n"] for r in rs if not r["holds"]]
        run.check(f"softmax-ge-linear-{'paper-task' if P == 1 else 'local-task'}",
                  f"{task_name(P)}: softmax SA test CE not above linear SA's at every n in {[r['n'] for r in rs]} "
                  f"(fails at n = {fails}); worst CE ratio softmax/linear", ratio, not fails,
                  "softmax CE <= linear CE + 2 paired s.e. at every n")
    rs = comparison(a, "shapes")
    fails = [(r["C"], r["d"]) for r in rs if not r["holds"]]
    ratio = max(r["ce_softmax"] / r["ce_linear"] for r in rs)
    run.check("softmax-ge-linear-other-C-d", f"paper's task at n = {cfg['n_main']}: softmax SA test CE not above "
              f"linear SA's for (C, d) in {[(r['C'], r['d']) for r in rs]} (fails at {fails}); worst CE ratio",
              ratio, not fails, "softmax CE <= linear CE + 2 paired s.e. for every (C, d)")
    allab = ablation(a)
    for r in [r for r in allab if r["n"] == cfg["n_main"]]:
        t = "paper-task" if r["P"] == 1 else "local-task"
        other = [q for q in allab if q["P"] == r["P"] and q["n"] != r["n"]]
        no_rate = [q["n"] for q in other if not q["rate_cost"] > 2 * q["rate_se"]]
        no_kern = [q["n"] for q in other if not q["kernel_cost"] > 2 * q["kernel_se"]]
        run.check(f"adaptive-rate-matters-{t}", f"{task_name(r['P'])}, n = {r['n']}: CE increase when the exp kernel's "
                  "adaptive rate is replaced by a fixed (searched) rate (at other n, not significant or reversed at "
                  f"n = {no_rate})", r["rate_cost"], r["rate_cost"] > 2 * r["rate_se"],
                  f"> 2 paired s.e. ({2 * r['rate_se']:.2g})")
        run.check(f"kernel-shape-matters-{t}", f"{task_name(r['P'])}, n = {r['n']}: CE increase when the exp kernel "
                  "is replaced by the linear kernel 1 + beta x^T x' with the adaptive rate kept (at other n, not "
                  f"significant or reversed at n = {no_kern})", r["kernel_cost"],
                  r["kernel_cost"] > 2 * r["kernel_se"], f"> 2 paired s.e. ({2 * r['kernel_se']:.2g})")
    run.record(
        final_alignment={m: {mm: float(np.mean([a["final_align"][k][mm] for k, c in enumerate(a["main_configs"])
                                                 if c["model"] == m])) for mm in a["final_align"][0]} for m in MODELS},
        jacobian_cosine_final={m: float(np.mean([hist["jacobian_cosine"][-1, k] for k, c in enumerate(a["main_configs"])
                                                  if c["model"] == m])) for m in MODELS},
        alignment_with_implied_hyperparameters={m: {mm: float(np.mean([a["implied_align"][k][mm] for k, c in
                                                                       enumerate(a["main_configs"]) if c["model"] == m]))
                                                    for mm in ("logit_cosine", "argmax_agreement", "ce")} for m in MODELS},
        hyperparameters={k: v for k, v in hp.items() if k not in ("models",)},
        softmax_runs_with_negative_beta=int((hp["beta_learned"] < 0).sum()),
        softmax_vs_linear=comparison(a, "context"), softmax_vs_linear_shapes=comparison(a, "shapes"),
        ablation=ablation(a), context_alignment=[dict(c, **al) for c, al in zip(a["context"]["configs"],
                                                                                 a["context"]["align"])],
    )


# -- plots ----------------------------------------------------------------------------------------

def plot_tasks(run: Run):
    """Example contexts (C, n_main) for d = 2 and d = 3, paper's task (top) and local task (bottom)."""
    cfg = run.cfg
    C, n, P = cfg["C"], cfg["n_main"], cfg["local_prototypes"]
    fig = plt.figure(figsize=(9, 8.2))
    colors = plt.cm.tab10(np.arange(C) % 10)
    for row, Pr in enumerate((1, P)):
        for col, d in enumerate((2, 3)):
            b = cl.sample_contexts(1, n, C, d, Pr, seed=derive_seed(cfg["eval_seed"], 101 + 10 * row + col))
            x = b.x_ctx[0, 0].numpy()
            lab = b.label_ctx[0, 0].numpy()
            pr = b.protos[0, 0].numpy()                                              # (C, P, d)
            title = f"{task_name(Pr)}, d = {d}"
            if d == 2:
                ax = fig.add_subplot(2, 2, 2 * row + col + 1)
                th = np.linspace(0, 2 * np.pi, 721)
                pts = np.stack([np.cos(th), np.sin(th)], 1)
                reg = np.argmax(np.max(np.einsum("td,cpd->tcp", pts, pr), -1), -1)
                for k in range(C):                                                  # class regions on the circle
                    m = np.where(reg == k, 1.0, np.nan)
                    ax.plot(1.12 * np.cos(th) * m, 1.12 * np.sin(th) * m, color=colors[k], lw=5, alpha=0.35)
                ax.plot(np.cos(th), np.sin(th), color="0.8", lw=0.6)
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], s=14, color=colors[k], label=f"class {k + 1}")
                    for p in pr[k]:
                        ax.annotate("", xy=p * 0.85, xytext=(0, 0),
                                    arrowprops=dict(arrowstyle="->", color=colors[k], lw=1.6))
                ax.set(aspect="equal", xlim=(-1.3, 1.3), ylim=(-1.3, 1.3), xlabel="x₁", ylabel="x₂", title=title)
                if row == 0:
                    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(-0.05, 1.0), framealpha=0.6)
            else:
                ax = fig.add_subplot(2, 2, 2 * row + col + 1, projection="3d")
                for k in range(C):
                    sel = lab == k
                    ax.scatter(x[sel, 0], x[sel, 1], x[sel, 2], s=10, color=colors[k])
                    for p in pr[k]:
                        ax.quiver(0, 0, 0, *(p * 0.9), color=colors[k], lw=1.6, arrow_length_ratio=0.15)
                ax.set(xlabel="x₁", ylabel="x₂", zlabel="x₃", title=title, xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1),
                       xticks=[-1, 0, 1], yticks=[-1, 0, 1], zticks=[-1, 0, 1])
                ax.set_box_aspect((1, 1, 1))
    fig.suptitle(f"One context each (C = {C}, n = {n}): arrows are the class vectors (prototypes), dots the "
                 "context inputs coloured by label; on the circle the bands show each class's region",
                 fontsize="small")
    return fig


def plot_alignment(run: Run, a: dict, model: str, seed: int = 0):
    """Paper Fig. 4 (linear) / Fig. 5 (softmax): alignment through training and per-context scatter plots."""
    ks = [k for k, c in enumerate(a["main_configs"]) if c["model"] == model]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    ax = axes[0]
    steps = a["log_steps"]
    for m, ls in zip(cl.METRICS, ("-", "--", "-.", ":")):
        v = a["align_history"][m][:, ks]
        ax.plot(steps, v.mean(1), ls, label=METRIC_LABEL[m])
        if v.shape[1] > 1:
            ax.fill_between(steps, v.min(1), v.max(1), alpha=0.2, lw=0)
    ax.set(xlabel="training step", ylabel="alignment", title=f"(a) {model} SA vs {ALG_LABEL[ALG[model]]}",
           ylim=(-0.05, 1.05))
    ax.legend(fontsize="x-small", loc="center right")
    k = ks[min(seed, len(ks) - 1)]
    pc = a["per_context"][k]
    rng = np.random.default_rng(0)
    B = pc["model"]["ce"].size
    sel = rng.choice(B, size=min(B, 1500), replace=False)
    for ax, key, lab, lo in zip(axes[1:], ("ce", "p_correct", "entropy"),
                                ("CE loss (nats)", "probability of the correct class", "entropy of ŷ (nats)"),
                                ("(b)", "(c)", "(d)")):
        xm, ya = pc["alg"][key], pc["model"][key]
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


def plot_hyperparameters(run: Run, a: dict, found: dict):
    """The searches: CE of the GD step against eta, and of kernel GD against beta (best gamma per beta)."""
    hp = hyperparameters(run, a, found)
    i = _setting_index(a["settings"], a["main_configs"][0])
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    ax = axes[0]
    ax.plot(ETA_GRID, found["gd_eta_profile"][i], color=ALG_COLORS["gd"], label="one GD step")
    ax.axvline(hp["eta_searched"], color=ALG_COLORS["gd"], ls="--", lw=1, label="searched η")
    for j, v in enumerate(hp["eta_learned"]):
        ax.axvline(v, color=MODEL_COLORS["linear"], ls=":", lw=1.2, label="learned η = a·b" if j == 0 else None)
    ax.set(xscale="log", xlabel="learning rate η", ylabel="expected CE (nats)", title="GD step: CE vs η")
    ax.legend(fontsize="x-small")
    g = found["kernel_gd"]
    ax = axes[1]
    ax.plot(g["grid"], g["grid_ce"][i], "o-", ms=3, color=ALG_COLORS["kernel_gd"], label="kernel GD, best γ per β")
    ax.axvline(hp["beta_searched"], color=ALG_COLORS["kernel_gd"], ls="--", lw=1, label="searched β")
    for j, v in enumerate(hp["beta_learned"]):
        ax.axvline(v, color=MODEL_COLORS["softmax"], ls=":", lw=1.2, label="learned β" if j == 0 else None)
    ax.set(xscale="log", xlabel="kernel parameter β", ylabel="expected CE (nats)", title="kernel GD: CE vs β",
           ylim=(min(g["grid_ce"][i]) - 0.05, min(g["grid_ce"][i]) + 0.6))
    ax.legend(fontsize="x-small")
    ax = axes[2]
    ax.plot(g["grid"], g["grid_rate"][i], color=ALG_COLORS["kernel_gd"], label="best γ for each β")
    ax.scatter([hp["beta_searched"]], [hp["gamma_searched"]], marker="*", s=140, color=ALG_COLORS["kernel_gd"],
               zorder=3, label="searched (β, γ)")
    ax.scatter(hp["beta_learned"], hp["gamma_learned"], marker="o", s=30, color=MODEL_COLORS["softmax"], zorder=4,
               label="learned (β, γ), one per seed")
    ax.set(xscale="log", yscale="log", xlabel="kernel parameter β", ylabel="rate γ", title="kernel GD: the (β, γ) valley")
    ax.legend(fontsize="x-small")
    return fig


def plot_softmax_vs_linear(run: Run, a: dict):
    """Test CE and accuracy of the trained units across n (both tasks) and across (C, d) (paper's task)."""
    cfg = run.cfg
    rows = comparison(a, "context")
    ab = ablation(a)
    fig, axes = plt.subplots(1, 5, figsize=(18, 4.0), layout="constrained")
    for j, P in enumerate((1, cfg["local_prototypes"])):
        rs = [r for r in rows if r["P"] == P]
        ns = [r["n"] for r in rs]
        ax_ce, ax_acc = axes[2 * j], axes[2 * j + 1]
        for m in MODELS:
            ax_ce.plot(ns, [r[f"ce_{m}"] for r in rs], "o-", color=MODEL_COLORS[m], label=f"trained {m} SA")
            ax_acc.plot(ns, [r[f"acc_{m}"] for r in rs], "o-", color=MODEL_COLORS[m], label=f"trained {m} SA")
        abs_ = [r for r in ab if r["P"] == P and r["n"] in ns]
        for name in ("gd", "kernel_gd"):
            ax_ce.plot([r["n"] for r in abs_], [r[f"ce_{name}"] for r in abs_], "--", color=ALG_COLORS[name],
                       label=ALG_LABEL[name] + " (searched)")
            ax_acc.plot([r["n"] for r in abs_], [r[f"acc_{name}"] for r in abs_], "--", color=ALG_COLORS[name],
                        label=ALG_LABEL[name] + " (searched)")
        ax_ce.set(xscale="log", xlabel="context length n", ylabel="test CE (nats)", title=task_name(P))
        ax_acc.set(xscale="log", xlabel="context length n", ylabel="test accuracy", title=task_name(P))
        for ax in (ax_ce, ax_acc):
            ax.set_xticks(ns, [str(n) for n in ns])
            ax.minorticks_off()
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize="small")
    ax = axes[4]
    rs = comparison(a, "shapes")
    lab = [f"C={r['C']}\nd={r['d']}" for r in rs]
    xs = np.arange(len(rs))
    for off, m in ((-0.2, "softmax"), (0.2, "linear")):
        ax.bar(xs + off, [r[f"ce_{m}"] for r in rs], width=0.4, color=MODEL_COLORS[m], label=f"{m} SA")
    ax.set_xticks(xs, lab)
    ax.set(ylabel="test CE (nats)", title=f"paper's task, n = {cfg['n_main']}: other C, d")
    ax.legend(fontsize="x-small")
    return fig


def plot_ablation(run: Run, a: dict):
    """The four algorithms (kernel shape x rate) at their searched hyperparameters, across n, per task."""
    cfg = run.cfg
    ab = ablation(a)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, P in zip(axes, (1, cfg["local_prototypes"])):
        rs = [r for r in ab if r["P"] == P]
        ns = [r["n"] for r in rs]
        for name, mk in zip(cl.ALGORITHMS, ("o", "s", "^", "v")):
            ax.plot(ns, [r[f"ce_{name}"] for r in rs], marker=mk, color=ALG_COLORS[name], label=ALG_LABEL[name])
        ax.set(xscale="log", xlabel="context length n", ylabel="test CE (nats)", title=task_name(P))
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
    axes[0].legend(fontsize="x-small")
    return fig
