"""Losses and alignment metrics of the classification chapter.

* :func:`masked_ce`: cross-entropy per context with unused classes masked out.
* :func:`alignment_metrics`: cosine of mean-centred logits, L2 distance of the probability vectors, cosine of the
  Jacobians ``d y_hat / d x_q``, argmax agreement (the paper's exact definitions are unavailable: chosen).
* :func:`per_context_stats`: CE, probability of the correct class, entropy, correctness per context.
"""

from __future__ import annotations

import math

import torch


METRICS = ("logit_cosine", "prob_l2", "jacobian_cosine", "argmax_agreement")


def masked_ce(logits: torch.Tensor, labels: torch.Tensor, class_mask=None) -> torch.Tensor:
    """Cross-entropy per context (..., B) with unused classes masked out."""
    if class_mask is not None:
        logits = logits.masked_fill(~class_mask, float("-inf"))
    labels = labels.expand(logits.shape[:-1])
    return torch.logsumexp(logits, -1) - logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def prob_jacobian(fn, x_q: torch.Tensor) -> torch.Tensor:
    """``d y_hat / d x_q`` for a batch: ``fn`` maps x_q (..., d) to probabilities (..., C), each context's output
    depending only on its own query. Returns (..., C, d): one reverse pass per class (torch.func.jacrev) of
    the outputs summed over contexts, which is exact because contexts do not interact."""
    from torch.func import jacrev

    out = fn(x_q)
    C = out.shape[-1]
    jac = jacrev(lambda xq: fn(xq).reshape(-1, C).sum(0))(x_q)          # (C, ..., d)
    return jac.movedim(0, -2)


def _cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-30)


def alignment_metrics(logits_a, logits_b, jac_a=None, jac_b=None, class_mask=None) -> dict:
    """Per-context alignment of two predictors (tensors (..., B, C); Jacobians (..., B, C, d)).

    ``logit_cosine``: cosine of the mean-centred logits; ``prob_l2``: ||p_a - p_b||_2; ``jacobian_cosine``:
    cosine of the flattened Jacobians of the probabilities; ``argmax_agreement``: 1 where the argmaxes agree.
    """
    if class_mask is not None:
        m = class_mask.to(logits_a.dtype)
        cnt = m.sum(-1, keepdim=True)
        ca = (logits_a - (logits_a * m).sum(-1, keepdim=True) / cnt) * m
        cb = (logits_b - (logits_b * m).sum(-1, keepdim=True) / cnt) * m
        la, lb = logits_a.masked_fill(~class_mask, float("-inf")), logits_b.masked_fill(~class_mask, float("-inf"))
    else:
        ca = logits_a - logits_a.mean(-1, keepdim=True)
        cb = logits_b - logits_b.mean(-1, keepdim=True)
        la, lb = logits_a, logits_b
    pa, pb = torch.softmax(la, -1), torch.softmax(lb, -1)
    out = {"logit_cosine": _cos(ca, cb), "prob_l2": (pa - pb).norm(dim=-1),
           "argmax_agreement": (la.argmax(-1) == lb.argmax(-1)).to(logits_a.dtype)}
    if jac_a is not None and jac_b is not None:
        out["jacobian_cosine"] = _cos(jac_a.flatten(-2), jac_b.flatten(-2))
    return out


#: The metrics the alignment checks decide on (the statistical design): the two scale-blind ones and the captions'
#: per-context panels (b)-(d) with the probability distance, which see a per-context scale.
MATCH_METRICS = ("logit_cosine", "argmax_agreement", "loss_rel_diff", "prob_correct_diff", "entropy_diff", "prob_l2")


def match_metrics(logits_a, logits_b, label) -> dict:
    """How closely predictor ``a`` matches ``b`` over contexts (logits (B, C), one class count): the means of the
    centred-logit cosine, argmax agreement and probability L2 distance, the mean |loss difference| over the mean loss
    of ``b``, the mean |difference of the probability of the correct class| and the mean |entropy difference| over
    log C (floats)."""
    al = alignment_metrics(logits_a, logits_b)
    sa, sb = per_context_stats(logits_a, label), per_context_stats(logits_b, label)
    log_c = math.log(logits_a.shape[-1])
    return {"logit_cosine": float(al["logit_cosine"].mean()), "argmax_agreement": float(al["argmax_agreement"].mean()),
            "loss_rel_diff": float((sa["ce"] - sb["ce"]).abs().mean() / sb["ce"].mean()),
            "prob_correct_diff": float((sa["p_correct"] - sb["p_correct"]).abs().mean()),
            "entropy_diff": float((sa["entropy"] - sb["entropy"]).abs().mean() / log_c),
            "prob_l2": float(al["prob_l2"].mean())}


def per_context_stats(logits, label, class_mask=None) -> dict:
    """CE loss, probability of the correct class, entropy of y_hat, and correctness, per context."""
    if class_mask is not None:
        logits = logits.masked_fill(~class_mask, float("-inf"))
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    label = label.expand(logits.shape[:-1])
    lp_true = logp.gather(-1, label.unsqueeze(-1)).squeeze(-1)
    ent = -(p * torch.where(p > 0, logp, torch.zeros_like(logp))).sum(-1)
    return {"ce": -lp_true, "p_correct": lp_true.exp(), "entropy": ent,
            "correct": (logits.argmax(-1) == label).to(logits.dtype)}
