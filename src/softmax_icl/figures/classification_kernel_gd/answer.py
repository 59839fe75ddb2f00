"""The classification chapter's answer, from its run: a short answer for above the headline figure (``short``) and
the sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

import math

from ...book.chapter_text import check, passed

READINGS = (("uniform", "uniform argmax labels"), ("balanced", "class-balanced contexts"),
            ("clustered-tight", "tight class clusters"), ("clustered-loose", "the loosest learnable clusters"))


def _status(run, tag: str) -> str:
    return check(run, f"softmax-ge-linear-{tag}").status or ("pass" if passed(run, f"softmax-ge-linear-{tag}")
                                                             else "fail")


def ratio(run, tag: str) -> str:
    """A reading's CE ratio softmax/linear: the exponential of the seed mean of the per-seed log ratio, with its
    one-sided 95% upper bound (what the design holds against 1.05)."""
    cell = check(run, f"softmax-ge-linear-{tag}").decision["cells"][0]
    return f"{math.exp(cell['mean']):.3g} ({math.exp(cell['hi']):.3g})"


def _n(run) -> str:
    return check(run, "softmax-ge-linear-uniform").decision["cells"][0]["label"].split("= ")[1]


def short(run) -> str:
    """The answer in a sentence: the title claim, softmax ≥ linear, under each reading of the task."""
    by = {st: [w for tag, w in READINGS if _status(run, tag) == st] for st in ("pass", "fail", "inconclusive",
                                                                             "not settled")}
    fails = [(w, ratio(run, tag)) for tag, w in READINGS if _status(run, tag) == "fail"]
    n = _n(run)
    if len(by["pass"]) == len(READINGS):
        return f"Softmax ≥ linear holds under every reading of the task at $n = {n}$."
    parts = []
    if by["pass"]:
        parts.append(f"holds with {' and '.join(by['pass'])}")
    if fails:
        parts.append("softmax is worse than linear by more than the 5 % margin with " +
                     ", ".join(f"{w} (CE ratio {v})" for w, v in fails))
    for st, says in (("inconclusive", "the seeds do not decide"), ("not settled", "the ratio is still moving at the "
                                                                                  "end of training")):
        if by[st]:
            parts.append(f"{says} with {' and '.join(by[st])}")
    return f"At $n = {n}$, softmax ≥ linear " + "; ".join(parts) + "."


def lead(run) -> str:
    """The rest of the answer: the CE ratio of each reading, what each trained unit computes against its rivals, and
    where the seed audit disagrees with this run."""
    seeds = check(run, "softmax-ge-linear-uniform").decision["seeds"]
    ratios = (f"CE ratio softmax/linear over {seeds} seeds (its upper bound, which must lie below 1.05): " + ", ".join(
        f"{ratio(run, tag)} with {w}" for tag, w in READINGS) + ".")
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
        ("linear", "linear-sa-matches-gd-step", "one GD step"),
        ("softmax", "softmax-sa-matches-kernel-gd", "one step of context-adaptive kernel GD"))]
    loss = [_cell(run, cid, "loss_rel_diff") for cid in ("linear-sa-matches-gd-step", "softmax-sa-matches-kernel-gd")]
    ids = ("linear-sa-matches-gd-step-half-rate", "linear-sa-matches-gd-step-double-rate",
           "softmax-sa-matches-fixed-rate-kernel-gd")
    rejected = all(check(run, cid).status == "fail" for cid in ids)
    cos = min(_cell(run, cid, "logit_cosine")["mean"] for cid in ids)
    return (f"Trained {parts[0]} and trained {parts[1]} on six match metrics (loss differences "
            f"{loss[0]['mean']:.1%} and {loss[1]['mean']:.1%}; bar {loss[0]['threshold']:.0%}); the GD step at half "
            f"or twice its rate and kernel GD with a fixed rate {'are' if rejected else 'are not all'} rejected ("
            + ", ".join(f"{_cell(run, cid, 'loss_rel_diff')['mean']:.0%}" for cid in ids)
            + f"), though their logit cosine ({cos:.3f} or more) is as high.")


def _audit_note(run) -> str:
    """What the fresh seed sets say of the readings, where they disagree with this run (the seed audit)."""
    from ...book.chapter import book_audit

    audit = book_audit(run)
    if not audit:
        return ""
    fresh = {c["id"]: c["fresh"] for c in audit.get("checks", [])}
    notes = []
    for tag, w in READINGS:
        cid = f"softmax-ge-linear-{tag}"
        if cid in fresh and any(f != passed(run, cid) for f in fresh[cid]):
            notes.append(f"{w} ({sum(fresh[cid])} of {len(fresh[cid])} pass)")
    if not notes:
        return ""
    return ("Each fresh seed set of the audit alone (a robustness display; the verdict rests on this run's pooled "
            "seeds) disagrees for " + ", ".join(notes) + ".")
