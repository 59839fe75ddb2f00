"""Two versions of a CPU engine in one process, alternated call by call: the ratio of their step times.

This machine's speed moves by a fifth between runs of one hour, so two versions of the engine
timed in separate runs cannot be told apart below that. Here both are compiled (paper 1's ``engine/regression.c`` or
paper 2's ``engine/classification.c``, each with the ``engine/philox.h`` and ``engine/adam.h`` of its tree, of two
source trees, e.g. ``main`` and a ``git worktree`` of a branch), and every training step
of a roofline stage (``roofline.py``'s sweeps at the paper profile) calls A and B in turn, ``--calls`` times each on the
same matrices; the step's time of each is the fastest of its calls, in CPU seconds of both threads (steadier than wall
time on a shared host). Printed per stage: the median over steps (the first two left out) of A's and B's times, B / A,
and the largest difference of B's loss and gradient from A's (relative to each configuration's largest gradient
entry; 0 means the same bits).

Training runs with the installed package (its Python code and its own engine, which does the steps' updates); A and B
only replace the engine call. Both must take the same arguments as the installed package's engine (paper 1: the
``fused_steps`` entry point of the same ``spec_t`` / ``step_t`` layout; paper 2: ``cls_step`` of the same
``step_spec``); the scratch is made as large as the larger of the two needs. For paper 2 the step's outputs are A's
again after each pair of calls, so training follows A.

Usage:  python benchmarks/engine_ab.py A_DIR B_DIR [--stages NAME ...] [--steps 14] [--calls 3]
        (A_DIR, B_DIR: source trees holding src/softmax_icl/engine/philox.h and adam.h, and regression.c for paper 1's
        stages, classification.c for paper 2's)
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import roofline  # noqa: E402

#: Paper 1's stages (engine/regression.c) and paper 2's (engine/classification.c)
STAGES = [s.name for s in roofline.STAGES]


def is_cls(stage: str) -> bool:
    return stage.startswith("classification")


def engine_sources(tree: Path) -> tuple[Path, Path, Path]:
    """Paper 1's engine source and the headers it includes (Philox, Adam) of source tree ``tree``."""
    e = tree / "src" / "softmax_icl" / "engine"
    return e / "regression.c", e / "philox.h", e / "adam.h"


def alternate(obj, attr: str, libs: dict, calls: int, call) -> tuple[dict, dict]:
    """``call()`` ``calls`` times with each engine of ``libs`` in turn as ``obj.<attr>``: per engine the fastest call's
    CPU seconds (both threads) and the last call's outputs. ``obj.<attr>`` is its own engine again afterwards."""
    best, out = {name: float("inf") for name in libs}, {}
    own = getattr(obj, attr)
    try:
        for _ in range(calls):
            for name, lib in libs.items():
                setattr(obj, attr, lib)
                t = time.process_time()
                res = call()
                best[name] = min(best[name], time.process_time() - t)
                out[name] = res
    finally:
        setattr(obj, attr, own)
    return best, out


def rel_diff(a: tuple, b: tuple) -> float:
    """The largest difference of B's outputs (loss, gradients...) from A's: the loss relative to A's, a gradient
    relative to each configuration's largest entry of A's."""
    (la, *ga), (lb, *gb) = a, b
    d = float(((lb - la).abs() / la.abs().clamp_min(1e-30)).max())
    for x, y in zip(ga, gb):
        scale = x.abs().flatten(1).amax(1).clamp_min(1e-30)
        d = max(d, float(((y - x).abs().flatten(1).amax(1) / scale).max()))
    return d


def train_patched(owner, method: str, patched, stage: str, steps: int, train) -> None:
    """Train ``stage`` (its sweep at the paper profile, ``steps`` steps) with ``owner.<method>`` replaced by
    ``patched`` (restored afterwards)."""
    own = getattr(owner, method)
    setattr(owner, method, patched)
    try:
        sw = roofline.stage_sweep(roofline.BY_NAME[stage])
        train(dataclasses.replace(sw, steps=steps, log_every=max(1, sw.log_every)), "cpu", progress=False)
    finally:
        setattr(owner, method, own)


def summary(stage: str, times: dict, diff: float) -> dict:
    """The medians of A's and B's step times (the first two steps left out), their ratio and the largest difference."""
    a, b = (statistics.median(times[x][2:]) for x in "AB")
    return {"stage": stage, "A_s": a, "B_s": b, "ratio": b / a, "max_rel_diff": diff}


def cls_sources(tree: Path) -> tuple[Path, Path, Path]:
    """Paper 2's engine source and the headers it includes (Philox, Adam) of source tree ``tree`` (a tree whose
    classification.c does not include philox.h builds the same: a header only keys the build)."""
    e = tree / "src" / "softmax_icl" / "engine"
    return e / "classification.c", e / "philox.h", e / "adam.h"


def load_cls(tree: Path):
    """Compile and load paper 2's engine of source tree ``tree``."""
    from softmax_icl.engine import classification as cls_engine
    from softmax_icl.engine import common
    source, *headers = cls_sources(tree)
    lib, how = common.build_library("cls-engine", source, "classification engine", headers, chosen_by_env=False)
    if lib is None:
        raise SystemExit(f"the classification engine of {tree} did not build: {how}")
    lib.cls_step.restype = ctypes.c_int
    lib.cls_step_workspace.restype = ctypes.c_int64
    for fn in (lib.cls_step, lib.cls_step_workspace):
        fn.argtypes = [ctypes.POINTER(cls_engine.StepSpec)]
    return lib


def measure_cls(stage: str, libs: dict, steps: int, calls: int) -> dict:
    """Train paper 2's ``stage`` for ``steps`` steps, each step's ``cls_step`` made by A and B in turn."""
    from softmax_icl.classification.models import train_cls_sweep
    from softmax_icl.engine import classification as cls_engine
    times = {"A": [], "B": []}
    diff = [0.0]
    compute = cls_engine.FusedStep.compute

    def alternated(self, A, WV, step, first=0):
        self.work.size_fn = lambda spec: max(int(lib.cls_step_workspace(spec)) for lib in libs.values())

        def call():
            compute(self, A, WV, step, first)
            return self.loss.clone(), self.gA.clone(), self.gWV.clone()

        best, out = alternate(self, "lib", libs, calls, call)
        for name in libs:
            times[name].append(best[name])
        for mine, a in zip((self.loss, self.gA, self.gWV), out["A"]):
            mine.copy_(a)
        diff[0] = max(diff[0], rel_diff(out["A"], out["B"]))

    train_patched(cls_engine.FusedStep, "compute", alternated, stage, steps, train_cls_sweep)
    if not times["A"]:
        raise SystemExit(f"{stage}: its training made no fused step (cls_step) to time")
    return summary(stage, times, diff[0])


def load(tree: Path):
    """Compile and load the engine of source tree ``tree`` (built and cached as the package builds its own)."""
    from softmax_icl.engine import common, regression
    engine, *headers = engine_sources(tree)
    lib, how = common.build_library("engine", engine, "fused kernel", headers, chosen_by_env=False)
    if lib is None:
        raise SystemExit(f"the engine of {tree} did not build: {how}")
    lib.fused_steps.restype = ctypes.c_int
    lib.fused_steps.argtypes = [ctypes.POINTER(regression._Spec), ctypes.POINTER(regression._Step), ctypes.c_int64,
                                ctypes.c_int64]
    lib.scratch_floats.restype = ctypes.c_int64
    lib.scratch_floats.argtypes = [ctypes.c_int64, ctypes.c_int64]
    return lib


def measure(stage: str, libs: dict, steps: int, calls: int) -> dict:
    """Train ``stage`` for ``steps`` steps, each step's engine call made by A and B in turn."""
    import torch
    from softmax_icl.engine import regression
    from softmax_icl.training import train_sweep
    times = {"A": [], "B": []}
    diff = [0.0]
    run = regression.FusedProgram.run
    sized = set()

    def alternated(self, M, step):
        if id(self) not in sized:                       # scratch for the larger of the two engines' needs
            for i, f in enumerate(self.streams):
                need = max(int(lib.scratch_floats(f.n, f.d)) for lib in libs.values())
                if need > f.per_thread:
                    f.per_thread, f.scratch = need, torch.empty(f.slots * need)
                    self.steps[i].scratch = f.scratch.data_ptr()
            sized.add(id(self))
        best, out = alternate(self, "_lib", libs, calls, lambda: tuple(x.clone() for x in run(self, M, step)))
        for name in libs:
            times[name].append(best[name])
        diff[0] = max(diff[0], rel_diff(out["A"], out["B"]))
        return out["A"]

    train_patched(regression.FusedProgram, "run", alternated, stage, steps, train_sweep)
    return summary(stage, times, diff[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="source tree A (holding src/softmax_icl/engine/regression.c and "
                                         "src/softmax_icl/engine/classification.c)")
    ap.add_argument("b", type=Path, help="source tree B")
    ap.add_argument("--stages", nargs="+", default=STAGES, help="roofline stages (figure/tag or tag)")
    ap.add_argument("--steps", type=int, default=14, help="training steps per stage (the first two are not counted)")
    ap.add_argument("--calls", type=int, default=3, help="calls of each engine per step (the fastest counts)")
    args = ap.parse_args()
    names = {s: roofline.BY_NAME[s].name for s in args.stages if s in roofline.BY_NAME}
    unknown = [s for s in args.stages if names.get(s) not in STAGES]
    if unknown:
        ap.error(f"unknown stage(s) {unknown}; allowed: {', '.join(STAGES)}")
    if args.steps < 3 or args.calls < 1:
        ap.error(f"--steps must be >= 3 and --calls >= 1; got --steps {args.steps}, --calls {args.calls}")
    papers = {is_cls(names[s]) for s in args.stages}
    for tree in (args.a, args.b):
        need = (list(engine_sources(tree)) if False in papers else []) + (list(cls_sources(tree)) if True in papers
                                                                            else [])
        missing = [str(p) for p in need if not p.is_file()]
        if missing:
            ap.error(f"{tree}: no engine sources ({', '.join(missing)})")
    libs = {"A": load(args.a), "B": load(args.b)} if False in papers else {}
    cls_libs = {"A": load_cls(args.a), "B": load_cls(args.b)} if True in papers else {}
    print(f"{'stage':48s} {'A ms':>8s} {'B ms':>8s}   B/A  max rel. diff")
    for stage in args.stages:
        name = names[stage]
        r = measure_cls(name, cls_libs, args.steps, args.calls) if is_cls(name) else measure(name, libs, args.steps,
                                                                                                args.calls)
        ms = f"{1e3 * r['A_s']:8.1f} {1e3 * r['B_s']:8.1f}"
        print(f"{r['stage']:48s} {ms} {r['ratio']:6.3f}  {r['max_rel_diff']:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
