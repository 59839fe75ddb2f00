"""The classification chapter's answer, from its run: two or three sentences with the run's numbers."""

from __future__ import annotations

from ...book.chapter_text import check, either, passed, value

READINGS = (("uniform", "uniform argmax labels"), ("balanced", "class-balanced contexts"),
            ("clustered-tight", "tight class clusters"), ("clustered-loose", "the loosest learnable clusters"))


def lead(run) -> str:
    algos = (either(run, "linear-sa-matches-gd-step", "Trained linear attention computes one GD step (logit cosine "
                    "{v} or more in every seed)", "Trained linear attention is only {v} (logit cosine) from one GD "
                    "step") + " and " + either(run, "softmax-sa-matches-kernel-gd",
                                               "trained softmax attention one step of context-adaptive kernel GD "
                                               "({v}).", "trained softmax attention {v} from kernel GD."))
    holds = [w for tag, w in READINGS if passed(run, f"softmax-ge-linear-{tag}")]
    fails = [(w, value(run, f"softmax-ge-linear-{tag}")) for tag, w in READINGS
             if not passed(run, f"softmax-ge-linear-{tag}")]
    n = check(run, "softmax-ge-linear-uniform").statement.split("n = ")[1].split(":")[0]
    if not fails:
        title = f"Softmax ≥ linear holds under every reading of the task at $n = {n}$."
    elif not holds:
        title = (f"In this run, softmax ≥ linear does not hold under any reading of the task at $n = {n}$: softmax's test "
                 "cross-entropy is significantly higher (CE ratio " + ", ".join(f"{v} with {w}" for w, v in fails)
                 + ").")
    else:
        title = (f"Whether softmax ≥ linear depends on how the task is drawn, which the sources leave open: at "
                 f"$n = {n}$ it holds with {' and '.join(holds)}, and not with "
                 + ", ".join(f"{w} (CE ratio {v})" for w, v in fails) + ".")
    return " ".join([algos, title] + ([unstable] if (unstable := _audit_note(run)) else []))


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
