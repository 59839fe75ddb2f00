"""The statistical design's prospective power, from the seed spread of the records committed before the design.

usage: python tools/design_power.py [--results book/results] [--out book/design_power.json] [--page book/design.md]
       python tools/design_power.py --page-only   (the page again from the committed power)

For every check of ``book/design.yml`` whose ``spread`` names how the committed record and its seed audit hold the
statistic ("log" or "identity" of the checks' values), the spread of the check's value over the committed run and the
audit's fresh seed sets (each of ``seeds`` seeds) gives a per-seed standard deviation (the set-to-set standard
deviation times the square root of the seeds per set: the values are seed means or close to them); the power and
false-pass rate of the design's test then follow at the design's seed counts (``softmax_icl.stats.power``). Written
once, before the records of the design were computed; later records do not change it. ``--page-only`` rewrites the
page from it and from what the committed records decided at each scale (run it after a regeneration; a test holds the
page to it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from softmax_icl import stats  # noqa: E402
from softmax_icl.book.design import number  # noqa: E402



def spread_today(results: Path, key: str, how: str) -> tuple[float, int, int] | None:
    """(per-seed sd, seeds per set, sets) of check ``key`` from the committed record and its audit."""
    figure, cid = key.split("/", 1)
    try:
        rec = json.loads((results / f"{figure}.json").read_text())
        aud = json.loads((results / "audit" / f"{figure}.json").read_text())
    except OSError:
        return None
    mine = next((c for c in rec["claims"] if c["id"] == cid), None)
    fresh = next((c for c in aud["checks"] if c["id"] == cid), None)
    if mine is None or fresh is None:
        return None
    vals = [mine["value"], *fresh.get("values", [])]
    flat = []
    for v in vals:
        if v is None:
            continue
        v = float(np.max(v)) if isinstance(v, list) else float(v)
        if how == "log":
            if not v > 0:
                return None
            v = math.log(v)
        flat.append(v)
    if len(flat) < 3:
        return None
    k = int(rec["parameters"].get("seeds", 1))
    return float(np.std(flat, ddof=1)) * math.sqrt(k), k, len(flat)


def seeds_for(test: stats.Test, sd: float, power: float = 0.8) -> int:
    """The smallest seed count whose power reaches ``power`` (normal approximation; capped at 10,000)."""
    for n in range(2, 10001):
        if stats.power(test, n, sd)[0] >= power:
            return n
    return 10001


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def decided_checks(results: Path) -> list[str]:
    """The design keys of the committed default-profile checks decided by the design (their record has a decision)."""
    out = []
    for path in sorted(results.glob("*.json")):
        rec = json.loads(path.read_text())
        out += [f"{path.stem}/{c['id']}" for c in rec.get("claims", []) if c.get("decision")]
    return out


def _decided_text(decided: list[str], total: int | None = None) -> str:
    if total is not None and decided and len(decided) == total:
        return (f"**Every check of the book's records ({total}, claims, findings and rivals) is decided by it**, on "
                "the pooled seeds of its run, at both scales.")
    if not decided:
        return ("**The chapters' verdicts are not yet decided by it**: they still come from each check's own rule, "
                "stated in its chapter and in the claims ledger's scope, on the seeds of one run (with the seed "
                "audit's fresh sets beside them).")
    by = {}
    for key in decided:
        fig, cid = key.split("/", 1)
        by.setdefault(fig, []).append(f"`{cid}`")
    return (f"**{len(decided)} checks are decided by it now**: " + "; ".join(
        f"in {fig}, {', '.join(ids)}" for fig, ids in by.items()) + ". Every other check still comes from its own "
        "rule, stated in its chapter and in the claims ledger's scope, on the seeds of one run (with the seed audit's "
        "fresh sets beside them); read its power below as what the pooled-seed rerun can resolve.")


def recorded_checks(results: Path) -> int:
    """How many checks the committed default-profile records hold."""
    return sum(len(json.loads(p.read_text()).get("claims", [])) for p in sorted(results.glob("*.json")))


def achieved(results: Path, key: str, design: dict, with_power: bool = True) -> str:
    """What the committed record of ``results`` decided for design key ``key``: status, seeds, the deciding cell's
    mean and bound against the threshold, and the power of its test at the run's seeds and its largest per-cell seed
    spread (empty when the record has no decision for it)."""
    figure, cid = key.split("/", 1)
    try:
        rec = json.loads((results / f"{figure}.json").read_text())
    except OSError:
        return ""
    c = next((x for x in rec.get("claims", []) if x["id"] == cid and x.get("decision")), None)
    if c is None:
        return ""
    d = c["decision"]
    cells = d.get("cells") or []
    worst = min(cells, key=stats.margin_over_threshold) if cells else None
    out = f"{c['status'].upper()}"
    if worst is None:
        return out
    seeds = d.get("seeds")
    if worst.get("exact"):
        out += f" (exact; {len(cells)} cell{'s' * (len(cells) > 1)}"
    else:
        out += f" on {seeds if not isinstance(seeds, list) else '/'.join(map(str, seeds))} seeds ({len(cells)} cell" \
               f"{'s' * (len(cells) > 1)}"
    out += (f"; deciding cell {_cell(worst['label'])}: mean {worst['mean']:.3g}, bound "
            f"{stats.worst_bound(worst):.3g} vs {worst['threshold']:.3g}, margin over the threshold "
            f"{stats.margin_over_threshold(worst):+.3g}")
    sds = [x["sd"] for x in cells if not x.get("exact") and x.get("n", 0) >= 2 and x.get("sd") == x.get("sd")]
    if sds and not worst.get("exact") and with_power:
        test = stats.Test(worst["test"], worst["threshold"], worst["margin"])
        out += f"; per-seed sd up to {max(sds):.2g}, power {stats.power(test, int(worst['n']), max(sds))[0]:.2f}"
    return out + ")"


#: The chapters' short names, for the titles of the page's folded blocks.
CHAPTERS = {"window_adaptation": "Window adaptation (Collins et al., Fig. 1)",
            "norm_scaling": "The window scale ‖M‖ (Collins et al., Fig. 3, Theorem 3.4)",
            "generalization": "Generalisation (Collins et al., Fig. 5, Theorem 3.5)",
            "low_rank": "Low-rank structure (Collins et al., Fig. 4/10, Theorem 4.4)",
            "classification_kernel_gd": "Classification by kernel GD (Dragutinović et al.)"}


def page(design: dict, power: dict, decided: list[str] = (), results: Path | None = None) -> str:
    """The design page: the rules, then per chapter a folded block with one item per check (statistic, test,
    threshold, margin, seeds, power, and what the committed records decided at each scale)."""
    seeds = design["seeds"]
    lines = ["# How verdicts are decided", "",
             "Every verdict of the book is decided by one statistical design, fixed before the records it decides: "
             "the rules below, and for each check its statistic, threshold, margin, rival and seeds. "
             + _decided_text(decided, recorded_checks(results) if results is not None else None)
             + " Each check's design is data (`book/design.yml`, read by `softmax_icl.book.design`), listed per "
             "chapter in the folded blocks at the end of this page beside what the committed records decided at each "
             "scale; each chapter's last folded block gives its own checks.", "",
             "## The rules", "",
             f"* **Seeds.** Seeds are one more batch axis of every figure's sweeps: {seeds['default']} at the default "
             f"profile, {seeds['paper']} at the paper profile. A seed is a pretraining run with its own task stream and "
             "initial weights; every seed meets the same fixed evaluation set, so two models compared on one seed are "
             "paired. A verdict rests on every seed of its run; the seed audit's fresh sets are shown beside it as a "
             "robustness check.",
             "* **Statistic.** One value per seed; ratios as natural logarithms, so a factor reads the same above and "
             "below 1.",
             f"* **Tests.** *below* (mean < threshold), *above* (mean > threshold), *equal* (|mean| < threshold), with "
             f"one-sided {1 - design['alpha']:.0%} Student-t bounds on the seed mean. **Pass**: the whole interval on "
             "the claim's side of the threshold. **Fail**: the whole interval on the other side. **Inconclusive**: the "
             "interval straddles the threshold. A pass needs evidence; finding no difference is never one. *Exact*: a "
             "computation with no seed (a construction, a population scan on its fixed Monte Carlo sample), held "
             "against the threshold as one value.",
             "* **Cells.** A check over several cells (settings, context lengths, links) passes when every cell "
             "passes, fails when any cell fails, and is inconclusive otherwise.",
             "* **Margin.** The deficit that matters, in the statistic's units. *Power* is the chance of a pass when "
             "the truth sits one margin on the claim's side of the threshold (for a non-inferiority test: no deficit "
             "at all); *false pass* the chance of a pass one margin on the other side (a deficit of twice the margin). "
             "A unit test feeds every test exactly these two cases at the committed seed count: the first must pass, "
             "the second fail.",
             "* **Settling.** A check marked *followed* records its statistic's seed mean at every logged step of "
             "training. It is *not settled at this training length* only when its drift over the last quarter of "
             "training, carried on for one more training length, would take its deciding bound to another verdict; "
             "a check not followed says why in the design.",
             "* **Rivals.** Every claim check runs on at least one rival without the property (the best isotropic or "
             "fixed window, identical units, the neighbouring L, the algorithm at a wrong rate, kernel GD with a fixed "
             "rate), through the same statistic and test. A rival must *fail*: like the check, it fails when one of "
             "its cells fails, each of its K cells judged at 5 %/K (Bonferroni), so that a rival as good as the claim "
             "everywhere is rejected at most 5 % of the time; an entry whose rival does not fail is inconclusive.",
             "* **Verdict of a claim.** *Not reproduced* when a check fails (settled); else *not settled at this "
             "training length* when a check has not settled; else *inconclusive* when a check is inconclusive or a "
             "rival does not fail; else *reproduced*. A claim tested under several readings of a setting the sources "
             "leave open *depends on that setting* when its readings disagree.", "",
             "## Each check's design", "",
             "The prospective power uses the spread of each statistic over the committed run and its five fresh seed "
             "sets before this design (the set-to-set standard deviation times the square root of the seeds per set); "
             "checks whose statistic those records do not hold show none. Where the power at the default seeds is "
             "below 0.8, *seeds for 0.8* says how many seeds the same test would need: such a check is "
             "expected to be inconclusive, and the book says so rather than widening its margin.", ""]
    by_fig: dict = {}
    for key, e in design["checks"].items():
        by_fig.setdefault(key.split("/", 1)[0], []).append((key, e))
    for fig, entries in by_fig.items():
        lines += [f"::::{{dropdown}} {CHAPTERS.get(fig, fig)}: {len(entries)} checks", ""]
        for key, e in entries:
            cid = key.split("/", 1)[1]
            metrics = e.get("metrics")
            if metrics:
                test_txt = "; ".join(f"{n}: {m['test']} {m['threshold']}, margin {m['margin']}"
                                     for n, m in metrics.items())
            else:
                test_txt = (f"{e['test']} {e['threshold']}" + (" (exact)" if e.get("exact") else "")
                            + f", margin {e['margin']}")
            p = power.get(key, {})
            if "power_default" in p:
                pw = f"power {p['power_default']:.2f} at the default seeds, {p['power_paper']:.2f} at the paper's"
                first = next(iter(metrics.values())) if metrics else e
                need = seeds_for(stats.Test(first["test"], number(first["threshold"]), number(first["margin"])),
                                 p["sd_per_seed"])
                if p["power_default"] < 0.8:
                    pw += f"; seeds for 0.8: {need if need <= 10000 else '> 10000'}"
            elif "mc_sd" in p:
                pw = f"exact (Monte Carlo sd {p['mc_sd']:.2g})"
            else:
                pw = "power: not in earlier records"
            controls = "; ".join(f"*{v}*" for v in (e.get("controls") or {}).values())
            lines += [f"* `{cid}`", f"  **Statistic per seed.** {_cell(e['quantity'])} ({_cell(e['cells'])})."
                      + (f" **Rival.** {_cell(controls)}." if controls else ""),
                      f"  **Test.** {_cell(test_txt)}; {'followed along training' if e['trajectory'] else 'at the end'}"
                      f"; {pw}.", f"  **Why this margin.** {_cell(e['why'])}"]
            if results is not None:
                got = {scale: achieved(results / sub, key, design) for scale, sub in (("default", "."),
                                                                                      ("paper", "paper"))}
                if any(got.values()):
                    lines.append("  **Result.** " + "; ".join(f"{scale} scale: {g}" for scale, g in got.items() if g)
                                 + ".")
                for rid in e.get("controls") or {}:
                    rival = {scale: achieved(results / sub, f"{fig}/{rid}", design, with_power=False)
                             for scale, sub in (("default", "."), ("paper", "paper"))}
                    if any(rival.values()):
                        lines.append(f"  **Rival `{rid}`** (must fail). " + "; ".join(
                            f"{scale} scale: {g}" for scale, g in rival.items() if g) + ".")
        lines += ["", "::::", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", type=Path, default=ROOT / "book" / "design.yml")
    ap.add_argument("--results", type=Path, default=ROOT / "book" / "results")
    ap.add_argument("--out", type=Path, default=ROOT / "book" / "design_power.json")
    ap.add_argument("--page", type=Path, default=ROOT / "book" / "design.md")
    ap.add_argument("--page-only", action="store_true",
                    help="write the page from the power already in --out (the spread of the records the design was "
                         "fixed on), without reading the records again")
    args = ap.parse_args(argv)
    design = yaml.safe_load(args.design.read_text())
    if args.page_only:
        args.page.write_text(page(design, json.loads(args.out.read_text()), decided_checks(args.results),
                                  args.results))
        print(f"wrote {args.page} from {args.out}")
        return 0
    seeds = design["seeds"]
    out = {}
    for key, e in design["checks"].items():
        row = {"spread_source": e["spread"]}
        got = None if e["spread"] == "none" else spread_today(args.results, key, e["spread"])
        if got is not None:
            sd, k, sets = got
            row.update(sd_per_seed=sd, seeds_per_set=k, sets=sets)
            metrics = e.get("metrics") or {"": {"test": e["test"], "threshold": e["threshold"], "margin": e["margin"]}}
            if e.get("exact"):
                row["mc_sd"] = sd / math.sqrt(k)
            else:
                m = next(iter(metrics.values()))
                test = stats.Test(m["test"], number(m["threshold"]), number(m["margin"]))
                for scale in ("default", "paper"):
                    pw, fp = stats.power(test, int(seeds[scale]), sd)
                    row[f"power_{scale}"], row[f"false_pass_{scale}"] = pw, fp
        out[key] = row
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    if args.page is not None:
        args.page.write_text(page(design, out, decided_checks(args.results), args.results))
    have = sum("power_default" in r for r in out.values())
    print(f"wrote {args.out.relative_to(ROOT)}: prospective power for {have} of {len(out)} checks")
    low = [(k, r["power_default"]) for k, r in out.items() if r.get("power_default", 1) < 0.8]
    for k, p in low:
        print(f"  power below 0.8 at the default seeds: {k}: {p:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
