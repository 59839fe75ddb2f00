"""The page "Results at two scales": every check at the book's profile beside the paper profile.

The book's chapters run at the ``default`` profile; the ``paper`` profile is the most faithful scale (more steps,
seeds and context lengths; meant for a GPU). :func:`scales_markdown` reads the records of both -- ``<results>/
<figure>.json`` (default) and ``<results>/paper/<figure>.json`` (paper, where one exists) -- and sets each check's
verdict and value side by side, marks the verdicts that change with scale, and lists the figures that have no paper
record yet, with the reason. It reads JSON only (no torch), so the page can be rebuilt anywhere.

``python -m softmax_icl.scales book/results`` prints the page.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

#: Where the paper-profile records sit, relative to the results folder.
PAPER_SUBDIR = "paper"
#: Why a figure has no paper record, unless the caller says more (e.g. the CPU time it would need).
_GPU_RAN_OUT = ("no record yet: the one GPU lent so far (an H100, 30 minutes of device time, 2026-11-25; "
                "benchmarks/gpu_h100.md) ran out of time before this figure's paper run came back")
DEFAULT_MISSING_REASON = _GPU_RAN_OUT + ", and the paper profile was not run on a CPU"
#: Why these figures have no paper record, where more is known than :data:`DEFAULT_MISSING_REASON` says (measured
#: step times, a run under way); a figure named here gets no cost-ratio estimate, which these measurements replace.
#: Empty since 2026-11-26, when the last figure (classification_kernel_gd) got its paper record on the CPU.
MISSING_REASONS: dict[str, str] = {}


#: What a figure's training cost grows with (where it has them): the training length (the largest growth among its
#: step counts), the batch and the seeds. A rough paper/default cost ratio is the product of their growths. It errs
#: both ways (the paper profile's larger grids are not counted; a larger batch uses a CPU better than a small one),
#: so the page also prints how far off it was for the figures that ran at both scales (:func:`estimate_accuracy`).
COST_PARAMS = (("steps", "steps_main"), ("batch_size",), ("seeds",))


def cost_ratio(figure: str) -> tuple[float, list[str]] | None:
    """Rough paper/default compute ratio of ``figure`` and the parameters it rests on (None if unknown)."""
    try:
        from .registry import resolve
        d, p = resolve(figure, "default"), resolve(figure, "paper")
    except Exception:
        return None
    ratio, used = 1.0, []
    for group in COST_PARAMS:
        growth = {k: p[k] / d[k] for k in group
                  if isinstance(d.get(k), (int, float)) and isinstance(p.get(k), (int, float)) and d[k] > 0}
        if growth:
            k = max(growth, key=growth.get)
            ratio *= growth[k]
            used.append(k)
    return (ratio, used) if used else None


def estimate_accuracy(pairs: dict[str, tuple[dict, dict]]) -> list[float]:
    """For each figure with a default and a paper record (``figure -> (default, paper)``), both computed without the
    result cache: paper notebook time / (default notebook time x :func:`cost_ratio`), i.e. how many times the
    estimate the paper run really took."""
    out = []
    for figure, (d, p) in pairs.items():
        cost = cost_ratio(figure)
        td, tp = (r.get("timings", {}).get("total") for r in (d, p))
        if cost and td and tp and not _cached_stages(d) and not _cached_stages(p):
            out.append(float(tp) / (float(td) * cost[0]))
    return sorted(out)


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _md(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _value(v) -> str:
    """A check's value for a table cell: numbers to 3 significant digits, lists shortened."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.3g}" if math.isfinite(v) else str(v)
    if isinstance(v, (list, tuple)):
        items = [_value(x) for x in v[:4]]
        return "[" + ", ".join(items) + (", ..." if len(v) > 4 else "") + "]"
    return "" if v is None else _md(v)


def _verdict(check: dict) -> str:
    """PASS / FAIL; a control says whether it failed as it must."""
    word = "PASS" if check.get("passed") else "FAIL"
    if check.get("kind") == "control":
        return word + (" (as it must)" if not check.get("passed") else " (control broken)")
    return word


def _checks(record: dict) -> dict[str, dict]:
    return {c["id"]: c for c in record.get("claims", record.get("checks", []))}


def _cached_stages(record: dict) -> str:
    """'' for a run that computed everything; else 'K of N stages read from the result cache': its notebook time
    then measures the cache, not the computation."""
    hits = record.get("cache_hits") or {}
    k = sum(bool(v) for v in hits.values())
    return f"{k} of {len(hits)} stages read from the result cache" if k else ""


def cache_note(record: dict) -> str:
    """:func:`_cached_stages` in brackets after a time, or ''; with what computing every stage took, where the cache
    kept it (``compute_seconds`` of the record)."""
    cached = _cached_stages(record)
    if not cached:
        return ""
    took = [(record.get("compute_seconds") or {}).get(tag) for tag in record.get("cache_hits", {})]
    if took and all(t is not None for t in took):
        cached += f"; computing its {len(took)} stages took {sum(took):.0f} s"
    parts = record.get("trained_in_parts") or {}
    if parts:
        cached += "; " + ", ".join(f"`{tag}` trained in {p} parts by seed" for tag, p in parts.items())
    return f" ({cached})"


def _run_line(label: str, record: dict) -> str:
    prov = record.get("provenance", {})
    seconds = record.get("timings", {}).get("total")
    bits = [f"device `{prov.get('device', '?')}`"]
    if prov.get("kernel"):
        bits.append(f"trainer: {prov['kernel']}")
    if seconds is not None:
        bits.append(f"notebook compute {float(seconds):.0f} s{cache_note(record)}")
    peak = prov.get("peak_memory_mb") or {}
    if peak:
        whose = " of the notebook (not of the stages it read from the cache)" if _cached_stages(record) else ""
        bits.append(f"peak memory{whose} " + ", ".join(f"{k.replace('_', ' ')} {v:.0f} MB" for k, v in peak.items()))
    if prov.get("git_revision"):
        bits.append(f"code `{prov['git_revision']}`")
    profile = record.get("profile")
    tag = "" if profile in (None, label) else f" (its record says profile `{profile}`)"
    return f"* **{label}**{tag}: " + ", ".join(bits)


def compare_scales(default: dict, paper: dict) -> list[dict]:
    """One row per check id of either record (default's order first): ids, kind, both checks (or None), and
    whether the verdict changes with scale (only where both exist)."""
    a, b = _checks(default), _checks(paper)
    rows = []
    for cid in [*a, *(k for k in b if k not in a)]:
        ca, cb = a.get(cid), b.get(cid)
        kind = (ca or cb).get("kind", "claim")
        changes = ca is not None and cb is not None and bool(ca.get("passed")) != bool(cb.get("passed"))
        rows.append({"id": cid, "kind": kind, "default": ca, "paper": cb, "changes": changes})
    return rows


def scales_markdown(results_dir, figures: list[str] | None = None, titles: dict[str, str] | None = None,
                    missing_reasons: dict[str, str] | None = None) -> str:
    """The page "Results at two scales" from the records in ``results_dir`` (e.g. ``book/results``).

    ``figures``: the figures in book order (default: every ``<figure>.json`` in ``results_dir``, in the registry's
    order where it can be imported); ``titles``: chapter titles by figure; ``missing_reasons``: why a figure has no
    paper record (e.g. the CPU time it would need; default :data:`MISSING_REASONS`), else
    :data:`DEFAULT_MISSING_REASON`.
    """
    results = Path(results_dir)
    paper_dir = results / PAPER_SUBDIR
    if figures is None:
        found = sorted(p.stem for p in results.glob("*.json"))
        try:
            from .registry import FIGURES
            figures = [f for f in FIGURES if f in found] + [f for f in found if f not in FIGURES]
        except Exception:                       # the page must build from JSON alone
            figures = found
    if titles is None:
        try:
            from .registry import FIGURES
            titles = {k: v.title for k, v in FIGURES.items()}
        except Exception:
            titles = {}
    reasons = MISSING_REASONS if missing_reasons is None else missing_reasons

    default = {f: _load(results / f"{f}.json") for f in figures}
    paper = {f: _load(paper_dir / f"{f}.json") for f in figures}
    both = [f for f in figures if default[f] is not None and paper[f] is not None]
    missing = [f for f in figures if paper[f] is None]
    rows = {f: compare_scales(default[f], paper[f]) for f in both}
    changed = [(f, r) for f in both for r in rows[f] if r["changes"]]
    compared = sum(1 for f in both for r in rows[f] if r["default"] is not None and r["paper"] is not None)

    out = ["# Results at two scales", "",
           "The chapters show the `default` profile: the scale at which the whole book runs in minutes on a "
           "two-core CPU. The `paper` profile is the most faithful scale (more training steps, seeds and context "
           "lengths; meant for a GPU). This page sets every check's verdict and value at the two profiles side by "
           "side, so a reader can see which conclusions hold at both scales and which depend on the scale. It is "
           "generated from the records (`book/results/<figure>.json` and `book/results/paper/<figure>.json`) by "
           "`softmax_icl.scales`.", "",
           f"{len(both)} of {len(figures)} figures have a paper-profile record; {compared} checks are compared at "
           f"both scales, and {len(changed)} of them change their verdict with scale.", ""]

    out += ["## Verdicts that change with scale", ""]
    if not both:
        out += ["No figure has a paper-profile record yet (see below).", ""]
    elif not changed:
        out += ["None: every check compared has the same verdict at both scales.", ""]
    else:
        out += ["| figure | check | kind | default | paper |", "|---|---|---|---|---|"]
        for f, r in changed:
            out.append(f"| {_md(titles.get(f, f))} | `{r['id']}` | {r['kind']} | {_verdict(r['default'])} "
                       f"({_value(r['default'].get('value'))}) | {_verdict(r['paper'])} "
                       f"({_value(r['paper'].get('value'))}) |")
        out.append("")

    for f in both:
        out += [f"## {_md(titles.get(f, f))}", "", _run_line("default", default[f]), _run_line("paper", paper[f]), "",
                "| check | kind | default | value | paper | value | required | changes with scale |",
                "|---|---|---|---|---|---|---|---|"]
        for r in rows[f]:
            ca, cb = r["default"], r["paper"]
            cells = []
            for c in (ca, cb):
                cells += ["(not in this record)", ""] if c is None else [_verdict(c), _value(c.get("value"))]
            required = (cb or ca).get("threshold", "")
            if ca is not None and cb is not None and ca.get("threshold") != cb.get("threshold"):
                required = f"default: {ca.get('threshold')}; paper: {cb.get('threshold')}"
            mark = "**yes**" if r["changes"] else ("" if ca is not None and cb is not None else "n/a")
            out.append(f"| `{r['id']}` | {r['kind']} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} | "
                       f"{_md(required)} | {mark} |")
        out.append("")

    out += ["## Figures with no paper-profile record yet", ""]
    accuracy = estimate_accuracy({f: (default[f], paper[f]) for f in both})
    if len(accuracy) > 1:
        calibration = (f"; the {len(accuracy)} figures whose runs at both scales computed every stage took "
                       f"{accuracy[0]:.1f} to {accuracy[-1]:.1f} times what this ratio predicted from their default "
                       "runs")
    elif accuracy:
        calibration = ("; the one figure whose runs at both scales computed every stage took "
                       f"{accuracy[0]:.1f} times what this ratio predicted from its default run")
    else:
        calibration = ""
    if not missing:
        out += ["None.", ""]
    else:
        for f in missing:
            why = reasons.get(f, DEFAULT_MISSING_REASON)
            d = default[f]
            total = None if d is None else d.get("timings", {}).get("total")
            if total is not None:
                why += f" (its default profile took {float(total):.0f} s of notebook compute"
                cost = cost_ratio(f)
                if _cached_stages(d):
                    why += f", with {_cached_stages(d)}, so it gives no estimate"
                elif cost is not None and f not in reasons:
                    ratio, used = cost
                    why += (f" on `{d.get('provenance', {}).get('device', '?')}`; the paper profile, roughly "
                            f"{ratio:.0f} times the work ({' x '.join(used)} grow by that much; its larger grids "
                            f"not counted), would need about {float(total) * ratio / 60:.0f} min there"
                            f"{calibration}")
                why += ")"
            if d is None:
                why += " (and it has no default-profile record either)"
            out.append(f"* **{_md(titles.get(f, f))}** (`{f}`): {_md(why)}.")
        out += ["", "To add them: `softmax-icl build --profile paper --device cuda --publish` (or `--only FIGURE "
                "...`; on a CPU `--device cpu`, resumable across sessions as benchmarks/cpu_paper.md shows): the "
                "notebooks run into `runs/<figure>-paper/`, and their records are copied to `book/results/paper/`, "
                "from where this page is regenerated.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(scales_markdown(sys.argv[1] if len(sys.argv) > 1 else "book/results"))
