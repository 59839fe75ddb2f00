"""The in-context classification task (SPEC 2.1; Dragutinovic, Saxe, Singh 2025): context sampler.

Each context draws its own class prototypes on the sphere ``U^d``: ``P`` prototypes per class, ``C`` classes;
inputs ``x_i ~ U^d``; the label of ``x`` is the class owning the prototype with the largest ``p^T x``. With
``P = 1`` the prototypes are the class vectors ``c_k`` and ``y = argmax_k c_k^T x`` (linearly separable: the
classes are the Voronoi cells of the ``c_k`` on the sphere). With ``P >= 2`` each class is a union of ``P`` cells
around its own prototypes: local, and not linearly separable (the book's own "local" task).

The sources do not fix the data model (SPEC 2.4), so the sampler draws every reading a careful reproducer would
(:data:`READINGS`): **uniform** (above); **balanced** (each class equally likely, ``x`` uniform within its class's
cell); **clustered** (``k ~ U{1..C}``, ``x = normalise(c_k + tau g / sqrt(d))``, label ``k``: tight clusters for
small ``tau``, nearly uniform inputs with noisy labels for large ``tau``); **subspace** (as uniform, with the class
vectors in a ``k``-dimensional coordinate subspace: the class structure lives there). Contexts can also draw their
length uniformly from a range (training over a mixture of lengths).

Everything works on a leading stack of K configurations, like the regression code; configurations that share a
seed share their raw draws (common random numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import derive_seed


#: Readings of the paper's task the sampler can draw (see the module docstring), as integer codes.
READINGS = {"uniform": 0, "balanced": 1, "clustered": 2, "subspace": 3}


def task_spec(reading: str = "uniform", P: int = 1, tau: float = 0.0, k: int = 0) -> tuple:
    """A task as a hashable tuple ``(reading, P, tau, k)`` (the form sweeps and cache keys carry)."""
    if reading not in READINGS:
        raise ValueError(f"reading={reading!r} is not one of {tuple(READINGS)}")
    return (reading, int(P), float(tau), int(k))


def task_label(reading: str, P: int = 1, tau: float = 0.0, k: int = 0) -> str:
    """Short human-readable name of a task."""
    if reading == "uniform":
        return "uniform argmax" if P == 1 else f"local (P = {P})"
    if reading == "clustered":
        return f"clustered, tau = {tau:g}"
    if reading == "subspace":
        return f"subspace (k = {k})"
    return "class-balanced"


def draw_raw_cls(batch: int, n: int, C_max: int, P_max: int, d_max: int, generator: torch.Generator,
                 device, pool: int = 0, pool_generator: torch.Generator | None = None) -> dict:
    """Raw draws of ``batch`` contexts: ``zx`` (B, n+1, d_max) Gaussian inputs (last row = query), ``zp``
    (B, C_max, P_max, d_max) Gaussian prototypes, ``zu`` (B, n+1) uniforms (the class of a point, where the
    reading draws the class first), ``zl`` (B,) uniforms (the context length, for mixtures of lengths), and with
    ``pool > 0`` ``zpool`` (B, pool, d_max) Gaussian candidates of the class-balanced reading (from
    ``pool_generator`` when given, so the other draws do not depend on whether a pool is drawn).
    :func:`make_cls_batch` turns them into tasks of any ``C <= C_max``, ``P <= P_max``, ``d <= d_max``."""
    raw = draw_raw_cls_rows(batch, n, C_max, P_max, d_max, [generator], device, pool,
                            None if pool_generator is None else [pool_generator])
    return {k: v[0] for k, v in raw.items()}


def draw_raw_cls_rows(batch: int, n: int, C_max: int, P_max: int, d_max: int, generators: list, device,
                      pool: int = 0, pool_generators: list | None = None) -> dict:
    """The draws of :func:`draw_raw_cls` for each generator, stacked: leading dims (S, batch), S = len(generators).

    Each generator makes the same draws in the same order as :func:`draw_raw_cls` with that generator alone, into
    its row of preallocated tensors (no per-generator tensors to stack afterwards)."""
    S = len(generators)
    zx = torch.empty(S, batch, n + 1, d_max, device=device)
    zp = torch.empty(S, batch, C_max, P_max, d_max, device=device)
    zu, zl = torch.empty(S, batch, n + 1, device=device), torch.empty(S, batch, device=device)
    for r, g in enumerate(generators):
        torch.randn(batch, n + 1, d_max, generator=g, out=zx[r])
        torch.randn(batch, C_max, P_max, d_max, generator=g, out=zp[r])
        torch.rand(batch, n + 1, generator=g, out=zu[r])
        torch.rand(batch, generator=g, out=zl[r])
    out = {"zx": zx, "zp": zp, "zu": zu, "zl": zl}
    if pool:
        zpool = torch.empty(S, batch, pool, d_max, device=device)
        for r, g in enumerate(pool_generators or generators):
            torch.randn(batch, pool, d_max, generator=g, out=zpool[r])
        out["zpool"] = zpool
    return out


@dataclass
class ClsBatch:
    """Contexts for K configurations, padded to common sizes.

    ``x_ctx`` (K, B, n, d_max), ``y_ctx`` (K, B, n, C_max) one-hot, ``x_q`` (K, B, d_max), ``label_q`` (K, B),
    ``label_ctx`` (K, B, n), ``ctx_mask`` (K, 1, n) or (K, B, n) or None (context slots in use), ``class_mask``
    (K, 1, C_max) or None (classes in use), ``protos`` (K, B, C_max, P_max, d_max).
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    label_q: torch.Tensor
    label_ctx: torch.Tensor
    ctx_mask: torch.Tensor | None
    class_mask: torch.Tensor | None
    protos: torch.Tensor

    def chunk(self, sl: slice) -> "ClsBatch":
        """The contexts ``sl`` of the batch axis."""
        m = self.ctx_mask
        m = None if m is None else (m if m.shape[1] == 1 else m[:, sl])
        return ClsBatch(self.x_ctx[:, sl], self.y_ctx[:, sl], self.x_q[:, sl], self.label_q[:, sl],
                        self.label_ctx[:, sl], m, self.class_mask, self.protos[:, sl])


def _as_col(v, K, device, dtype=torch.long) -> torch.Tensor:
    t = torch.as_tensor(v, device=device, dtype=dtype)
    return t.expand(K).clone() if t.dim() == 0 else t


def _normalise(z: torch.Tensor) -> torch.Tensor:
    return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-30)


def _masked_scores(x, cv, keep, dtype):
    """Scores ``x^T c`` (..., m, M) with the columns not in ``keep`` (K, M) pushed below any real score."""
    sc = torch.matmul(x, cv.transpose(-1, -2))
    if keep is not None:
        K = keep.shape[0]
        sc = sc + torch.where(keep, 0.0, -10.0).to(dtype).view(K, *([1] * (sc.dim() - 2)), -1)
    return sc


def _balanced_draw(zpool, cv, keep, kc, dtype):
    """Class-balanced inputs: for each slot of class ``kc`` (K, B, m), a candidate of the pool (K, B, R, d)
    whose argmax label is ``kc``, taken without replacement in pool order (a class with fewer candidates than
    slots reuses them; one with none gives its slot the pool's first candidate of the next class, with its
    own label). Returns inputs (K, B, m, d) and labels (K, B, m)."""
    xp = _normalise(zpool)
    R, Cm = xp.shape[-2], cv.shape[-2]
    lp = _masked_scores(xp, cv, keep, dtype).argmax(-1)                                    # (K, B, R)
    cnt = torch.zeros(*lp.shape[:-1], Cm, dtype=lp.dtype, device=lp.device).scatter_add_(
        -1, lp, torch.ones_like(lp))                                                       # (K, B, Cm) counts
    order = torch.sort(lp, dim=-1, stable=True).indices                                   # grouped by class
    start = torch.cumsum(cnt, -1) - cnt
    ohk = torch.nn.functional.one_hot(kc, Cm)
    rank = (torch.cumsum(ohk, dim=-2) - 1).gather(-1, kc.unsqueeze(-1)).squeeze(-1)       # (K, B, m)
    ck = cnt.gather(-1, kc)
    pos = (start.gather(-1, kc) + torch.remainder(rank, ck.clamp_min(1))).clamp_max(R - 1)
    sel = order.gather(-1, pos)
    x = xp.gather(-2, sel.unsqueeze(-1).expand(*sel.shape, xp.shape[-1]))
    return x, lp.gather(-1, sel)


@dataclass(frozen=True)
class BatchPlan:
    """Which branches :func:`make_cls_batch` takes for a stack of K configurations, decided once on the host.

    A stream builds its plan when it is made (:meth:`BatchPlan.of`), so drawing a batch never reads a tensor's
    value from Python: on a GPU every ``bool(tensor.any())`` or boolean-mask index would wait for the device at
    every training step. The plan holds flags and index tensors (on the stream's device), nothing that depends
    on the draws.
    """

    pad_d: bool                      # some configuration uses d < d_max
    subspace: bool                   # some configuration reads the subspace task
    mask_scores: bool                # some configuration uses P < P_max or C < C_max
    mask_classes: bool               # some configuration uses C < C_max
    drawn: torch.Tensor | None       # rows whose class is drawn first (balanced, clustered)
    balanced: torch.Tensor | None    # positions, within ``drawn``, of the balanced rows
    clustered: torch.Tensor | None   # positions, within ``drawn``, of the clustered rows
    pool_rows: torch.Tensor | None   # the balanced rows themselves (the rows that read a candidate pool)
    argmax_rows: torch.Tensor | None  # rows labelled by the argmax (uniform, subspace); None: every row
    n: torch.Tensor                  # (K,) context lengths
    n_min: torch.Tensor | None       # (K,) shortest lengths of a mixture; None without one
    mixture: bool                    # some configuration draws its length from n_min..n
    short: bool                      # some configuration uses n < n_ctx (fixed lengths)

    @classmethod
    def of(cls, code, C, P, d, n, n_min, dims: tuple[int, int, int], n_ctx: int, device) -> "BatchPlan":
        """The plan for configurations with reading codes ``code`` and sizes ``C, P, d, n, n_min`` (ints or (K,)
        sequences or tensors; ``n_min`` may be None), padded to ``dims = (C_max, P_max, d_max)`` and ``n_ctx``
        context slots. Reads its inputs on the host: call it outside training loops."""
        cols = [v if isinstance(v, (list, tuple)) else torch.as_tensor(v).reshape(-1).tolist()
                for v in (code, C, P, d, n, 0 if n_min is None else n_min)]
        K = max(len(c) for c in cols)
        code, C, P, d, n, n_min = ([int(x) for x in c] * (K if len(c) == 1 else 1) for c in cols)
        Cm, Pm, dm = dims
        drawn = [i for i, c in enumerate(code) if c in (READINGS["balanced"], READINGS["clustered"])]
        bal = [j for j, i in enumerate(drawn) if code[i] == READINGS["balanced"]]
        clu = [j for j, i in enumerate(drawn) if code[i] == READINGS["clustered"]]
        idx = lambda v: torch.tensor(v, dtype=torch.long, device=device) if v else None  # noqa: E731
        return cls(pad_d=any(x < dm for x in d), subspace=READINGS["subspace"] in code,
                   mask_scores=any(x < Pm for x in P) or any(x < Cm for x in C), mask_classes=any(x < Cm for x in C),
                   drawn=idx(drawn), balanced=idx(bal), clustered=idx(clu), pool_rows=idx([drawn[j] for j in bal]),
                   argmax_rows=idx([i for i in range(K) if i not in drawn]) if drawn else None,
                   n=torch.tensor(n, device=device),
                   n_min=torch.tensor(n_min, device=device) if any(x > 0 for x in n_min) else None,
                   mixture=any(x > 0 for x in n_min), short=any(x < n_ctx for x in n))


def make_cls_batch(raw: dict, C, P, d, n, dtype=torch.float32, reading=None, tau=None, k=None,
                   n_min=None, plan: BatchPlan | None = None, source: torch.Tensor | None = None) -> ClsBatch:
    """Tasks from raw draws gathered per configuration (leading dims (K, B)), or, with ``source`` (K,), from raw
    draws per seed (leading dims (S, B)) of which configuration ``i`` reads row ``source[i]`` (the candidate pool
    is then given for the balanced configurations alone, as below): the rows are read where they are used, not
    copied per configuration first.

    ``C``, ``P``, ``d``, ``n``: ints or (K,) tensors, each at most the raw draws' size; ``reading`` (codes of
    :data:`READINGS`, default uniform), ``tau`` (clustered spread), ``k`` (subspace dimension) and ``n_min``
    (with ``n_min > 0`` each context draws its length uniformly from ``n_min..n``): None or (K,) tensors.
    ``plan``: the branches to take (:class:`BatchPlan`), made from these arguments when not given; a stream
    passes the plan it made once, so building a batch never waits for the device. The class-balanced reading's
    candidates ``raw["zpool"]`` are given for every configuration (K, B, R, d_max) or only for the balanced ones,
    in order (``plan.pool_rows``): a stream draws them for those alone.

    * uniform: ``x ~ U^d``, label ``argmax_k max_p p_{k,p}^T x`` over the classes and prototypes in use;
    * balanced: the class ``k ~ U{1..C}`` first, then ``x`` uniform within its class's cell (from a pool);
    * clustered: ``k ~ U{1..C}``, ``x = normalise(c_k + tau g / sqrt(d))`` with ``g`` standard normal;
      the label is ``k``;
    * subspace: as uniform, with the class vectors in the span of the first ``k`` coordinates.
    """
    zx, zp, zu, zl = raw["zx"].to(dtype), raw["zp"].to(dtype), raw["zu"], raw["zl"]
    if source is not None:
        zp, zu, zl = zp[source], zu[source], zl[source]
        if plan is None or plan.pad_d:                         # padding scales every row's inputs: copy them here
            zx, source = zx[source], None
    K, B, n1, dm = zp.shape[0], zx.shape[1], zx.shape[2], zx.shape[3]
    Cm, Pm = zp.shape[2], zp.shape[3]
    dev = zx.device
    n_ctx = n1 - 1
    C, P, d = (_as_col(v, K, dev) for v in (C, P, d))
    code = _as_col(0 if reading is None else reading, K, dev)
    if plan is None:
        plan = BatchPlan.of(code, C, P, d, _as_col(n, K, dev), n_min, (Cm, Pm, dm), n_ctx, dev)
    ar = torch.arange(dm, device=dev).view(1, -1)

    def zx_rows(rows):
        """Inputs of configurations ``rows`` (from the seed rows they read when ``source`` is given)."""
        return zx[rows] if source is None else zx[source[rows]]

    zpool = raw.get("zpool")
    if zpool is not None and plan.pool_rows is not None:
        zpool = zpool.to(dtype)
        if zpool.shape[0] == K:                      # given for every configuration: keep the balanced ones
            zpool = zpool[plan.pool_rows]
    if plan.pad_d:
        dmask = (ar < d.view(-1, 1)).to(dtype)                                            # (K, dm)
        zx = zx * dmask.view(K, 1, 1, dm)
        zp = zp * dmask.view(K, 1, 1, 1, dm)
        if zpool is not None and plan.pool_rows is not None:
            zpool = zpool * dmask[plan.pool_rows].view(-1, 1, 1, dm)
    if plan.subspace:
        sub = code == READINGS["subspace"]
        kk = _as_col(k, K, dev)
        kmask = torch.where(sub.view(-1, 1), ar < kk.view(-1, 1), True).to(dtype)
        zp = zp * kmask.view(K, 1, 1, 1, dm)
    pr = _normalise(zp)
    # unused prototypes and classes get a score below any real one (real scores lie in [-1, 1])
    cmask = torch.arange(Cm, device=dev).view(1, -1) < C.view(-1, 1)                       # (K, Cm)
    keep = None
    if plan.mask_scores:
        pmask = torch.arange(Pm, device=dev).view(1, -1) < P.view(-1, 1)                   # (K, Pm)
        keep = (cmask.unsqueeze(-1) & pmask.unsqueeze(-2)).flatten(1)                       # (K, Cm*Pm)
    # inputs on the sphere, labelled by the argmax over the prototypes: every row, or only the rows that do not
    # draw their class first (those get their inputs and labels below)
    arg = plan.argmax_rows
    if arg is None:
        x = _normalise(zx if source is None else zx[source])
        lab = torch.div(_masked_scores(x, pr.flatten(2, 3), keep, dtype).argmax(-1), Pm, rounding_mode="floor")
    else:
        x = zx.new_empty(K, B, n1, dm)
        lab = torch.empty(K, B, n1, dtype=torch.long, device=dev)
        if arg.numel():
            xa = _normalise(zx_rows(arg))
            sc = _masked_scores(xa, pr[arg].flatten(2, 3), None if keep is None else keep[arg], dtype)
            x[arg] = xa
            lab[arg] = torch.div(sc.argmax(-1), Pm, rounding_mode="floor")                # owner class
    if plan.drawn is not None:
        rows = plan.drawn
        kc = torch.floor(zu[rows].to(torch.float64) * C[rows].view(-1, 1, 1)).long()
        kc = torch.minimum(kc, (C[rows] - 1).view(-1, 1, 1))                                 # (K', B, n+1)
        cv = pr[rows][:, :, :, 0]                                                          # class vectors (K', B, Cm, dm)
        lab[rows] = kc
        clu = plan.clustered
        if clu is not None:                       # clustered: around the class vector of the drawn class
            r = rows[clu]
            t = _as_col(0.0 if tau is None else tau, K, dev, dtype)[r].view(-1, 1, 1, 1)
            kcc = kc[clu]
            cx = cv[clu].gather(2, kcc.unsqueeze(-1).expand(*kcc.shape, dm))
            z = zx_rows(r)                        # a copy: the arithmetic below runs in place, in the order of
            z = z.mul_(t).div_(d[r].to(dtype).sqrt().view(-1, 1, 1, 1)).add_(cx)  # cx + t * z / sqrt(d)
            x[r] = z.div_(z.norm(dim=-1, keepdim=True).clamp_min(1e-30))          # _normalise(z)
        bal = plan.balanced
        if bal is not None:                       # balanced: a candidate of the drawn class
            if zpool is None:
                raise ValueError("the class-balanced reading needs raw draws with a pool (draw_raw_cls(pool=...))")
            kb = None if keep is None else cmask[rows][bal]
            x_bal, l_bal = _balanced_draw(zpool, cv[bal], kb, kc[bal], dtype)
            x[rows[bal]] = x_bal
            lab[rows[bal]] = l_bal
    y = _one_hot(lab[:, :, :n_ctx], Cm, dtype)
    ctx_mask = _context_mask(plan, zl, n_ctx)
    class_mask = cmask.view(K, 1, Cm) if plan.mask_classes else None
    return ClsBatch(x[:, :, :n_ctx], y, x[:, :, n_ctx], lab[:, :, n_ctx], lab[:, :, :n_ctx], ctx_mask, class_mask,
                    pr)


def _one_hot(lab: torch.Tensor, m: int, dtype) -> torch.Tensor:
    """``one_hot(lab, m).to(dtype)`` for labels known to lie in ``0..m-1``, without its range check over every label
    (a pass over the labels and a device sync; three times slower on the CPU)."""
    return (lab.unsqueeze(-1) == torch.arange(m, device=lab.device)).to(dtype)


def _context_mask(plan: BatchPlan, zl: torch.Tensor, n_ctx: int):
    """Context slots in use: (K, 1, n_ctx) for fixed lengths ``plan.n`` (None when all are ``n_ctx``), or
    (K, B, n_ctx) for a mixture: each context's length uniform in ``n_min..n`` from the uniforms ``zl`` (K, B)."""
    n = plan.n
    slots = torch.arange(n_ctx, device=n.device)
    if plan.mixture:
        lo = torch.where(plan.n_min > 0, plan.n_min, n).view(-1, 1)
        span = (n.view(-1, 1) - lo + 1).to(torch.float64)
        length = lo + torch.minimum(torch.floor(zl.to(torch.float64) * span).long(), (span - 1).long())
        return slots.view(1, 1, -1) < length.unsqueeze(-1)
    if plan.short:
        return slots.view(1, 1, -1) < n.view(-1, 1, 1)
    return None


def pool_size(n: int) -> int:
    """Candidates per context of the class-balanced reading (16 per input)."""
    return 16 * (n + 1)


def sample_contexts(batch: int, n: int, C: int, d: int, P: int = 1, seed: int = 0, device="cpu",
                    dtype=torch.float32, reading: str = "uniform", tau: float = 0.0, k: int = 0) -> ClsBatch:
    """``batch`` contexts of one setting (K = 1), drawn from ``seed``."""
    g = torch.Generator(device=device).manual_seed(int(seed))
    raw = draw_raw_cls(batch, n, C, P, d, g, device, pool=pool_size(n) if reading == "balanced" else 0)
    return make_cls_batch({key: v.unsqueeze(0) for key, v in raw.items()}, C, P, d, n, dtype,
                          reading=READINGS[reading], tau=tau, k=k)


class ClsStream:
    """Per-seed online context streams for a stack of configurations (common random numbers).

    ``configs``: dicts with ``seed, reading, P, tau, k, C, d, n`` (and optionally ``n_min``). Configurations that
    share a seed see the same raw draws; those that also share the task and ``(C, d)`` see the same contexts, so
    tasks are made once per distinct ``(seed, reading, P, tau, k, C, d)`` and gathered.
    """

    def __init__(self, configs: list[dict], dims, seeds: list[int], device, dtype=torch.float32):
        self.n_max, self.C_max, self.P_max, self.d_max = dims
        self.device, self.dtype = torch.device(device), dtype
        self.gens = [torch.Generator(device=self.device).manual_seed(int(s)) for s in seeds]
        # the class-balanced pool has its own streams: a configuration draws the same contexts alone or in a sweep
        self.pool_gens = [torch.Generator(device=self.device).manual_seed(derive_seed(int(s), 1)) for s in seeds]
        keys = [(c["seed"], READINGS[c.get("reading", "uniform")], c["P"], float(c.get("tau", 0.0)), c.get("k", 0),
                 c["C"], c["d"]) for c in configs]
        uniq = sorted(set(keys))
        self.group_idx = torch.tensor([uniq.index(key) for key in keys], device=self.device)
        col = lambda i, dt=torch.long: torch.tensor([u[i] for u in uniq], device=self.device, dtype=dt)  # noqa: E731
        self.g_seed, self.g_code, self.g_P = col(0), col(1), col(2)
        self.g_tau = col(3, torch.float64)
        self.g_k, self.g_C, self.g_d = col(4), col(5), col(6)
        self.pool = pool_size(self.n_max) if any(u[1] == READINGS["balanced"] for u in uniq) else 0
        dims3 = (self.C_max, self.P_max, self.d_max)
        # the branches of the task builder (per distinct task) and of the context mask (per configuration),
        # decided here on the host: sample() never reads a tensor's value
        self.g_plan = BatchPlan.of([u[1] for u in uniq], [u[5] for u in uniq], [u[2] for u in uniq],
                                   [u[6] for u in uniq], [self.n_max], None, dims3, self.n_max, self.device)
        self.pool_seed = None if self.g_plan.pool_rows is None else self.g_seed[self.g_plan.pool_rows]
        self.pool_in_order = self.pool_seed is not None and self.pool_seed.tolist() == list(range(len(seeds)))
        self.plan = BatchPlan.of([0], [self.C_max], [self.P_max], [self.d_max], [c["n"] for c in configs],
                                 [c.get("n_min", 0) for c in configs], dims3, self.n_max, self.device)

    def sample(self, batch_size: int) -> ClsBatch:
        raw = draw_raw_cls_rows(batch_size, self.n_max, self.C_max, self.P_max, self.d_max, self.gens, self.device,
                                self.pool, self.pool_gens)
        # tasks per distinct (seed, task), each reading its seed's row of the draws; the large candidate pool only
        # for the class-balanced tasks (copied only when they do not read every seed's pool in order)
        if "zpool" in raw and not self.pool_in_order:
            raw["zpool"] = raw["zpool"][self.pool_seed]
        g = make_cls_batch(raw, self.g_C, self.g_P, self.g_d, self.g_plan.n, self.dtype, reading=self.g_code,
                           tau=self.g_tau, k=self.g_k, plan=self.g_plan, source=self.g_seed)
        i = self.group_idx
        ctx_mask = _context_mask(self.plan, raw["zl"][self.g_seed[i]], self.n_max)
        return ClsBatch(g.x_ctx[i], g.y_ctx[i], g.x_q[i], g.label_q[i], g.label_ctx[i], ctx_mask,
                        None if g.class_mask is None else g.class_mask[i], g.protos[i])


def fixed_batch(settings: list[dict], dims, seed: int, n_contexts: int, device="cpu") -> ClsBatch:
    """A fixed set of contexts for each setting (dicts with reading, P, tau, k, C, d, n), all from one seed
    (common random numbers across settings): the evaluation and search sets."""
    stream = ClsStream([dict(s, seed=0) for s in settings], dims, [derive_seed(seed, 0)], device)
    return stream.sample(n_contexts)


def with_length(batch: ClsBatch, n: int) -> ClsBatch:
    """The same contexts read at length ``n``: only their first ``n`` examples are in use."""
    n_ctx = batch.x_ctx.shape[2]
    mask = None if n >= n_ctx else torch.arange(n_ctx, device=batch.x_ctx.device).view(1, 1, -1) < n
    if mask is not None:
        mask = mask.expand(batch.x_ctx.shape[0], 1, n_ctx)
    return ClsBatch(batch.x_ctx, batch.y_ctx, batch.x_q, batch.label_q, batch.label_ctx, mask, batch.class_mask,
                    batch.protos)


def take(batch: ClsBatch, idx, sl: slice = slice(None)) -> ClsBatch:
    """Settings ``idx`` (and contexts ``sl``) of a batch."""
    idx = torch.as_tensor(idx, device=batch.x_ctx.device)
    m = batch.ctx_mask
    m = None if m is None else (m[idx] if m.shape[1] == 1 else m[idx, sl])
    return ClsBatch(batch.x_ctx[idx, sl], batch.y_ctx[idx, sl], batch.x_q[idx, sl], batch.label_q[idx, sl],
                    batch.label_ctx[idx, sl], m,
                    None if batch.class_mask is None else batch.class_mask[idx], batch.protos[idx, sl])
