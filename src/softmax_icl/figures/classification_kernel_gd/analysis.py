"""Evaluation of the trained units and the searched algorithms on fixed evaluation sets (cached), and the typed
tables derived from it (comparisons with seed intervals, the tau x n maps, ablations, kernel shape)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run
from .sweeps import ALG, CONTROL_ALG, Search, at_lengths, reading_tasks, setting_dict, task_of, uniform_task

#: two-sided 95% quantiles of Student's t by degrees of freedom (no scipy in the environment)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def t_interval(values, fallback_half: float) -> tuple[float, float, float]:
    """Mean and 95% t-interval over seeds; with one seed, mean +- ``fallback_half``."""
    v = np.asarray(values, dtype=np.float64)
    m = float(v.mean())
    if v.size < 2:
        return m, m - fallback_half, m + fallback_half
    half = T95.get(v.size - 1, 1.96) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return m, m - half, m + half


def _t(x, run):
    return torch.as_tensor(np.asarray(x), dtype=torch.float32, device=run.device)


# -- cached evaluation ----------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitTable:
    """Test statistics of one training programme's units: per configuration (and test length) and context."""

    configs: tuple
    ce: np.ndarray                       # (K, B) or (K, N_test, B)
    correct: np.ndarray
    test_n: tuple = ()                   # the test lengths of a (K, N_test, B) table


@dataclass(frozen=True)
class AlgTable:
    """The algorithms at their searched hyperparameters, per search setting and evaluation context."""

    settings: tuple
    ce: dict                             # name -> (S, B)
    correct: dict


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
    match: tuple = ()                    # per unit: rival -> the six match metrics on the evaluation set
    match_history: dict = None           # metric -> (T, K): the six metrics against the unit's own algorithm


@dataclass(frozen=True)
class KernelShape:
    """Softmax units' (W_K^T W_Q)_xx on the subspace task and (control) on the uniform task (main units), n_main."""

    k: int
    A_sub: np.ndarray                    # (S, d, d) per seed, subspace task
    A_uni: np.ndarray                    # (S, d, d) per seed, uniform task (control)
    frac_sub: np.ndarray                 # (S,) tr(A_SS) / tr(A_xx): share of the kernel on the class subspace
    frac_uni: np.ndarray                 # (isotropic beta I: k / d)
    cos_iso_sub: np.ndarray              # (S,) logit cosine, unit vs isotropic kernel GD read off its weights
    cos_aniso_sub: np.ndarray            # (S,) ... vs anisotropic kernel GD (beta_S, beta_perp) read off
    cos_iso_uni: np.ndarray
    cos_aniso_uni: np.ndarray


@dataclass(frozen=True)
class Evaluation:
    main: MainEval
    readings: UnitTable
    readings_untrained: UnitTable        # the readings' softmax units at initialisation, as model "untrained"
    trajectory: Trajectory               # the readings at the captions' n through training (settling rule)
    extras: UnitTable
    shapes: UnitTable
    mixture: UnitTable
    algs: AlgTable
    kernel: KernelShape
    construction: dict                   # Proposition 3.1: largest |probability difference| of the construction
    train_seconds: dict


def _setting_key(c: dict) -> tuple:
    return (task_of(c), c["C"], c["d"])


def _eval_batch(run: Run, res: cmodels.ClsResult, n_max: int | None = None, contexts: int | None = None):
    """One fixed evaluation batch per distinct (task, C, d) of a programme, at its padded sizes: the evaluation set,
    or its first ``contexts`` contexts."""
    cfg = run.cfg
    keys = list(dict.fromkeys(_setting_key(c) for c in res.configs))
    dims = tuple(res.dims)
    if n_max is not None:
        dims = (n_max,) + dims[1:]
    sets = [dict(reading=t[0], P=t[1], tau=t[2], k=t[3], C=C, d=d, n=dims[0]) for t, C, d in keys]
    return keys, ctasks.fixed_batch(sets, dims, cfg["eval_seed"], contexts or cfg["eval_contexts"], run.device)


def _unit_table(run: Run, res: cmodels.ClsResult, test_n=None, step: int = -1,
                contexts: int | None = None) -> UnitTable:
    """Test CE and correctness of a programme's units (at logged step ``step``: -1 the trained units, 0 the untrained
    ones) on their settings' fixed evaluation sets (or their first ``contexts``), at each unit's own length or at
    every length of ``test_n``."""
    n_max = None if test_n is None else max(max(test_n), res.dims[0])
    keys, batch = _eval_batch(run, res, n_max, contexts)
    idx = [keys.index(_setting_key(c)) for c in res.configs]
    codes = cmodels.model_codes(res.configs, run.device)
    A, V = _t(res.A_history[step], run), _t(res.WV_history[step], run)
    ti = torch.tensor(idx, device=run.device)
    cm = None if batch.class_mask is None else batch.class_mask[ti]
    lengths = [[c["n"] for c in res.configs]] if test_n is None else [[n] * len(res.configs) for n in test_n]
    ce, corr = [], []
    for L in lengths:
        lg, _ = cmodels.models_on(A, V, codes, batch, idx, chunk=256, lengths=L)
        st = cmetrics.per_context_stats(lg, batch.label_q[ti], cm)
        ce.append(st["ce"].cpu().numpy())
        corr.append(st["correct"].cpu().numpy())
    if test_n is None:
        return UnitTable(tuple(res.configs), ce[0], corr[0])
    return UnitTable(tuple(res.configs), np.stack(ce, 1), np.stack(corr, 1), tuple(test_n))


def _reading_programs(results: dict) -> list:
    return [r for tag, r in results.items() if tag.startswith("readings_")]


@dataclass(frozen=True)
class Trajectory:
    """The readings' units at the captions' n through training: a unit table per logged step, on the first
    ``align_contexts`` contexts of the evaluation set (the statistic the settling rule follows)."""

    n: int
    steps: np.ndarray                    # (T,) logged steps
    tables: tuple                        # (T,) UnitTable


def _trajectory(run: Run, results: dict) -> Trajectory:
    cfg = run.cfg
    n0 = cfg["n_main"] if cfg["n_main"] in cfg["n_values"] else max(cfg["n_values"])
    res = results[f"readings_n{n0}"]
    tables = tuple(_unit_table(run, res, step=t, contexts=cfg["align_contexts"]) for t in range(len(res.log_steps)))
    return Trajectory(n0, np.asarray(res.log_steps), tables)


def _concat(tables: list) -> UnitTable:
    return UnitTable(sum((t.configs for t in tables), ()), np.concatenate([t.ce for t in tables]),
                     np.concatenate([t.correct for t in tables]))


def _untrained_softmax(run: Run, res: cmodels.ClsResult) -> UnitTable:
    """The softmax units of a programme at initialisation, as model "untrained" (the softmax >= linear baseline)."""
    t = _unit_table(run, res, step=0)
    keep = [i for i, c in enumerate(t.configs) if c["model"] == "softmax"]
    return UnitTable(tuple(dict(t.configs[i], model="untrained") for i in keep), t.ce[keep], t.correct[keep])


def _alg_table(run: Run, found: Search, results: dict) -> AlgTable:
    """Every algorithm at its searched hyperparameters on the evaluation sets of the readings and extras."""
    ce = {name: [None] * len(found.settings) for name in calg.ALGORITHMS}
    corr = {name: [None] * len(found.settings) for name in calg.ALGORITHMS}
    for res in (_reading_programs(results)[-1], results["extras"]):
        keys, batch = _eval_batch(run, res, max(n for _, n in found.settings))
        for j, (task, C, d) in enumerate(keys):
            rows = [i for i, (t, _) in enumerate(found.settings) if t == task]
            if not rows:
                continue
            sub = at_lengths(ctasks.take(batch, [j]), [found.settings[i][1] for i in rows])
            for name in calg.ALGORITHMS:
                s = found.algs[name]
                lg, _ = calg.algorithm_on(name, s.beta[rows], s.rate[rows], sub)
                st = cmetrics.per_context_stats(lg, sub.label_q, sub.class_mask)
                for r, i in enumerate(rows):
                    ce[name][i] = st["ce"][r].cpu().numpy()
                    corr[name][i] = st["correct"][r].cpu().numpy()
    return AlgTable(found.settings, {k: np.stack(v) for k, v in ce.items()}, {k: np.stack(v) for k, v in corr.items()})


def _construction(run: Run, res: cmodels.ClsResult, found: Search) -> dict:
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


def _main_eval(run: Run, res: cmodels.ClsResult, found: Search) -> MainEval:
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
        A = _t(np.stack([res.A_history[t, k] for t, k in tk]), run)
        V = _t(np.stack([res.WV_history[t, k] for t, k in tk]), run)
        lg, jac = cmodels.models_on(A, V, codes[[k for _, k in tk]], abatch, [0] * len(tk), chunk=256, jacobian=True)
        for j, (t, k) in enumerate(tk):
            model = res.configs[k]["model"]
            for out, name in ((own, ALG[model]), (ctrl, CONTROL_ALG[model])):
                met = cmetrics.alignment_metrics(lg[j], targets[name][0], jac[j], targets[name][1])
                for m in cmetrics.METRICS:
                    out[m][t, k] = float(met[m].mean())
            for m, v in cmetrics.match_metrics(lg[j], targets[ALG[model]][0], abatch.label_q[0]).items():
                hist[m][t, k] = v
    A, V = _t(res.A_history[-1], run), _t(res.WV_history[-1], run)
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


def _kernel_shape(run: Run, results: dict) -> KernelShape:
    """Share of the trained softmax units' kernel on the class subspace (subspace task vs the uniform task), and how well isotropic
    and anisotropic kernel GD read off their weights reproduce them."""
    cfg = run.cfg
    d, C, k, n = cfg["d"], cfg["C"], cfg["subspace_k"], cfg["n_main"]
    out = {}
    for tag, prog, reading in (("sub", "extras", "subspace"), ("uni", "main", "uniform")):
        res = results[prog]
        ks = [i for i, c in enumerate(res.configs) if c["model"] == "softmax" and c["reading"] == reading
              and c["P"] == 1 and c["n"] == n]
        A = res.A_history[-1][ks]
        V = res.WV_history[-1][ks]
        Axx = 0.5 * (A[:, :d, :d] + A[:, :d, :d].transpose(0, 2, 1))
        bS = np.trace(Axx[:, :k, :k], axis1=1, axis2=2) / k
        bP = np.trace(Axx[:, k:, k:], axis1=1, axis2=2) / (d - k)
        ro = cmodels.read_off(A, V, d, C, res.dims[3])
        keys, batch = _eval_batch(run, res)
        task = task_of(res.configs[ks[0]])
        j = next(i for i, key in enumerate(keys) if key[0] == task)
        sub = ctasks.take(batch, [j] * len(ks))                    # both programmes are padded to n = n_main only
        lg, _ = cmodels.models_on(_t(A, run), _t(V, run), cmodels.model_codes([res.configs[i] for i in ks], run.device),
                                  batch, [j] * len(ks), chunk=256, lengths=[n] * len(ks))
        lg_iso, _ = calg.algorithm_on("kernel_gd", ro["scale"], ro["value"], sub)
        scale = np.ones((len(ks), 1, 1, sub.x_ctx.shape[-1]))
        scale[:, 0, 0, :k] = bS[:, None]
        scale[:, 0, 0, k:d] = bP[:, None]
        aniso = ctasks.ClsBatch(sub.x_ctx * _t(scale, run), sub.y_ctx, sub.x_q, sub.label_q, sub.label_ctx,
                                sub.ctx_mask, sub.class_mask, sub.protos)
        lg_an, _ = calg.algorithm_on("kernel_gd", np.ones(len(ks)), ro["value"], aniso)
        cos = lambda a, b: np.array([float(cmetrics.alignment_metrics(a[i], b[i])["logit_cosine"].mean())  # noqa: E731
                                     for i in range(len(ks))])
        frac = np.trace(Axx[:, :k, :k], axis1=1, axis2=2) / np.trace(Axx, axis1=1, axis2=2)
        out[tag] = dict(A=A[:, :d, :d], frac=frac, iso=cos(lg, lg_iso), aniso=cos(lg, lg_an))
    s, u = out["sub"], out["uni"]
    return KernelShape(k, s["A"], u["A"], s["frac"], u["frac"], s["iso"], s["aniso"], u["iso"], u["aniso"])


def evaluate(run: Run, results: dict, found: Search) -> Evaluation:
    """Everything the figures and claims need (cached)."""
    cfg = run.cfg

    def compute():
        return Evaluation(
            main=_main_eval(run, results["main"], found),
            readings=_concat([_unit_table(run, r) for r in _reading_programs(results)]),
            readings_untrained=_concat([_untrained_softmax(run, r) for r in _reading_programs(results)]),
            trajectory=_trajectory(run, results),
            extras=_unit_table(run, results["extras"]),
            shapes=_unit_table(run, results["shapes"]),
            mixture=_unit_table(run, results["mixture"], test_n=cfg["mix_test_n"]),
            algs=_alg_table(run, found, results),
            kernel=_kernel_shape(run, results),
            construction=_construction(run, results["main"], found),
            train_seconds={k: r.timings["train_seconds"] for k, r in results.items()})

    key = {"layout": 4, "train": {k: r.sweep for k, r in results.items()}, "search": {k: cfg[k] for k in ("search_contexts", "search_seed")},
           "eval": {k: cfg[k] for k in ("eval_contexts", "align_contexts", "eval_seed", "mix_test_n", "subspace_k")}}
    return run.cached("evaluate", key, compute)


# -- derived tables -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comparison:
    """Model ``a`` vs model ``b`` at one setting: mean test CE, seed intervals of the paired difference and ratio."""

    task: tuple
    C: int
    d: int
    n: int
    a: str
    b: str
    ce_a: float
    ce_b: float
    acc_a: float
    acc_b: float
    diff: float                          # mean over seeds of mean_context(CE_a - CE_b)
    diff_lo: float
    diff_hi: float
    ratio: float                         # mean over seeds of CE_a / CE_b
    ratio_lo: float
    ratio_hi: float
    seeds: int

    @property
    def verdict(self) -> str:
        """'worse' (a's CE significantly above b's), 'better', or 'tie'."""
        return "worse" if self.diff_lo > 0 else ("better" if self.diff_hi < 0 else "tie")

    @property
    def holds(self) -> bool:
        """a >= b: a is not significantly worse than b."""
        return self.verdict != "worse"


def compare(table: UnitTable, a: str = "softmax", b: str = "linear") -> list[Comparison]:
    """``a`` vs ``b`` per (task, C, d, n) (and test length for a mixture table), paired by seed."""
    rows = []
    cf = table.configs
    keys = list(dict.fromkeys((task_of(c), c["C"], c["d"], c["n"]) for c in cf))
    tests = list(table.test_n) if table.test_n else [None]
    for task, C, d, n in keys:
        pick = lambda m: sorted((c["seed"], i) for i, c in enumerate(cf)  # noqa: E731
                                if (task_of(c), c["C"], c["d"], c["n"], c["model"]) == (task, C, d, n, m))
        ia, ib = [i for _, i in pick(a)], [i for _, i in pick(b)]
        if not ia or not ib:
            continue
        for j, nt in enumerate(tests):
            ce_a = table.ce[ia] if nt is None else table.ce[ia, j]
            ce_b = table.ce[ib] if nt is None else table.ce[ib, j]
            acc_a = table.correct[ia] if nt is None else table.correct[ia, j]
            acc_b = table.correct[ib] if nt is None else table.correct[ib, j]
            per_diff = (ce_a - ce_b).mean(-1)
            per_ratio = ce_a.mean(-1) / ce_b.mean(-1)
            dctx = (ce_a - ce_b).mean(0)
            se = float(dctx.std(ddof=1) / math.sqrt(dctx.size))
            dm, dlo, dhi = t_interval(per_diff, 2 * se)
            rm, rlo, rhi = t_interval(per_ratio, 2 * se / float(ce_b.mean()))
            rows.append(Comparison(task, C, d, n if nt is None else nt, a, b, float(ce_a.mean()), float(ce_b.mean()),
                                   float(acc_a.mean()), float(acc_b.mean()), dm, dlo, dhi, rm, rlo, rhi, len(ia)))
    return rows


def log_ratios(table: UnitTable, a: str = "softmax", b: str = "linear") -> dict:
    """Per (task, C, d, n) (n the test length for a mixture table): the per-seed log of ``a``'s mean test CE over
    ``b``'s, paired by seed (the statistic of every softmax >= linear check in the statistical design)."""
    out = {}
    cf = table.configs
    keys = list(dict.fromkeys((task_of(c), c["C"], c["d"], c["n"]) for c in cf))
    tests = list(table.test_n) if table.test_n else [None]
    for task, C, d, n in keys:
        pick = lambda m: dict(sorted((c["seed"], i) for i, c in enumerate(cf)  # noqa: E731
                                     if (task_of(c), c["C"], c["d"], c["n"], c["model"]) == (task, C, d, n, m)))
        ia, ib = pick(a), pick(b)
        seeds = sorted(set(ia) & set(ib))
        if not seeds:
            continue
        for j, nt in enumerate(tests):
            ce = lambda ix: np.array([(table.ce[ix[s]] if nt is None else table.ce[ix[s], j]).mean()  # noqa: E731
                                      for s in seeds], dtype=np.float64)
            out[(task, C, d, n if nt is None else nt)] = np.log(ce(ia) / ce(ib))
    return out


@dataclass(frozen=True)
class RatioMap:
    """A CE ratio over the clustered task's tau x n grid, with its interval and the crossover per n."""

    name: str
    taus: np.ndarray
    ns: np.ndarray
    ratio: np.ndarray                    # (tau, n)
    lo: np.ndarray
    hi: np.ndarray
    crossover: np.ndarray                # (n,): tau where the ratio first rises through 1 (nan if it does not)


def crossover(taus, ratio) -> np.ndarray:
    """Per column of ``ratio`` (tau, n): the tau where log ratio first changes sign from < 0 to >= 0, linear in
    log tau between grid points; nan where it does not cross."""
    lt, lr = np.log(np.asarray(taus)), np.log(np.asarray(ratio))
    out = np.full(lr.shape[1], np.nan)
    for j in range(lr.shape[1]):
        for i in range(len(lt) - 1):
            if lr[i, j] < 0 <= lr[i + 1, j]:
                out[j] = float(np.exp(lt[i] + (lt[i + 1] - lt[i]) * (-lr[i, j]) / (lr[i + 1, j] - lr[i, j])))
                break
    return out


def ratio_maps(run: Run, ev: Evaluation) -> list[RatioMap]:
    """The trained softmax/linear ratio, and the searched kernel GD, exp-fixed and linear-adaptive steps over the
    GD step, on the clustered task's tau x n grid."""
    cfg = run.cfg
    taus, ns = np.array(cfg["taus"], dtype=float), np.array(cfg["n_values"])
    clu = [t for t in reading_tasks(cfg) if t[0] == "clustered"]
    rows = {(r.task, r.n): r for r in compare(ev.readings)}
    shape = (len(taus), len(ns))
    maps = []
    R, L, H = (np.zeros(shape) for _ in range(3))
    for i, t in enumerate(clu):
        for j, n in enumerate(ns):
            r = rows[(t, int(n))]
            R[i, j], L[i, j], H[i, j] = r.ratio, r.ratio_lo, r.ratio_hi
    maps.append(RatioMap("trained softmax SA / linear SA", taus, ns, R, L, H, crossover(taus, R)))
    for name in ("kernel_gd", "exp_fixed", "linear_norm"):
        R, L, H = (np.zeros(shape) for _ in range(3))
        for i, t in enumerate(clu):
            for j, n in enumerate(ns):
                s = ev.algs.settings.index((t, int(n)))
                a, g = ev.algs.ce[name][s], ev.algs.ce["gd"][s]
                r = float(a.mean() / g.mean())
                se = float((a - g).std(ddof=1) / math.sqrt(a.size) / g.mean())
                R[i, j], L[i, j], H[i, j] = r, r - 2 * se, r + 2 * se
        maps.append(RatioMap(name, taus, ns, R, L, H, crossover(taus, R)))
    return maps


@dataclass(frozen=True)
class AblationRow:
    task: tuple
    n: int
    ce: dict                             # algorithm -> mean test CE
    acc: dict
    rate_cost: float                     # CE(exp kernel, fixed rate) - CE(kernel GD), paired over contexts
    rate_cost_se: float                  # its paired standard error (the regression check allows 2 of them)
    kernel_cost: float                   # CE(linear kernel, adaptive rate) - CE(kernel GD)
    kernel_cost_se: float


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(diff.size))


def ablation(ev: Evaluation) -> list[AblationRow]:
    rows = []
    for i, (task, n) in enumerate(ev.algs.settings):
        ce = {name: ev.algs.ce[name][i] for name in calg.ALGORITHMS}
        dr, sr = _paired(ce["exp_fixed"], ce["kernel_gd"])
        dk, sk = _paired(ce["linear_norm"], ce["kernel_gd"])
        rows.append(AblationRow(task, n, {k: float(v.mean()) for k, v in ce.items()},
                                {k: float(ev.algs.correct[k][i].mean()) for k in calg.ALGORITHMS}, dr, sr, dk, sk))
    return rows


@dataclass(frozen=True)
class Hyperparameters:
    """Searched vs learned hyperparameters in the main setting (learned: one per seed)."""

    eta_searched: float
    eta_learned: np.ndarray
    beta_searched: float
    beta_learned: np.ndarray
    gamma_searched: float
    gamma_learned: np.ndarray
    eta_other: float                     # searched on the tightest clustered task (the control's counterpart)
    beta_other: float
    gamma_other: float
    ce_gd_searched: float
    ce_kernel_searched: float
    deviation: dict


def hyperparameters(run: Run, ev: Evaluation, found: Search) -> Hyperparameters:
    cfg = run.cfg
    i = found.index(uniform_task(), cfg["n_main"])
    o = found.index(ctasks.task_spec("clustered", tau=cfg["taus"][0]), cfg["n_main"])
    ro = ev.main.read_off
    models = np.array([c["model"] for c in ev.main.configs])
    lin, soft = models == "linear", models == "softmax"
    g, kg = found.algs["gd"], found.algs["kernel_gd"]
    return Hyperparameters(float(g.rate[i]), ro["product"][lin], float(kg.beta[i]), ro["scale"][soft],
                           float(kg.rate[i]), ro["value"][soft], float(g.rate[o]), float(kg.beta[o]), float(kg.rate[o]),
                           float(g.ce[i]), float(kg.ce[i]),
                           {k: ro[k] for k in ("xx_dev", "yy_dev", "yx_rel", "vx_rel")})
