"""Parameters and profiles of the window-adaptation figure (Collins et al. 2024, Fig. 1)."""

from ...profiles import (Figure, Param, ParameterError, at_least, non_negative, positive, seed_params,
                         training_params)
from ...profiles import FUNCTION_CLASSES


def _window_validate(cfg: dict) -> None:
    if cfg["d"] < 2:
        raise ParameterError(f"parameter 'd' = {cfg['d']} is out of range for window_adaptation; allowed: an "
                             "integer >= 2 (the attention window is an angle on the sphere S^(d-1))")
    if len(cfg["L_values"]) != 3:
        raise ParameterError("parameter 'L_values' must list exactly 3 Lipschitz constants (small, medium, "
                             f"large), got {cfg['L_values']!r}")
    if cfg["n_window"] not in cfg["n_values"]:
        raise ParameterError(f"parameter 'n_window' = {cfg['n_window']} must be one of n_values = "
                             f"{cfg['n_values']!r}")
    if cfg["zero_mean_class"] == cfg["function_class"]:
        raise ParameterError(f"parameter 'zero_mean_class' = {cfg['zero_mean_class']!r} must differ from "
                             "function_class (it is the second task family)")
    if cfg["curve_tasks"] > cfg["eval_tasks"]:
        raise ParameterError(f"parameter 'curve_tasks' = {cfg['curve_tasks']} must be at most eval_tasks = "
                             f"{cfg['eval_tasks']} (the curve set is the evaluation set's first tasks)")
    if sorted(cfg["L_values"]) != cfg["L_values"]:
        raise ParameterError(f"parameter 'L_values' must be increasing, got {cfg['L_values']!r}")


FIGURE = Figure(
    name="window_adaptation",
    title="Softmax attention adapts its window to Lipschitzness and noise",
    paper="Collins et al. (2024), Figure 1",
    validate=_window_validate,
    params={
        "d": Param("int", {"default": 2}, "input dimension; d = 2 puts inputs on the circle", check=at_least(1),
                   check_text="an integer >= 2"),
        "function_class": Param("str", {"default": "cosine"}, "pretraining and test function class",
                                allowed=tuple(FUNCTION_CLASSES), source="spec"),
        "zero_mean_class": Param("str", {"default": "cosine_centered"},
                                 "second task family, with zero mean over x and no offset, on which the softmax-vs-"
                                 "linear comparison is about the window alone (trained and tested like the first)",
                                 allowed=tuple(FUNCTION_CLASSES)),
        "L_values": Param("list[float]", {"default": [0.5, 2.0, 8.0]},
                          "small, medium, large Lipschitz constant of the three settings", check=positive,
                          check_text="positive numbers"),
        "sigma": Param("float", {"default": 0.1}, "label-noise standard deviation of the three settings",
                       check=non_negative, check_text="a number >= 0", source="spec"),
        "sigma_noisy": Param("float", {"default": 1.0}, "noise of the noisier variant (at the medium L)",
                             check=non_negative, check_text="a number >= 0"),
        "n_values": Param("list[int]", {"smoke": [8, 32], "default": [4, 8, 16, 32, 64, 128],
                                        "paper": [4, 8, 16, 32, 64, 128, 256, 512]},
                          "context lengths; one unit is pretrained per n", check=positive,
                          check_text="integers >= 1"),
        "n_window": Param("int", {"smoke": 32, "default": 64, "paper": 64},
                          "context length of the units whose windows are plotted and checked", check=positive,
                          check_text="an integer in n_values"),
        "steps": Param("int", {"smoke": 400, "default": 1000, "paper": 5000}, "Adam steps of pretraining",
                       check=positive, check_text="an integer >= 1"),
        "curve_tasks": Param("int", {"smoke": 256, "default": 1024, "paper": 4096},
                             "tasks of the curve evaluation set: the first curve_tasks tasks of the evaluation set, on "
                             "which every unit's ICL error is followed at every logged training step (the statistical "
                             "design's settling rule)", check=positive, check_text="an integer >= 1"),
        "tune_tasks": Param("int", {"smoke": 512, "default": 2048, "paper": 4096},
                            "tasks of each seed's own tuning set, on which the Nadaraya-Watson bandwidths (tuned per "
                            "setting and n, and the one shared window per n) are chosen", check=positive,
                            check_text="an integer >= 1"),
        **training_params(),
        **seed_params(),
        "seeds": Param("int", {"smoke": 2, "default": 15, "paper": 10},
                       "independent pretraining runs per configuration (a batch axis of the sweeps), each with its "
                       "own Nadaraya-Watson tuning set: every verdict rests on all of them", check=at_least(2),
                       check_text="an integer >= 2 (one seed gives no interval)"),
    },
    notes=(
        "Window adaptation: on the sphere E[x] = 0, so linear attention, whose prediction is linear in x_q, cannot "
        "output a task's offset (for the cosine class cos(phi) E[cos(L w^T x)]), while softmax attention, whose "
        "weights sum to one, can. The second family cosine_centered is the same cosine task less its mean over x: "
        "there the softmax-vs-linear comparison is about the window alone.",
        "The softmax units are pretrained once, on the paper's tasks, and serve both families: a per-task constant "
        "added to every label shifts a softmax prediction (weights summing to one) by that constant, so the loss, "
        "its gradients and the trained M are the same on the zero-mean tasks drawn from the same numbers, and so is "
        "the ICL error (tests/test_window_adaptation.py checks both).",
    ),
)
