"""A figure's training stages and the result cache, apart from its notebook: which are cached, and train others.

A long run (the paper profile on a CPU) is a notebook whose stages run one after another, each cached when it
completes. Its training stages are independent programs (each with its own seeds and generators), so they can also
be trained apart from the notebook -- e.g. on an idle core while the notebook trains an earlier stage -- into the
same cache entries the notebook will read: the key is computed here exactly as the notebook computes it
(:meth:`softmax_icl.book.run.Run.cached`: figure, stage tag, the sweep's settings, the device, the code fingerprint).
Only for figures whose ``sweeps`` module has ``sweeps(cfg)`` (norm_scaling, classification_kernel_gd). Long
stages the notebook computes from the configuration alone (norm_scaling's ``theorem34_scan``, classification's
hyperparameter ``search``) or from training stages already cached (norm_scaling's ``population_scan``, from its
five main sweeps) can be computed apart too: they are named here as stages, computed through the notebook's own
``Run`` (so under its key), and listed only as such (their key is built inside the figure's code).

A stage too long for the time one has (on a CPU, the paper profile's longest stages) can be trained in parts:
``--part I/P`` trains the configurations of the seeds s with s % P == I (each seed has its own task stream and
initial weights, and the loss is a sum over configurations, so a configuration follows the same trajectory in a part
as in the whole sweep -- within float32 rounding, tested in ``tests/test_paper_stages.py``) and keeps them in
``<cache>/parts/``; parts run on different cores or machines, or one after another, and the P-th to finish
assembles the stage's cache entry (configurations in the sweep's order, its meta recording the parts' summed training
time and ``"parts": P``). ``--merge STAGE --parts P`` assembles it from parts already there.

Usage:
    python tools/paper_stages.py FIGURE [--profile paper] [--device cpu]            # list: cached or not, and time
    python tools/paper_stages.py FIGURE --train STAGE [STAGE ...]                   # train these into the cache
    python tools/paper_stages.py FIGURE --train STAGE --part I/P                    # train part I of P of a stage

The cache is ``$SOFTMAX_ICL_CACHE_DIR`` (else ``~/.cache/softmax_icl``), as for the notebooks.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pickle
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from softmax_icl.base import atomic_write_bytes, cache_dir, resolve_device
from softmax_icl.book.cache import cache_key, cached
from softmax_icl.book.run import Run
from softmax_icl.figures import FIGURES

def _norm_population_scan(run: Run) -> None:
    from softmax_icl.figures.norm_scaling import analysis, sweeps
    progs = sweeps.sweeps(run.cfg)
    res = {k: run.train(f"train_{k}", sweeps.FullWeights(progs[k]) if sweeps.is_full(k) else progs[k])
           for k in analysis.MAIN_SWEEPS}
    analysis.population_scans(run, res, {k: analysis.final_M(r, run.cfg["average_last"]) for k, r in res.items()})


def _call(module: str, name: str):
    return lambda run: getattr(importlib.import_module(module), name)(run)


#: Stages the notebook computes through its ``Run`` (under its key) from the configuration and, where named, training
#: stages that must be cached first (the tool never trains them as a side effect): tag -> (function of the Run, needs).
CONFIG_STAGES = {
    "norm_scaling": {
        "theorem34_scan": (_call("softmax_icl.figures.norm_scaling.theorem34", "scans"), ()),
        "population_scan": (_norm_population_scan, ("train_iso", "train_n", "train_noniso", "train_whitened",
                                                    "train_full")),
    },
    "classification_kernel_gd": {
        "search": (_call("softmax_icl.figures.classification_kernel_gd.sweeps", "search"), ()),
    },
}


def stages(figure: str, profile: str) -> dict:
    """The figure's training programs at ``profile`` by stage tag (``train_<name>``), and how to train each."""
    mod = importlib.import_module(f"softmax_icl.figures.{figure}.sweeps")
    if not hasattr(mod, "sweeps"):
        sys.exit(f"{figure}: its sweeps module has no sweeps(cfg); allowed: norm_scaling, classification_kernel_gd")
    programs = mod.sweeps(FIGURES.resolve(figure, profile))
    if figure == "classification_kernel_gd":
        from softmax_icl.classification.models import train_cls_sweep as train
    else:
        from softmax_icl.training import train_sweep as train
    table = {f"train_{k}": (sw, train) for k, sw in programs.items()}
    if figure == "norm_scaling":
        # the full-weight units (at every d) log W_K, W_Q, W_V along training: the notebook trains and caches them as
        # FullWeights
        table.update({f"train_{k}": (mod.FullWeights(sw), _train_whole)
                      for k, sw in programs.items() if mod.is_full(k)})
    return table


def _train_whole(stage, device, desc=None, configs=None):
    """Train a stage that trains itself (``stage.train(device, desc)``); it is trained whole, never in parts."""
    if configs is not None:
        raise ValueError(f"{type(stage).__name__} stages are trained whole: no --part")
    return stage.train(device, desc=desc)


def cached_meta(figure: str, tag: str, sw, device) -> Path:
    """The meta file of a training stage's cache entry (it exists when the stage is cached)."""
    return cache_dir() / f"{cache_key(f'{figure}-{tag}', sw.to_dict(), str(device), figure)}.meta.json"


def part_configs(sw, i: int, p: int) -> list[dict]:
    """The configurations of part ``i`` of ``p``: those of the seeds s with s % p == i (the sweep's order)."""
    if not (isinstance(p, int) and 1 <= p <= sw.seeds):
        raise ValueError(f"parts={p!r}: a stage of {sw.seeds} seeds splits into 1 to {sw.seeds} parts")
    if not (isinstance(i, int) and 0 <= i < p):
        raise ValueError(f"part={i!r}: allowed 0 to {p - 1} for {p} parts")
    return [c for c in sw.configs() if int(c["seed"]) % p == i]


def part_path(key: str, i: int, p: int) -> Path:
    return cache_dir() / "parts" / f"{key}.part{i}of{p}.pkl"


def train_part(sw, train, device, key: str, i: int, p: int, desc: str) -> dict:
    """Train part ``i`` of ``p`` (or read it, if there) into ``<cache>/parts/``; return the stored part."""
    path = part_path(key, i, p)
    if path.exists():
        return pickle.loads(path.read_bytes())
    t0 = time.perf_counter()
    result = train(sw, device, configs=part_configs(sw, i, p), desc=desc)
    part = {"result": result, "seconds": time.perf_counter() - t0,
            "computed_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    return part


#: per result type: fields stacked over configurations -> the configuration axis (dicts: every value)
CONFIG_AXIS = {"SweepResult": {"M_history": 1, "loss_history": 1, "final_state": 0},
               "ClsResult": {"A_history": 1, "WV_history": 1, "loss_history": 1, "final": 0}}


def merge_parts(sw, results: list):
    """One result of the whole sweep from its parts' results: every configuration once, in ``sw.configs()``'s
    order; the other fields (sweep, log steps, dims) must agree."""
    order = sw.configs()
    where = [[order.index(c) for c in r.configs] for r in results]
    flat = sorted(j for w in where for j in w)
    if flat != list(range(len(order))):
        raise ValueError(f"the parts hold {len(flat)} configurations ({len(set(flat))} distinct) of the sweep's "
                         f"{len(order)}: they are not a partition of it")
    kind = type(results[0]).__name__
    axes = CONFIG_AXIS[kind]
    first = results[0]
    fields = {}
    for f in dataclasses.fields(first):
        vals = [getattr(r, f.name) for r in results]
        if f.name in axes:
            ax = axes[f.name]

            def place(arrs, ax=ax):
                shape = list(arrs[0].shape)
                shape[ax] = len(order)
                out = np.empty(shape, dtype=arrs[0].dtype)
                for a, w in zip(arrs, where):
                    np.moveaxis(out, ax, 0)[w] = np.moveaxis(a, ax, 0)
                return out
            fields[f.name] = ({k: place([v[k] for v in vals]) for k in vals[0]} if isinstance(vals[0], dict)
                              else place(vals))
        elif f.name == "configs":
            fields[f.name] = order
        elif f.name == "timings":
            fields[f.name] = {"train_seconds": sum(v.get("train_seconds", 0.0) for v in vals),
                              "configs": len(order), "device": vals[0].get("device"), "parts": len(results)}
        else:
            for v in vals[1:]:
                if not np.array_equal(np.asarray(v), np.asarray(vals[0])):
                    raise ValueError(f"the parts disagree on {f.name}: they are not parts of one sweep")
            fields[f.name] = vals[0]
    return type(first)(**fields)


def merge_stage(sw, key: str, tag: str, p: int) -> str:
    """Assemble the stage's cache entry from its ``p`` parts, when all are there; say what happened."""
    paths = [part_path(key, i, p) for i in range(p)]
    missing = [i for i, q in enumerate(paths) if not q.exists()]
    if missing:
        return f"parts {', '.join(map(str, missing))} of {p} not yet trained: not assembled"
    parts = [pickle.loads(q.read_bytes()) for q in paths]
    merged = merge_parts(sw, [pt["result"] for pt in parts])
    seconds = sum(pt["seconds"] for pt in parts)
    path = cache_dir() / f"{key}.pkl"
    atomic_write_bytes(path, pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL))
    atomic_write_bytes(path.with_suffix(".meta.json"), json.dumps({
        "tag": tag, "seconds": round(seconds, 3), "parts": p,
        "computed_at": max(pt["computed_at"] for pt in parts)}).encode())
    return f"assembled from {p} parts ({seconds:.0f} s of training in all)"


def parse_part(text: str) -> tuple[int, int]:
    try:
        i, p = (int(t) for t in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--part {text!r}: expected I/P, e.g. 0/5 (part I of P, 0 <= I < P)")
    if not 0 <= i < p:
        raise argparse.ArgumentTypeError(f"--part {text!r}: I must be 0 to P - 1")
    return i, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("figure", choices=list(FIGURES))
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--train", nargs="+", metavar="STAGE", help="train these stages into the cache (train_<name>)")
    ap.add_argument("--part", type=parse_part, metavar="I/P",
                    help="train only part I of P of the (one) stage: the seeds s with s %% P == I")
    ap.add_argument("--merge", metavar="STAGE", help="assemble STAGE's cache entry from its --parts P parts")
    ap.add_argument("--parts", type=int, metavar="P", help="how many parts --merge assembles")
    args = ap.parse_args()
    if args.part and (len(args.train or []) != 1):
        ap.error("--part I/P trains one stage: give exactly one --train STAGE")
    if args.part and args.train[0] in CONFIG_STAGES.get(args.figure, {}):
        ap.error(f"--part I/P splits a training stage by seeds; {args.train[0]} trains no unit")
    if args.merge and not args.parts:
        ap.error("--merge STAGE needs --parts P")
    device = resolve_device(args.device)
    table = stages(args.figure, args.profile)
    scans = CONFIG_STAGES.get(args.figure, {})
    unknown = sorted(set(args.train or []) - set(table) - set(scans) | ({args.merge} - set(table) - {None}))
    if unknown:
        sys.exit(f"stage(s) {', '.join(unknown)} not among {args.figure}'s: {', '.join([*table, *scans])}")
    print(f"{args.figure}, {args.profile} profile, device {device}, cache {cache_dir()}")
    for tag, (sw, train) in table.items():
        key = cache_key(f"{args.figure}-{tag}", sw.to_dict(), str(device), args.figure)
        meta = cache_dir() / f"{key}.meta.json"
        if args.part and tag in args.train:
            i, p = args.part
            if train is _train_whole:
                sys.exit(f"{tag}: trained whole (it logs its weights along training), not in parts: --train {tag}")
            try:
                part_configs(sw, i, p)
            except ValueError as e:
                sys.exit(f"{tag}: {e}")
            if meta.exists():
                print(f"  {tag}: cached (not trained in parts)")
                continue
            part = train_part(sw, train, device, key, i, p, desc=f"{tag} part {i}/{p}")
            print(f"  {tag}: part {i}/{p} ({part['seconds']:.0f} s); {merge_stage(sw, key, tag, p)}", flush=True)
        elif args.merge == tag:
            try:
                part_configs(sw, 0, args.parts)
            except ValueError as e:
                sys.exit(f"{tag}: {e}")
            print(f"  {tag}: {merge_stage(sw, key, tag, args.parts)}", flush=True)
        elif args.train and tag in args.train:
            info: dict = {}
            _, hit = cached(f"{args.figure}-{tag}", sw.to_dict(), str(device),
                            lambda sw=sw, train=train, tag=tag: train(sw, device, desc=tag), figure=args.figure,
                            info=info)
            print(f"  {tag}: {'was cached' if hit else 'trained'} ({info.get('seconds') or 0:.0f} s)", flush=True)
        elif meta.exists():
            m = json.loads(meta.read_text())
            how = f", from {m['parts']} parts" if m.get("parts") else ""
            print(f"  {tag}: cached ({m.get('seconds', 0):.0f} s{how}, {m.get('computed_at', '?')})")
        else:
            done = sorted(q.name.split(".part")[1].removesuffix(".pkl")
                          for q in (cache_dir() / "parts").glob(f"{key}.part*.pkl"))
            print(f"  {tag}: not cached" + (f" (parts trained: {', '.join(done)})" if done else ""))
    for tag, (compute, needs) in scans.items():
        after = f" and {', '.join(needs)}" if needs else " alone"
        if args.train and tag in args.train:
            missing = [t for t in needs if not cached_meta(args.figure, t, table[t][0], device).exists()]
            if missing:
                print(f"  {tag}: not computed: it needs {', '.join(missing)} cached first", flush=True)
                continue
            run = Run(FIGURES[args.figure], args.profile, str(device))
            compute(run)
            print(f"  {tag}: {'was cached' if run.cache_hits[tag] else 'computed'} "
                  f"({run.compute_seconds.get(tag) or 0:.0f} s)", flush=True)
        else:
            print(f"  {tag}: computed by the notebook from the configuration{after} "
                  f"(--train {tag} computes it, or finds it cached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
