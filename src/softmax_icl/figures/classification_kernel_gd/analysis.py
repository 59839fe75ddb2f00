"""Evaluation of the trained units and the searched algorithms on the fixed evaluation sets (cached), and the typed
tables derived from it (softmax against linear paired by seed, the tau x n maps, the ablations, the hyperparameters).
The main setting's mechanism (alignment, construction, kernel shape) is evaluated in :mod:`.mechanism`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ... import stats
from ...classification import algorithms as calg
from ...classification import metrics as cmetrics
from ...classification import models as cmodels
from ...classification import tasks as ctasks
from ...book.run import Run
from .evalsets import eval_batch, setting_key, tensor
from .mechanism import KernelShape, MainEval, construction, kernel_shape, main_eval
from .sweeps import Search, at_lengths, reading_tasks, task_of, uniform_task


# -- cached evaluation ----------------------------------------------------------------------------

@dataclass(frozen=True)
class UnitTable:
    """Test statistics of one training programme's units: per configuration (and test length) and context."""

    configs: tuple
    ce: np.ndarray                       # (K, B) or (K, N_test, B)
    correct: np.ndarray
    test_n: tuple = ()                   # the test lengths of a (K, N_test, B) table
    scale: np.ndarray | None = None      # (K,) each unit's learned kernel scale beta = tr((W_K^T W_Q)_xx) / d


@dataclass(frozen=True)
class AlgTable:
    """The algorithms at their searched hyperparameters, per search setting and evaluation context, and how far the
    fixed-rate step is from kernel GD per setting (the six match metrics of kernel GD against it)."""

    settings: tuple
    ce: dict                             # name -> (S, B)
    correct: dict
    rate_match: tuple                    # (S,) metric -> value: kernel GD against the exp kernel with a fixed rate


@dataclass(frozen=True)
class Evaluation:
    """Everything the chapter's figures, tables and checks read (:func:`evaluate`)."""

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


def _unit_table(run: Run, res: cmodels.ClsResult, test_n=None, step: int = -1,
                contexts: int | None = None) -> UnitTable:
    """Test CE and correctness of a programme's units (at logged step ``step``: -1 the trained units, 0 the untrained
    ones) on their settings' fixed evaluation sets (or their first ``contexts``), at each unit's own length or at
    every length of ``test_n``."""
    n_max = None if test_n is None else max(max(test_n), res.dims[0])
    keys, batch = eval_batch(run, res, n_max, contexts)
    idx = [keys.index(setting_key(c)) for c in res.configs]
    codes = cmodels.model_codes(res.configs, run.device)
    A, V = tensor(res.A_history[step], run), tensor(res.WV_history[step], run)
    ti = torch.tensor(idx, device=run.device)
    cm = None if batch.class_mask is None else batch.class_mask[ti]
    lengths = [[c["n"] for c in res.configs]] if test_n is None else [[n] * len(res.configs) for n in test_n]
    ce, corr = [], []
    for L in lengths:
        lg, _ = cmodels.models_on(A, V, codes, batch, idx, chunk=256, lengths=L)
        st = cmetrics.per_context_stats(lg, batch.label_q[ti], cm)
        ce.append(st["ce"].cpu().numpy())
        corr.append(st["correct"].cpu().numpy())
    Anp, Vnp = np.asarray(res.A_history[step]), np.asarray(res.WV_history[step])
    scale = np.array([float(cmodels.read_off(Anp[i], Vnp[i], c["d"], c["C"], res.dims[3])["scale"])
                      for i, c in enumerate(res.configs)])
    if test_n is None:
        return UnitTable(tuple(res.configs), ce[0], corr[0], scale=scale)
    return UnitTable(tuple(res.configs), np.stack(ce, 1), np.stack(corr, 1), tuple(test_n), scale)


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
    scales = [t.scale for t in tables]
    return UnitTable(sum((t.configs for t in tables), ()), np.concatenate([t.ce for t in tables]),
                     np.concatenate([t.correct for t in tables]),
                     scale=None if any(x is None for x in scales) else np.concatenate(scales))


def _untrained_softmax(run: Run, res: cmodels.ClsResult) -> UnitTable:
    """The softmax units of a programme at initialisation, as model "untrained" (the softmax >= linear baseline)."""
    t = _unit_table(run, res, step=0)
    keep = [i for i, c in enumerate(t.configs) if c["model"] == "softmax"]
    return UnitTable(tuple(dict(t.configs[i], model="untrained") for i in keep), t.ce[keep], t.correct[keep])


def _alg_table(run: Run, found: Search, results: dict) -> AlgTable:
    """Every algorithm at its searched hyperparameters on the evaluation sets of the readings and extras, and kernel
    GD against the fixed-rate step (the six match metrics) at every setting."""
    ce = {name: [None] * len(found.settings) for name in calg.ALGORITHMS}
    corr = {name: [None] * len(found.settings) for name in calg.ALGORITHMS}
    match = [None] * len(found.settings)
    for res in (_reading_programs(results)[-1], results["extras"]):
        keys, batch = eval_batch(run, res, max(n for _, n in found.settings))
        for j, (task, C, d) in enumerate(keys):
            rows = [i for i, (t, _) in enumerate(found.settings) if t == task]
            if not rows:
                continue
            sub = at_lengths(ctasks.take(batch, [j]), [found.settings[i][1] for i in rows])
            logits = {}
            for name in calg.ALGORITHMS:
                s = found.algs[name]
                logits[name], _ = calg.algorithm_on(name, s.beta[rows], s.rate[rows], sub)
                st = cmetrics.per_context_stats(logits[name], sub.label_q, sub.class_mask)
                for r, i in enumerate(rows):
                    ce[name][i] = st["ce"][r].cpu().numpy()
                    corr[name][i] = st["correct"][r].cpu().numpy()
            for r, i in enumerate(rows):
                match[i] = cmetrics.match_metrics(logits["kernel_gd"][r], logits["exp_fixed"][r], sub.label_q[r])
    return AlgTable(found.settings, {k: np.stack(v) for k, v in ce.items()}, {k: np.stack(v) for k, v in corr.items()},
                    tuple(match))


def evaluate(run: Run, results: dict, found: Search) -> Evaluation:
    """Everything the figures and claims need (cached)."""
    cfg = run.cfg

    def compute():
        return Evaluation(
            main=main_eval(run, results["main"], found),
            readings=_concat([_unit_table(run, r) for r in _reading_programs(results)]),
            readings_untrained=_concat([_untrained_softmax(run, r) for r in _reading_programs(results)]),
            trajectory=_trajectory(run, results),
            extras=_unit_table(run, results["extras"]),
            shapes=_unit_table(run, results["shapes"]),
            mixture=_unit_table(run, results["mixture"], test_n=cfg["mix_test_n"]),
            algs=_alg_table(run, found, results),
            kernel=kernel_shape(run, results),
            construction=construction(run, results["main"], found),
            train_seconds={k: r.timings["train_seconds"] for k, r in results.items()})

    key = {"layout": 5, "train": {k: r.sweep for k, r in results.items()},
           "search": {k: cfg[k] for k in ("search_contexts", "search_seed")},
           "eval": {k: cfg[k] for k in ("eval_contexts", "align_contexts", "eval_seed", "mix_test_n", "subspace_k")}}
    return run.cached("evaluate", key, compute)


# -- derived tables -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Paired:
    """Models ``a`` and ``b`` at one setting, their units paired by seed (the same task stream, initial weights and
    evaluation contexts): test CE and correctness per seed (S,) and evaluation context (B,)."""

    task: tuple
    C: int
    d: int
    n: int                               # the units' length (a mixture table: the test length)
    seeds: tuple                         # (S,) the seeds both models ran
    ce_a: np.ndarray                     # (S, B)
    ce_b: np.ndarray
    correct_a: np.ndarray
    correct_b: np.ndarray

    @property
    def key(self) -> tuple:
        return (self.task, self.C, self.d, self.n)

    @property
    def log_ratio(self) -> np.ndarray:
        """(S,): per seed, log of ``a``'s mean test CE over ``b``'s (the statistic of every softmax >= linear check
        in the statistical design)."""
        return np.log(self.ce_a.mean(-1, dtype=np.float64) / self.ce_b.mean(-1, dtype=np.float64))


def paired(table: UnitTable, a: str = "softmax", b: str = "linear") -> list[Paired]:
    """``a`` against ``b`` per (task, C, d, n) of ``table`` (per test length of a mixture table), their units paired
    by seed: the seeds both models ran, in increasing order; settings where either model is missing are left out."""
    cf = table.configs
    units: dict = {}
    for i, c in enumerate(cf):
        units.setdefault((task_of(c), c["C"], c["d"], c["n"]), {}).setdefault(c["model"], {})[c["seed"]] = i
    tests = list(table.test_n) if table.test_n else [None]
    out = []
    for (task, C, d, n), by_model in units.items():
        ua, ub = by_model.get(a, {}), by_model.get(b, {})
        seeds = sorted(set(ua) & set(ub))
        if not seeds:
            continue
        ia, ib = [ua[s] for s in seeds], [ub[s] for s in seeds]
        for j, nt in enumerate(tests):
            pick = (lambda x, ix: x[ix]) if nt is None else (lambda x, ix, j=j: x[ix, j])  # noqa: E731
            out.append(Paired(task, C, d, n if nt is None else nt, tuple(seeds), pick(table.ce, ia),
                              pick(table.ce, ib), pick(table.correct, ia), pick(table.correct, ib)))
    return out


def basins(table: UnitTable, a: str = "softmax", b: str = "linear") -> dict:
    """(task, C, d, n) -> per seed (in :func:`paired`'s order), whether ``a``'s unit lies in the kernel-GD basin:
    a learned kernel scale beta > 0 (attention to the points nearest the query, the sign of the paper's
    construction), against beta <= 0 (attention to far points). None where the table has no scales."""
    if table.scale is None or table.test_n:
        return {}
    at = {(task_of(c), c["C"], c["d"], c["n"], c["model"], c["seed"]): i for i, c in enumerate(table.configs)}
    return {p.key: np.array([table.scale[at[(*p.key, a, s)]] > 0 for s in p.seeds]) for p in paired(table, a, b)}


def log_ratios(table: UnitTable, a: str = "softmax", b: str = "linear") -> dict:
    """(task, C, d, n) -> the per-seed log of ``a``'s mean test CE over ``b``'s (:func:`paired`)."""
    return {p.key: p.log_ratio for p in paired(table, a, b)}


@dataclass(frozen=True)
class Comparison:
    """Model ``a`` against ``b`` at one setting: mean test CE and accuracy over seeds and contexts, and the per-seed
    log CE ratio with its seed mean and one-sided 95% bounds, shown as ratios (the design's statistic and bounds)."""

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
    log_ratio: np.ndarray                # (S,) per seed
    ratio: float                         # exp of the seed mean of the log ratio
    ratio_lo: float                      # exp of its one-sided 95% lower bound
    ratio_hi: float                      # exp of its one-sided 95% upper bound
    seeds: int


def compare(table: UnitTable, a: str = "softmax", b: str = "linear") -> list[Comparison]:
    """``a`` against ``b`` per (task, C, d, n) (and test length for a mixture table), paired by seed."""
    rows = []
    for p in paired(table, a, b):
        lr = p.log_ratio
        m, lo, hi, _ = stats.bounds(lr)
        rows.append(Comparison(p.task, p.C, p.d, p.n, a, b, float(p.ce_a.mean()), float(p.ce_b.mean()),
                               float(p.correct_a.mean()), float(p.correct_b.mean()), lr, math.exp(m), math.exp(lo),
                               math.exp(hi), len(p.seeds)))
    return rows


def loosest_learnable(rows: list[Comparison], taus, n: int, chance: float, share: float) -> tuple[float, list]:
    """The loosest tau of the clustered reading at length ``n`` at which the better model's accuracy is at least
    ``share`` of the way from ``chance`` to 1 (the tightest tau where none is), and every such tau."""
    bar = chance + share * (1 - chance)
    acc = {r.task[2]: max(r.acc_a, r.acc_b) for r in rows if r.task[0] == "clustered" and r.n == n}
    learnable = [t for t in taus if acc.get(float(t), 0.0) >= bar]
    return (max(learnable) if learnable else taus[0]), learnable


#: Equal blocks of the evaluation contexts over which the searched steps' per-context cost is averaged (the unit of
#: replication of the ablation checks: the steps have no training seed).
BLOCKS = 64


def block_means(x, blocks: int = BLOCKS) -> np.ndarray:
    """Means of ``x`` (B,) over ``min(blocks, B)`` consecutive blocks of (nearly) equal size."""
    x = np.asarray(x, dtype=np.float64).ravel()
    edges = np.linspace(0, x.size, min(blocks, x.size) + 1).round().astype(int)
    return np.add.reduceat(x, edges[:-1]) / np.diff(edges)


def cost_blocks(ev: Evaluation, name: str, task: tuple, n: int) -> np.ndarray:
    """The test CE increase of step ``name`` over kernel GD (both at their searched hyperparameters) per evaluation
    context of (task, n), averaged over :data:`BLOCKS` blocks of contexts."""
    s = ev.algs.settings.index((tuple(task), int(n)))
    return block_means(ev.algs.ce[name][s].astype(np.float64) - ev.algs.ce["kernel_gd"][s])


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
    """The four searched steps at one (task, n): mean test CE and accuracy, and what kernel GD loses without each of
    its two parts (mean over contexts and paired standard error)."""

    task: tuple
    n: int
    ce: dict                             # algorithm -> mean test CE
    acc: dict
    rate_cost: float                     # CE(exp kernel, fixed rate) - CE(kernel GD), paired over contexts
    rate_cost_se: float                  # its paired standard error over contexts (the table shows it)
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
