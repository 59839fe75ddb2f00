"""The PyTorch builder of paper 2's tasks: a plan's contexts (:class:`.plan.Tasks`) from the counter-based streams,
vectorised over tasks and contexts, on any device and in any float dtype (the reference the compiled engine is held
against, and what runs on a GPU). The task, its readings and its streams are described in :mod:`.tasks`.
"""

from __future__ import annotations

import torch

from .. import streams
from ..tasks import dot_last
from .plan import POOL_FACTOR, READINGS, TAGS, Keys, TaskPlan, Tasks, scaled_index

#: Devices on which the PyTorch sampler scans the class-balanced pool in chunks, stopping once every point has its
#: candidate (a read on the host after each chunk; the same tasks as the whole pool gives).
CHUNKED_POOL_DEVICES = ("cpu",)


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

