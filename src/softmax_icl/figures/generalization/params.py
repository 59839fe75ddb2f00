"""Parameters and profiles of the generalisation figure (Collins et al. 2024, Fig. 5 and Theorem 3.5)."""

from ...profiles import Figure, Param, ParameterError, at_least, non_negative, positive, seed_params
from ...profiles import LOW_RANK_CLASSES, FUNCTION_CLASSES

GENERAL_CLASSES = tuple(c for c in FUNCTION_CLASSES if c not in LOW_RANK_CLASSES)


def _generalization_validate(cfg: dict) -> None:
    classes, Ls = cfg["pretrain_classes"], cfg["L_pretrain"]
    if len(set(classes)) != len(classes):
        raise ParameterError(f"parameter 'pretrain_classes' lists a class twice: {classes!r}")
    if len(set(Ls)) != len(Ls) or sorted(Ls) != Ls:
        raise ParameterError(f"parameter 'L_pretrain' must be strictly increasing, got {Ls!r}")
    if not any(abs(L - cfg["L_test"]) < 1e-12 for L in Ls):
        raise ParameterError(f"parameter 'L_pretrain' = {Ls!r} must contain L_test = {cfg['L_test']!r} (the matched "
                             "pretraining)")
    if not (Ls[0] < cfg["L_test"] < Ls[-1]):
        raise ParameterError(f"parameter 'L_pretrain' = {Ls!r} must hold a value below and a value above L_test = "
                             f"{cfg['L_test']!r} (panel (b) mismatches L on both sides)")
    for name in ("mismatch_class", "reference_class"):
        if cfg[name] not in classes:
            raise ParameterError(f"parameter {name!r} = {cfg[name]!r} must be one of pretrain_classes = {classes!r}")
    if cfg["n_train"] > max(cfg["n_test"]) or cfg["n_train"] < min(cfg["n_test"]):
        raise ParameterError(f"parameter 'n_train' = {cfg['n_train']} must lie within the range of n_test = "
                             f"{cfg['n_test']!r}")
    if cfg["n_train"] not in cfg["n_test"]:
        raise ParameterError(f"parameter 'n_train' = {cfg['n_train']} must be one of n_test = {cfg['n_test']!r} (the "
                             "claims compare units at the pretraining context length)")
    if sorted(set(cfg["n_test"])) != cfg["n_test"]:
        raise ParameterError(f"parameter 'n_test' must be strictly increasing, got {cfg['n_test']!r}")


FIGURE = Figure(
    name="generalization",
    title="Generalisation: shared Lipschitzness is necessary and sufficient",
    paper="Collins et al. (2024), Figure 5 and Theorem 3.5",
    validate=_generalization_validate,
    params={
        "d": Param("int", {"default": 2}, "input dimension (inputs on the sphere S^{d-1})", check=at_least(1),
                   check_text="an integer >= 1"),
        "sigma": Param("float", {"default": 0.5}, "label-noise standard deviation, pretraining and test",
                       check=non_negative, check_text="a number >= 0"),
        "pretrain_classes": Param("list[str]", {"default": ["affine", "relu", "cosine"]},
                                  "function classes of pretraining (each also a test class)", source="paper",
                                  allowed=GENERAL_CLASSES),
        "L_pretrain": Param("list[float]", {"default": [0.1, 1.0, 10.0]},
                            "Lipschitz constants of pretraining (one unit per class and L)", source="paper",
                            check=positive, check_text="positive numbers, increasing, around L_test"),
        "L_test": Param("float", {"default": 1.0}, "Lipschitz constant of every test setting", source="paper",
                        check=positive, check_text="a number > 0 contained in L_pretrain"),
        "mismatch_class": Param("str", {"default": "cosine"},
                                "panel (b): class of the L-mismatched units and of the test tasks", source="paper",
                                allowed=GENERAL_CLASSES),
        "reference_class": Param("str", {"default": "affine"},
                                 "panel (b): class of the matched-L unit (pretrained at L_test)", source="paper",
                                 allowed=GENERAL_CLASSES),
        "n_train": Param("int", {"smoke": 32, "default": 128, "paper": 128},
                         "context length of pretraining", check=at_least(2), check_text="an integer >= 2 in n_test"),
        "n_test": Param("list[int]", {"smoke": [8, 32, 64], "default": [4, 8, 16, 32, 64, 128, 256],
                                      "paper": [4, 8, 16, 32, 64, 128, 256, 512, 1024]},
                        "test context lengths (one evaluation pass covers all)", check=at_least(1),
                        check_text="increasing integers >= 1 containing n_train"),
        "steps": Param("int", {"smoke": 200, "default": 600, "paper": 5000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "batch_size": Param("int", {"smoke": 64, "default": 128, "paper": 512}, "tasks per step per configuration",
                            check=positive, check_text="an integer >= 1"),
        "lr": Param("float", {"default": 0.1}, "Adam learning rate", check=positive, check_text="a number > 0"),
        "param": Param("str", {"default": "KQ"}, "trainable object: M directly or M = M_K^T M_Q",
                       allowed=("M", "KQ")),
        "eval_tasks": Param("int", {"smoke": 2000, "default": 10000, "paper": 50000},
                            "tasks in the fixed evaluation set", check=positive, check_text="an integer >= 1",
                            source="spec"),
        **seed_params(),
    },
    notes=(
        "Generalisation: d = 2 (inputs on the circle), sigma = 0.5 and pretraining context n = 128 are chosen so "
        "that the L = 10 cosine tasks are resolvable at the pretraining n (several context points per period) and "
        "the noise matters, i.e. the regime Theorem 3.5 describes. In exploratory runs at d = 3 and d = 5 with "
        "n = 64 the L = 10 cosine unit instead learned a wide window (it cannot resolve the oscillation and "
        "predicts the mean): the saturation regime of SPEC 1.4.",
        "Generalisation: every unit is pretrained at one context length n_train and tested at every n in n_test "
        "(test settings differ from training in class, L and n). The claims compare units at n = n_train.",
        "Generalisation: the grid pretraining class x L is trained in full (one batched sweep), so panel (b)'s "
        "mismatch is also reported for the other classes.",
        "Generalisation: linear attention reference = a linear unit pretrained on the test class at L_test; "
        "Nadaraya-Watson oracle = M = w I with w tuned per test class and n on a separate tuning set (24 values of w, "
        "log-spaced in [0.1, 1000]).",
        "Generalisation: errors at all test n come from one pass over the evaluation set (prefix sums over the "
        "context), drawing exactly the tasks metrics.icl_error draws at n = max(n_test).",
    ),
)
