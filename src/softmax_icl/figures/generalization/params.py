"""Parameters and profiles of the generalisation figure (Collins et al. 2024, Fig. 5 and Theorem 3.5)."""

from ...profiles import (Figure, Param, ParameterError, at_least, min_seeds, non_negative, positive, seed_params,
                         training_params)
from ...profiles import LOW_RANK_CLASSES, FUNCTION_CLASSES

GENERAL_CLASSES = tuple(c for c in FUNCTION_CLASSES if c not in LOW_RANK_CLASSES)


def _generalization_validate(cfg: dict) -> None:
    classes, Ls = cfg["pretrain_classes"], cfg["L_pretrain"]
    if len(set(classes)) != len(classes):
        raise ParameterError(f"parameter 'pretrain_classes' lists a class twice: {classes!r}")
    if len(set(Ls)) != len(Ls) or sorted(Ls) != Ls:
        raise ParameterError(f"parameter 'L_pretrain' must be strictly increasing, got {Ls!r}")
    if cfg["L_test"] not in Ls:
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
    for name in ("theory_n", "large_d_n"):
        if sorted(set(cfg[name])) != cfg[name] or len(cfg[name]) < 2:
            raise ParameterError(f"parameter {name!r} must hold at least 2 strictly increasing context lengths, got "
                                 f"{cfg[name]!r}")
    f = cfg["L_prime_factors"]
    if sorted(set(f)) != f or not (f[0] < 1 < f[-1]) or 1.0 not in f:
        raise ParameterError(f"parameter 'L_prime_factors' = {f!r} must be increasing, contain 1 and values on both "
                             "sides of 1 (the two branches of Theorem 3.5)")
    if cfg["curve_tasks"] > cfg["eval_tasks"]:
        raise ParameterError(f"parameter 'curve_tasks' = {cfg['curve_tasks']} must be at most eval_tasks = "
                             f"{cfg['eval_tasks']} (the curve set is the evaluation set's first tasks)")
    if cfg["large_d"] and cfg["large_d"] <= cfg["d"]:
        raise ParameterError(f"parameter 'large_d' = {cfg['large_d']} must be 0 (none) or larger than d = {cfg['d']}")


FIGURE = Figure(
    name="generalization",
    title="Generalisation: shared Lipschitzness is necessary and sufficient",
    paper="Collins et al. (2024), Figure 5 and Theorem 3.5",
    validate=_generalization_validate,
    params={
        "d": Param("int", {"default": 2}, "input dimension (inputs on the sphere S^(d-1))", check=at_least(1),
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
        "steps": Param("int", {"smoke": 300, "default": 1500, "paper": 5000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "init_identity": Param("float", {"default": 1.0},
                               "initial M = w0 I plus the small random initialisation (0: random only)",
                               check=non_negative, check_text="a number >= 0"),
        "lr_schedule": Param("str", {"default": "cosine"}, "Adam learning-rate schedule (cosine: decays to 0)",
                             allowed=("constant", "cosine")),
        "theory_class": Param("str", {"default": "relu"}, "Theorem 3.5's class F_L^+ (units of the quantitative "
                              "checks are pretrained and tested on it)", source="slides", allowed=GENERAL_CLASSES),
        "L_prime_factors": Param("list[float]", {"default": [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]},
                                 "test L' = factor x L_test of the Theorem 3.5 sweep", check=positive,
                                 check_text="increasing positive numbers containing 1, on both sides of 1"),
        "theory_n": Param("list[int]", {"smoke": [16, 64], "default": [32, 64, 128, 256, 512]},
                          "context lengths of the Theorem 3.5 units at d (one unit per n, L_test and L_pretrain[0])",
                          check=at_least(2), check_text="increasing integers >= 2"),
        "large_d": Param("int", {"smoke": 3, "default": 5}, "the larger input dimension of the Theorem 3.5 checks "
                         "(0: none)", check=non_negative, check_text="0 or an integer > d"),
        "large_d_n": Param("list[int]", {"smoke": [32, 128], "default": [64, 256, 1024]},
                           "context lengths of the Theorem 3.5 units at large_d", check=at_least(2),
                           check_text="increasing integers >= 2"),
        "curve_tasks": Param("int", {"smoke": 512, "default": 2000, "paper": 4000},
                             "tasks of the curve evaluation set (the first tasks of the evaluation set, "
                             "n <= n_train) on which the units of the trajectory checks are evaluated at every "
                             "logged step",
                             check=positive, check_text="an integer >= 1, at most eval_tasks"),
        **training_params(),
        **{**seed_params(), "seeds": Param("int", {"smoke": 2, "default": 15, "paper": 10},
                                           "independent pretraining runs per configuration, a batch axis of every "
                                           "sweep: every check's verdict rests on all of them", **min_seeds())},
    },
    notes=(
        "Generalisation: d = 2 (inputs on the circle), sigma = 0.5 and pretraining context n = 128 are chosen so "
        "that the L = 10 cosine tasks are resolvable at the pretraining n (several context points per period) and "
        "the noise matters, i.e. the regime Theorem 3.5 describes. In exploratory runs at d = 3 and d = 5 with "
        "n = 64 the L = 10 cosine unit instead learned a wide window (it cannot resolve the oscillation and "
        "predicts the mean): the saturation regime.",
        "Generalisation: pretraining starts from M = I (plus the small random initialisation) and decays Adam's "
        "learning rate along a cosine to 0. Chosen before the seed audit, for two reasons: at large L the loss along "
        "M = wI has a second, spurious minimum at w < 0, and a random start with tr(M) ~ 0 can fall into it (a "
        "fresh seed set ended a cosine L = 10 unit at M ~ -wI); a constant Adam step leaves the iterate jittering "
        "at a scale set by the step, so the loss never settles.",
        "Generalisation: Theorem 3.5 is tested quantitatively on its own class (ReLU, F_L^+): units pretrained at "
        "L_test and at L_pretrain[0] for every n in theory_n (d) and large_d_n (large_d), tested at L' = factor x "
        "L_test and at every n.",
        "Generalisation: every unit is pretrained at one context length n_train and tested at every n in n_test "
        "(test settings differ from training in class, L and n). The mismatched-L claims compare units at "
        "n = n_train, the matched-L claim at every n <= n_train.",
        "Generalisation: the grid pretraining class x L is trained in full (one batched sweep), so panel (b)'s "
        "mismatch is also reported for the other classes.",
        "Generalisation: linear attention reference = a linear unit pretrained on the test class at L_test; "
        "Nadaraya-Watson oracle = M = w I with w tuned per test class and n on a separate tuning set (24 values of w, "
        "log-spaced in [0.1, 1000]).",
        "Generalisation: errors at all test n come from one pass over the evaluation set (prefix sums over the "
        "context), drawing exactly the tasks metrics.icl_error draws at n = max(n_test). The checks followed along "
        "training (book/design.yml: trajectory) evaluate their units' logged M on the curve set, the first "
        "curve_tasks tasks of the same evaluation set.",
    ),
)
