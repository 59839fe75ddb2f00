"""Parameters and profiles of the norm-scaling figure (Collins et al. 2024, Fig. 3, Theorem 3.4, covariance lemma)."""

from ...profiles import Figure, Param, ParameterError, at_least, non_negative, positive, seed_params

CLASSES = ("relu", "cosine")


def _norm_validate(cfg: dict) -> None:
    for name in ("L_values", "sigma_values", "n_values", "n_curve", "full_L"):
        v = cfg[name]
        if sorted(v) != v or len(set(v)) != len(v):
            raise ParameterError(f"parameter {name!r} must be strictly increasing, got {v!r}")
    if len(cfg["L_values"]) < 3 or len(cfg["sigma_values"]) < 3 or len(cfg["n_values"]) < 3:
        raise ParameterError("parameters 'L_values', 'sigma_values' and 'n_values' need at least 3 values each "
                             "(a slope and a trend need 3 points)")
    if cfg["sigma"] not in cfg["sigma_values"]:
        raise ParameterError(f"parameter 'sigma' = {cfg['sigma']} must be one of sigma_values = "
                             f"{cfg['sigma_values']!r} (the L sweep and the sigma sweep share that point)")
    if cfg["L_sigma"] not in cfg["L_values"]:
        raise ParameterError(f"parameter 'L_sigma' = {cfg['L_sigma']} must be one of L_values = "
                             f"{cfg['L_values']!r} (the sigma sweep runs at that L)")
    if cfg["n"] not in cfg["n_values"]:
        raise ParameterError(f"parameter 'n' = {cfg['n']} must be one of n_values = {cfg['n_values']!r}")
    for L in cfg["n_sweep_L"] + cfg["full_L"]:
        if L not in cfg["L_values"]:
            raise ParameterError(f"Lipschitz constant {L} of 'n_sweep_L' / 'full_L' must be one of L_values = "
                                 f"{cfg['L_values']!r} (their population optimum comes from the same scan)")
    if cfg["d"] < 2:
        raise ParameterError(f"parameter 'd' = {cfg['d']} is out of range; allowed: an integer >= 2")
    if not 0 < cfg["w_min"] < cfg["w_max"]:
        raise ParameterError(f"parameters 'w_min' = {cfg['w_min']} and 'w_max' = {cfg['w_max']} must satisfy "
                             "0 < w_min < w_max")


FIGURE = Figure(
    name="norm_scaling",
    title="The window scale ||M|| grows with L and n and shrinks with sigma (Theorem 3.4)",
    paper="Collins et al. (2024), Figure 3, Theorem 3.4 and the covariance lemma",
    validate=_norm_validate,
    params={
        "d": Param("int", {"default": 5}, "input dimension", source="spec", check=at_least(2),
                   check_text="an integer >= 2"),
        "n": Param("int", {"default": 50}, "context length of the L and sigma sweeps", source="spec",
                   check=positive, check_text="an integer >= 1 in n_values"),
        "sigma": Param("float", {"default": 0.1}, "label noise of the L sweep and the n sweep", source="spec",
                       check=non_negative, check_text="a number >= 0 in sigma_values"),
        "classes": Param("list[str]", {"default": list(CLASSES)}, "function classes (panels)", source="spec",
                         allowed=CLASSES),
        "L_values": Param("list[float]", {"smoke": [0.3, 1.0, 3.0],
                                          "default": [0.03, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 3.0, 10.0, 30.0],
                                          "paper": [0.01, 0.03, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 2.0, 3.0,
                                                    10.0, 30.0, 100.0]},
                          "Lipschitz constants of the L sweep (at sigma, n); from the noise-dominated end to "
                          "past the saturation of the window", check=positive, check_text="positive numbers"),
        "L_sigma": Param("float", {"default": 1.0}, "Lipschitz constant of the sigma sweep", check=positive,
                         check_text="a number > 0 in L_values"),
        "sigma_values": Param("list[float]", {"smoke": [0.1, 0.3, 1.0],
                                              "default": [0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 1.0, 3.0],
                                              "paper": [0.003, 0.01, 0.03, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0,
                                                        3.0]},
                              "noise levels of the sigma sweep (at L_sigma, n)", check=positive,
                              check_text="positive numbers"),
        "n_values": Param("list[int]", {"smoke": [10, 25, 50], "default": [10, 20, 50, 100, 200],
                                        "paper": [10, 20, 50, 100, 200, 400, 800]},
                          "context lengths of the n sweep (ReLU, isotropic)", check=positive,
                          check_text="integers >= 1"),
        "n_sweep_L": Param("list[float]", {"default": [0.3, 1.0]},
                           "Lipschitz constants of the n sweep (at sigma): one inside the theory regime, one "
                           "near saturation", check=positive, check_text="numbers > 0 in L_values"),
        "full_L": Param("list[float]", {"smoke": [1.0], "default": [0.3, 1.0]},
                        "Lipschitz constants of the units with full W_K, W_Q, W_V (each class, at sigma, n)",
                        check=positive, check_text="numbers > 0 in L_values"),
        "steps": Param("int", {"smoke": 60, "default": 1000, "paper": 5000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "batch_size": Param("int", {"smoke": 32, "default": 128, "paper": 512}, "tasks per step per configuration",
                            check=positive, check_text="an integer >= 1"),
        "lr": Param("float", {"default": 0.1}, "Adam learning rate (M = M_K^T M_Q)", check=positive,
                    check_text="a number > 0"),
        "lr_full": Param("float", {"default": 0.03}, "Adam learning rate of the full W_K, W_Q, W_V units",
                         check=positive, check_text="a number > 0"),
        "average_last": Param("float", {"default": 0.25},
                              "final M = mean of the logged M over this last fraction of training",
                              check=lambda x: 0 <= x < 1, check_text="a number in [0, 1)"),
        "scan_tasks": Param("int", {"smoke": 512, "default": 8192, "paper": 65536},
                            "Monte Carlo tasks of the population-loss scans over M = w I (and w Sigma^-p)",
                            check=positive, check_text="an integer >= 1"),
        "scan_points": Param("int", {"smoke": 32, "default": 96, "paper": 160},
                             "grid points of w (log-spaced in [w_min, w_max]) in the scans", check=at_least(8),
                             check_text="an integer >= 8"),
        "w_min": Param("float", {"default": 0.01}, "smallest w of the scans", check=positive,
                       check_text="a number > 0"),
        "w_max": Param("float", {"default": 300.0}, "largest w of the scans", check=positive,
                       check_text="a number > w_min"),
        "n_curve": Param("list[int]", {"smoke": [50], "default": [50, 200, 800],
                                       "paper": [50, 200, 800, 3200]},
                         "context lengths of the population curves w*(n L^2 / sigma^2) (ReLU)", check=positive,
                         check_text="integers >= 1"),
        "regime_w": Param("float", {"default": 2.0},
                          "theory regime, lower end: population-optimal w at least this (window half-width "
                          "below ~50 degrees)", check=positive, check_text="a number > 0"),
        "regime_saturation": Param("float", {"default": 0.75},
                                   "theory regime, upper end: population-optimal w below this fraction of its "
                                   "noiseless limit (saturation)", check=lambda x: 0 < x <= 1,
                                   check_text="a number in (0, 1]"),
        **{**seed_params(), "seeds": Param("int", {"smoke": 1, "default": 2, "paper": 5},
                                           "independent pretraining runs per configuration", check=positive,
                                           check_text="an integer >= 1")},
    },
    notes=(
        "Window scale w of a trained M: its least-squares multiple of the predicted direction (I, or Sigma^-1 for "
        "non-isotropic inputs); the final M is the mean of the logged M over the last `average_last` of training "
        "(iterate averaging: Adam at lr 0.1 leaves a few per cent of jitter). Curves over training show ||M||_2 "
        "as in the paper.",
        "Population-optimal w: Monte Carlo over `scan_tasks` tasks with common random numbers, loss split exactly "
        "into bias + sigma^2 * E[sum_i a_i^2] (the noise term averaged over the label noise in closed form), all "
        "w values as one stacked evaluation; the minimum refined by a parabola in log w.",
        "Theorem 3.4 regime (chosen, SPEC 1.4): a configuration is inside it when its population-optimal w is "
        "at least `regime_w` and below `regime_saturation` times the noiseless limit argmin_w bias(w) at its n. "
        "Slopes are fitted to the trained w of the ReLU units inside it; outside it the notebook shows "
        "saturation instead of hiding it.",
        "Theorem 3.4 exponents: the book tests the range implied by the slides' proof sketch, 1/(d+2) to "
        "2/(d+2), because it follows from the stated ingredients (re-derived in softmax_icl.theory, unit-tested) "
        "and matches the d+2 in the slides' Theorem 3.5; the slides' stated 1/d to 2/d is tested alongside. A "
        "range 'holds' when the 95% confidence interval of the fitted exponent overlaps it.",
        "Covariance lemma: tested twice. With the SPEC's non-isotropic inputs the task direction is uniform in x "
        "(the tasks are not rotation invariant after whitening, so the lemma's symmetry condition fails); with "
        "input_dist 'nonisotropic_whitened' the tasks are functions of the whitened input, where it holds. A "
        "population scan over M = w Sigma^-p locates the optimal exponent p in both.",
        "Full W_K, W_Q, W_V units: trained on raw tokens [x; y] with their own learning rate `lr_full` (0.03: at "
        "0.1 the block form is as clear but noisier); the query's label slot is 0, so the label column of "
        "W_K^T W_Q cannot affect the prediction and stays near its initial value.",
    ),
)
