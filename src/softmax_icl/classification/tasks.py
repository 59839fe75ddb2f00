"""The in-context classification task (SPEC 2.1; Dragutinovic, Saxe, Singh 2025): context sampler.

Each context draws its own class prototypes on the sphere ``U^d``: ``P`` prototypes per class, ``C`` classes;
inputs ``x_i ~ U^d``; the label of ``x`` is the class owning the prototype with the largest ``p^T x``. With
``P = 1`` the prototypes are the class vectors ``c_k`` and ``y = argmax_k c_k^T x`` (linearly separable: the
classes are the Voronoi cells of the ``c_k`` on the sphere). With ``P >= 2`` each class is a union of ``P`` cells
around its own prototypes: local, and not linearly separable (the book's own "local" task).

The sources do not fix the data model (SPEC 2.4), so the sampler draws every reading a careful reproducer would
(:data:`READINGS`): **uniform** (above); **balanced** (each class equally likely, ``x`` uniform within its class's
cell: drawn without replacement from a pool of ``16 (n + 1)`` uniform candidates); **clustered** (``k ~ U{1..C}``,
``x = normalise(c_k + tau g / sqrt(d))``, label ``k``: tight clusters for small ``tau``, nearly uniform inputs with
noisy labels for large ``tau``); **subspace** (as uniform, with the class vectors in a ``k``-dimensional coordinate
subspace: the class structure lives there). Contexts can also draw their length uniformly from a range (training
over a mixture of lengths).

**Random numbers** come from the counter-based streams of :mod:`softmax_icl.streams`, so a context is a pure
function of where it is used: (seed, step, context, point, coordinate). A context's ``n + 1`` points are numbered
with the query first (point 0) and its examples after it (example ``i`` is point ``i + 1``). Per seed (its key
``K = key(seed)``) and context ``t`` (the task word) of training step ``s`` (0 for evaluation sets):

=================  ======================================  ===================================================
draw               stream (key, tag)                        value ``f``
=================  ======================================  ===================================================
input normals      ``fold_in(K, c)``, ``cls_x``             ``f = point``; one stream per coordinate ``c``
prototype normals  ``fold_in(K, c, p)``, ``cls_proto``      ``f = class``; per coordinate and prototype ``p``
drawn class        ``K``, ``cls_class``                     ``f = point``: a word ``w``, class ``(m C) >> 24``
context length     ``K``, ``cls_length``                    ``f = 0``: length ``lo + ((m (hi - lo + 1)) >> 24)``
pool candidates    ``fold_in(K, c)``, ``cls_pool``          ``f = candidate``; per coordinate
=================  ======================================  ===================================================

with ``m = w >> 8`` (24 bits; ``(m C) >> 24 = floor(u C)`` for ``u = m 2^-24``, exactly, in integers). Each
coordinate and prototype has its own stream, so a context of ``n`` points in ``d`` dimensions is the prefix of any
larger one: nothing a configuration draws depends on the sizes (``n_max``, ``C_max``, ``P_max``, ``d_max``) a sweep
pads it to, on the other configurations it is trained with, or on the device (the integers are the same bits
everywhere; floats equal to rounding). Configurations that share a seed share every raw draw (common random
numbers): the readings differ only in what they make of them.

**Readings from the draws** (``z`` the input normals of a point, first ``d`` coordinates; ``pr`` the prototypes,
``normalise(z_proto)`` over the first ``d`` coordinates, the first ``k`` for the subspace task):

* uniform, subspace: ``x = normalise(z)``, label ``argmax_k max_p pr_{k,p}^T x``;
* clustered: ``k`` the drawn class, ``x = normalise(c_k + tau z / sqrt(d))`` (``c_k = pr_{k,0}``), label ``k``;
* balanced: ``k`` the drawn class; candidate ``j`` is ``normalise(z_pool_j)`` labelled by the argmax over the class
  vectors, for ``j < R = 16 (n + 1)``. The points draw their candidates in point order, without replacement: a
  point of class ``k`` that is the ``r``-th point of its class (counting from 0, query first) takes the ``r``-th
  candidate of class ``k`` in pool order. A class with fewer candidates than points reuses them (``r mod count``);
  a class with none gives its points the pool's first candidate of the next class that has one (cyclically), with
  that class's label. The distribution is exactly "class uniform, ``x`` uniform in its cell" whenever the pool
  holds enough candidates of every class (all but a vanishing fraction of contexts at the book's settings).

**Implementations.** :class:`ClsStream` draws the distinct tasks of a sweep once per step into buffers it owns
(:class:`Tasks`); every configuration reads its task's rows through an index (no per-configuration copies). On the
CPU with float32 a compiled kernel (:mod:`.native`) draws and builds a context while it is in cache, on every
thread, and stops scanning the class-balanced pool as soon as every class has the candidates its points take (the
same candidates as the whole pool gives); elsewhere (CUDA, float64, no C compiler) the PyTorch code below builds
the same tasks from the same streams, vectorised over tasks and contexts (on the CPU it too reads the pool in chunks
until every point has its candidate; a GPU's captured step reads it in one pass).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import streams
from ..base import derive_seed
from ..tasks import dot_last
from ..engine import classification as _engine
from ..engine.classification import row_length

#: Readings of the paper's task the sampler can draw (see the module docstring), as integer codes.
READINGS = {"uniform": 0, "balanced": 1, "clustered": 2, "subspace": 3}
#: Candidates per point of the class-balanced reading's pool.
POOL_FACTOR = 16
#: Devices on which the PyTorch sampler scans the class-balanced pool in chunks, stopping once every point has its
#: candidate (a read on the host after each chunk; the same tasks as the whole pool gives).
CHUNKED_POOL_DEVICES = ("cpu",)
TAGS = streams.TAGS


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


def pool_size(n: int) -> int:
    """Candidates per context of the class-balanced reading (16 per point, the query included)."""
    return POOL_FACTOR * (n + 1)


# -- keys -------------------------------------------------------------------------------------------------------

def fold_keys(key: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``streams.fold_in`` vectorised: the keys (..., 2) of ``fold_in(key, x)`` for int64 keys (..., 2) and
    non-negative integers ``x`` (< 2^63) broadcastable against ``key[..., 0]``."""
    w = streams.philox((key[..., 0], key[..., 1]),
                       (x & streams.MASK32, (x >> 32) & streams.MASK32, 0, TAGS["fold"]))
    return torch.stack(w[:2], dim=-1)


@dataclass(frozen=True)
class Keys:
    """Stream keys of S seeds (int64 words): ``seed`` (S, 2), ``coord`` (S, d_max, 2) = ``fold_in(seed, c)`` and
    ``proto`` (S, d_max, P_max, 2) = ``fold_in(seed, c, p)``."""

    seed: torch.Tensor
    coord: torch.Tensor
    proto: torch.Tensor

    @classmethod
    def of(cls, seeds, d_max: int, P_max: int, device) -> "Keys":
        seed = streams.keys([int(s) for s in seeds], device)                                     # (S, 2)
        S = seed.shape[0]
        coord = fold_keys(seed.view(S, 1, 2), torch.arange(d_max, device=seed.device).view(1, d_max))
        proto = fold_keys(coord.view(S, d_max, 1, 2), torch.arange(P_max, device=seed.device).view(1, 1, P_max))
        return cls(seed, coord, proto)


# -- the distinct tasks of a sweep ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskPlan:
    """The distinct tasks a stack of configurations reads, decided once on the host (nothing here depends on the
    draws, so building a batch never waits for the device).

    A task is a distinct ``(seed, reading, P, tau, k, C, d, n_b)``, with ``n_b`` the context length for the
    class-balanced reading (its pool and its points depend on it) and 0 otherwise (a context of another reading is
    the prefix of a longer one). Per task (G,): ``seed`` (index into the stream's seeds), ``code``, ``P``, ``tau``,
    ``k``, ``C``, ``d``, ``n`` (points drawn: ``n_b``, else ``n_max``); the lists ``host`` hold the same on the host.
    Per configuration (K,): ``group`` (its task), ``n``, ``n_min`` (0 without a mixture), ``C``.
    """

    dims: tuple                     # (n_max, C_max, P_max, d_max)
    host: dict                      # name -> list over tasks
    seed: torch.Tensor
    code: torch.Tensor
    P: torch.Tensor
    tau: torch.Tensor
    k: torch.Tensor
    C: torch.Tensor
    d: torch.Tensor
    n: torch.Tensor
    group: torch.Tensor             # (K,) task of each configuration
    unit_n: torch.Tensor            # (K,)
    unit_n_min: torch.Tensor        # (K,)
    unit_C: torch.Tensor            # (K,)
    unit_seed: torch.Tensor         # (K,)
    by_code: dict                   # reading code -> (G_r,) indices of its tasks (None when there are none)
    mixture: bool
    short: bool                     # some configuration uses n < n_max
    mask_classes: bool              # some configuration uses C < C_max

    @classmethod
    def of(cls, configs: list[dict], dims, device) -> "TaskPlan":
        """The plan of configurations (dicts with ``seed`` (an index), ``reading``, ``P``, ``tau``, ``k``, ``C``,
        ``d``, ``n`` and optionally ``n_min``) padded to ``dims = (n_max, C_max, P_max, d_max)``."""
        n_max, C_max, P_max, d_max = (int(v) for v in dims)
        keys = []
        for c in configs:
            code = READINGS[c.get("reading", "uniform")]
            if not (c["C"] <= C_max and c["P"] <= P_max and c["d"] <= d_max and c["n"] <= n_max):
                raise ValueError(f"configuration {c} exceeds the padded sizes {dims}")
            keys.append((int(c["seed"]), code, int(c["P"]), float(c.get("tau", 0.0)), int(c.get("k", 0)),
                         int(c["C"]), int(c["d"]), int(c["n"]) if code == READINGS["balanced"] else 0))
        uniq = sorted(set(keys))
        host = {name: [u[i] for u in uniq] for i, name in enumerate(("seed", "code", "P", "tau", "k", "C", "d"))}
        host["n"] = [u[7] if u[7] else n_max for u in uniq]
        dev = torch.device(device)
        col = lambda v, dt=torch.long: torch.tensor(v, dtype=dt, device=dev)  # noqa: E731
        by_code = {code: (col(idx) if idx else None) for code in READINGS.values()
                   for idx in [[g for g, c in enumerate(host["code"]) if c == code]]}
        n_min = [int(c.get("n_min", 0)) for c in configs]
        return cls(dims=(n_max, C_max, P_max, d_max), host=host, seed=col(host["seed"]), code=col(host["code"]),
                   P=col(host["P"]), tau=col(host["tau"], torch.float64), k=col(host["k"]), C=col(host["C"]),
                   d=col(host["d"]), n=col(host["n"]), group=col([uniq.index(k) for k in keys]),
                   unit_n=col([int(c["n"]) for c in configs]), unit_n_min=col(n_min),
                   unit_C=col([int(c["C"]) for c in configs]), unit_seed=col([int(c["seed"]) for c in configs]),
                   by_code=by_code, mixture=any(v > 0 for v in n_min),
                   short=any(int(c["n"]) < n_max for c in configs), mask_classes=any(c["C"] < C_max for c in configs))

    @property
    def G(self) -> int:
        return len(self.host["code"])

    def has(self, reading: str) -> bool:
        return self.by_code[READINGS[reading]] is not None


@dataclass
class Tasks:
    """The contexts of a plan's G tasks at one step: T contexts each, read by every configuration of the task.

    ``xs`` (G, T, d_max, N) the examples' inputs, coordinate-major (example ``i``'s input is ``xs[..., :, i]``;
    ``N = row_length(n_max)``; zero beyond a task's ``d``, its balanced ``n`` and ``n_max``), ``xq`` (G, T, d_max)
    the queries, ``lab`` (G, T, N) int32 and ``lq`` (G, T) int32 their labels, ``protos`` (G, T, C_max, P_max, d_max)
    or None, ``length_words`` (S, T) int64 24-bit words of the mixture lengths (None without a mixture).
    """

    xs: torch.Tensor
    xq: torch.Tensor
    lab: torch.Tensor
    lq: torch.Tensor
    protos: torch.Tensor | None = None
    length_words: torch.Tensor | None = None

    @classmethod
    def empty(cls, plan: TaskPlan, S: int, T: int, device, dtype=torch.float32, protos: bool = False) -> "Tasks":
        n_max, C_max, P_max, d_max = plan.dims
        G, dev = plan.G, torch.device(device)
        N = row_length(n_max)
        return cls(torch.zeros(G, T, d_max, N, dtype=dtype, device=dev),
                   torch.zeros(G, T, d_max, dtype=dtype, device=dev),
                   torch.zeros(G, T, N, dtype=torch.int32, device=dev),
                   torch.zeros(G, T, dtype=torch.int32, device=dev),
                   torch.zeros(G, T, C_max, P_max, d_max, dtype=dtype, device=dev) if protos else None,
                   torch.zeros(S, T, dtype=torch.int64, device=dev) if plan.mixture else None)

    def rows(self, sl: slice) -> "Tasks":
        """Contexts ``sl`` of every task (views)."""
        return Tasks(self.xs[:, sl], self.xq[:, sl], self.lab[:, sl], self.lq[:, sl],
                     None if self.protos is None else self.protos[:, sl],
                     None if self.length_words is None else self.length_words[:, sl])


def scaled_index(m24: torch.Tensor, size) -> torch.Tensor:
    """``floor(u size)`` for ``u = m24 2^-24``, exactly: ``(m24 size) >> 24`` (int64; ``size`` < 2^39)."""
    return torch.bitwise_right_shift(m24 * size, 24)


def context_lengths(plan: TaskPlan, length_words: torch.Tensor | None) -> torch.Tensor | None:
    """Per configuration and context (K, T) its length, uniform in ``n_min..n`` from the seed's length word (the
    mixture); None without a mixture."""
    if not plan.mixture:
        return None
    lo = torch.where(plan.unit_n_min > 0, plan.unit_n_min, plan.unit_n).view(-1, 1)
    span = plan.unit_n.view(-1, 1) - lo + 1
    return lo + scaled_index(length_words[plan.unit_seed], span)


# -- the PyTorch builder ----------------------------------------------------------------------------------------

def _normalise(z: torch.Tensor) -> torch.Tensor:
    """Rows of ``z`` scaled to unit length. On the CPU the squared norm is paper 1's :func:`softmax_icl.tasks.dot_last`
    (a loop of multiply-adds over the few coordinates: a norm over a last axis of 2 to 16 entries takes several times
    longer there)."""
    if z.device.type != "cpu":
        return z / z.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    return z / dot_last(z, z).sqrt_().clamp_min_(1e-30).unsqueeze(-1)


def _score_bias(C: torch.Tensor, P: torch.Tensor, C_max: int, P_max: int, dtype) -> torch.Tensor:
    """(G', C_max * P_max): 0 for the columns (class, prototype) in use (class < C, prototype < P), -inf for the
    others."""
    col = torch.arange(C_max * P_max, device=C.device).view(1, -1)
    use = (col // P_max < C.view(-1, 1)) & (col % P_max < P.view(-1, 1))
    return torch.where(use, 0.0, float("-inf")).to(dtype)


def draw_torch(keys: Keys, plan: TaskPlan, step, first: int, T: int, dtype=torch.float32) -> Tasks:
    """The plan's tasks for contexts ``first .. first + T - 1`` of ``step`` (an int, or a 0-dim int64 tensor on the
    keys' device: no host data in a training loop), in PyTorch (any device, any float dtype: the normals are float32
    streams, converted before any arithmetic). New tensors (:class:`Tasks`)."""
    n_max, C_max, P_max, d_max = plan.dims
    S, G, n1, dev = keys.seed.shape[0], plan.G, n_max + 1, keys.seed.device
    tasks = range(first, first + T)
    zx = streams.normal(keys.coord.reshape(-1, 2), TAGS["cls_x"], step, tasks, n1).view(S, d_max, T, n1)
    zp = streams.normal(keys.proto.reshape(-1, 2), TAGS["cls_proto"], step, tasks, C_max)
    zp = zp.view(S, d_max, P_max, T, C_max)
    coord = torch.arange(d_max, device=dev)
    dmask = (coord.view(1, -1) < plan.d.view(-1, 1)).to(dtype)                                   # (G, d_max)
    sub = plan.code == READINGS["subspace"]
    pmask = dmask * torch.where(sub.view(-1, 1), coord.view(1, -1) < plan.k.view(-1, 1), True).to(dtype)
    pr = _normalise(zp[plan.seed].permute(0, 3, 4, 2, 1).to(dtype) * pmask.view(G, 1, 1, 1, d_max))
    gx = zx[plan.seed].permute(0, 2, 3, 1).to(dtype) * dmask.view(G, 1, 1, d_max)               # (G, T, n1, d)
    x = torch.zeros(G, T, n1, d_max, dtype=dtype, device=dev)
    lab = torch.zeros(G, T, n1, dtype=torch.long, device=dev)
    argmax = [r for r in (plan.by_code[READINGS["uniform"]], plan.by_code[READINGS["subspace"]]) if r is not None]
    if argmax:
        rows = torch.cat(argmax)
        xa = _normalise(gx[rows])
        sc = torch.matmul(xa, pr[rows].flatten(2, 3).transpose(-1, -2))                      # (G', T, n1, C P)
        sc = sc + _score_bias(plan.C[rows], plan.P[rows], C_max, P_max, dtype).view(len(rows), 1, 1, -1)
        x[rows] = xa
        lab[rows] = torch.div(sc.argmax(-1), P_max, rounding_mode="floor")
    drawn = plan.has("clustered") or plan.has("balanced")
    if drawn:
        m24 = torch.bitwise_right_shift(streams.words(keys.seed, TAGS["cls_class"], step, tasks, n1), 8)
    rows = plan.by_code[READINGS["clustered"]]
    if rows is not None:
        kc = scaled_index(m24[plan.seed[rows]], plan.C[rows].view(-1, 1, 1))                     # (G', T, n1)
        cx = pr[rows][:, :, :, 0].gather(2, kc.unsqueeze(-1).expand(*kc.shape, d_max))
        t = plan.tau[rows].to(dtype).view(-1, 1, 1, 1)
        z = gx[rows].mul_(t).div_(plan.d[rows].to(dtype).sqrt().view(-1, 1, 1, 1)).add_(cx)     # c_k + tau z / sqrt(d)
        x[rows] = _normalise(z)
        lab[rows] = kc
    rows = plan.by_code[READINGS["balanced"]]
    if rows is not None:
        xb, lb = _balanced_torch(keys, plan, rows, m24, pr, dmask, step, tasks, dtype)
        x[rows] = xb
        lab[rows] = lb
    out = Tasks(x[:, :, 1:].transpose(-1, -2).contiguous(), x[:, :, 0].contiguous(),
                lab[:, :, 1:].to(torch.int32), lab[:, :, 0].to(torch.int32), pr)
    if plan.mixture:
        out.length_words = torch.bitwise_right_shift(
            streams.words(keys.seed, TAGS["cls_length"], step, tasks, 1)[..., 0], 8)
    return out


def _pool_normals(keys: torch.Tensor, step, tasks, j0: int, count: int) -> torch.Tensor:
    """Candidates ``j0 .. j0 + count - 1`` of the class-balanced pools of ``keys`` (one per coordinate): normals
    (rows, T, count) of the ``cls_pool`` streams, value ``f = candidate`` (``j0`` a multiple of 4: a whole block)."""
    block = torch.arange(j0 // 4, -(-(j0 + count) // 4), dtype=torch.int64, device=keys.device)
    w = streams.blocks(keys, step, tasks, block, torch.full_like(block, TAGS["cls_pool"]))
    return streams.normal_from_words(w.view(*w.shape[:2], -1))[..., :count]


def _balanced_torch(keys: Keys, plan: TaskPlan, rows: torch.Tensor, m24, pr, dmask, step, tasks, dtype,
                    chunk: int | None = None):
    """Inputs (G', T, n1, d_max) and labels (G', T, n1) of the class-balanced tasks ``rows`` (module docstring).

    The pool is scanned in chunks of ``chunk`` candidates (a multiple of 4; default: ``max(128, n + 1)`` rounded up
    on the devices of :data:`CHUNKED_POOL_DEVICES`, the whole pool elsewhere: a GPU's step is one captured graph,
    which cannot read a value on the host), and the scan stops after the first chunk at which every class of every
    task has the candidates its points take. The points then take the candidates the whole pool gives them (a point
    of class ``k`` that is the ``r``-th of its class takes the ``r``-th candidate of class ``k``, and ``r`` is below
    the count found so far), as in the compiled engine. In a step measured at the book's default n = 100, every task
    had its candidates within the first 430 of its 1616.
    """
    n_max, C_max, _, d_max = plan.dims
    n1, Gb, T, dev = n_max + 1, len(rows), len(tasks), keys.seed.device
    nb = plan.n[rows]                                                                      # (G',) points - 1
    R = POOL_FACTOR * (nb + 1)
    Rm = POOL_FACTOR * (max(n for n, c in zip(plan.host["n"], plan.host["code"]) if c == READINGS["balanced"]) + 1)
    if chunk is not None and (chunk <= 0 or chunk % 4):
        raise ValueError(f"chunk={chunk} must be a positive multiple of 4 (whole Philox blocks)")
    if chunk is None:
        chunk = 4 * -(-max(128, n1) // 4) if dev.type in CHUNKED_POOL_DEVICES else Rm
    seeds = plan.seed[rows]
    C = plan.C[rows]
    cls = torch.arange(C_max, device=dev)
    point = torch.arange(n1, device=dev)
    used = (point.view(1, 1, -1) <= nb.view(-1, 1, 1))                                      # the task's n + 1 points
    kc = scaled_index(m24[seeds], C.view(-1, 1, 1))                                         # (G', T, n1)
    ofk = kc.unsqueeze(-2) == cls.view(-1, 1)                                               # (G', T, C_max, n1)
    need = (ofk & used.unsqueeze(-2)).sum(-1)                                              # points per class
    cv = pr[rows][:, :, :, 0]                                                              # (G', T, C_max, d)
    bias = _score_bias(C, torch.ones_like(C), C_max, 1, dtype).view(Gb, 1, 1, C_max)
    key_rows, dmask_rows = keys.coord[seeds].reshape(-1, 2), dmask[rows].view(Gb, 1, 1, d_max)
    cnt = torch.zeros(Gb, T, C_max, dtype=torch.long, device=dev)                          # candidates per class
    # table[g, t, k, r] = the r-th candidate of class k (r < n1); the rest of the candidates go to a dump slot
    table = torch.zeros(Gb, T, C_max * n1 + 1, dtype=torch.long, device=dev)
    parts = []
    for j0 in range(0, Rm, chunk):
        J = min(chunk, Rm - j0)
        zc = _pool_normals(key_rows, step, tasks, j0, J)
        cand = _normalise(zc.view(Gb, d_max, T, J).permute(0, 2, 3, 1).to(dtype) * dmask_rows)
        parts.append(cand)
        sc = torch.matmul(cand, cv.transpose(-1, -2)) + bias
        j = torch.arange(j0, j0 + J, device=dev)
        lp = torch.where(j.view(1, 1, -1) < R.view(-1, 1, 1), sc.argmax(-1), C_max)        # C_max: not in the pool
        onehot = (lp.unsqueeze(-2) == cls.view(-1, 1)).to(torch.int32)                      # (G', T, C_max, J)
        cum = torch.cumsum(onehot, dim=-1)
        own = lp.clamp_max(C_max - 1).unsqueeze(-2)
        rank = cnt.gather(-1, own.squeeze(-2)) + cum.gather(-2, own).squeeze(-2).long() - 1   # rank within class
        slot = (lp * n1 + rank).where((lp < C_max) & (rank < n1), C_max * n1)
        table.scatter_(-1, slot, j.view(1, 1, -1).expand_as(slot))
        cnt += cum[..., -1].long()
        if J < Rm - j0 and bool((cnt >= need).all()):                 # a host read: CPU only (by default)
            break                                             # every point has its candidate: the rest is unread
    cand = parts[0] if len(parts) == 1 else torch.cat(parts, dim=2)
    # the points: drawn class, its rank among the points (query first), reuse when the class has too few
    pcum = torch.cumsum(ofk.to(torch.int32), dim=-1)
    prank = pcum.gather(-2, kc.unsqueeze(-2)).squeeze(-2).long() - 1
    ck = cnt.gather(-1, kc)
    # a class with no candidate: the next class (cyclically, among the C in use) that has one
    off = torch.arange(C_max, device=dev)
    nxt_cls = torch.remainder(cls.view(1, -1, 1) + off.view(1, 1, -1), C.view(-1, 1, 1))      # (G', k, offset)
    has = cnt.gather(-1, nxt_cls.view(Gb, 1, -1).expand(Gb, T, -1)).view(Gb, T, C_max, C_max) > 0
    has = has & (off.view(1, 1, 1, -1) < C.view(-1, 1, 1, 1))
    nxt = nxt_cls.view(Gb, 1, C_max, C_max).expand(Gb, T, -1, -1).gather(
        -1, has.to(torch.int8).argmax(-1, keepdim=True)).squeeze(-1)                        # (G', T, C_max)
    empty = ck == 0
    k_eff = torch.where(empty, nxt.gather(-1, kc), kc)
    r_eff = torch.where(empty, 0, torch.remainder(prank, ck.clamp_min(1)))
    pick = table.gather(-1, k_eff * n1 + r_eff)                                            # (G', T, n1)
    x = cand.gather(2, pick.unsqueeze(-1).expand(Gb, T, n1, d_max))
    return x * used.unsqueeze(-1).to(dtype), k_eff * used


# -- streams of a sweep -----------------------------------------------------------------------------------------

@dataclass
class ClsBatch:
    """Contexts for K configurations, padded to common sizes.

    ``x_ctx`` (K, B, n, d_max), ``y_ctx`` (K, B, n, C_max) one-hot, ``x_q`` (K, B, d_max), ``label_q`` (K, B),
    ``label_ctx`` (K, B, n), ``ctx_mask`` (K, 1, n) or (K, B, n) or None (context slots in use), ``class_mask``
    (K, 1, C_max) or None (classes in use), ``protos`` (K, B, C_max, P_max, d_max) or None. ``source``: for a set
    drawn by the compiled engine (:func:`fixed_batch` on the CPU), the same contexts as the engine reads them
    (:class:`TaskSource`), so that :func:`.models.models_on` can evaluate units there; views and subsets of the
    batch drop it.
    """

    x_ctx: torch.Tensor
    y_ctx: torch.Tensor
    x_q: torch.Tensor
    label_q: torch.Tensor
    label_ctx: torch.Tensor
    ctx_mask: torch.Tensor | None
    class_mask: torch.Tensor | None
    protos: torch.Tensor | None
    source: "TaskSource | None" = None

    def chunk(self, sl: slice) -> "ClsBatch":
        """The contexts ``sl`` of the batch axis."""
        m = self.ctx_mask
        m = None if m is None else (m if m.shape[1] == 1 else m[:, sl])
        return ClsBatch(self.x_ctx[:, sl], self.y_ctx[:, sl], self.x_q[:, sl], self.label_q[:, sl],
                        self.label_ctx[:, sl], m, self.class_mask, None if self.protos is None else self.protos[:, sl])


@dataclass(frozen=True)
class TaskSource:
    """The contexts of a :class:`ClsBatch`'s K settings as the compiled engine reads them: ``tasks``
    (:class:`Tasks` of the stream's G tasks), and per setting (K,) its task ``group``, ``C``, ``d`` and ``n``
    (host lists); ``dims = (n_max, C_max, P_max, d_max)``."""

    tasks: Tasks
    group: list
    C: list
    d: list
    n: list
    dims: tuple


def _one_hot(lab: torch.Tensor, m: int, dtype) -> torch.Tensor:
    """``one_hot(lab, m).to(dtype)`` for labels known to lie in ``0..m-1``, without its range check over every label
    (a pass over the labels and a device sync)."""
    return (lab.unsqueeze(-1) == torch.arange(m, device=lab.device)).to(dtype)


class ClsStream:
    """The task streams of a stack of configurations: their distinct tasks drawn once per step (common random
    numbers), into buffers the stream owns.

    ``configs``: dicts with ``seed`` (an index into ``seeds``), ``reading``, ``P``, ``tau``, ``k``, ``C``, ``d``,
    ``n`` (and optionally ``n_min``); ``dims = (n_max, C_max, P_max, d_max)``; ``seeds``: the 64-bit stream seed of
    each seed index (only those the configurations read are drawn). ``native``: draw with the compiled CPU kernel (default: on the CPU with float32 where it
    builds, :func:`softmax_icl.engine.classification.available`).
    """

    def __init__(self, configs: list[dict], dims, seeds: list[int], device, dtype=torch.float32,
                 native: bool | None = None):
        self.device, self.dtype = torch.device(device), dtype
        used = sorted({int(c["seed"]) for c in configs})            # only the seeds some configuration reads
        self.plan = TaskPlan.of([dict(c, seed=used.index(int(c["seed"]))) for c in configs], dims, self.device)
        self.keys = Keys.of([seeds[i] for i in used], dims[3], dims[2], self.device)
        if native is None:
            native = self.device.type == "cpu" and dtype == torch.float32 and _engine.available()
        self.native = bool(native)
        self.threads = torch.get_num_threads()              # the compiled engine's threads
        self._drawer = _engine.Drawer(self.keys, self.plan, self.threads) if self.native else None
        self._buffers: Tasks | None = None
        # the step, as the streams take it (a trainer writes it, then draws with ``step=step_tensor``)
        self.step_tensor = torch.zeros((), dtype=torch.int64, device=self.device)

    @property
    def drawer(self):
        """The compiled engine's :class:`softmax_icl.engine.classification.Drawer` of this stream (None on the PyTorch path)."""
        return self._drawer

    @property
    def S(self) -> int:
        return self.keys.seed.shape[0]

    def buffers(self, T: int, protos: bool = False) -> Tasks:
        """The stream's own buffers for ``T`` contexts per task, made on the first call and reused while ``T`` stays
        the same (a trainer makes them before its loop)."""
        b = self._buffers
        if b is None or b.xq.shape[1] != T or (protos and b.protos is None):
            b = self._buffers = Tasks.empty(self.plan, self.S, T, self.device, self.dtype, protos)
        return b

    def draw(self, step, T: int, first: int = 0, out: Tasks | None = None, protos: bool = False) -> Tasks:
        """Contexts ``first .. first + T - 1`` of ``step`` of every task, into ``out`` (or :meth:`buffers`). ``step``:
        an int, or (PyTorch path) :attr:`step_tensor` holding it."""
        if out is None:
            out = self.buffers(T, protos)
        if self._drawer is not None:
            self._drawer.draw(step, first, out)
        else:
            if step is not self.step_tensor:
                self.step_tensor.fill_(int(step))
            t = draw_torch(self.keys, self.plan, self.step_tensor, first, T, self.dtype)
            n_max = self.plan.dims[0]
            out.xs[..., :n_max].copy_(t.xs)
            out.lab[..., :n_max].copy_(t.lab)
            for name in ("xq", "lq", "protos", "length_words"):
                dst = getattr(out, name)
                if dst is not None:
                    dst.copy_(getattr(t, name))
        return out

    def masks(self, tasks: Tasks) -> tuple:
        """Per configuration ``ctx_mask`` ((K, 1, n_max), (K, T, n_max) for a mixture, or None) and ``class_mask``
        ((K, 1, C_max) or None)."""
        plan = self.plan
        n_max, C_max = plan.dims[0], plan.dims[1]
        slots = torch.arange(n_max, device=self.device)
        lengths = context_lengths(plan, tasks.length_words)
        if lengths is not None:
            ctx = slots.view(1, 1, -1) < lengths.unsqueeze(-1)
        else:
            ctx = (slots.view(1, 1, -1) < plan.unit_n.view(-1, 1, 1)) if plan.short else None
        cls = (torch.arange(C_max, device=self.device).view(1, 1, -1) < plan.unit_C.view(-1, 1, 1)
               if plan.mask_classes else None)
        return ctx, cls

    def batch(self, tasks: Tasks, rows=None) -> ClsBatch:
        """The contexts of every configuration (or of the configurations ``rows``) as a :class:`ClsBatch` (gathered
        from their tasks' rows: a copy per configuration)."""
        ctx, cls = self.masks(tasks)
        g = self.plan.group
        if rows is not None:
            rows = torch.as_tensor(rows, device=self.device)
            g = g[rows]
            ctx = None if ctx is None else ctx[rows]
            cls = None if cls is None else cls[rows]
        n_max, C_max = self.plan.dims[:2]
        lab = tasks.lab[g][..., :n_max].long()
        return ClsBatch(tasks.xs[g][..., :n_max].transpose(-1, -2), _one_hot(lab, C_max, tasks.xs.dtype), tasks.xq[g],
                        tasks.lq[g].long(), lab, ctx, cls, None if tasks.protos is None else tasks.protos[g])

    def sample(self, batch_size: int, step: int = 1) -> ClsBatch:
        """The contexts of ``step`` (``batch_size`` per configuration) as a :class:`ClsBatch`."""
        return self.batch(self.draw(step, batch_size))


#: Most values a chunk of an evaluation set draws at once in PyTorch (the class-balanced pool is the large one).
_CHUNK_VALUES = 1 << 24


def fixed_batch(settings: list[dict], dims, seed: int, n_contexts: int, device="cpu", dtype=torch.float32) -> ClsBatch:
    """A fixed set of contexts for each setting (dicts with reading, P, tau, k, C, d, n), all from one seed
    (common random numbers across settings): the evaluation and search sets. Contexts ``0 .. n_contexts - 1`` of
    step 0 of the stream of ``derive_seed(seed, 0)``, drawn in chunks (every context is its own stream)."""
    stream = ClsStream([dict(s, seed=0) for s in settings], dims, [derive_seed(seed, 0)], device, dtype)
    plan, T = stream.plan, int(n_contexts)
    n_max, C_max, _, d_max = plan.dims
    per_context = plan.G * d_max * (POOL_FACTOR * (n_max + 1) if plan.has("balanced") else n_max + 1)
    chunk = T if stream.native else max(1, min(T, _CHUNK_VALUES // per_context))
    full = Tasks.empty(plan, 1, T, device, dtype, protos=True)
    for t0 in range(0, T, chunk):
        stream.draw(0, min(chunk, T - t0), first=t0, out=full.rows(slice(t0, t0 + chunk)))
    b = stream.batch(full)
    source = None
    if stream.native:
        source = TaskSource(full, plan.group.tolist(), plan.unit_C.tolist(), [int(s_["d"]) for s_ in settings],
                            plan.unit_n.tolist(), plan.dims)
    return ClsBatch(b.x_ctx.contiguous(), b.y_ctx, b.x_q, b.label_q, b.label_ctx, b.ctx_mask, b.class_mask, b.protos,
                    source)


def sample_contexts(batch: int, n: int, C: int, d: int, P: int = 1, seed: int = 0, device="cpu",
                    dtype=torch.float32, reading: str = "uniform", tau: float = 0.0, k: int = 0,
                    step: int = 0, native: bool | None = None) -> ClsBatch:
    """``batch`` contexts of one setting (K = 1): contexts ``0 .. batch - 1`` of ``step`` of the stream ``seed``
    (``native``: as :class:`ClsStream`)."""
    cfg = dict(seed=0, reading=reading, P=P, tau=tau, k=k, C=C, d=d, n=n)
    stream = ClsStream([cfg], (n, C, P, d), [int(seed)], device, dtype, native)
    return stream.batch(stream.draw(step, batch, protos=True))


def with_length(batch: ClsBatch, n: int) -> ClsBatch:
    """The same contexts read at length ``n``: only their first ``n`` examples are in use."""
    n_ctx = batch.x_ctx.shape[2]
    mask = None if n >= n_ctx else torch.arange(n_ctx, device=batch.x_ctx.device).view(1, 1, -1) < n
    if mask is not None:
        mask = mask.expand(batch.x_ctx.shape[0], 1, n_ctx)
    return ClsBatch(batch.x_ctx, batch.y_ctx, batch.x_q, batch.label_q, batch.label_ctx, mask, batch.class_mask,
                    batch.protos)


def prefix(batch: ClsBatch, n: int) -> ClsBatch:
    """The first ``n`` points of every context of ``batch`` (tasks drawn at a longer length, read at ``n``), cut
    rather than masked (:func:`with_length` masks): the batch's first ``n`` context slots must all be in use."""
    m = batch.ctx_mask
    if m is not None and not bool(m[..., :n].all()):
        raise ValueError(f"prefix: the batch's first n = {n} context slots are not all in use")
    return ClsBatch(batch.x_ctx[:, :, :n], batch.y_ctx[:, :, :n], batch.x_q, batch.label_q, batch.label_ctx[:, :, :n],
                    None, batch.class_mask, batch.protos)


def take(batch: ClsBatch, idx, sl: slice = slice(None)) -> ClsBatch:
    """Settings ``idx`` (and contexts ``sl``) of a batch."""
    idx = torch.as_tensor(idx, device=batch.x_ctx.device)
    m = batch.ctx_mask
    m = None if m is None else (m[idx] if m.shape[1] == 1 else m[idx, sl])
    return ClsBatch(batch.x_ctx[idx, sl], batch.y_ctx[idx, sl], batch.x_q[idx, sl], batch.label_q[idx, sl],
                    batch.label_ctx[idx, sl], m, None if batch.class_mask is None else batch.class_mask[idx],
                    None if batch.protos is None else batch.protos[idx, sl])
