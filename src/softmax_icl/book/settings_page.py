"""The appendix page "Parameter values and deviations" (``book/settings.md``): the choices shared by every figure,
then each figure's parameters grouped by where their value comes from, with a column per profile where the profiles
differ."""

from __future__ import annotations

from collections.abc import Mapping

from ..profiles import PROFILES, Figure, fmt
from .myst import nobreak

#: Where a value comes from, in words a reader understands (``Param.source`` -> text).
SOURCES = {
    "paper": "the paper",
    "slides": "the authors' slides",
    "spec": "our choice, fixed before the runs",
    "chosen": "our choice (the papers are silent)",
}

#: Sources whose parameters fold under their group (those that change with the profile in one block, those the same
#: at every profile in another): a reader sees first what the papers fix and each figure's deviations.
FOLDED_WHEN_SAME = ("spec", "chosen")

#: Choices that hold for every figure: (setting, our choice, where it comes from).
GENERAL_CHOICES = [
    ("Label noise", "Gaussian, eps ~ N(0, sigma^2)", "our choice, fixed before the runs"),
    ("Pretraining", "online: fresh tasks every step; Adam; loss = squared error against the noiseless f(x_q)",
     "the authors' slides (population loss); online pretraining is our choice"),
    ("Sweeps", "all configurations of a figure trained as one batched program; configurations with the same "
     "seed share inputs, task coefficients and noise draws (common random numbers)",
     "our choice: comparisons across L and sigma are not blurred by sampling noise"),
    ("Seeds", "separate seeds for initial weights, training data and the fixed evaluation set",
     "our choice, recorded in every notebook"),
    ("ICL error", "E[(f_hat(x_q) - f(x_q))^2] on a fixed evaluation set of fresh tasks (noisy context labels, "
     "noiseless target), >= 10^4 tasks at the default profile", "our choice, fixed before the runs"),
    ("Linear attention", "weights x_i^T M x_q / n", "the papers; the 1/n normalisation is our choice"),
    ("Key-query parameterisation", "M = M_K^T M_Q trained from a small random init (scale 0.1)",
     "the authors' slides (M_K, M_Q); the init is our choice"),
    ("Nadaraya-Watson oracle", "softmax attention with M = w I, w tuned per test setting on a separate tuning "
     "set (its own seed), reported on the evaluation set", "beyond the papers (our baseline)"),
]


def _md(x) -> str:
    """Text for a list-table cell or a heading: word-internal hyphens non-breaking (:func:`nobreak`)."""
    return nobreak(str(x))


def _list_table(header: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    out = ["```{list-table}", ":header-rows: 1", ":class: check-table", ":widths: " + " ".join(map(str, widths)), ""]
    for r in [header, *rows]:
        out += [f"* - {r[0]}"] + [f"  - {x}" for x in r[1:]]
    return out + ["```"]


def settings_markdown(registry: Mapping[str, Figure]) -> str:
    """The appendix page "Parameter values and deviations": the shared choices, then every parameter of each figure of
    ``registry``."""
    out = ["# Parameter values and deviations", "",
           "Neither paper's appendix (with its exact hyperparameters) was available, so many settings are ours. "
           "This page is generated from the code (`softmax_icl.figures` and `softmax_icl.book.pages`), so it always "
           "shows what the notebooks actually use. *Source* says where a value comes from: "
           + "; ".join(f"**{t}**" for t in SOURCES.values()) + ". Every figure parameter can be changed with "
           "`softmax-icl run FIGURE -p NAME VALUE` (or the same name in the notebook's parameters cell), which writes "
           "to a run folder of its own under `runs/`, never the book; see {doc}`running`. Each figure's parameters are grouped "
           "by where their value comes from, with one column per profile; what the papers fix stays in view, our "
           "choices fold under their group (those that change with the profile, then those that do not), and so do "
           "each figure's deviations and readings of the sources.", "",
           "## Choices shared by every figure", ""]
    out += _list_table(["Setting", "Our choice", "Source"], [[_md(a), _md(b), _md(c)] for a, b, c in GENERAL_CHOICES],
                       [22, 48, 30])
    for fig in registry.values():
        out += ["", f"(settings-{fig.name.replace('_', '-')})=", f"## {fig.title}", "",
                f"Notebook `notebooks/{fig.notebook}` ({fig.paper}). Change any value with "
                f"`softmax-icl run {fig.name} -p NAME VALUE`.", ""]
        for source in [*SOURCES, *sorted({p.source for p in fig.params.values()} - set(SOURCES))]:
            group = {n: p for n, p in fig.params.items() if p.source == source}
            if not group:
                continue
            out += [f"**{_md(SOURCES.get(source, source)).capitalize()}**", ""]
            same, per_profile = [], []
            for name, p in group.items():
                vals = [_md(fmt(p.value(pr))) for pr in PROFILES]
                if len(set(vals)) > 1:
                    per_profile.append([f"`{name}`", _md(p.help), *vals])
                else:
                    same.append([f"`{name}`", _md(p.help), vals[0]])
            if per_profile:
                folded = source in FOLDED_WHEN_SAME
                # folded, the parameter column takes a quarter of the width: a dropdown's padding narrows the table
                table = _list_table(["Parameter", "Meaning", *PROFILES], per_profile,
                                    [25, 33, 14, 14, 14] if folded else [18, 40, 14, 14, 14])
                if folded:
                    n = len(per_profile)
                    table = [f":::{{dropdown}} {n} parameter{'s change' if n > 1 else ' changes'} with the profile",
                             *table, ":::"]
                out += table + [""]
            if same:
                # the parameter column is a quarter of the width: a dropdown's padding narrows the table
                table = _list_table(["Parameter", "Meaning", "Value (every profile)"], same, [25, 47, 28])
                if source in FOLDED_WHEN_SAME:
                    what = "more" if per_profile else ("parameter" if len(same) == 1 else "parameters")
                    table = [f":::{{dropdown}} {len(same)} {what}, the same at every profile", *table, ":::"]
                out += table + [""]
        if fig.notes:
            out += [f":::{{dropdown}} Deviations and readings ({len(fig.notes)})"] + [f"* {n}" for n in fig.notes]
            if fig.tolerances:
                tol = lambda t: "not compared" if t is None else f"relative tolerance {t:g}"  # noqa: E731
                out += ["", "Regression check (`make test`, `softmax-icl compare`), exceptions to the default "
                        "tolerance: " + "; ".join(f"`{k}`: {tol(t)}" for k, t in fig.tolerances.items()) + "."]
            out += [":::"]
    return "\n".join(out) + "\n"
