"""Evaluation metrics: ICL error on a fixed evaluation set, attention-window width, rho(M, B)."""

from __future__ import annotations

import numpy as np
import torch

from .models import check_kind, predict, scores, segment_weights
from .tasks import InputSpec, TaskBatch
from .base import derive_seed, resolve_device
from .training import TaskStream

#: Smallest chunk of tasks an evaluation computes at once. Task b of an evaluation set is the same numbers whatever
#: the chunk (the streams are counter-based), so the chunk only trades memory for speed.
MIN_CHUNK = 256


def _eval_chunk(chunk: int) -> int:
    return max(MIN_CHUNK, chunk)


def _mean_and_stderr(stream: TaskStream, n_tasks: int, chunk: int, squared_errors, shape) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over ``n_tasks`` tasks of ``squared_errors(batch)``, a (shape + (b,)) tensor
    with the batch's tasks on the last axis; tasks 0 to n_tasks - 1 of the evaluation set are drawn from ``stream``
    in chunks of ``chunk``."""
    dev = stream.device
    total = torch.zeros(shape, dtype=torch.float64, device=dev)
    total_sq = torch.zeros_like(total)
    done = 0
    with torch.no_grad():
        while done < n_tasks:
            b = min(chunk, n_tasks - done)
            err = squared_errors(stream.sample(b, first_task=done)).double()
            total += err.sum(-1)
            total_sq += (err**2).sum(-1)
            done += b
    mean = total / n_tasks
    var = (total_sq / n_tasks - mean**2).clamp_min(0)
    return mean.cpu().numpy(), (var / n_tasks).sqrt().cpu().numpy()


def eval_stream(rows: list[dict], spec: InputSpec, n: int, eval_seed: int, device) -> TaskStream:
    """The fixed evaluation stream of ``eval_seed`` (step 0 of the stream keyed by ``derive_seed(eval_seed, 7919)``):
    one row of inputs shared by every test setting in ``rows`` (dicts with ``function_class``, ``L``, ``sigma``),
    contexts of length ``n``."""
    rows = [dict(function_class=r["function_class"], L=float(r["L"]), sigma=float(r["sigma"]), n=int(n), seed=0)
            for r in rows]
    classes = sorted({r["function_class"] for r in rows})
    return TaskStream(spec, rows, classes, n, [derive_seed(eval_seed, 7919)], device)


def icl_error(predict_fn, rows: list[dict], spec: InputSpec, n_tasks: int = 10_000, eval_seed: int = 3,
              device="cpu", chunk: int = 2048, n_draw: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ICL error E[(f_hat(x_q) - f(x_q))^2] of R predictors on one fixed evaluation set.

    ``rows``: R dicts with ``function_class``, ``L``, ``sigma``, ``n`` (the test setting of each
    row; one ``n`` for all). ``predict_fn(batch)`` maps a :class:`TaskBatch` with one row of inputs and
    the R settings as slots to predictions shaped like ``batch.f_q`` (1, R, B). All rows see the same raw
    draws (inputs, task coefficients, noise) from ``eval_seed``, so differences between rows are not
    sampling noise. Contexts are drawn at ``n_draw`` (default ``n``) and cut to their first ``n`` points; a point's
    draws do not depend on the context length, so these are the tasks drawn at ``n`` itself, and the ones
    :func:`icl_error_grid` evaluates at ``n``.
    Returns (mean, standard error), each (R,).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    ns = sorted({int(r["n"]) for r in rows})
    if len(ns) != 1:
        raise ValueError(f"icl_error evaluates one context length at a time, got n = {ns}; "
                         "use icl_error_grid for several")
    n = ns[0]
    n_draw = n if n_draw is None else int(n_draw)
    if n_draw < n:
        raise ValueError(f"n_draw = {n_draw} is smaller than the rows' n = {n}")
    stream = eval_stream(rows, spec, n_draw, eval_seed, dev)
    # keep each chunk's (R, chunk, n) tensors to about 2e7 elements
    chunk = _eval_chunk(min(chunk, int(2e7 // (len(rows) * (n_draw + 1) * (spec.d + 2)))))

    def squared_errors(batch):
        batch = batch.prefix(n)
        return (predict_fn(batch) - batch.f_q)[0].double() ** 2

    return _mean_and_stderr(stream, n_tasks, chunk, squared_errors, (len(rows),))


def icl_error_of_matrices(kind: str, M, rows: list[dict], spec: InputSpec, **kw) -> tuple[np.ndarray, np.ndarray]:
    """:func:`icl_error` of units with key-query matrices ``M`` (R, d, d), one per row."""
    dev = resolve_device(kw.pop("device", "cpu"))
    Mt = torch.as_tensor(np.asarray(M), dtype=torch.float32, device=dev).unsqueeze(0)

    def fn(batch: TaskBatch):
        return predict(kind, batch.x_ctx, batch.y_ctx, batch.x_q, Mt)

    return icl_error(fn, rows, spec, device=dev, **kw)


def prefix_predictions(kind: str, s: torch.Tensor, y: torch.Tensor, ns) -> torch.Tensor:
    """Predictions of U units on R label sets at every context length of ``ns`` (increasing), each context the
    prefix of one longer context: scores ``s`` (U, b, n), labels ``y`` (R, b, n) -> (U, R, b, len(ns)).

    The context is cut into the segments between consecutive lengths. Softmax: each segment's weights are taken
    relative to its own largest score (:func:`softmax_icl.models.segment_weights`) and the running sums rescaled as
    segments are added (log-sum-exp), so every score's exp is computed once, whatever the number of lengths, and the
    weighted labels are one batched product per segment (no (U, R, b, n) tensor); linear: running sums of
    ``s_i y_i``, divided by the length.
    """
    out, lo = [], 0
    S0 = S1 = logm = None
    if kind == "softmax":
        E, stats = segment_weights(s, [0] + list(ns))
    for k, n in enumerate(ns):
        if kind == "softmax":
            cm, A0 = stats[..., k, 0], stats[..., k, 1]                              # (U, b)
            A1 = torch.einsum("ubm,rbm->urb", E[..., lo:n], y[..., lo:n])           # (U, R, b)
            if S0 is None:
                logm, S0, S1 = cm, A0, A1
            else:
                new = torch.maximum(logm, cm)
                f_old, f_new = torch.exp(logm - new), torch.exp(cm - new)
                S0 = S0 * f_old + A0 * f_new
                S1 = S1 * f_old[:, None] + A1 * f_new[:, None]
                logm = new
            out.append(S1 / S0[:, None])
        else:
            A1 = torch.einsum("ubm,rbm->urb", s[..., lo:n], y[..., lo:n])
            S1 = A1 if S1 is None else S1 + A1
            out.append(S1 / n)
        lo = n
    return torch.stack(out, -1)


def icl_error_grid(kind: str, M, tests: list[dict], ns, spec: InputSpec, n_tasks: int = 10_000, eval_seed: int = 3,
                device="cpu", chunk: int = 2048, max_elements: float = 1.5e7,
                units=None) -> tuple[np.ndarray, np.ndarray]:
    """ICL error of U units on R test settings at every context length in ``ns``, in one pass over the tasks.

    ``M`` (U, d, d); ``tests``: R dicts with ``function_class``, ``L``, ``sigma``. Every context is drawn at
    n = max(ns) and the shorter contexts are its prefixes, as in :func:`icl_error` (same
    evaluation stream, hence the same tasks for the same ``eval_seed``).
    The scores of all units are computed once per chunk (one matrix product) and shared by all test settings
    and context lengths (:func:`prefix_predictions`: each score's exp once, whatever the number of lengths).
    ``units``: indices into ``M`` of the only units whose errors are wanted (default all); the scores are still
    computed for every unit, in the same chunks, so each wanted unit's numbers are exactly those of the whole
    evaluation, while the weights and errors (most of the work) are computed for the wanted ones only. Returns (mean, standard error), each (U, R, len(ns)), U = len(units) when given.
    """
    check_kind(kind)
    dev = resolve_device(device) if isinstance(device, str) else device
    ns = [int(n) for n in ns]
    n_draw = max(ns)
    stream = eval_stream(tests, spec, n_draw, eval_seed, dev)
    Mt = torch.as_tensor(np.asarray(M), dtype=torch.float32, device=dev).unsqueeze(0)
    U, R = Mt.shape[1], len(tests)
    chunk = _eval_chunk(min(chunk, int(max_elements // (U * R * (n_draw + 1)))))
    pick = None if units is None else torch.as_tensor(np.asarray(units, dtype=np.int64), device=dev)

    lengths = sorted(set(ns))
    order = [lengths.index(n) for n in ns]

    def squared_errors(batch):
        s = scores(batch.x_ctx, batch.x_q, Mt)[0]                   # (U, b, n): inputs shared by the tests
        if pick is not None:
            s = s[pick]
        pred = prefix_predictions(kind, s, batch.y_ctx[0], lengths)[..., order]     # (U, R, b, N)
        err = (pred - batch.f_q[0][None, :, :, None]).double() ** 2
        return err.movedim(2, -1)                                                    # (U, R, N, b)

    return _mean_and_stderr(stream, n_tasks, chunk, squared_errors, (U if pick is None else len(pick), R, len(ns)))


def spectral_norm(M) -> np.ndarray:
    """||M||_2 over the last two axes."""
    return np.linalg.norm(np.asarray(M, dtype=np.float64), ord=2, axis=(-2, -1))


def window_profile(kind: str, M, thetas, n_queries: int = 256, seed: int = 0, sqrt_cov=None) -> np.ndarray:
    """Unnormalised attention weight of a context point at angle ``theta`` from the query, relative
    to a point on the query (theta = 0), averaged over random queries and great-circle directions.

    For softmax the weight is exp(x^T M x_q), for linear x^T M x_q. Returns (..., len(thetas)) for
    M of shape (..., d, d).
    """
    M = np.asarray(M, dtype=np.float64)
    d = M.shape[-1]
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_queries, d))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    v = rng.standard_normal((n_queries, d))
    v -= (v * q).sum(1, keepdims=True) * q
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    th = np.asarray(thetas, dtype=np.float64)
    pts = np.cos(th)[None, :, None] * q[:, None, :] + np.sin(th)[None, :, None] * v[:, None, :]   # (Q, T, d)
    if sqrt_cov is not None:
        s = np.asarray(sqrt_cov, dtype=np.float64)
        pts, q = pts * s, q * s
    Mq = np.einsum("...de,qe->...qd", M, q)                                        # (..., Q, d)
    sc = np.einsum("qtd,...qd->...qt", pts, Mq)                                    # (..., Q, T)
    if kind == "softmax":
        prof = np.exp(sc - sc[..., :1])
    elif kind == "linear":
        prof = sc / sc[..., :1]
    else:
        raise ValueError(f"model={kind!r} is not one of ('softmax', 'linear')")
    return prof.mean(axis=-2)


def window_halfwidth(kind: str, M, n_theta: int = 721, **kw) -> np.ndarray:
    """Angle (radians) at which the attention profile first falls to half its value at the query.

    pi when it never does (a window wider than the sphere). For M = w I and softmax this is
    arccos(1 - ln 2 / w); for linear attention with M = w I it is pi/3 whatever w.
    """
    thetas = np.linspace(0, np.pi, n_theta)
    prof = window_profile(kind, M, thetas, **kw)
    below = prof <= 0.5
    first = np.where(below.any(-1), below.argmax(-1), n_theta)
    out = np.full(first.shape, np.pi)
    ok = first < n_theta
    i = first[ok]
    p0, p1 = np.take_along_axis(prof[ok], (i - 1)[..., None], -1)[..., 0], np.take_along_axis(prof[ok], i[..., None], -1)[..., 0]
    t0, t1 = thetas[i - 1], thetas[i]
    out[ok] = t0 + (p0 - 0.5) / (p0 - p1) * (t1 - t0)
    return out


def rho1(M, B) -> np.ndarray:
    """rho_1(M, B) = ||B_perp^T M B_perp||_2 / ||B^T M B||_2."""
    M, B = np.asarray(M, dtype=np.float64), np.asarray(B, dtype=np.float64)
    d, k = B.shape
    q, _ = np.linalg.qr(np.concatenate([B, np.eye(d)], axis=1))
    Bp = q[:, k:d]
    num = spectral_norm(np.einsum("dk,...de,el->...kl", Bp, M, Bp))
    den = spectral_norm(np.einsum("dk,...de,el->...kl", B, M, B))
    return num / den


def rho2(M, B) -> np.ndarray:
    """rho_2(M, B) = ||M - P M P||_F / ||M||_F with P = B B^T."""
    M, B = np.asarray(M, dtype=np.float64), np.asarray(B, dtype=np.float64)
    P = B @ B.T
    R = M - np.einsum("de,...ef,fg->...dg", P, M, P)
    return np.linalg.norm(R, axis=(-2, -1)) / np.linalg.norm(M, axis=(-2, -1))
