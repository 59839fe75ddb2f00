"""Theory formulas of Collins et al. (2024) and the measurements that test them, one module per topic:
:mod:`.theorem34`, :mod:`.fits`, :mod:`.matrices`, :mod:`.population`, :mod:`.window_scan`; every name is
re-exported here (``from softmax_icl import theory as th; th.loss_terms(...)``).

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

from .fits import SlopeFit, fit_loglog, local_slopes
from .matrices import (BlockForm, best_multiple, block_form, covariance_exponent, covariance_prediction,
                       normalized_distance, window_base)
from .population import (LossTerms, half_width_deg, loss_terms, near_optimal_interval, optimal_w_curve,
                         refine_minimum, saturation_w)
from .theorem34 import (SNR_POWER, THEOREM_34_VERSIONS, sketch_exponents, sketch_window_bounds, snr,
                        theorem34_exponents, theorem34_slope_range, which_version)
from .window_scan import WindowScan, noise_exponent_fit, relu_window_scan, sphere_noise_limit

__all__ = ["BlockForm", "LossTerms", "SNR_POWER", "SlopeFit", "THEOREM_34_VERSIONS", "WindowScan", "best_multiple",
           "block_form", "covariance_exponent", "covariance_prediction", "fit_loglog", "half_width_deg",
           "local_slopes", "loss_terms", "near_optimal_interval", "noise_exponent_fit", "normalized_distance",
           "optimal_w_curve", "refine_minimum", "relu_window_scan", "saturation_w", "sketch_exponents",
           "sketch_window_bounds", "snr", "sphere_noise_limit", "theorem34_exponents", "theorem34_slope_range",
           "which_version", "window_base"]
