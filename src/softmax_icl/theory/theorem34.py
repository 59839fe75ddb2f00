"""Theorem 3.4 of Collins et al. (2024), the window scale: for the ReLU class and large ``n`` the optimal key-query
matrix is ``M* = w I`` with ``w`` a power of the signal-to-noise ratio ``s = n L^2 / sigma^2``. Two versions of the
exponent range are in circulation:

- ``"slides"``: the talk states ``Omega(s^{1/d}) < w < O(s^{2/d})``;
- ``"sketch"``: the talk's own proof sketch (noise term ``Theta(sigma^2 w^{d/2} / n)``, bias between ``L^2/w^2`` and
  ``L^2/w``) gives ``Omega(s^{1/(d+2)}) < w < O(s^{2/(d+2)})`` (:func:`sketch_window_bounds` carries out that
  derivation).

Here: the ratio, the exponent ranges and their slopes against each variable, and which version a measured slope is
consistent with.
"""

from __future__ import annotations

import numpy as np

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
