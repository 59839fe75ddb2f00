"""The registry type: the book's figures, in book order, and the resolution of a figure's configuration.

The book machinery never imports the figures: :mod:`softmax_icl.figures` builds the :class:`Registry` from each
figure package's ``FIGURE`` and hands it to what needs more than one figure (the command line, the pages, the
verdicts across chapters).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ..profiles import PROFILES, Figure, ParameterError, coerce


class Registry(Mapping):
    """Figures by name, in the order given (the order of the book and of ``softmax-icl list``)."""

    def __init__(self, figures: Iterable[Figure]):
        self._figures: dict[str, Figure] = {}
        for fig in figures:
            if fig.name in self._figures:
                raise ValueError(f"figure {fig.name!r} is registered twice")
            self._figures[fig.name] = fig

    def __getitem__(self, name: str) -> Figure:
        return self._figures[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._figures)

    def __len__(self) -> int:
        return len(self._figures)

    def __repr__(self) -> str:
        return f"Registry({', '.join(self._figures)})"

    def figure(self, name: str) -> Figure:
        """The figure called ``name``; :class:`ParameterError` naming the allowed values otherwise."""
        if name not in self._figures:
            raise ParameterError(f"unknown figure {name!r}; allowed values: {', '.join(self._figures)}")
        return self._figures[name]

    def resolve(self, name: str, profile: str = "default", overrides: dict | None = None) -> dict:
        """:func:`resolve` of the figure called ``name``."""
        return resolve(self.figure(name), profile, overrides)


def resolve(fig: Figure, profile: str = "default", overrides: dict | None = None) -> dict:
    """The figure's full configuration: the profile's values with ``overrides`` on top.

    ``None`` in ``overrides`` means "take the profile's value" (the notebooks' parameters cell
    defaults every figure parameter to None). Raises :class:`ParameterError` on an unknown
    profile or parameter name, or on a value outside the allowed set.
    """
    if profile not in PROFILES:
        raise ParameterError(f"parameter 'profile' = {profile!r} is not allowed; allowed values: "
                             f"{', '.join(PROFILES)}")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    unknown = sorted(set(overrides) - set(fig.params))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for figure {fig.name!r}; "
                             f"allowed: {', '.join(sorted(fig.params))}")
    cfg = {}
    for pname, p in fig.params.items():
        cfg[pname] = coerce(pname, p, overrides.get(pname, p.value(profile)))
    if fig.validate is not None:
        fig.validate(cfg)
    cfg["profile"] = profile
    return cfg
