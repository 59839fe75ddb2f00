"""Theory formulas of Collins et al. (2024) and the measurements that test them (SPEC 1.4).

* **Theorem 3.4 (window scale).** For the ReLU class and large ``n`` the optimal key-query matrix is
  ``M* = w I`` with ``w`` a power of the signal-to-noise ratio ``s = n L^2 / sigma^2``. Two versions
  of the exponent range are in circulation:

  - ``"slides"``: the talk states ``Omega(s^{1/d}) < w < O(s^{2/d})``;
  - ``"sketch"``: the talk's own proof sketch (noise term ``Theta(sigma^2 w^{d/2} / n)``, bias between
    ``L^2/w^2`` and ``L^2/w``) gives ``Omega(s^{1/(d+2)}) < w < O(s^{2/(d+2)})``
    (:func:`sketch_window_bounds` carries out that derivation).

* **Covariance lemma.** With ``x = Sigma^{1/2} u``, ``u ~ U^d``, the optimal ``M* = w Sigma^{-1}``.

* **Population loss over ``M = w B``** (``B = I`` or ``Sigma^{-1}``), by Monte Carlo with common random
  numbers, split exactly into a bias term and a noise term: for noisy context labels
  ``y_i = f(x_i) + sigma eps_i`` and the noiseless target, conditioning on everything but the noise gives

      E[(sum_i a_i y_i - f(x_q))^2] = E[(sum_i a_i f(x_i) - f(x_q))^2] + sigma^2 E[sum_i a_i^2],

  so one pass over the draws gives the loss at every ``sigma`` (and the noise term is averaged over
  the label noise exactly). All ``w`` values are stacked along one axis and evaluated in one program.

* Measurements of trained weights against these predictions: the window scale of ``M`` (its best
  multiple of ``B``), the relative Frobenius distance between normalised matrices, the block form of a
  full ``W_K^T W_Q``, and log-log slope fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .engine import regression as engine
from .models import scores, segment_weights
from .tasks import InputSpec, draw_raw, nonisotropic_covariance, task_values
from .base import Progress, derive_seed, resolve_device

THEOREM_34_VERSIONS = {
    "slides": "exponents 1/d and 2/d on n L^2 / sigma^2 (as stated on the slides)",
    "sketch": "exponents 1/(d+2) and 2/(d+2) (implied by the slides' proof sketch, noise term w^{d/2})",
    "sphere": "exponents 1/(d+1) and 2/(d+1) (the sketch with the noise term of inputs on S^{d-1}, w^{(d-1)/2})",
}

#: how each variable enters the signal-to-noise ratio s = n L^2 / sigma^2 (its power)
SNR_POWER = {"snr": 1.0, "n": 1.0, "L": 2.0, "sigma": -2.0}


# -- Theorem 3.4 -----------------------------------------------------------------------------------

def snr(n, L, sigma):
    """The theorem's signal-to-noise ratio n L^2 / sigma^2 (inf where sigma = 0)."""
    n, L, sigma = (np.asarray(v, dtype=np.float64) for v in (n, L, sigma))
    with np.errstate(divide="ignore"):
        return n * L**2 / sigma**2


def theorem34_exponents(d: int, version: str) -> tuple[float, float]:
    """(lower, upper) exponent of ``n L^2 / sigma^2`` bounding the optimal window scale ``w``."""
    if version not in THEOREM_34_VERSIONS:
        raise ValueError(f"version={version!r} is not one of {sorted(THEOREM_34_VERSIONS)}")
    if d < 1:
        raise ValueError(f"d={d} must be >= 1")
    k = {"slides": d, "sketch": d + 2, "sphere": d + 1}[version]
    return 1.0 / k, 2.0 / k


def sketch_exponents(noise_exponent: float) -> tuple[float, float]:
    """(lower, upper) exponent of ``s`` that the proof sketch gives for a noise term ``sigma^2 w^k / n``.

    With bias between ``L^2/w^2`` and ``L^2/w`` (see :func:`sketch_window_bounds`): ``w_lo ~ s^{1/(2(k+1))}``
    and ``w_hi ~ s^{1/(k+1)}``; ``k = d/2`` gives the sketch's ``[1/(d+2), 2/(d+2)]`` and ``k = (d-1)/2`` (inputs
    on S^(d-1)) gives ``[1/(d+1), 2/(d+1)]``.
    """
    k = float(noise_exponent)
    if k <= 0:
        raise ValueError(f"noise_exponent={k} must be > 0")
    return 1.0 / (2.0 * (k + 1.0)), 1.0 / (k + 1.0)


def theorem34_slope_range(d: int, variable: str, version: str) -> tuple[float, float]:
    """Predicted range of the log-log slope of ``w`` against ``variable`` (snr, n, L or sigma).

    ``w ~ s^alpha`` with ``s = n L^2 / sigma^2`` gives slope ``alpha`` against ``s`` and ``n``, ``2 alpha``
    against ``L`` and ``-2 alpha`` against ``sigma``; the range is returned sorted.
    """
    if variable not in SNR_POWER:
        raise ValueError(f"variable={variable!r} is not one of {sorted(SNR_POWER)}")
    lo, hi = theorem34_exponents(d, version)
    p = SNR_POWER[variable]
    return tuple(sorted((p * lo, p * hi)))


def sketch_window_bounds(d: int, s, c_noise: float = 1.0, c_bias: float = 1.0, noise_exponent: float | None = None):
    """The range of optimal ``w`` that the slides' proof sketch implies, with explicit constants.

    Sketch: noise term ``N(w) = c_noise sigma^2 w^{d/2} / n``; bias between ``c_bias L^2 / w^2`` and
    ``c_bias L^2 / w``. The optimal loss is at most ``U = min_w [N(w) + c_bias L^2 / w]`` and at least the
    larger of the two lower bounds at ``w*``, so ``c_bias L^2 / w*^2 <= U`` and ``N(w*) <= U``. In units
    ``L = 1``, ``sigma^2 / n = 1 / s`` this gives (returned as ``(w_lo, w_hi)``)

        w_lo = sqrt(c_bias / U),   w_hi = (s U / c_noise)^(2/d),   U ~ s^(-2/(d+2)),

    i.e. ``w_lo ~ s^{1/(d+2)}`` and ``w_hi ~ s^{2/(d+2)}``.

    ``noise_exponent`` replaces the sketch's ``d/2`` (e.g. ``(d-1)/2`` on the sphere).
    """
    s = np.asarray(s, dtype=np.float64)
    a = d / 2.0 if noise_exponent is None else float(noise_exponent)
    # minimise g(w) = c_noise w^a / s + c_bias / w:  a c_noise w^{a-1} / s = c_bias / w^2
    w_min = (c_bias * s / (a * c_noise)) ** (1.0 / (a + 1.0))
    U = c_noise * w_min**a / s + c_bias / w_min
    return np.sqrt(c_bias / U), (s * U / c_noise) ** (1.0 / a)


def which_version(slope: float, d: int, variable: str = "snr") -> list[str]:
    """Versions of Theorem 3.4 whose predicted slope range contains ``slope``."""
    out = []
    for v in THEOREM_34_VERSIONS:
        lo, hi = theorem34_slope_range(d, variable, v)
        if lo <= slope <= hi:
            out.append(v)
    return out


# -- fits --------------------------------------------------------------------------------------------

@dataclass
class SlopeFit:
    """Least-squares fit of ``log y = slope log x + intercept`` (one intercept per group, if grouped)."""

    slope: float
    intercept: float       # of the first group (the only one when ungrouped)
    stderr: float          # standard error of the slope (nan without residual degrees of freedom)
    n_points: int
    r2: float
    intercepts: dict | None = None     # group -> intercept, for grouped fits

    def ci(self, z: float = 1.96) -> tuple[float, float]:
        """Normal-approximation confidence interval of the slope (default 95%)."""
        return self.slope - z * self.stderr, self.slope + z * self.stderr

    def predict(self, x, group=None) -> np.ndarray:
        b = self.intercept if group is None else self.intercepts[group]
        return np.exp(b) * np.asarray(x, dtype=np.float64) ** self.slope


def fit_loglog(x, y, groups=None) -> SlopeFit:
    """Fit a power law ``y = C x^slope`` by least squares on log-log axes (x, y > 0).

    With ``groups`` (one label per point) every group gets its own constant ``C`` and all share the slope:
    series measured at different fixed values of another variable (e.g. w against n at two L) are not
    mixed into one line.
    """
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same length, got {x.size} and {y.size}")
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError("a slope needs at least two distinct x values")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("log-log fit needs positive x and y")
    lx, ly = np.log(x), np.log(y)
    labels = [None] * x.size if groups is None else list(groups)
    if len(labels) != x.size:
        raise ValueError("groups must give one label per point")
    names = list(dict.fromkeys(labels))
    G = np.array([[lab == g for g in names] for lab in labels], dtype=np.float64)
    A = np.concatenate([lx[:, None], G], axis=1)
    coef, *_ = np.linalg.lstsq(A, ly, rcond=None)
    slope = float(coef[0])
    resid = ly - A @ coef
    dof = x.size - A.shape[1]
    cov = np.linalg.pinv(A.T @ A)
    stderr = float(np.sqrt((resid**2).sum() / dof * cov[0, 0])) if dof > 0 else float("nan")
    sst = ((ly - ly.mean()) ** 2).sum()
    r2 = float(1 - (resid**2).sum() / sst) if sst > 0 else 1.0
    inter = {g: float(c) for g, c in zip(names, coef[1:])}
    return SlopeFit(slope, float(coef[1]), stderr, int(x.size), r2, inter if groups is not None else None)


def local_slopes(x, y, half_width: float = 0.0) -> np.ndarray:
    """d log y / d log x along a curve.

    ``half_width = 0``: central differences (one-sided at the ends). Otherwise the slope of a least-squares
    line through the points within ``half_width`` (in natural-log units of x) of each point, which smooths
    the steps a minimiser on a finite grid leaves in ``y``.
    """
    lx = np.log(np.asarray(x, dtype=np.float64))
    ly = np.log(np.asarray(y, dtype=np.float64))
    if half_width <= 0:
        return np.gradient(ly, lx)
    out = np.empty_like(lx)
    for i, c in enumerate(lx):
        m = np.abs(lx - c) <= half_width
        xc = lx[m] - lx[m].mean()
        out[i] = (xc * (ly[m] - ly[m].mean())).sum() / (xc**2).sum() if m.sum() >= 2 else np.nan
    return out


# -- covariance lemma and measurements of trained matrices -------------------------------------------

def covariance_prediction(cov) -> np.ndarray:
    """The covariance lemma's direction ``Sigma^{-1}`` (d, d) for a covariance (d, d) or its diagonal (d,)."""
    cov = np.asarray(cov, dtype=np.float64)
    return np.diag(1.0 / cov) if cov.ndim == 1 else np.linalg.inv(cov)


def window_base(d: int, input_dist: str) -> np.ndarray:
    """The direction the theory predicts for M: ``I`` (isotropic) or ``Sigma^{-1}`` (non-isotropic)."""
    if input_dist == "isotropic":
        return np.eye(d)
    if input_dist == "nonisotropic":
        return covariance_prediction(nonisotropic_covariance(d).numpy())
    raise ValueError(f"input_dist={input_dist!r} is not one of ('isotropic', 'nonisotropic')")


def covariance_exponent(M, cov) -> np.ndarray:
    """Exponent ``p`` of the best fit ``M ~ c Sigma^{-p}`` (1 = the covariance lemma, 0 = isotropic).

    Least-squares slope of ``log m_j`` against ``-log lambda_j``, where ``lambda_j`` are the eigenvalues of
    ``Sigma`` (``cov``: (d, d) or its diagonal (d,)) and ``m_j = u_j^T M u_j`` the diagonal of ``M`` in
    Sigma's eigenbasis. ``nan`` where some ``m_j`` is not positive (no window in that direction).
    """
    M = np.asarray(M, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    cov = np.diag(cov) if cov.ndim == 1 else cov
    lam, U = np.linalg.eigh(cov)
    m = np.einsum("dj,...de,ej->...j", U, M, U)
    x = -np.log(lam)
    xc = x - x.mean()
    with np.errstate(invalid="ignore", divide="ignore"):
        lm = np.where(m > 0, np.log(np.where(m > 0, m, 1.0)), np.nan)
    slope = ((lm - lm.mean(-1, keepdims=True)) * xc).sum(-1) / (xc**2).sum()
    return slope


def normalized_distance(A, B) -> np.ndarray:
    """``|| A/||A||_F - B/||B||_F ||_F`` over the last two axes (0 = same direction, 2 = opposite)."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    nA = A / np.linalg.norm(A, axis=(-2, -1), keepdims=True)
    nB = B / np.linalg.norm(B, axis=(-2, -1), keepdims=True)
    return np.linalg.norm(nA - nB, axis=(-2, -1))


def best_multiple(M, base) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares ``c`` with ``M ~ c base`` and the relative residual ``||M - c base||_F / ||M||_F``."""
    M, base = np.asarray(M, dtype=np.float64), np.asarray(base, dtype=np.float64)
    c = (M * base).sum((-2, -1)) / (base * base).sum((-2, -1))
    resid = np.linalg.norm(M - c[..., None, None] * base, axis=(-2, -1)) / np.linalg.norm(M, axis=(-2, -1))
    return c, resid


@dataclass(frozen=True)
class BlockForm:
    """Measurements of full key/query/value weights against the slides' block form (see :func:`block_form`)."""

    A: np.ndarray
    w: np.ndarray
    xblock_identity_distance: np.ndarray
    label_row_ratio: np.ndarray
    label_col_ratio: np.ndarray
    offblock_ratio: np.ndarray
    value_label: np.ndarray
    value_x_ratio: np.ndarray


def block_form(WK, WQ, WV) -> BlockForm:
    """How close full key/query/value weights on tokens ``[x; y]`` are to the slides' block form.

    ``A = W_K^T W_Q`` ((d+1) x (d+1)) should have its x-block ``~ w I`` and label row and column ~ 0;
    the label row of ``W_V`` should read the label only. Returns (a :class:`BlockForm`) arrays over the leading axes:

    * ``w``: best multiple of ``I`` for the x-block (``tr / d``);
    * ``xblock_identity_distance``: ``||X - w I||_F / ||X||_F``;
    * ``label_row_ratio``: ``||A[d, :d]|| / ||X||_F`` (label of a context token times query x: changes the
      scores);
    * ``label_col_ratio``: ``(||A[:d, d]||^2 + A[d, d]^2)^{1/2} / ||X||_F`` (multiplies the query's label
      slot, which is 0: it cannot change the prediction, so training leaves it near its initial value);
    * ``offblock_ratio``: all off-block mass over the x-block mass;
    * ``value_label``: ``W_V[d, d]`` (should be ~1) and ``value_x_ratio``: ``||W_V[d, :d]|| / |W_V[d, d]|``.
    """
    WK, WQ, WV = (np.asarray(a, dtype=np.float64) for a in (WK, WQ, WV))
    A = np.swapaxes(WK, -1, -2) @ WQ
    d = A.shape[-1] - 1
    X = A[..., :d, :d]
    xnorm = np.linalg.norm(X, axis=(-2, -1))
    w, resid = best_multiple(X, np.eye(d))
    row = np.linalg.norm(A[..., d, :d], axis=-1)
    col = np.sqrt((A[..., :d, d] ** 2).sum(-1) + A[..., d, d] ** 2)
    return BlockForm(A=A, w=w, xblock_identity_distance=resid, label_row_ratio=row / xnorm,
                     label_col_ratio=col / xnorm, offblock_ratio=np.sqrt(row**2 + col**2) / xnorm,
                     value_label=WV[..., d, d],
                     value_x_ratio=np.linalg.norm(WV[..., d, :d], axis=-1) / np.abs(WV[..., d, d]))


# -- population loss by Monte Carlo ---------------------------------------------------------------

@dataclass
class LossTerms:
    """Monte Carlo loss terms: ``loss = bias + sigma^2 * noise`` for every (row, matrix).

    ``bias`` and ``noise`` have shape (R, K) (or (R,) when the matrices were paired with the rows);
    ``*_se`` are their standard errors over tasks.
    """

    bias: np.ndarray
    noise: np.ndarray
    bias_se: np.ndarray
    noise_se: np.ndarray
    n_tasks: int

    def loss(self, sigma) -> np.ndarray:
        """Loss at noise level ``sigma`` (scalar, or one per row)."""
        s2 = np.asarray(sigma, dtype=np.float64) ** 2
        if s2.ndim == 1 and self.bias.ndim == 2:
            s2 = s2[:, None]
        return self.bias + s2 * self.noise


def loss_terms(spec: InputSpec, rows: list[dict], matrices, n_tasks: int = 4096, seed: int = 11,
               device="cpu", paired: bool = False, chunk: int | None = None,
               n_draw: int | None = None, desc: str = "population loss") -> LossTerms:
    """Population loss terms of softmax attention with key-query ``matrices`` (K, d, d) on the tasks of ``rows``.

    ``rows``: R dicts with ``function_class``, ``L`` and ``n`` (the noise level enters only through
    :meth:`LossTerms.loss`). Every (row, matrix) pair sees the same draws (inputs at the largest ``n``,
    shorter contexts use prefixes, the query is shared; task coefficients shared), drawn from ``seed``.
    ``paired=True`` evaluates matrix ``r`` on row ``r`` only (R == K). The whole grid is one batched
    computation per chunk of tasks: scores for all matrices at once, then one softmax per distinct n.
    Two calls with the same ``spec`` and ``seed`` see identical draws: task b is the same numbers whatever the
    chunk, and its first n points whatever ``n_draw`` (the counter-based streams, :mod:`softmax_icl.streams`).
    """
    dev = resolve_device(device) if isinstance(device, str) else device
    Ms = torch.as_tensor(np.asarray(matrices, dtype=np.float64), dtype=torch.float32, device=dev)
    K, R = Ms.shape[0], len(rows)
    if paired and K != R:
        raise ValueError(f"paired evaluation needs one matrix per row, got {K} matrices for {R} rows")
    n_max = max(int(r["n"]) for r in rows) if n_draw is None else int(n_draw)
    if n_max < max(int(r["n"]) for r in rows):
        raise ValueError(f"n_draw={n_draw} is smaller than the largest n of the rows")
    ns = sorted({int(r["n"]) for r in rows})
    classes = sorted({r["function_class"] for r in rows})
    L = torch.tensor([float(r["L"]) for r in rows], device=dev)
    row_n = np.array([int(r["n"]) for r in rows])
    row_cls = np.array([classes.index(r["function_class"]) for r in rows])
    if chunk is None:   # keep each chunk's largest tensors near 2e7 elements
        chunk = int(min(2048, max(16, 2e7 // (max(K, R) * (n_max + 1)))))
    shape = (R,) if paired else (R, K)
    sums = {k: torch.zeros(shape, dtype=torch.float64, device=dev) for k in ("b", "b2", "v", "v2")}
    stream = derive_seed(seed, 7919)
    done = 0
    bar = Progress(-(-n_tasks // chunk), desc)
    try:
        with torch.no_grad():
            while done < n_tasks:
                b = min(chunk, n_tasks - done)
                raw = draw_raw(spec, b, n_max, stream, dev, first_task=done)
                x = raw["x"]
                xt = raw.get("x_task", x)          # where the task is evaluated (whitened inputs, if any)
                xq = x[:, n_max]
                # f at every input for every row: one call per class on the shared draws, (R, b, n_max + 1)
                f = torch.empty(R, b, n_max + 1, device=dev)
                raw1 = {k: v.unsqueeze(0) for k, v in raw.items()}
                for j, name in enumerate(classes):
                    st = torch.as_tensor(np.nonzero(row_cls == j)[0], device=dev)
                    basis = spec.basis(dev) if name.startswith("lowrank_") else None
                    f[st] = task_values(name, xt.unsqueeze(0), raw1, L[st].unsqueeze(0), basis)[0]
                s_all = scores(x[None, :, :n_max], xq[None], Ms[None])[0]                  # (K, b, n_max)
                for n, rs, pred, v in _prefix_terms(s_all, f, row_n, ns, paired):
                    target = f[rs, :, n_max] if paired else f[rs, :, n_max].unsqueeze(1)
                    err = (pred - target).double() ** 2
                    v = v.double() if paired else v.double().unsqueeze(0).expand(len(rs), K, b)
                    sums["b"][rs] += err.sum(-1)
                    sums["b2"][rs] += (err**2).sum(-1)
                    sums["v"][rs] += v.sum(-1)
                    sums["v2"][rs] += (v**2).sum(-1)
                done += b
                bar.update(-(-done // chunk))
    finally:
        bar.close()
    out = {k: (t / n_tasks).cpu().numpy() for k, t in sums.items()}

    def se(m, m2):
        return np.sqrt(np.clip(m2 - m**2, 0, None) / n_tasks)

    return LossTerms(out["b"], out["v"], se(out["b"], out["b2"]), se(out["v"], out["v2"]), int(n_tasks))


def _prefix_terms(s: torch.Tensor, f: torch.Tensor, row_n: np.ndarray, ns: list[int], paired: bool):
    """For each context length ``n`` of ``ns`` (increasing), the rows evaluated at ``n``, their softmax predictions
    and ``sum_i a_i^2``, from scores ``s`` (K, b, n_max) and labels ``f`` (R, b, n_max + 1) of rows of lengths
    ``row_n``. Not paired: every matrix on every row, predictions (r, K, b), ``sum a^2`` (K, b); paired: matrix r on
    row r only, (r, b) and (r, b).

    Not paired, every matrix is read at every length: the context is cut into the segments between consecutive
    lengths, each segment's weights taken relative to its own largest score (:func:`softmax_icl.models.
    segment_weights`) and the running sums rescaled as segments are added (log-sum-exp), so every score's exp is
    computed once whatever the number of lengths, and a row's weighted labels are summed only up to its own length.
    Paired, each matrix is read at its row's length only: one softmax per length over the rows of that length.
    """
    row_t = torch.as_tensor(row_n, device=s.device)
    if paired:
        for n in ns:
            at = torch.nonzero(row_t == n).flatten()
            if at.numel():
                a = torch.softmax(s[at, :, :n], dim=-1)                                       # (r, b, n)
                yield n, at, (a * f[at, :, :n]).sum(-1), (a**2).sum(-1)
        return
    S1 = torch.zeros((f.shape[0], s.shape[0], s.shape[1]), dtype=s.dtype, device=s.device)
    E, stats = segment_weights(s, [0] + list(ns), inplace=True)
    logm = S0 = S2 = None
    lo = 0
    for k, n in enumerate(ns):
        alive = torch.nonzero(row_t >= n).flatten()                      # rows whose context reaches past lo
        cm, A0, A2 = stats[:, :, k, 0], stats[:, :, k, 1], stats[:, :, k, 2]          # (K, b)
        A1 = torch.einsum("kbm,rbm->rkb", E[:, :, lo:n], f[alive, :, lo:n])          # (r, K, b)
        if logm is None:
            logm, S0, S2 = cm, A0, A2
            S1[alive] = A1
        else:
            new = torch.maximum(logm, cm)
            f_old, f_new = torch.exp(logm - new), torch.exp(cm - new)
            S1[alive] = S1[alive] * f_old + A1 * f_new
            S0, S2, logm = S0 * f_old + A0 * f_new, S2 * f_old**2 + A2 * f_new**2, new
        lo = n
        at = torch.nonzero(row_t == n).flatten()
        if at.numel():
            yield n, at, S1[at] / S0, S2 / S0**2


def refine_minimum(w_grid, loss, log: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Minimiser and minimum of ``loss`` (..., W) over ``w_grid``, refined by a parabola through the three
    grid points around the minimum (in ``log w`` by default, else in ``w``).

    At the ends of the grid the grid value is returned (the minimum may lie beyond the grid).
    """
    w = np.asarray(w_grid, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    lw = np.log(w) if log else w
    j = loss.argmin(-1)
    w_best = w[j].astype(np.float64)
    l_best = np.take_along_axis(loss, j[..., None], -1)[..., 0]
    inner = (j > 0) & (j < w.size - 1)
    if np.any(inner):
        jj = np.clip(j, 1, w.size - 2)
        x0, x1, x2 = lw[jj - 1], lw[jj], lw[jj + 1]
        y0 = np.take_along_axis(loss, (jj - 1)[..., None], -1)[..., 0]
        y1 = np.take_along_axis(loss, jj[..., None], -1)[..., 0]
        y2 = np.take_along_axis(loss, (jj + 1)[..., None], -1)[..., 0]
        den = (x0 - x1) * (x0 - x2) * (x1 - x2)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):   # an infinite neighbour: no parabola
            a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
            bb = (x2**2 * (y0 - y1) + x1**2 * (y2 - y0) + x0**2 * (y1 - y2)) / den
            cc = (x1 * x2 * (x1 - x2) * y0 + x2 * x0 * (x2 - x0) * y1 + x0 * x1 * (x0 - x1) * y2) / den
            xv = np.clip(-bb / (2 * a), x0, x2)
        ok = inner & (a > 0) & np.isfinite(bb) & np.isfinite(cc)
        with np.errstate(invalid="ignore", over="ignore"):
            w_best = np.where(ok, np.exp(xv) if log else xv, w_best)
            l_best = np.where(ok, a * xv**2 + bb * xv + cc, l_best)
    return w_best, l_best


def near_optimal_interval(w_grid, loss, rel_tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest grid ``w`` whose loss is within ``(1 + rel_tol)`` of the minimum, over (..., W)."""
    w = np.asarray(w_grid, dtype=np.float64)
    loss = np.asarray(loss, dtype=np.float64)
    ok = loss <= loss.min(-1, keepdims=True) * (1 + rel_tol)
    lo = w[ok.argmax(-1)]
    hi = w[w.size - 1 - ok[..., ::-1].argmax(-1)]
    return lo, hi


def saturation_w(w_grid, bias) -> np.ndarray:
    """The window the optimum saturates at when the noise vanishes: ``argmin_w bias(w)`` (refined)."""
    return refine_minimum(w_grid, bias)[0]


def optimal_w_curve(w_grid, bias_1, noise, snr_values, n: int) -> np.ndarray:
    """Population-optimal ``w`` of the ReLU class against ``s = n L^2 / sigma^2`` at one ``n``.

    For the ReLU (and affine) class ``f`` scales linearly with ``L``, so ``bias(L) = L^2 bias(1)`` and the
    loss is ``L^2 [bias_1(w) + noise(w) n / s]``: the optimum depends on ``L`` and ``sigma`` only through
    ``s``. ``bias_1`` and ``noise`` are the (W,) terms at ``L = 1`` and this ``n``.
    """
    s = np.asarray(snr_values, dtype=np.float64)
    loss = np.asarray(bias_1)[None, :] + (n / s)[:, None] * np.asarray(noise)[None, :]
    return refine_minimum(w_grid, loss)[0]


def half_width_deg(w) -> np.ndarray:
    """Half-width (degrees) of the softmax window with ``M = w I`` on the sphere: ``arccos(1 - ln 2 / w)``."""
    w = np.asarray(w, dtype=np.float64)
    c = np.clip(1 - math.log(2) / w, -1, 1)
    return np.degrees(np.arccos(c))


# -- Theorem 3.4 across n and d: the ReLU class over M = w I, batched over w and n --------------------

@dataclass(frozen=True)
class WindowScan:
    """Population terms of the ReLU class (L = 1) over ``M = w I`` at several context lengths.

    ``bias`` and ``noise`` (N, W): ``E[(sum_i a_i f(x_i) - f(x_q))^2]`` at ``L = 1`` and ``E[sum_i a_i^2]``, one
    row per ``ns``; the loss at ``(L, sigma)`` is ``L^2 bias + sigma^2 noise``. ``*_se``: standard errors over tasks.
    """

    d: int
    ns: tuple
    w: np.ndarray
    bias: np.ndarray
    noise: np.ndarray
    bias_se: np.ndarray
    noise_se: np.ndarray
    n_tasks: int


def relu_window_scan(d: int, ns, w, n_tasks: int, seed: int = 0, chunk: int = 32,
                     dtype: torch.dtype = torch.float32, desc: str | None = None) -> WindowScan:
    """Monte Carlo of the ReLU class's bias and noise terms over ``M = w I`` for every ``n`` of ``ns`` at once.

    Independent of :func:`loss_terms` (its own sampler, float64): by rotation invariance the query is fixed at
    ``e_1`` (so ``x_i^T M x_q = w c_i`` with ``c_i`` the first coordinate of ``x_i``); the coefficients
    ``l1, l2 ~ U[-1, 1]`` are averaged in closed form (``E[l^2] = 1/3``, the offset ``b`` cancels because the
    weights sum to one). The contexts of the shorter ``n`` are prefixes of the longest. Every ``w`` sees the same
    draws; for each task and ``w`` the sums over a segment of the context are taken relative to the segment's
    largest ``c`` and combined in log-sum-exp fashion, so no term that matters underflows at large ``w``. The
    inputs are drawn in float64 and the per-task sums computed in ``dtype`` (float32: every weight is at most 1
    relative to the largest, so what float32 drops is below 1e-38 of it); the sums over tasks are float64. In float32
    on the CPU the per-segment sums run in the engine (:func:`softmax_icl.engine.window_sums`, where it is built and
    chosen), else in PyTorch; the two agree to float32 rounding (a test). A progress bar (``desc``, default
    "Theorem 3.4 scan, d = <d>") counts the chunks.
    """
    ns = tuple(sorted(int(n) for n in ns))
    wt = torch.as_tensor(np.asarray(w, dtype=np.float64)).to(dtype)
    W, n_max = wt.numel(), ns[-1]
    bounds = (0,) + ns
    g = torch.Generator().manual_seed(derive_seed(seed, 3413))
    fused = dtype == torch.float32 and engine.available()
    sums = {k: torch.zeros(len(ns), W, dtype=torch.float64) for k in ("b", "b2", "v", "v2")}
    done = 0
    bar = Progress(-(-n_tasks // chunk), desc or f"Theorem 3.4 scan, d = {d}")
    try:
        with torch.no_grad():
            while done < n_tasks:
                b = min(chunk, n_tasks - done)
                x = torch.randn(b, n_max, d, generator=g, dtype=torch.float64)
                x = x / x.norm(dim=-1, keepdim=True)
                q = torch.randn(b, d, generator=g, dtype=torch.float64)
                q = q / q.norm(dim=-1, keepdim=True)
                c = x[..., 0].to(dtype)                                     # (b, n): cosine to the query e_1
                p = (x @ q.unsqueeze(-1)).to(dtype)                         # (b, n, 1): q^T x_i
                G = torch.cat([torch.ones_like(p), p.clamp_min(0), (-p).clamp_min(0)], -1)      # (b, n, 3)
                gq = torch.stack([q[:, 0].clamp_min(0), (-q[:, 0]).clamp_min(0)], -1).to(dtype)  # (b, 2)
                if fused:                    # every segment's sums at once, each exp computed once (the engine)
                    AA = engine.window_sums(wt, c.contiguous(), G[..., 1].contiguous(), G[..., 2].contiguous(), bounds)
                logm = None                                                 # running shift (b, W) of the prefix
                S = None                                                    # prefix sums (b, W, 3) and (b, W)
                for k, n in enumerate(ns):
                    seg = slice(bounds[k], n)
                    cm = c[:, seg].max(-1).values                                              # (b,)
                    if fused:
                        A, A2 = AA[:, k, :, :3], AA[:, k, :, 3]
                    else:
                        E = torch.exp(wt[None, :, None] * (c[:, None, seg] - cm[:, None, None]))    # (b, W, m)
                        A = torch.bmm(E, G[:, seg])                                                # (b, W, 3)
                        A2 = (E * E).sum(-1)                                                       # (b, W)
                    lm = wt[None, :] * cm[:, None]                                             # (b, W) log-scale
                    if S is None:
                        logm, S, S2 = lm, A, A2
                    else:
                        new = torch.maximum(logm, lm)
                        f_old, f_new = torch.exp(logm - new), torch.exp(lm - new)
                        S = S * f_old[..., None] + A * f_new[..., None]
                        S2 = S2 * f_old**2 + A2 * f_new**2
                        logm = new
                    pred = S[..., 1:] / S[..., :1]                                             # (b, W, 2)
                    err = ((pred - gq[:, None, :]) ** 2).sum(-1) / 3.0                         # E over l1, l2
                    v = S2 / S[..., 0] ** 2
                    err, v = err.double(), v.double()
                    sums["b"][k] += err.sum(0)
                    sums["b2"][k] += (err**2).sum(0)
                    sums["v"][k] += v.sum(0)
                    sums["v2"][k] += (v**2).sum(0)
                done += b
                bar.update(-(-done // chunk))
    finally:
        bar.close()
    m = {k: (t / n_tasks).numpy() for k, t in sums.items()}

    def se(a, a2):
        return np.sqrt(np.clip(a2 - a**2, 0, None) / n_tasks)

    return WindowScan(d, ns, np.asarray(w, dtype=np.float64), m["b"], m["v"], se(m["b"], m["b2"]),
                      se(m["v"], m["v2"]), int(n_tasks))


def sphere_noise_limit(d: int, w) -> np.ndarray:
    """``lim_{n->inf} n E[sum_i a_i^2]`` for ``M = w I`` and inputs on ``S^{d-1}``:
    ``E[e^{2 w c}] / E[e^{w c}]^2`` with ``c`` the cosine between two uniform points (density
    ``~ (1 - c^2)^{(d-3)/2}``), by quadrature in ``t = 1 - c`` on a geometric grid. It grows like
    ``w^{(d-1)/2}`` for large ``w`` (the slides' sketch writes ``w^{d/2}``); for ``d = 3``,
    ``E[e^{w c}] = sinh(w) / w``.
    """
    w = np.atleast_1d(np.asarray(w, dtype=np.float64))
    t = np.geomspace(1e-14, 2.0, 20001)
    lt = np.log(t)
    dens = np.exp(0.5 * (d - 3) * (np.log(t) + np.log(np.clip(2 - t, 1e-300, None))))   # unnormalised

    def moment(k):        # E[exp(-k w t)] (t = 1 - c): integral in log t of dens * exp(-k w t) * t
        y = dens[None, :] * np.exp(-k * w[:, None] * t[None, :]) * t[None, :]
        return np.trapezoid(y, lt, axis=-1)

    z = np.trapezoid(dens * t, lt)
    return moment(2.0) * z / moment(1.0) ** 2


def noise_exponent_fit(w, n_noise, w_lo: float, w_hi: float) -> SlopeFit:
    """Power-law fit ``n E[sum a_i^2] ~ w^k`` over ``w_lo <= w <= w_hi``."""
    w, y = np.asarray(w, dtype=np.float64), np.asarray(n_noise, dtype=np.float64)
    m = (w >= w_lo) & (w <= w_hi)
    return fit_loglog(w[m], y[m])
