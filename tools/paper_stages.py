"""A figure's training stages and the result cache, apart from its notebook: which are cached, and train others.

A long run (the paper profile on a CPU) is a notebook whose stages run one after another, each cached when it
completes. Its training stages are independent programs (each with its own seeds and generators), so they can also
be trained apart from the notebook -- e.g. on an idle core while the notebook trains an earlier stage -- into the
same cache entries the notebook will read: the key is computed here exactly as the notebook computes it
(:meth:`softmax_icl.records.Run.cached`: figure, stage tag, the sweep's settings, the device, the code fingerprint).
Only for figures whose ``sweeps`` module has ``sweeps(cfg)`` (norm_scaling, classification_kernel_gd). Stages that
depend on the configuration alone (norm_scaling's ``theorem34_scan``, no trained unit) can be computed apart too:
they are named here as stages, computed through the notebook's own ``Run`` (so under its key), and listed only as
such (their key is built inside the figure's code).

Usage:
    python tools/paper_stages.py FIGURE [--profile paper] [--device cpu]            # list: cached or not, and time
    python tools/paper_stages.py FIGURE --train STAGE [STAGE ...]                   # train these into the cache

The cache is ``$SOFTMAX_ICL_CACHE_DIR`` (else ``~/.cache/softmax_icl``), as for the notebooks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from softmax_icl.base import cache_dir, resolve_device
from softmax_icl.cache import cache_key, cached
from softmax_icl.records import Run
from softmax_icl.registry import FIGURES, resolve

#: Stages computed from the configuration alone, by figure: tag -> (module, function of the notebook's Run).
CONFIG_STAGES = {"norm_scaling": {"theorem34_scan": ("softmax_icl.figures.norm_scaling.theorem34", "scans")}}


def stages(figure: str, profile: str) -> dict:
    """The figure's training programs at ``profile`` by stage tag (``train_<name>``), and how to train each."""
    mod = importlib.import_module(f"softmax_icl.figures.{figure}.sweeps")
    if not hasattr(mod, "sweeps"):
        sys.exit(f"{figure}: its sweeps module has no sweeps(cfg); allowed: norm_scaling, classification_kernel_gd")
    programs = mod.sweeps(resolve(figure, profile))
    if figure == "classification_kernel_gd":
        from softmax_icl.classification.models import train_cls_sweep as train
    else:
        from softmax_icl.training import train_sweep as train
    return {f"train_{k}": (sw, train) for k, sw in programs.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("figure", choices=list(FIGURES))
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--train", nargs="+", metavar="STAGE", help="train these stages into the cache (train_<name>)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    table = stages(args.figure, args.profile)
    scans = CONFIG_STAGES.get(args.figure, {})
    unknown = sorted(set(args.train or []) - set(table) - set(scans))
    if unknown:
        sys.exit(f"stage(s) {', '.join(unknown)} not among {args.figure}'s: {', '.join([*table, *scans])}")
    print(f"{args.figure}, {args.profile} profile, device {device}, cache {cache_dir()}")
    for tag, (sw, train) in table.items():
        key = cache_key(f"{args.figure}-{tag}", sw.to_dict(), str(device), args.figure)
        meta = cache_dir() / f"{key}.meta.json"
        if args.train and tag in args.train:
            info: dict = {}
            _, hit = cached(f"{args.figure}-{tag}", sw.to_dict(), str(device),
                            lambda sw=sw, train=train, tag=tag: train(sw, device, desc=tag), figure=args.figure,
                            info=info)
            print(f"  {tag}: {'was cached' if hit else 'trained'} ({info.get('seconds') or 0:.0f} s)", flush=True)
        elif meta.exists():
            m = json.loads(meta.read_text())
            print(f"  {tag}: cached ({m.get('seconds', 0):.0f} s, {m.get('computed_at', '?')})")
        else:
            print(f"  {tag}: not cached")
    for tag, (module, name) in scans.items():
        if args.train and tag in args.train:
            run = Run(args.figure, args.profile, str(device))
            getattr(importlib.import_module(module), name)(run)
            print(f"  {tag}: {'was cached' if run.cache_hits[tag] else 'computed'} "
                  f"({run.compute_seconds.get(tag) or 0:.0f} s)", flush=True)
        else:
            print(f"  {tag}: computed from the configuration alone (--train {tag} computes it, or finds it cached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
