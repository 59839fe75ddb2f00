"""The classification chapter's answer, from its run: a short answer for above the headline figure (``short``) and
the sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

import math

from ...book.chapter_text import check, status
from . import claims as check_ids

READINGS = (("uniform", "uniform argmax labels"), ("balanced", "class-balanced contexts"),
            ("clustered-tight", "tight class clusters"), ("clustered-loose", "the loosest learnable clusters"))


def _status(run, tag: str) -> str:
    return status(run, f"softmax-ge-linear-{tag}")


def ratio(run, tag: str) -> str:
    """A reading's CE ratio softmax/linear in each training basin: the exponential of the basin's seed mean of the
    per-seed log ratio, with its one-sided 95% upper bound (what the design holds against 1.05), and the basin's
    share of the seeds."""
    return "; ".join(f"{_basin(c)} {c['n']} of {run.cfg['seeds']} seeds: {math.exp(c['mean']):.3g} "
                     f"({math.exp(c['hi']):.3g})" for c in check(run, f"softmax-ge-linear-{tag}").decision["cells"])


def _basin(cell: dict) -> str:
    """A reading's cell label in words: its training basin."""
    label = cell["label"]
    return "β > 0:" if "beta > 0" in label else "β ≤ 0:" if "beta <= 0" in label else "all seeds:"


def _n(run) -> str:
    return str(run.cfg["n_main"] if run.cfg["n_main"] in run.cfg["n_values"] else max(run.cfg["n_values"]))


def _basin_words(cell: dict) -> str:
    return "β > 0" if "beta > 0" in cell["label"] else "β ≤ 0"


def _series(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def short(run) -> str:
    """The answer in a sentence: the title claim, softmax ≥ linear, under each reading of the task: where it holds in
    every training basin, where only in some (with the basin's share of the trained units), where in none."""
    n, every, some, none, basin = _n(run), [], [], [], False
    for tag, words in READINGS:
        cells = check(run, f"softmax-ge-linear-{tag}").decision["cells"]
        held = [c for c in cells if c["verdict"] == "pass"]
        if _status(run, tag) == "pass":
            every.append(words)
        elif held and len(cells) > 1:
            some.append(f"{words} (the {' and '.join(_basin_words(c) for c in held)} basin, "
                        f"{sum(c['n'] for c in held)} of {run.cfg['seeds']} trained units)")
            basin = True
        else:
            none.append((words, _status(run, tag)))
    if not some and not none:
        return f"At $n = {n}$, softmax classifies at least as well as linear under every reading of the task, in " \
               "every training basin."
    parts = ([f"in every training basin with {_series(every)}"] if every else []) + \
        ([f"only in part of the training basins with {_series(some)}"] if some else [])
    head = f"At $n = {n}$, softmax classifies at least as well as linear " + ("; ".join(parts) if parts else
                                                                              "under no reading of the task")
    failed = [w for w, st in none if st == "fail"]
    other = [f"{w} ({st})" for w, st in none if st != "fail"]
    tail = (f"; with {_series(failed)} its cross-entropy is more than 5 % above linear's in every basin" if failed
            else "") + (f"; undecided with {_series(other)}" if other else "")
    defined = (" A unit's training basin is the sign of its learned kernel scale β: with β > 0 it attends to the "
               "nearest context points, as kernel GD does.") if basin else ""
    return head + tail + "." + defined


def lead(run) -> str:
    """The rest of the answer: the CE ratio of each reading in each basin, what each trained unit computes against
    its rivals, and where the seed audit disagrees with this run."""
    ratios = ("CE ratio softmax/linear per training basin of the softmax units (β, the learned kernel scale; its upper "
              "bound must lie below 1.05): " + "; ".join(f"{w}: {ratio(run, tag)}" for tag, w in READINGS) + ".")
    algos = _match(run)
    return " ".join([ratios, algos] + ([unstable] if (unstable := _audit_note(run)) else []))


def _cell(run, cid: str, metric: str) -> dict:
    return next(c for c in check(run, cid).decision["cells"] if c["label"] == metric)


def _match(run) -> str:
    """The two alignment claims and their rivals in a sentence: the claims' status on the six metrics and loss
    differences, and whether the rivals that differ only in the rate are rejected although their cosine is as high."""
    says = {"pass": "matches {}", "fail": "does not match {}", "inconclusive": "is not told apart from {}",
            "not settled": "is still approaching {} at the end of training"}
    parts = [f"{model} attention " + says[check(run, cid).status].format(what) for model, cid, what in (
        ("linear", check_ids.LINEAR_SA_MATCHES_GD_STEP, "one GD step"),
        ("softmax", check_ids.SOFTMAX_SA_MATCHES_KERNEL_GD, "one step of context-adaptive kernel GD"))]
    loss = [_cell(run, cid, "loss_rel_diff") for cid in (check_ids.LINEAR_SA_MATCHES_GD_STEP,
                                                         check_ids.SOFTMAX_SA_MATCHES_KERNEL_GD)]
    rivals = (check_ids.LINEAR_SA_MATCHES_GD_STEP_HALF_RATE, check_ids.LINEAR_SA_MATCHES_GD_STEP_DOUBLE_RATE,
              check_ids.SOFTMAX_SA_MATCHES_FIXED_RATE_KERNEL_GD)
    rejected = all(check(run, cid).status == "fail" for cid in rivals)
    cos = min(_cell(run, cid, "logit_cosine")["mean"] for cid in rivals)
    return (f"Trained {parts[0]} and trained {parts[1]} on six match metrics (loss differences "
            f"{loss[0]['mean']:.1%} and {loss[1]['mean']:.1%}; bar {loss[0]['threshold']:.0%}); the GD step at half "
            f"or twice its rate and kernel GD with a fixed rate {'are' if rejected else 'are not all'} rejected ("
            + ", ".join(f"{_cell(run, cid, 'loss_rel_diff')['mean']:.0%}" for cid in rivals)
            + f"), though their logit cosine ({cos:.3f} or more) is as high.")


def _audit_note(run) -> str:
    """What the seed audit's sets say of the readings, where they disagree with this run."""
    from ...book.audit import stability
    from ...book.chapter import book_audit

    audit = book_audit(run)
    if not audit:
        return ""
    notes = []
    for tag, w in READINGS:
        c = check(run, f"softmax-ge-linear-{tag}")
        st = stability(c.id, audit, {"id": c.id, "status": c.status, "passed": c.passed})
        if st is not None and not st.stable:
            notes.append(f"{w} ({st.agree} of {st.ran} sets agree)")
    if not notes:
        return ""
    return "The seed audit's sets disagree with this run for " + ", ".join(notes) + "."


#: The six match metrics in words.
METRIC_WORDS = {"logit_cosine": "logit cosine", "argmax_agreement": "argmax agreement",
                "loss_rel_diff": "relative loss difference", "prob_correct_diff": "difference of $p$(correct)",
                "entropy_diff": "entropy difference", "prob_l2": "probability $L_2$ distance"}


def _ns(cells: list, verdict: str) -> str:
    return ", ".join(c["label"].split("= ")[1] for c in cells if c["verdict"] == verdict)


def adaptive_rate(run) -> str:
    """At which n the adaptive rate matters, from the run: the CE the fixed-rate step loses per n (the
    ``adaptive-rate-matters-*`` checks), the n at which the two steps' per-context predictions differ by more than
    the softmax alignment claim's thresholds, and whether that claim's fixed-rate rival fails at the main n."""
    from ...book import design

    readings = []
    for tag, what in (("uniform", "uniform argmax labels"), ("clustered-tight", "the tightest clusters")):
        c = check(run, f"adaptive-rate-matters-{tag}-every-n")
        cells, thr = c.decision["cells"], c.decision["threshold"]
        costs = ", ".join(f"{x['mean']:+.3f} ({x['lo']:+.3f}) at $n = {x['label'].split('= ')[1]}$" for x in cells)
        says = [f"{verdict} at $n = {ns}$" for verdict, ns in (
            ("it matters", _ns(cells, "pass")), ("it does not", _ns(cells, "fail")),
            ("the blocks do not decide", _ns(cells, "inconclusive"))) if ns]
        readings.append(f"with {what}, {costs}, so " + ", ".join(says))
    out = [f"Replacing kernel GD's adaptive rate by its best fixed rate raises the test cross-entropy (nats; mean, and "
           f"its one-sided 95 % lower bound over {cells[0]['n']} blocks of evaluation contexts; the rate matters "
           f"where that bound exceeds {thr:g}) " + "; ".join(readings) + "."]
    metrics = design.load().entry(run.figure, check_ids.SOFTMAX_SA_MATCHES_KERNEL_GD).metrics
    n_main = run.cfg["n_main"]
    apart = {}
    for row in run.numbers["fixed_rate_distance"]:
        if row["task"][0] == "uniform" and row["task"][1] == 1 and row["n"] in run.cfg["n_values"] + [n_main]:
            miss = [f"{METRIC_WORDS[m]} {row[m]:.3g}" for m, t in metrics.items()
                    if (row[m] < t.threshold if t.kind == "above" else row[m] > t.threshold)]
            apart[row["n"]] = miss
    far = [f"$n = {n}$ ({len(m)} of the {len(metrics)} metrics)" for n, m in sorted(apart.items()) if m]
    near = [str(n) for n, m in sorted(apart.items()) if not m]
    out.append("Per context, on the uniform reading, the fixed-rate step's predictions differ from kernel GD's by more "
               "than the softmax alignment claim's thresholds at " + ("; ".join(far) if far else "no $n$")
               + (f", and not at $n = {', '.join(near)}$" if near else "") + ".")
    control = check(run, check_ids.SOFTMAX_SA_MATCHES_FIXED_RATE_KERNEL_GD)
    seen = {"fail": "fails: the trained softmax unit is told apart from the fixed-rate step",
            "pass": "passes: the trained softmax unit is not told apart from the fixed-rate step",
            "inconclusive": "is inconclusive", "not settled": "has not settled"}[control.status]
    out.append(f"At the main setting's $n = {n_main}$ the fixed-rate rival of the softmax alignment claim {seen}.")
    return "**At which $n$ the adaptive rate matters.** " + " ".join(out)


#: A finding's status in words.
_SAYS = {"pass": "at least a fifth per step: the finding holds",
         "fail": "less than the fifth the book asks for in a step: the finding does not hold",
         "inconclusive": "too close to a fifth per step to call", "not settled": "still moving when training stopped"}


def _steps(cells) -> str:
    """'1.12 from $p = 0$ to $0.2$ and 1.07 from $0.2$ to $0.4$' from cells labelled 'p 0 -> 0.2, ...'."""
    out = []
    for k, x in enumerate(cells):
        unit, a, _, b = x["label"].split(",")[0].split()[:4]
        out.append(f"{math.exp(x['mean']):.2f} from {f'${unit} = {a}$' if k == 0 else f'${a}$'} to ${b}$")
    return " and ".join(out)


def expectation(run) -> str:
    """The authors' expectation in words, from the run: the factor by which the learned kernel scale moves between
    neighbouring label-flip rates and numbers of prototypes per class (the per-unit factors' geometric mean), and
    each finding's status."""
    noise = check(run, check_ids.KERNEL_WIDENS_WITH_LABEL_NOISE)
    fast = check(run, check_ids.KERNEL_NARROWS_WITH_LABEL_LIPSCHITZNESS)
    agree = all(x["mean"] > 0 for c in (noise, fast) for x in c.decision["cells"])
    scale = "paper" if run.profile == "paper" else "default"
    how = "the way the authors expect" if agree else "against the authors' expectation in some step"
    return (f"At the {scale} scale the learned kernel scale $\\beta$ moves {how}: it falls "
            f"with the label noise by a factor {_steps(noise.decision['cells'])} "
            f"({_SAYS.get(noise.status, noise.status)}), and grows as the labels change faster by a factor "
            f"{_steps(fast.decision['cells'])} ({_SAYS.get(fast.status, fast.status)}).")
