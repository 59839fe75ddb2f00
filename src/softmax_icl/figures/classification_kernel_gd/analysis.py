"""Evaluation of the trained units and the searched algorithms on fixed evaluation sets (cached), and the
tables derived from it."""

from __future__ import annotations

import numpy as np
import torch

from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...records import Run
from .sweeps import ALG, MODELS, _dims, _setting_index


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
        batch = ctasks.fixed_batch(sets, _dims(cfg), cfg["eval_seed"], cfg["eval_contexts"], dev)
        # algorithms at their searched hyperparameters on every setting: per-context CE and correctness
        alg = {}
        for name in calg.ALGORITHMS:
            lg, _ = calg.algorithm_on(name, found[name]["beta"], found[name]["rate"], batch)
            st = cmetrics.per_context_stats(lg, batch.label_q, batch.class_mask)
            alg[name] = {k: v.cpu().numpy() for k, v in st.items()}                        # (S, B)
        out["alg"] = alg

        # -- main programme: alignment through training and at the end
        res = results["main"]
        K = len(res.configs)
        i_main = _setting_index(sets, res.configs[0])
        is_soft = torch.tensor([c["model"] == "softmax" for c in res.configs], device=dev)
        nA = min(cfg["align_contexts"], cfg["eval_contexts"])
        abatch = ctasks.take(batch, [i_main], slice(0, nA))
        targets = {}
        for name in ("gd", "kernel_gd"):
            lg, jac = calg.algorithm_on(name, found[name]["beta"][i_main:i_main + 1], found[name]["rate"][i_main:i_main + 1],
                                      abatch, jacobian=True)
            targets[name] = (lg[0], jac[0])
        T = len(res.log_steps)
        hist = {m: np.zeros((T, K)) for m in cmetrics.METRICS}
        Ah, Vh = res.A_history, res.WV_history
        flat = [(t, k) for t in range(T) for k in range(K)]
        step = 16
        for f0 in range(0, len(flat), step):
            tk = flat[f0:f0 + step]
            A = _t(np.stack([Ah[t, k] for t, k in tk]), run)
            V = _t(np.stack([Vh[t, k] for t, k in tk]), run)
            soft = torch.stack([is_soft[k] for _, k in tk])
            lg, jac = cmodels.models_on(A, V, soft, abatch, [0] * len(tk), chunk=256, jacobian=True)
            for j, (t, k) in enumerate(tk):
                tl, tj = targets[ALG[res.configs[k]["model"]]]
                met = cmetrics.alignment_metrics(lg[j], tl, jac[j], tj)
                for m in cmetrics.METRICS:
                    hist[m][t, k] = float(met[m].mean())
        out["align_history"] = hist
        out["log_steps"] = res.log_steps
        out["main_configs"] = res.configs

        # final models on the whole evaluation set: per-context statistics vs their algorithm
        A, V = _t(res.A_history[-1], run), _t(res.WV_history[-1], run)
        lg_main, _ = cmodels.models_on(A, V, is_soft, batch, [i_main] * K)
        lb = batch.label_q[i_main]
        per_ctx, final_align, implied = [], [], []
        ro = cmodels.read_off(res.A_history[-1], res.WV_history[-1], cfg["d"], cfg["C"])
        for k, c in enumerate(res.configs):
            name = ALG[c["model"]]
            st_m = {kk: v.cpu().numpy() for kk, v in cmetrics.per_context_stats(lg_main[k], lb).items()}
            st_a = {kk: v[i_main] for kk, v in alg[name].items()}
            per_ctx.append({"model": st_m, "alg": st_a})
            # the algorithm at the hyperparameters implied by this model's weights
            if name == "gd":
                b_imp, r_imp = 0.0, ro["product"][k]
            else:
                b_imp, r_imp = ro["scale"][k], ro["value"][k]
            lg_imp, _ = calg.algorithm_on(name, [b_imp], [r_imp], ctasks.take(batch, [i_main]))
            met_imp = cmetrics.alignment_metrics(lg_main[k], lg_imp[0])
            lg_s, _ = calg.algorithm_on(name, found[name]["beta"][i_main:i_main + 1],
                                      found[name]["rate"][i_main:i_main + 1], ctasks.take(batch, [i_main]))
            met_s = cmetrics.alignment_metrics(lg_main[k], lg_s[0])
            final_align.append({m: float(v.mean()) for m, v in met_s.items()})
            implied.append({m: float(v.mean()) for m, v in met_imp.items()})
            implied[-1]["ce"] = float(cmetrics.per_context_stats(lg_imp[0], lb)["ce"].mean())
        out["per_context"] = per_ctx
        out["final_align"] = final_align
        out["implied_align"] = implied
        out["read_off"] = ro

        # -- context programme: every unit on its setting
        rc = results["context"]
        idx = [_setting_index(sets, c) for c in rc.configs]
        soft_c = torch.tensor([c["model"] == "softmax" for c in rc.configs], device=dev)
        lg_c, _ = cmodels.models_on(_t(rc.A_history[-1], run), _t(rc.WV_history[-1], run), soft_c, batch, idx)
        st_c = cmetrics.per_context_stats(lg_c, batch.label_q[torch.tensor(idx, device=dev)])
        out["context"] = {"configs": rc.configs, "ce": st_c["ce"].cpu().numpy(), "correct": st_c["correct"].cpu().numpy()}
        # alignment of the context units with their algorithm (all tasks, all n)
        al = []
        for k, c in enumerate(rc.configs):
            i = idx[k]
            name = ALG[c["model"]]
            lg_a, _ = calg.algorithm_on(name, found[name]["beta"][i:i + 1], found[name]["rate"][i:i + 1],
                                      ctasks.take(batch, [i]))
            met = cmetrics.alignment_metrics(lg_c[k], lg_a[0])
            al.append({m: float(v.mean()) for m, v in met.items()})
        out["context"]["align"] = al

        # -- shapes programme
        rs = results["shapes"]
        sw = rs.sweep
        shape_sets = [dict(C=c, P=1, d=d, n=cfg["n_main"]) for c, d in sw["shapes"]]
        sbatch = ctasks.fixed_batch(shape_sets, tuple(rs.dims), cfg["eval_seed"], cfg["eval_contexts"], dev)
        sidx = [_setting_index(shape_sets, c) for c in rs.configs]
        soft_s = torch.tensor([c["model"] == "softmax" for c in rs.configs], device=dev)
        lg_s, _ = cmodels.models_on(_t(rs.A_history[-1], run), _t(rs.WV_history[-1], run), soft_s, sbatch, sidx)
        ti = torch.tensor(sidx, device=dev)
        cm = None if sbatch.class_mask is None else sbatch.class_mask[ti]
        st_s = cmetrics.per_context_stats(lg_s, sbatch.label_q[ti], cm)
        out["shapes"] = {"configs": rs.configs, "ce": st_s["ce"].cpu().numpy(), "correct": st_s["correct"].cpu().numpy()}
        out["train_seconds"] = {k: r.timings["train_seconds"] for k, r in results.items()}
        return out

    key = {"train": {k: r.sweep for k, r in results.items()}, "search": {k: cfg[k] for k in ("search_contexts", "search_seed")},
           "eval": {k: cfg[k] for k in ("eval_contexts", "align_contexts", "eval_seed")}}
    return run.cached("evaluate", key, compute)


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
        ce = {name: a["alg"][name]["ce"][i] for name in calg.ALGORITHMS}
        d_rate, se_rate = _paired(ce["exp_fixed"], ce["kernel_gd"])
        d_kern, se_kern = _paired(ce["linear_norm"], ce["kernel_gd"])
        rows.append(dict(P=s["P"], n=s["n"], **{f"ce_{k}": float(v.mean()) for k, v in ce.items()},
                         **{f"acc_{k}": float(a["alg"][k]["correct"][i].mean()) for k in calg.ALGORITHMS},
                         rate_cost=d_rate, rate_se=se_rate, kernel_cost=d_kern, kernel_se=se_kern))
    return rows
