"""The statistical design (``book/design.yml``): each check's statistic, test, threshold, margin, rivals and
trajectory, fixed before the records that carry its verdicts were computed.

:meth:`softmax_icl.book.run.Run.decide` reads a check's test here (a control uses the test of the check it
controls), so a verdict follows from the design and never from a number written into a chapter's code; the design
page (``book/design.md``) is written from the same data with the power of every test (:func:`page`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import stats

ROOT = Path(__file__).resolve().parents[3]
#: The design file of the checkout this package was installed from.
DESIGN_PATH = ROOT / "book" / "design.yml"


def number(x) -> float:
    """A number of the design: a float, or ``log(x)``, ``log(a/b)``, ``-log(x)``."""
    if isinstance(x, bool):
        raise ValueError(f"not a number: {x!r}")
    if isinstance(x, (int, float)):
        return float(x)
    text = str(x).replace(" ", "")
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("-")
    if text.startswith("log(") and text.endswith(")"):
        a, _, b = text[4:-1].partition("/")
        return sign * math.log(float(a) / (float(b) if b else 1.0))
    try:
        return sign * float(text)
    except ValueError:
        raise ValueError(f"not a number of the design: {x!r} (a number, or log(x), log(a/b), -log(x))") from None


@dataclass(frozen=True)
class Entry:
    """One check's design (see the header of ``book/design.yml`` for every field)."""

    key: str                                   # "figure/check-id"
    quantity: str
    cells: str
    test: stats.Test
    metrics: dict = field(default_factory=dict)     # metric -> stats.Test
    controls: dict = field(default_factory=dict)    # control id -> the rival, in words
    trajectory: str | bool = False
    spread: str = "none"
    why: str = ""
    raw: dict = field(default_factory=dict)

    def test_for(self, metric: str | None = None) -> stats.Test:
        """The test of ``metric`` (one of :attr:`metrics`), or the entry's own test."""
        if metric is None:
            if self.metrics:
                raise ValueError(f"{self.key} decides on several metrics ({', '.join(self.metrics)}): name one")
            return self.test
        if metric not in self.metrics:
            raise ValueError(f"{self.key} has no metric {metric!r}; allowed values: "
                             f"{', '.join(self.metrics) or 'none (the entry has one test)'}")
        return self.metrics[metric]


def _test(d: dict, exact: bool) -> stats.Test:
    return stats.Test(d["test"], number(d["threshold"]), number(d["margin"]), exact=exact)


@dataclass(frozen=True)
class Design:
    alpha: float
    seeds: dict
    entries: dict                               # key -> Entry
    parents: dict                               # "figure/control-id" -> key of the check it controls

    def entry(self, figure: str, cid: str) -> Entry:
        """The design of check ``cid`` of ``figure``, or of the check a control ``cid`` belongs to."""
        key = f"{figure}/{cid}"
        if key in self.entries:
            return self.entries[key]
        if key in self.parents:
            return self.entries[self.parents[key]]
        raise KeyError(f"check {key!r} is not in the statistical design (book/design.yml); every check is designed "
                       "before it is run")

    def is_control(self, figure: str, cid: str) -> bool:
        return f"{figure}/{cid}" in self.parents

    def role(self, figure: str, cid: str) -> tuple[str, str | None, str | None]:
        """``(kind, control_of, ledger entry)`` of check ``cid``, as the design gives them: a control of the check
        whose ``controls`` list it; else a claim of the entry its ``claim`` names; else a finding, past the scope of
        the entry its ``beyond`` names, if any."""
        if self.is_control(figure, cid):
            return "control", self.parents[f"{figure}/{cid}"].split("/", 1)[1], None
        raw = self.entry(figure, cid).raw
        if raw.get("claim"):
            return "claim", None, str(raw["claim"])
        return "finding", None, (str(raw["beyond"]) if raw.get("beyond") else None)

    def of_figure(self, figure: str) -> list[Entry]:
        return [e for k, e in self.entries.items() if k.split("/", 1)[0] == figure]


@functools.lru_cache(maxsize=4)
def load(path: str | Path | None = None) -> Design:
    data = yaml.safe_load(Path(path or DESIGN_PATH).read_text())
    if float(data["alpha"]) != stats.ALPHA:
        raise ValueError(f"the design's alpha {data['alpha']} is not softmax_icl.stats.ALPHA ({stats.ALPHA})")
    entries, parents = {}, {}
    for key, d in data["checks"].items():
        exact = bool(d.get("exact", False))
        metrics = {name: _test(m, exact) for name, m in (d.get("metrics") or {}).items()}
        controls = dict(d.get("controls") or {})
        entries[key] = Entry(key, " ".join(str(d["quantity"]).split()), " ".join(str(d["cells"]).split()),
                             _test(d, exact), metrics, controls, d.get("trajectory", False), d.get("spread", "none"),
                             " ".join(str(d.get("why", "")).split()), d)
        figure = key.split("/", 1)[0]
        for cid in controls:
            parents.setdefault(f"{figure}/{cid}", key)
    return Design(float(data["alpha"]), dict(data["seeds"]), entries, parents)
