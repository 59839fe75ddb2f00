"""Parameters and profiles of the low-rank figure (Collins et al. 2024, Fig. 4 / Appendix Fig. 10, Theorem 4.4)."""

from ...profiles import Figure, Param, ParameterError, at_least, min_seeds, non_negative, positive, seed_params
from ...profiles import LOW_RANK_CLASSES


def _low_rank_validate(cfg: dict) -> None:
    if not 1 <= cfg["k"] < cfg["d"]:
        raise ParameterError(f"parameter 'k' = {cfg['k']} is out of range for d = {cfg['d']}; allowed: an integer "
                             "with 1 <= k < d (rho_1 needs a non-empty complement B_perp)")
    if len(set(cfg["classes"])) != len(cfg["classes"]):
        raise ParameterError(f"parameter 'classes' lists a class twice: {cfg['classes']!r}")
    fs = cfg["floor_steps"]
    if sorted(set(fs)) != fs or len(fs) < 2:
        raise ParameterError(f"parameter 'floor_steps' must hold at least 2 increasing training lengths, got {fs!r}")
    if cfg["snapshots"] > cfg["steps"]:
        raise ParameterError(f"parameter 'snapshots' = {cfg['snapshots']} must not exceed steps = {cfg['steps']}")
    om = cfg["link_omegas"]
    if sorted(set(om)) != om or len(om) < 2 or om[0] <= 0:
        raise ParameterError(f"parameter 'link_omegas' must hold at least 2 increasing values > 0, got {om!r}")
    sg = cfg["noise_sigmas"]
    if len(sg) != 2 or not 0 <= sg[0] < sg[1]:
        raise ParameterError(f"parameter 'noise_sigmas' must hold a low and a higher noise level >= 0, got {sg!r}")


FIGURE = Figure(
    name="low_rank",
    title="Softmax attention learns the low-rank structure of the tasks",
    paper="Collins et al. (2024), Figure 4 / Appendix Figure 10 and Theorem 4.4",
    validate=_low_rank_validate,
    params={
        "d": Param("int", {"default": 10}, "input dimension", source="spec", check=at_least(2),
                   check_text="an integer >= 2"),
        "k": Param("int", {"default": 2}, "rank of the shared subspace col(B)", source="spec", check=at_least(1),
                   check_text="an integer with 1 <= k < d"),
        "n": Param("int", {"default": 20}, "context length (pretraining and test)", source="spec",
                   check=at_least(1), check_text="an integer >= 1"),
        "sigma": Param("float", {"default": 0.0}, "label-noise standard deviation (Theorem 4.4: sigma = 0)",
                       source="slides", check=non_negative, check_text="a number >= 0"),
        "classes": Param("list[str]", {"default": list(LOW_RANK_CLASSES)},
                         "task classes f(x) = g(a^T B^T x): the linear class and the affine (+2), quadratic and "
                         "cos(4 .) links", source="slides", allowed=LOW_RANK_CLASSES),
        "L": Param("float", {"default": 1.0}, "scale of a^T B^T x inside the link (1: the slides' classes)",
                   source="slides", check=positive, check_text="a number > 0"),
        "basis_seed": Param("int", {"default": 2}, "seed that draws the orthonormal basis B (fixed per run)",
                            check=non_negative, pool=True, check_text="an integer >= 0"),
        "steps": Param("int", {"smoke": 300, "default": 2000, "paper": 10000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "batch_size": Param("int", {"smoke": 64, "default": 128, "paper": 512}, "tasks per step per configuration",
                            check=positive, check_text="an integer >= 1"),
        "lr": Param("float", {"default": 0.1}, "peak Adam learning rate (as in the other chapters)",
                    check=positive, check_text="a number > 0"),
        "lr_schedule": Param("str", {"default": "cosine"}, "Adam learning-rate schedule (cosine: decays to 0)",
                             allowed=("constant", "cosine")),
        "theory_sigma": Param("float", {"default": 0.5}, "label noise of the Theorem 4.4 units with sigma > 0",
                              check=positive, check_text="a number > 0"),
        "theory_n": Param("int", {"default": 2}, "short context of the Theorem 4.4 units (the theorem: n = 2)",
                          source="slides", check=at_least(2), check_text="an integer >= 2"),
        "floor_steps": Param("list[int]", {"smoke": [100, 300], "default": [250, 500, 1000, 2000],
                                           "paper": [1000, 3000, 10000]},
                             "training lengths of the rho-floor study (linear class, both schedules)",
                             check=positive, check_text="increasing integers >= 1"),
        "link_omegas": Param("list[float]", {"default": [1.5, 3.0, 6.0]},
                             "window sweep: Lipschitz constants omega of the cosine link cos(omega a^T B^T x), "
                             "at link_sigma", check=positive, check_text="increasing numbers > 0"),
        "link_sigma": Param("float", {"default": 0.2}, "window sweep: label noise of the omega grid",
                            check=non_negative, check_text="a number >= 0"),
        "noise_sigmas": Param("list[float]", {"default": [0.1, 1.0]},
                              "window sweep: the low and the high label noise, at noise_omega", check=non_negative,
                              check_text="two increasing numbers >= 0"),
        "noise_omega": Param("float", {"default": 4.0}, "window sweep: omega of the cosine link at the two noise "
                             "levels (4: the chapter's cosine link)", check=positive, check_text="a number > 0"),
        "param": Param("str", {"default": "KQ"}, "trainable object: M directly or M = M_K^T M_Q",
                       allowed=("M", "KQ")),
        "snapshots": Param("int", {"smoke": 10, "default": 40, "paper": 50},
                           "snapshots of M logged during pretraining (rho and ICL error against step)",
                           check=at_least(2), check_text="an integer >= 2 and <= steps"),
        "curve_tasks": Param("int", {"smoke": 500, "default": 2048, "paper": 10000},
                             "evaluation tasks per snapshot for the error-against-step curves", check=positive,
                             check_text="an integer >= 1"),
        "eval_tasks": Param("int", {"smoke": 2000, "default": 10000, "paper": 50000},
                            "tasks in the fixed evaluation set (final units and references)", check=positive,
                            check_text="an integer >= 1", source="spec"),
        "tune_tasks": Param("int", {"smoke": 1000, "default": 4096, "paper": 10000},
                            "tasks in each seed's tuning set of the reference windows M = w I and M = c B B^T "
                            "(drawn apart from the evaluation set)", check=positive, check_text="an integer >= 1"),
        **{**seed_params(), "seeds": Param("int", {"smoke": 2, "default": 15, "paper": 10},
                                           "independent pretraining runs per configuration (a batch axis of every "
                                           "sweep; every check's verdict rests on all of them)", **min_seeds())},
    },
    notes=(
        "Low rank: the learning rate is the other chapters' 0.1, decayed along a cosine to 0. A constant rate of 0.01 "
        "(0.005 at paper), lowered in exploratory runs until rho_2 passed its threshold, was set aside: with a "
        "constant Adam step the off-subspace entries of M keep diffusing at a scale set by the step, a floor under "
        "rho. The floor is measured against the training length for both schedules.",
        "Low rank: for softmax attention the affine link a^T B^T x + 2 is the linear class: the weights sum to one, "
        "so the prediction shifts by exactly 2 and the loss, gradients and trained M are those of the linear class "
        "(with common random numbers, identical up to rounding). It is not independent evidence for Theorem 4.4.",
        "Low rank: Theorem 4.4 is also tested at n = theory_n (2) with sigma = 0 and sigma = theory_sigma, and at "
        "n with sigma = theory_sigma (beyond the theorem), on the linear class.",
        "Low rank: rho_1 = ||B_perp^T M B_perp||_2 / ||B^T M B||_2 and rho_2 = ||M - P M P||_F / ||M||_F with "
        "P = B B^T (both reported); 'M close to c B B^T' is measured by min_c ||M - c B B^T||_F / ||M||_F.",
        "Low rank: the window sweep (the authors' rebuttal: with a nonlinear link the attention learns the "
        "projection and a nearest-neighbour window sized by the link's Lipschitz constant and the noise) trains "
        "softmax units on the cosine link cos(omega a^T B^T x) at each omega of link_omegas (sigma = link_sigma) and "
        "at each sigma of noise_sigmas (omega = noise_omega), with the main units' steps, batch and learning-rate "
        "schedule; the statistic is the in-subspace window scale |tr(B^T M B)| / k.",
        "Low rank: references are the zero predictor (its error is E[f(x_q)^2]), the uniform average of the context "
        "labels (softmax with M = 0), and the best M = c B B^T and M = w I, tuned on tuning sets apart from the "
        "evaluation set: w per class and seed (each seed its own tuning set; the rival of the subspace check), c per "
        "class; each scale is a grid minimum refined by a parabola in log scale.",
    ),
)
