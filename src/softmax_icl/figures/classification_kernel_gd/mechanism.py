"""The main setting's mechanism, evaluated on the fixed evaluation set (part of the cached evaluation): each trained
unit against its GD step and the step's rivals through training (paper Figs 4-5), Proposition 3.1's construction,
and the shape of the softmax kernel on the subspace task."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run
from .evalsets import eval_batch, tensor
from .sweeps import ALG, CONTROL_ALG, Search, setting_dict, task_of, uniform_task


@dataclass(frozen=True)
class MainEval:
    """Main setting: alignment of each unit through training with its algorithm and with the control algorithm."""

    configs: tuple
    log_steps: np.ndarray
    align: dict                          # metric -> (T, K), against the unit's own algorithm
    control: dict                        # metric -> (T, K), against the other algorithm (the control)
    per_context: tuple                   # per unit: (model stats, algorithm stats), dicts of (B,) arrays
    final: tuple                         # per unit: metric -> mean over the evaluation set (own algorithm)
    final_control: tuple                 # the same against the control algorithm
    implied: tuple                       # per unit: its algorithm at the hyperparameters read off its weights
    read_off: dict
    match: tuple                         # per unit: rival -> the six match metrics on the evaluation set
    match_history: dict                  # metric -> (T, K): the six metrics against the unit's own algorithm


@dataclass(frozen=True)
class KernelShape:
    """Softmax units' (W_K^T W_Q)_xx on the subspace task and (control) on the uniform task (main units), n_main;
    the units of each task in the order of their seeds (``seeds_sub``, ``seeds_uni``)."""

    k: int
    A_sub: np.ndarray                    # (S, d, d) per seed, subspace task
    A_uni: np.ndarray                    # (S, d, d) per seed, uniform task (control)
    frac_sub: np.ndarray                 # (S,) tr(A_SS) / tr(A_xx): share of the kernel on the class subspace
    frac_uni: np.ndarray                 # (isotropic beta I: k / d)
    cos_iso_sub: np.ndarray              # (S,) logit cosine, unit vs isotropic kernel GD read off its weights
    cos_aniso_sub: np.ndarray            # (S,) ... vs anisotropic kernel GD (beta_S, beta_perp) read off
    cos_iso_uni: np.ndarray
    cos_aniso_uni: np.ndarray
    seeds_sub: np.ndarray                # (S,) the seed of each subspace unit
    seeds_uni: np.ndarray                # (S,) the seed of each uniform unit


def construction(run: Run, res: cmodels.ClsResult, found: Search) -> dict:
    """Proposition 3.1 on the main setting's evaluation contexts: linear SA with the constructed weights
    ((W_K^T W_Q)_xx = a I, W_V's label block b I, a = 1, b = the searched eta) against the GD step with eta = a b,
    and (the control) against kernel GD with beta = a, gamma = a b. Largest |difference| of class probabilities."""
    cfg = run.cfg
    i = found.index(uniform_task(), cfg["n_main"])
    eta = float(found.algs["gd"].rate[i])
    batch = ctasks.fixed_batch([setting_dict(cfg, uniform_task(), cfg["n_main"])], tuple(res.dims), cfg["eval_seed"],
                               cfg["eval_contexts"], run.device)
    WK, WQ, WV = cmodels.construct_weights("linear", cfg["d"], cfg["C"], 1.0, eta, dtype=torch.float32)
    A, V = (t.to(run.device)[None] for t in (WK.T @ WQ, WV))
    lg, _ = cmodels.models_on(A, V, cmodels.model_codes([{"model": "linear"}], run.device), batch, [0])
    p = torch.softmax(lg[0].double(), -1)
    out = {"contexts": int(batch.x_ctx.shape[1]), "eta": eta}
    for name, beta in (("gd", 0.0), ("kernel_gd", 1.0)):
        ref, _ = calg.algorithm_on(name, np.array([beta]), np.array([eta]), batch)
        out[name] = float((p - torch.softmax(ref[0].double(), -1)).abs().max())
    return out


#: The algorithms each trained model is matched against in the alignment checks: name -> (algorithm, factor on its
#: searched rate). The first is the claim's own algorithm; the others are its rivals (the controls): the GD step at a
#: wrong rate and the wrong algorithm for linear SA; kernel GD with its best fixed rate and the GD step for softmax.
RIVALS = {"linear": {"gd": ("gd", 1.0), "gd-half-rate": ("gd", 0.5), "gd-double-rate": ("gd", 2.0),
                     "kernel_gd": ("kernel_gd", 1.0)},
          "softmax": {"kernel_gd": ("kernel_gd", 1.0), "exp_fixed": ("exp_fixed", 1.0), "gd": ("gd", 1.0)}}


def main_eval(run: Run, res: cmodels.ClsResult, found: Search) -> MainEval:
    """Each unit of the main programme against its algorithm (and the control algorithm) at every logged step on the
    first ``align_contexts`` evaluation contexts, and the trained units against every rival of ``RIVALS`` on the
    whole evaluation set."""
    cfg = run.cfg
    dev = run.device
    task = uniform_task()
    i_main = found.index(task, cfg["n_main"])
    batch = ctasks.fixed_batch([setting_dict(cfg, task, cfg["n_main"])], tuple(res.dims), cfg["eval_seed"],
                               cfg["eval_contexts"], dev)
    codes = cmodels.model_codes(res.configs, dev)
    K = len(res.configs)
    nA = min(cfg["align_contexts"], cfg["eval_contexts"])
    abatch = ctasks.take(batch, [0], slice(0, nA))
    hp = {name: (found.algs[name].beta[i_main:i_main + 1], found.algs[name].rate[i_main:i_main + 1])
          for name in ("gd", "kernel_gd", "exp_fixed")}
    targets = {name: tuple(x[0] for x in calg.algorithm_on(name, *hp[name], abatch, jacobian=True)) for name in hp}
    T = len(res.log_steps)
    own = {m: np.zeros((T, K)) for m in cmetrics.METRICS}
    hist = {m: np.zeros((T, K)) for m in cmetrics.MATCH_METRICS}
    ctrl = {m: np.zeros((T, K)) for m in cmetrics.METRICS}
    flat = [(t, k) for t in range(T) for k in range(K)]
    for f0 in range(0, len(flat), 16):
        tk = flat[f0:f0 + 16]
        A = tensor(np.stack([res.A_history[t, k] for t, k in tk]), run)
        V = tensor(np.stack([res.WV_history[t, k] for t, k in tk]), run)
        lg, jac = cmodels.models_on(A, V, codes[[k for _, k in tk]], abatch, [0] * len(tk), chunk=256, jacobian=True)
        for j, (t, k) in enumerate(tk):
            model = res.configs[k]["model"]
            for out, name in ((own, ALG[model]), (ctrl, CONTROL_ALG[model])):
                met = cmetrics.alignment_metrics(lg[j], targets[name][0], jac[j], targets[name][1])
                for m in cmetrics.METRICS:
                    out[m][t, k] = float(met[m].mean())
            for m, v in cmetrics.match_metrics(lg[j], targets[ALG[model]][0], abatch.label_q[0]).items():
                hist[m][t, k] = v
    A, V = tensor(res.A_history[-1], run), tensor(res.WV_history[-1], run)
    lg_main, _ = cmodels.models_on(A, V, codes, batch, [0] * K)
    lb = batch.label_q[0]
    full = {name: calg.algorithm_on(name, *hp[name], batch)[0][0] for name in hp}
    rivals = {r: calg.algorithm_on(name, hp[name][0], hp[name][1] * f, batch)[0][0]
              for m in RIVALS.values() for r, (name, f) in m.items()}
    ro = cmodels.read_off(res.A_history[-1], res.WV_history[-1], cfg["d"], cfg["C"])
    per_ctx, final, final_c, implied, match = [], [], [], [], []
    for k, c in enumerate(res.configs):
        name, cname = ALG[c["model"]], CONTROL_ALG[c["model"]]
        st_m = {kk: v.cpu().numpy() for kk, v in cmetrics.per_context_stats(lg_main[k], lb).items()}
        st_a = {kk: v.cpu().numpy() for kk, v in cmetrics.per_context_stats(full[name], lb).items()}
        per_ctx.append((st_m, st_a))
        final.append({m: float(v.mean()) for m, v in cmetrics.alignment_metrics(lg_main[k], full[name]).items()})
        final_c.append({m: float(v.mean()) for m, v in cmetrics.alignment_metrics(lg_main[k], full[cname]).items()})
        b_imp, r_imp = (0.0, ro["product"][k]) if name == "gd" else (ro["scale"][k], ro["value"][k])
        lg_imp, _ = calg.algorithm_on(name, [b_imp], [r_imp], batch)
        imp = {m: float(v.mean()) for m, v in cmetrics.alignment_metrics(lg_main[k], lg_imp[0]).items()}
        imp["ce"] = float(cmetrics.per_context_stats(lg_imp[0], lb)["ce"].mean())
        implied.append(imp)
        match.append({r: cmetrics.match_metrics(lg_main[k], rivals[r], lb) for r in RIVALS[c["model"]]})
    return MainEval(tuple(res.configs), res.log_steps, own, ctrl, tuple(per_ctx), tuple(final), tuple(final_c),
                    tuple(implied), ro, tuple(match), hist)


def kernel_shape(run: Run, results: dict) -> KernelShape:
    """Share of the trained softmax units' kernel on the class subspace (subspace task vs the uniform task), and how
    well isotropic and anisotropic kernel GD read off their weights reproduce them (mean logit cosine over the
    evaluation set). Units in the order of their seeds, so the two tasks' units of one seed sit at the same index."""
    cfg = run.cfg
    d, C, k, n = cfg["d"], cfg["C"], cfg["subspace_k"], cfg["n_main"]
    out = {}
    for tag, prog, reading in (("sub", "extras", "subspace"), ("uni", "main", "uniform")):
        res = results[prog]
        ks = sorted((i for i, c in enumerate(res.configs) if c["model"] == "softmax" and c["reading"] == reading
                     and c["P"] == 1 and c["n"] == n), key=lambda i: res.configs[i]["seed"])
        A = res.A_history[-1][ks]
        V = res.WV_history[-1][ks]
        Axx = 0.5 * (A[:, :d, :d] + A[:, :d, :d].transpose(0, 2, 1))
        bS = np.trace(Axx[:, :k, :k], axis1=1, axis2=2) / k
        bP = np.trace(Axx[:, k:, k:], axis1=1, axis2=2) / (d - k)
        ro = cmodels.read_off(A, V, d, C, res.dims[3])
        keys, batch = eval_batch(run, res)
        task = task_of(res.configs[ks[0]])
        j = next(i for i, key in enumerate(keys) if key[0] == task)
        sub = ctasks.take(batch, [j] * len(ks))                    # both programmes are padded to n = n_main only
        lg, _ = cmodels.models_on(tensor(A, run), tensor(V, run),
                                  cmodels.model_codes([res.configs[i] for i in ks], run.device),
                                  batch, [j] * len(ks), chunk=256, lengths=[n] * len(ks))
        lg_iso, _ = calg.algorithm_on("kernel_gd", ro["scale"], ro["value"], sub)
        scale = np.ones((len(ks), 1, 1, sub.x_ctx.shape[-1]))
        scale[:, 0, 0, :k] = bS[:, None]
        scale[:, 0, 0, k:d] = bP[:, None]
        aniso = ctasks.ClsBatch(sub.x_ctx * tensor(scale, run), sub.y_ctx, sub.x_q, sub.label_q, sub.label_ctx,
                                sub.ctx_mask, sub.class_mask, sub.protos)
        lg_an, _ = calg.algorithm_on("kernel_gd", np.ones(len(ks)), ro["value"], aniso)
        cos = lambda a, b: cmetrics.alignment_metrics(a, b)["logit_cosine"].mean(-1).cpu().numpy()  # noqa: E731
        frac = np.trace(Axx[:, :k, :k], axis1=1, axis2=2) / np.trace(Axx, axis1=1, axis2=2)
        out[tag] = dict(A=A[:, :d, :d], frac=frac, iso=cos(lg, lg_iso), aniso=cos(lg, lg_an),
                        seeds=np.array([res.configs[i]["seed"] for i in ks]))
    s, u = out["sub"], out["uni"]
    return KernelShape(k, s["A"], u["A"], s["frac"], u["frac"], s["iso"], s["aniso"], u["iso"], u["aniso"],
                       s["seeds"], u["seeds"])
