"""Two versions of paper 1's CPU engine in one process, alternated call by call: the ratio of their step times.

This machine's speed moves by a fifth between runs of one hour (``roofline.md``), so two versions of the engine
timed in separate runs cannot be told apart below that. Here both are compiled (``kernels/engine.c`` and
``kernels/philox.h`` of two source trees, e.g. ``main`` and a ``git worktree`` of a branch), and every training step
of a roofline stage (``roofline.py``'s sweeps at the paper profile) calls A and B in turn, ``--calls`` times each on the
same matrices; the step's time of each is the fastest of its calls, in CPU seconds of both threads (steadier than wall
time on a shared host). Printed per stage: the median over steps (the first two left out) of A's and B's times, B / A,
and the largest difference of B's loss and gradient from A's (relative to each configuration's largest gradient
entry; 0 means the same bits).

Training runs with the installed package (its Python code and its own engine, which does the steps' updates); A and B
only replace the engine call. Both must take the same arguments as the installed package's engine (the ``fused_steps``
entry point of the same ``spec_t`` / ``step_t`` layout); each stream's scratch is made as large as the larger of the two
needs.

Usage:  python benchmarks/engine_ab.py A_DIR B_DIR [--stages NAME ...] [--steps 14] [--calls 3]
        (A_DIR, B_DIR: source trees holding src/softmax_icl/kernels/engine.c)
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

#: Paper 1's stages (paper 2's stage trains through its own engine, classification/engine.c)
STAGES = [s.name for s in roofline.STAGES if not s.name.startswith("classification")]


def engine_sources(tree: Path) -> tuple[Path, Path]:
    k = tree / "src" / "softmax_icl" / "kernels"
    return k / "engine.c", k / "philox.h"


def load(tree: Path):
    """Compile and load the engine of source tree ``tree`` (built and cached as the package builds its own)."""
    from softmax_icl import kernels
    engine, philox = engine_sources(tree)
    lib, how = kernels.build_library("engine", engine, "fused kernel", [philox], chosen_by_env=False)
    if lib is None:
        raise SystemExit(f"the engine of {tree} did not build: {how}")
    lib.fused_steps.restype = ctypes.c_int
    lib.fused_steps.argtypes = [ctypes.POINTER(kernels._Spec), ctypes.POINTER(kernels._Step), ctypes.c_int64,
                                ctypes.c_int64]
    lib.scratch_floats.restype = ctypes.c_int64
    lib.scratch_floats.argtypes = [ctypes.c_int64, ctypes.c_int64]
    return lib


def measure(stage: str, libs: dict, steps: int, calls: int) -> dict:
    """Train ``stage`` for ``steps`` steps, each step's engine call made by A and B in turn."""
    import torch
    from softmax_icl import kernels
    from softmax_icl.training import train_sweep
    times = {"A": [], "B": []}
    diff = [0.0]
    run = kernels.FusedProgram.run
    sized = set()

    def alternated(self, M, step):
        if id(self) not in sized:                       # scratch for the larger of the two engines' needs
            for i, f in enumerate(self.streams):
                need = max(int(lib.scratch_floats(f.n, f.d)) for lib in libs.values())
                if need > f.per_thread:
                    f.per_thread, f.scratch = need, torch.empty(f.slots * need)
                    self.steps[i].scratch = f.scratch.data_ptr()
            sized.add(id(self))
        best, out = {"A": float("inf"), "B": float("inf")}, {}
        own = self._lib
        try:
            for _ in range(calls):
                for name, lib in libs.items():
                    self._lib = lib
                    t = time.process_time()
                    loss, grad = run(self, M, step)
                    best[name] = min(best[name], time.process_time() - t)
                    out[name] = (loss.clone(), grad.clone())
        finally:
            self._lib = own
        for name in libs:
            times[name].append(best[name])
        (la, ga), (lb, gb) = out["A"], out["B"]
        scale = ga.abs().flatten(1).amax(1).clamp_min(1e-30)
        diff[0] = max(diff[0], float(((gb - ga).abs().flatten(1).amax(1) / scale).max()),
                      float(((lb - la).abs() / la.abs().clamp_min(1e-30)).max()))
        return out["A"]

    kernels.FusedProgram.run = alternated
    try:
        sw = roofline.stage_sweep(roofline.BY_NAME[stage])
        train_sweep(dataclasses.replace(sw, steps=steps, log_every=max(1, sw.log_every)), "cpu", progress=False)
    finally:
        kernels.FusedProgram.run = run
    a, b = (statistics.median(times[x][2:]) for x in "AB")
    return {"stage": stage, "A_s": a, "B_s": b, "ratio": b / a, "max_rel_diff": diff[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a", type=Path, help="source tree A (holding src/softmax_icl/kernels/engine.c)")
    ap.add_argument("b", type=Path, help="source tree B")
    ap.add_argument("--stages", nargs="+", default=STAGES, help="paper-1 roofline stages (figure/tag or tag)")
    ap.add_argument("--steps", type=int, default=14, help="training steps per stage (the first two are not counted)")
    ap.add_argument("--calls", type=int, default=3, help="calls of each engine per step (the fastest counts)")
    args = ap.parse_args()
    for tree in (args.a, args.b):
        missing = [str(p) for p in engine_sources(tree) if not p.is_file()]
        if missing:
            ap.error(f"{tree}: no engine sources ({', '.join(missing)})")
    names = {s: roofline.BY_NAME[s].name for s in args.stages if s in roofline.BY_NAME}
    unknown = [s for s in args.stages if names.get(s) not in STAGES]
    if unknown:
        ap.error(f"unknown stage(s) {unknown}; allowed: {', '.join(STAGES)}")
    if args.steps < 3 or args.calls < 1:
        ap.error(f"--steps must be >= 3 and --calls >= 1; got --steps {args.steps}, --calls {args.calls}")
    libs = {"A": load(args.a), "B": load(args.b)}
    print(f"{'stage':48s} {'A ms':>8s} {'B ms':>8s}   B/A  max rel. diff")
    for stage in args.stages:
        r = measure(names[stage], libs, args.steps, args.calls)
        ms = f"{1e3 * r['A_s']:8.1f} {1e3 * r['B_s']:8.1f}"
        print(f"{r['stage']:48s} {ms} {r['ratio']:6.3f}  {r['max_rel_diff']:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
