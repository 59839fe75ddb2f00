"""The book's figures, in book order, and the resolution of a notebook's configuration.

Built explicitly from each figure folder's ``params`` module (nothing registers itself on import), so the order of the
book and of ``softmax-icl list`` is written here once.
"""

from __future__ import annotations

from ..figures.classification_kernel_gd.params import FIGURE as CLASSIFICATION_KERNEL_GD
from ..figures.generalization.params import FIGURE as GENERALIZATION
from ..figures.low_rank.params import FIGURE as LOW_RANK
from ..figures.norm_scaling.params import FIGURE as NORM_SCALING
from ..figures.window_adaptation.params import FIGURE as WINDOW_ADAPTATION
from ..profiles import PROFILES, Figure, ParameterError, coerce

#: Every figure, in the order of the book.
FIGURES: dict[str, Figure] = {f.name: f for f in (WINDOW_ADAPTATION, NORM_SCALING, GENERALIZATION, LOW_RANK,
                                                  CLASSIFICATION_KERNEL_GD)}


def figure(name: str) -> Figure:
    """The figure called ``name``; :class:`ParameterError` naming the allowed values otherwise."""
    if name not in FIGURES:
        raise ParameterError(f"unknown figure {name!r}; allowed values: {', '.join(FIGURES)}")
    return FIGURES[name]


def resolve(name: str, profile: str = "default", overrides: dict | None = None) -> dict:
    """The figure's full configuration: the profile's values with ``overrides`` on top.

    ``None`` in ``overrides`` means "take the profile's value" (the notebooks' parameters cell
    defaults every figure parameter to None). Raises :class:`ParameterError` on an unknown figure,
    profile or parameter name, or on a value outside the allowed set.
    """
    fig = figure(name)
    if profile not in PROFILES:
        raise ParameterError(f"parameter 'profile' = {profile!r} is not allowed; allowed values: "
                             f"{', '.join(PROFILES)}")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    unknown = sorted(set(overrides) - set(fig.params))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for figure {name!r}; "
                             f"allowed: {', '.join(sorted(fig.params))}")
    cfg = {}
    for pname, p in fig.params.items():
        cfg[pname] = coerce(pname, p, overrides.get(pname, p.value(profile)))
    if fig.validate is not None:
        fig.validate(cfg)
    cfg["profile"] = profile
    return cfg
