"""Write ``benchmarks/RESULTS.md``, the current benchmark results, from the measurements kept in the repository.

Three sources, each read as it is committed:

* **the roofline** of each device: ``benchmarks/results/roofline_<device>.json``, one file per device, written by
  ``benchmarks/roofline.py`` (which runs this script at its end); a new measurement on a device replaces its file;
* **the paper profile**: the committed paper-profile records (``book/results/paper/*.json``: each record's device,
  threads, trainer, notebook time and the compute time of its stages, ``compute_seconds``, which a resumed run keeps)
  and the GPU runs of the paper profile whose records stayed on the lent machine
  (``benchmarks/results/paper_gpu_runs.json``: per run the GPU, whether its code was that of the committed records,
  and each notebook's wall and compute seconds);
* **CI's time**: ``benchmarks/results/ci_times.json``, the job table ``tools/run_tests.py --times-json`` writes (``make
  test TEST_TIMES=benchmarks/results/ci_times.json``).

Usage:  python benchmarks/results_page.py [--check]
  --check  exit 1 (saying so) when RESULTS.md is not what the sources give, instead of writing it
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "benchmarks" / "RESULTS.md"
PAPER_RECORDS = ROOT / "book" / "results" / "paper"
GPU_PAPER_RUNS = RESULTS / "paper_gpu_runs.json"
CI_TIMES = RESULTS / "ci_times.json"


def device_slug(device: str, processor: str) -> str:
    """The file name's device part: ``cpu_amd_epyc_family_25_model_17``, ``cuda_nvidia_h200``."""
    return re.sub(r"[^a-z0-9]+", "_", f"{device} {processor}".lower()).strip("_")


def roofline_files(results: Path = RESULTS) -> list[tuple[Path, dict]]:
    """Every device's roofline measurement, CPUs first; refuses two files of one device (keep the newest: git has
    the others)."""
    found, by_device = [], {}
    for path in sorted(results.glob("roofline_*.json")):
        data = json.loads(path.read_text())
        m = data["machine"]
        key = (m["device"], m.get("processor", "unknown"))
        if key in by_device:
            raise SystemExit(f"two roofline measurements of {key[1]} ({key[0]}): {by_device[key].name} and {path.name};"
                             " keep the newest (the history keeps the other)")
        by_device[key] = path
        found.append((path, data))
    return sorted(found, key=lambda pd: (pd[1]["machine"]["device"] != "cpu", pd[1]["machine"].get("processor", "")))


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f}" if seconds >= 0.01 else f"{1e3 * seconds:.2f}"


def roofline_section(files: list[tuple[Path, dict]]) -> list[str]:
    out = ["## Roofline: each heavy paper-profile stage's step against the machine's floor", "",
           "Per stage, `floor = max(FLOP / throughput, bytes / bandwidth)` from the work the stage's tasks need (the",
           "counting convention is `benchmarks/roofline.py`'s docstring), the measured step (median over rounds) under",
           "each numerical backend, and `ratio = measured / floor`. `auto` is the compiled CPU engine, `torch` the",
           "PyTorch path (on a GPU: its step replayed as a CUDA graph, the draws' words from the Triton kernel);",
           "`torch-eager` is the GPU step without the graph. The floors are each machine's own: ratios on two machines are not the same code's.",
           "A device's table is replaced when `make bench` (or `roofline.py --device cuda`) runs on it again.", ""]
    if not files:
        return out + ["No roofline measurement is committed (`make bench` makes one).", ""]
    for path, data in files:
        m = data["machine"]
        backends = list(next(iter(data["stages"].values()))["by_backend"])
        out += [f"### {m.get('processor', 'unknown processor')} ({m['device']}, {m['threads']} threads)", "",
                f"Arithmetic {m['flop_per_s'] / 1e9:,.1f} GFLOP/s ({m['flop_source']}), memory "
                f"{m['bytes_per_s'] / 1e9:,.1f} GB/s (triad); the best of {len(m.get('flop_per_s_rounds', [1]))} "
                f"round(s). The code measured is that of the file's `code` revision. File: `results/{path.name}`.",
                ""]
        head = "| stage | GFLOP | floor (ms) |" + "".join(f" {b} (ms) | ratio |" for b in backends)
        out += [head, "|---|---:|---:|" + "---:|---:|" * len(backends)]
        for name, s in data["stages"].items():
            row = f"| {name} | {s['flop'] / 1e9:.2f} | {_ms(s['floor_s'])} |"
            for b in backends:
                r = s["by_backend"].get(b)
                row += f" {_ms(r['measured_s'])} | {r['ratio']:.2f} |" if r else " | |"
            out.append(row)
        out.append("")
    return out


def paper_records(folder: Path = PAPER_RECORDS) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def paper_section(records: list[dict], gpu_runs: list[dict]) -> list[str]:
    out = ["## The paper profile, per device", ""]
    if records:
        revisions = sorted({r["provenance"].get("git_revision", "?") for r in records})
        out += ["### The committed paper records (`book/results/paper/`)", "",
                "Each figure's notebook run at the paper profile: its device and threads, its trainer, the notebook's",
                "time and the compute time of its stages (kept from the result cache when a run resumed). The",
                "figures ran one after another in one command.", "",
                "| figure | device | threads | trainer | notebook (s) | stages' compute (s) | peak host memory (MB) |",
                "|---|---|---:|---|---:|---:|---:|"]
        total = compute = 0.0
        for r in sorted(records, key=lambda r: sum(r.get("compute_seconds", {}).values())):
            p = r["provenance"]
            c = sum(r.get("compute_seconds", {}).values())
            t = r["timings"].get("total", 0.0)
            total, compute = total + t, compute + c
            peak = (p.get("peak_memory_mb") or {}).get("host")
            out.append(f"| {r['notebook']} | {p['device']} | {p.get('threads', '')} | {p.get('kernel', '')} | "
                       f"{t:.0f} | {c:.0f} | {'' if peak is None else f'{peak:.0f}'} |")
        out += [f"| all {len(records)} | | | | {total:.0f} ({total / 60:.1f} min) | {compute:.0f} | |", ""]
        if len(revisions) > 1:
            out += [f"(The records come from {len(revisions)} revisions of the code; each record's provenance names"
                    " its own.)", ""]
    rev = {r["provenance"].get("git_revision") for r in records}
    for run in gpu_runs:
        same = run.get("code") in rev
        out += [f"### {run['gpu']} (the five notebooks at once on one GPU)", "",
                f"{run['note']} " + ("Code: that of the committed paper records." if same else
                                     "Code: other than the committed paper records' (the file names its revision): "
                                     "a time of that code, not of this one.") + f" File: `results/{GPU_PAPER_RUNS.name}`.",
                "", "| figure | notebook wall, five at once (s) | stages' compute (s) |", "|---|---:|---:|"]
        for fig, t in sorted(run["figures"].items(), key=lambda ft: ft[1]["wall_s"]):
            out.append(f"| {fig} | {t['wall_s']:.0f} | {t['compute_s']:.0f} |")
        wall = max(t["wall_s"] for t in run["figures"].values())
        out += [f"| all {len(run['figures'])} | {wall:.0f} ({wall / 60:.1f} min) | |", ""]
    return out


def ci_section(ci: dict | None) -> list[str]:
    out = ["## CI: `make test`", ""]
    if ci is None:
        return out + ["No job table is committed (`make test TEST_TIMES=benchmarks/results/ci_times.json`).", ""]
    jobs = ci["jobs"]
    busy = sum(j["seconds"] for j in jobs)
    out += [f"`tools/run_tests.py` on {ci['cpu']} ({ci['cores']} cores): {ci['workers']} jobs at once, "
            f"{ci['threads']} thread(s) each; **{ci['wall_seconds']:.0f} s** from the first job's start to the last "
            f"one's end ({ci['wall_seconds'] / 60:.1f} min; {busy:.0f} s of jobs), "
            + ("every job passed." if all(j["status"] == "passed" for j in jobs) else
               f"failed: {', '.join(j['name'] for j in jobs if j['status'] != 'passed')}.")
            + " `.ci/run` adds the install (`make setup`) before it.", "",
            "| job, in the order they started | status | seconds |", "|---|---|---:|"]
    for j in jobs:
        out.append(f"| {j['name']} | {j['status']} | {j['seconds']:.0f} |")
    return out + [""]


def page() -> str:
    gpu_runs = json.loads(GPU_PAPER_RUNS.read_text())["runs"] if GPU_PAPER_RUNS.is_file() else []
    ci = json.loads(CI_TIMES.read_text()) if CI_TIMES.is_file() else None
    lines = ["# Benchmark results", "",
             "The current measurements: the roofline of each device measured, the paper profile's time per device, and",
             "CI's time. Written by `benchmarks/results_page.py` from `benchmarks/results/` and",
             "`book/results/paper/` (do not edit it by hand: run `python benchmarks/results_page.py`, which",
             "`benchmarks/roofline.py` also does at its end). Earlier measurements of earlier code are in the",
             "repository's history.", ""]
    lines += roofline_section(roofline_files())
    lines += paper_section(paper_records(), gpu_runs)
    lines += ci_section(ci)
    wrapped = [ln if ln.startswith(("|", "#")) or len(ln) <= 120 else textwrap.fill(ln, 118, break_on_hyphens=False)
               for ln in lines]
    return "\n".join(wrapped).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md is stale, instead of writing it")
    args = ap.parse_args(argv)
    text = page()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is not what its sources give: run python benchmarks/results_page.py",
                  file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
