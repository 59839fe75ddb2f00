"""Log-log slope fits: a power law ``y = C x^slope`` fitted by least squares (one constant per group if grouped), and
local slopes along a curve."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
