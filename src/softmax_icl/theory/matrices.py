"""Measurements of trained key-query matrices against the predictions: the covariance lemma (with ``x = Sigma^{1/2}
u``, ``u ~ U^d``, the optimal ``M* = w Sigma^{-1}``), the window scale of ``M`` (its best multiple of a base ``B``),
the relative Frobenius distance between normalised matrices and the block form of a full ``W_K^T W_Q``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tasks import nonisotropic_covariance


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
