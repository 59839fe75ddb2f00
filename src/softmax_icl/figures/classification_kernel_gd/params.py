"""Parameters and profiles of the classification chapter (Dragutinovic, Saxe, Singh 2025, Figs 1-5 + ablations)."""

from ...profiles import Figure, Param, ParameterError, at_least, min_seeds, non_negative, positive, seed_params


def _cls_validate(cfg: dict) -> None:
    for name in ("n_values", "taus", "mix_test_n", "label_noise", "prototypes"):
        if sorted(set(cfg[name])) != list(cfg[name]):
            raise ParameterError(f"parameter {name!r} must be strictly increasing, got {cfg[name]!r}")
    lo, hi = cfg["mix_lengths"]
    if not 1 <= lo < hi:
        raise ParameterError(f"parameter 'mix_lengths' must be [n_min, n_max] with 1 <= n_min < n_max, got "
                             f"{cfg['mix_lengths']!r}")
    top = (cfg["C"] - 1) / cfg["C"]
    if not all(0 <= p < top for p in cfg["label_noise"]):
        raise ParameterError(f"parameter 'label_noise' must hold flip probabilities in [0, (C - 1)/C) = [0, {top:.3g}) "
                             f"(the true class stays the most likely), got {cfg['label_noise']!r}")
    if len(cfg["label_noise"]) < 2 or len(cfg["prototypes"]) < 2:
        raise ParameterError("parameters 'label_noise' and 'prototypes' need at least two values each (the window is "
                             f"compared between neighbours), got {cfg['label_noise']!r} and {cfg['prototypes']!r}")
    if not 1 <= cfg["subspace_k"] < cfg["d"]:
        raise ParameterError(f"parameter 'subspace_k' must lie in 1..d-1, got {cfg['subspace_k']!r}")
    for name, main in (("shape_C", "C"), ("shape_d", "d")):
        if cfg[main] in cfg[name] or len(set(cfg[name])) != len(cfg[name]):
            raise ParameterError(f"parameter {name!r} = {cfg[name]!r} must list distinct values other than "
                                 f"{main} = {cfg[main]} (the main setting is compared across n)")


_int = dict(check=positive, check_text="an integer >= 1")

FIGURE = Figure(
    name="classification_kernel_gd",
    title="In-context classification: linear attention takes a GD step, softmax attention a kernel GD step",
    paper="Dragutinovic, Saxe, Singh (2025), Figures 1-5 and ablations",
    validate=_cls_validate,
    params={
        "C": Param("int", {"default": 5}, "classes per context (main setting)", source="paper",
                   check=at_least(2), check_text="an integer >= 2"),
        "d": Param("int", {"default": 5}, "input dimension (main setting); inputs and class vectors on S^(d-1)",
                   source="paper", check=at_least(2), check_text="an integer >= 2"),
        "n_main": Param("int", {"default": 100}, "context length of the main setting", source="paper", **_int),
        "local_prototypes": Param("int", {"default": 3},
                                  "prototypes per class P of the local task: each class is the union of the "
                                  "sphere's cells nearest to its P own prototypes (not linearly separable)",
                                  check=at_least(2), check_text="an integer >= 2"),
        "n_values": Param("list[int]", {"smoke": [10, 30], "default": [10, 30, 100],
                                        "paper": [10, 25, 50, 100, 200]},
                          "context lengths of the softmax-vs-linear comparison (one unit per n, task, model, seed)",
                          check=positive, check_text="increasing integers >= 1"),
        "taus": Param("list[float]", {"smoke": [0.5, 2.0], "default": [0.25, 0.5, 1.0, 2.0, 4.0],
                                      "paper": [0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 4.0]},
                      "spreads tau of the class-clustered reading, x = normalise(c_k + tau g / sqrt(d))",
                      check=positive, check_text="increasing numbers > 0"),
        "label_noise": Param("list[float]", {"smoke": [0.0, 0.4], "default": [0.0, 0.2, 0.4]},
                             "label-flip probabilities p of the label-noise programme (uniform task at n_main; each "
                             "label replaced by another class w.p. p): does the window widen with the noise?",
                             check=non_negative, check_text="at least two increasing numbers in [0, (C - 1)/C)"),
        "prototypes": Param("list[int]", {"smoke": [1, 2], "default": [1, 2, 4]},
                            "prototypes per class P of the Lipschitzness programme (uniform task at n_main, no label "
                            "noise): does the window narrow as the labels change over shorter distances?",
                            check=positive, check_text="at least two increasing integers >= 1"),
        "subspace_k": Param("int", {"default": 2}, "dimension of the class-vector subspace of the kernel-shape task",
                            **{"check": positive, "check_text": "an integer in 1..d-1"}),
        "mix_lengths": Param("list[int]", {"smoke": [10, 30], "default": [20, 60], "paper": [20, 100]},
                             "[n_min, n_max]: training over a mixture of context lengths, each context's length "
                             "uniform in this range", check=positive, check_text="two integers 1 <= n_min < n_max"),
        "mix_test_n": Param("list[int]", {"smoke": [5, 20, 60], "default": [5, 10, 20, 40, 60, 120],
                                          "paper": [5, 10, 20, 50, 100, 200, 400]},
                            "test lengths of the mixture-trained units (seen and unseen, shorter and longer)",
                            check=positive, check_text="increasing integers >= 1"),
        "mix_tau": Param("float", {"default": 0.5}, "tau of the clustered task also trained over a mixture of lengths",
                         check=positive, check_text="a number > 0"),
        "shape_C": Param("list[int]", {"smoke": [3], "default": [2, 10], "paper": [2, 3, 10, 20]},
                         "other class counts (at d and n_main) of the softmax-vs-linear comparison (uniform task)",
                         check=at_least(2), check_text="integers >= 2"),
        "shape_d": Param("list[int]", {"smoke": [3], "default": [2, 10], "paper": [2, 3, 10, 20]},
                         "other input dimensions (at C and n_main) of the softmax-vs-linear comparison (uniform task)",
                         check=at_least(2), check_text="integers >= 2"),
        "steps_main": Param("int", {"smoke": 60, "default": 4000, "paper": 10000},
                            "Adam steps of the main-setting units (alignment and hyperparameter checks); at 2000 steps "
                            "the softmax unit's loss difference from kernel GD is still falling, so the default trains "
                            "twice as long (the design's settling rule: train longer where a check has not settled)",
                            **_int),
        "steps": Param("int", {"smoke": 60, "default": 1000, "paper": 5000},
                       "Adam steps of the units of the n and (C, d) comparisons", **_int),
        "batch_size": Param("int", {"smoke": 32, "default": 64, "paper": 256},
                            "contexts per step per configuration (fresh every step)", **_int),
        "lr": Param("float", {"default": 0.05}, "peak Adam learning rate (cosine decay to 5% of it)",
                    check=positive, check_text="a number > 0"),
        "init_scale": Param("float", {"default": 0.1},
                            "initial W_K, W_Q, W_V entries ~ N(0, init_scale^2 / (d + C))", check=positive,
                            check_text="a number > 0"),
        "search_contexts": Param("int", {"smoke": 512, "default": 4096, "paper": 32768},
                                 "fresh contexts on which the GD steps' hyperparameters are searched", **_int),
        "eval_contexts": Param("int", {"smoke": 512, "default": 4096, "paper": 16384},
                               "contexts of the fixed evaluation set (losses, accuracies, scatter plots)", **_int),
        "align_contexts": Param("int", {"smoke": 128, "default": 1024, "paper": 4096},
                                "evaluation contexts used for the alignment metrics through training "
                                "(the first ones of the evaluation set)", **_int),
        "search_seed": Param("int", {"default": 4}, "seed of the hyperparameter-search contexts",
                             check=non_negative, pool=True, check_text="an integer >= 0"),
        **seed_params(),
        "seeds": Param("int", {"smoke": 2, "default": 15, "paper": 10},
                       "independent pretraining runs per configuration, a batch axis of every training programme: "
                       "the seeds every check's verdict rests on (the statistical design's count; two at smoke, so "
                       "that its bounds are finite)", **min_seeds()),
    },
    notes=(
        "Task readings (the sources do not fix the data model): uniform argmax (per-context class "
        "vectors c_1..c_C ~ U^d, inputs x_i ~ U^d, label argmax_k c_k^T x; the book's 'paper's task'); class-balanced "
        "(class k uniform, x uniform within its class's cell, drawn without replacement from a pool of 16(n+1) "
        "uniform candidates); class-clustered (k uniform, x = normalise(c_k + tau g / sqrt(d)), label k; a sweep of "
        "tau); local (P = local_prototypes prototypes per class, beyond the papers); subspace (class vectors in the "
        "first subspace_k coordinates: the kernel-shape test). All readings share raw draws (common random numbers). "
        "The query is drawn like the context inputs; no label noise, except in the label-noise programme.",
        "The authors' expectation (rebuttal): softmax units on the uniform task at n_main, one factor moved at a time: "
        "every label (context and query) flipped w.p. p to another class drawn uniformly (label_noise, a process of "
        "one's own on the PyTorch path), and P prototypes per class with no noise (prototypes); the learned kernel "
        "scale beta = tr((W_K^T W_Q)_xx)/d compared between neighbouring levels, per seed.",
        "Model: one layer, one head, full W_K, W_Q, W_V in R^((d+C)x(d+C)) on tokens [x_i; y_i], query [x_q; 0]; "
        "the query does not attend to itself; linear attention weights s_i / n; prediction softmax of the "
        "y-slot of the query's attention update; cross-entropy loss; no MLP, LayerNorm or residual readout "
        "beyond the update.",
        "Training: Adam, cosine learning-rate decay to 5% of lr, fresh contexts every step, one batched program "
        "per sweep (main setting; readings x n; local and subspace tasks; (C, d); mixture of lengths). Within a sweep, contexts are padded to the largest "
        "n, C and d: unused context slots and classes are masked and unused input coordinates are zero, so a padded "
        "unit computes exactly the smaller unit's function class (its W_K, W_Q inner dimension is the padded d + C). "
        "init_scale = 0.1: with larger random initial weights some softmax runs settle in a worse basin with "
        "beta < 0 and gamma < 0 (attention to far-away points), which the book reports when it happens.",
        "GD-step hyperparameters: eta (GD step) and (beta, gamma) (kernel GD) minimise the step's own "
        "cross-entropy on search_contexts fresh contexts of the same setting (search_seed): golden-section search "
        "of the rate (the CE is convex in it) for each beta of a log grid, the best beta refined by a parabola in "
        "log beta. Learned values: beta (or a) = tr((W_K^T W_Q)_xx)/d, gamma (or b) = identity coefficient of the "
        "class-centred y-block of W_V, eta = a b.",
        "Alignment metrics (chosen; the paper's definitions are unavailable): cosine similarity of mean-centred "
        "logits, L2 distance of probability vectors, cosine of the flattened Jacobians d y_hat / d x_q (full "
        "Euclidean Jacobian, torch.func.jacrev), argmax agreement; means over evaluation contexts. The trained "
        "model at every logged step is compared with the algorithm at its searched hyperparameters.",
        "Ablations: exp kernel with a fixed rate, logits (eta/n) sum_i y_i exp(beta (x_i^T x_q - 1)); normalised "
        "linear kernel, logits gamma sum_i y_i k(x_i, x_q) / sum_j k(x_j, x_q) with k = 1 + beta x^T x' and "
        "beta searched in [0.01, 100] (an ablation free to take its best parameters: beyond beta = 1 the kernel is negative "
        "far from the query); each with its own searched hyperparameters. The checks of which part of kernel GD "
        "matters take the per-context CE increase averaged over 64 equal blocks of the evaluation set as their unit "
        "of replication (the steps have no training seed).",
        "Softmax >= linear is tested per task and n with 'seeds' independent units per model: per seed, "
        "the log of the ratio of mean test CEs (softmax over linear) on one evaluation set; non-inferiority (the "
        "statistical design): a setting holds when the one-sided 95% upper t-bound of the seed mean lies below "
        "log 1.05, fails when the lower bound lies above it, and is inconclusive otherwise; the ratio's seed mean at "
        "the 11 logged steps of the captions' n decides whether it has settled.",
        "Mixture of lengths: units trained with each context's length uniform in mix_lengths, tested at mix_test_n "
        "(seen and unseen); linear attention both normalised by 1/n and unnormalised (weights s_i).",
    ),
)
