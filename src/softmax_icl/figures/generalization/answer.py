"""The generalisation chapter's answer, from its run: a short answer for above the headline figure (``short``) and the
sentences that follow it under the figure (``lead``), every number read from the run."""

from __future__ import annotations

from ...book.chapter_text import either, value


def short(run) -> str:
    """The answer in a sentence: units pretrained with the same $L$ generalise alike, whatever their class."""
    return either(run, "matched-L-curves-coincide",
                  "Units pretrained on affine, ReLU or cosine tasks with the same $L$ reach the same ICL error on "
                  "each class, up to the pretraining length (largest relative spread {v})",
                  "Units pretrained on affine, ReLU or cosine tasks with the same $L$ differ by up to {v} (relative "
                  "spread) on some class, up to the pretraining length") + either(
        run, "matched-L-curves-coincide-long-contexts", "; at longer test contexts too.",
        "; at test contexts longer than pretraining they part (spread {v}).")


def lead(run) -> str:
    """The rest of the answer: units pretrained at another $L$, and Theorem 3.5's crossover."""
    other = (f"A unit pretrained at a smaller $L$ is {value(run, 'mismatched-L-small-worse')}× and one at a larger "
             f"$L$ {value(run, 'mismatched-L-large-worse')}× worse than the matched unit (worst seed), ")
    other += either(run, "thm35-crossover-at-L",
                    "and Theorem 3.5's two error branches meet within a factor {v} of the pretraining $L$.",
                    "but Theorem 3.5's two error branches meet up to a factor {v} away from the pretraining $L$.")
    return other
