"""What a stack of paper 2's configurations draws, decided on the host: the readings' codes, the stream keys of
its seeds, the plan of its distinct tasks, and the buffers of their contexts (:class:`Tasks`).

The task, its readings and the streams its numbers come from are described in :mod:`.tasks`; the PyTorch builder
(:mod:`.builder`) and the compiled engine (:mod:`softmax_icl.engine.classification`) both draw a plan's tasks into
:class:`Tasks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import streams
from ..engine.classification import row_length

#: Readings of the paper's task the sampler can draw (see :mod:`.tasks`), as integer codes.
READINGS = {"uniform": 0, "balanced": 1, "clustered": 2, "subspace": 3}
#: Candidates per point of the class-balanced reading's pool.
POOL_FACTOR = 16
TAGS = streams.TAGS


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

