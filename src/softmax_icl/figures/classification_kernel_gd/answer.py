"""The classification chapter's answer, from its run: a short answer for above the headline figure (``short``) and
the sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

from ...book.chapter_text import check, either, passed, value

READINGS = (("uniform", "uniform argmax labels"), ("balanced", "class-balanced contexts"),
            ("clustered-tight", "tight class clusters"), ("clustered-loose", "the loosest learnable clusters"))


def short(run) -> str:
    """The answer in a sentence: the title claim, softmax ≥ linear, under each reading of the task."""
    holds = [w for tag, w in READINGS if passed(run, f"softmax-ge-linear-{tag}")]
    fails = [(w, value(run, f"softmax-ge-linear-{tag}")) for tag, w in READINGS
             if not passed(run, f"softmax-ge-linear-{tag}")]
    n = check(run, "softmax-ge-linear-uniform").statement.split("n = ")[1].split(":")[0]
    if not fails:
        return f"Softmax ≥ linear holds under every reading of the task at $n = {n}$."
    ratios = ", ".join(v for _, v in fails)
    if not holds:
        return (f"In this run softmax ≥ linear holds under none of the {len(READINGS)} readings of the task at "
                f"$n = {n}$: softmax's test cross-entropy is higher than linear's (ratio {ratios}).")
    return (f"Whether softmax ≥ linear depends on how the task is drawn: at $n = {n}$ it holds with "
            f"{' and '.join(holds)}, not with " + ", ".join(f"{w} (CE ratio {v})" for w, v in fails) + ".")


def lead(run) -> str:
    """The rest of the answer: the CE ratio of each reading, what each trained unit computes, and where the seed
    audit disagrees with this run."""
    ratios = "CE ratio softmax/linear: " + ", ".join(
        f"{value(run, f'softmax-ge-linear-{tag}')} with {w}" for tag, w in READINGS) + "."
    algos = (either(run, "linear-sa-matches-gd-step", "Trained linear attention computes one GD step (logit cosine "
                    "{v} or more in every seed)", "Trained linear attention is only {v} (logit cosine) from one GD "
                    "step") + " and " + either(run, "softmax-sa-matches-kernel-gd",
                                               "trained softmax attention one step of context-adaptive kernel GD "
                                               "({v}).", "trained softmax attention {v} from kernel GD."))
    return " ".join([ratios, algos] + ([unstable] if (unstable := _audit_note(run)) else []))


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
    return ("The fresh seed sets of the audit disagree with this run for " + ", ".join(notes) + ", so those "
            "readings are inconclusive.")
