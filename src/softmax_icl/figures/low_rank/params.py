"""Parameters and profiles of the low-rank figure (Collins et al. 2024, Fig. 4 / Appendix Fig. 10, Theorem 4.4)."""

from ...profiles import Figure, Param, ParameterError, at_least, non_negative, positive, seed_params
from ...profiles import LOW_RANK_CLASSES


def _low_rank_validate(cfg: dict) -> None:
    if not 1 <= cfg["k"] < cfg["d"]:
        raise ParameterError(f"parameter 'k' = {cfg['k']} is out of range for d = {cfg['d']}; allowed: an integer "
                             "with 1 <= k < d (rho_1 needs a non-empty complement B_perp)")
    if len(set(cfg["classes"])) != len(cfg["classes"]):
        raise ParameterError(f"parameter 'classes' lists a class twice: {cfg['classes']!r}")
    if cfg["snapshots"] > cfg["steps"]:
        raise ParameterError(f"parameter 'snapshots' = {cfg['snapshots']} must not exceed steps = {cfg['steps']}")


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
                            check=non_negative, check_text="an integer >= 0"),
        "steps": Param("int", {"smoke": 300, "default": 2000, "paper": 10000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "batch_size": Param("int", {"smoke": 64, "default": 128, "paper": 512}, "tasks per step per configuration",
                            check=positive, check_text="an integer >= 1"),
        "lr": Param("float", {"smoke": 0.02, "default": 0.01, "paper": 0.005}, "Adam learning rate",
                    check=positive, check_text="a number > 0"),
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
        **seed_params(),
    },
    # the paper claims softmax < linear on the nonlinear links only; on F_B^lin itself linear is the right estimator
    findings=("softmax-beats-linear-on-linear-class",),
    notes=(
        "Low rank: the learning rate (0.01 at the default profile, 0.005 at paper) is lower than the other figures'. "
        "With a constant Adam step the off-subspace entries of M keep diffusing at a scale set by the step, which "
        "puts a floor under rho; in exploratory runs lr = 0.05 left rho_2 at 0.1-0.4, lr = 0.005-0.01 at 0.05-0.15.",
        "Low rank: rho_1 = ||B_perp^T M B_perp||_2 / ||B^T M B||_2 and rho_2 = ||M - P M P||_F / ||M||_F with "
        "P = B B^T (both reported, SPEC 1.4); 'M close to c B B^T' is measured by min_c ||M - c B B^T||_F / ||M||_F.",
        "Low rank: references are the zero predictor (its error is E[f(x_q)^2]), the uniform average of the context "
        "labels (softmax with M = 0), and the best M = c B B^T and M = w I, c and w tuned per class on a separate "
        "tuning set.",
    ),
)
