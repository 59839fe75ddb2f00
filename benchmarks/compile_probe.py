"""Would ``torch.compile`` bring the PyTorch path's task draws near the C engine on the CPU?

Times one batch of raw task randomness (Philox words, Box-Muller, inputs normalised onto the sphere; the part of the
PyTorch path's step that dominates it on the CPU, ``benchmarks/roofline.md``) three ways, in one process:

* eager PyTorch (``softmax_icl.tasks._draw_torch``, what ``SOFTMAX_ICL_KERNEL=torch`` and every GPU run use);
* the same function under ``torch.compile`` (inductor's C++ backend; the step passed as a tensor so that one compiled
  program serves every step), with its compile time;
* the engine (``softmax_icl.kernels.sample_raw``), the fused CPU path.

and prints the times, the ratios and the largest difference of the three outputs (the same counter scheme: equal to
float32 rounding). Usage: ``python benchmarks/compile_probe.py [d n rows tasks ...]`` (groups of four; default two
paper-sized shapes). Run it on an otherwise idle machine.
"""

from __future__ import annotations

import sys
import time
import warnings

import torch

from softmax_icl import kernels, streams, tasks


def probe(d: int, n: int, R: int, T: int, reps: int = 5) -> str:
    spec = tasks.InputSpec(d=d)
    keys = streams.keys(list(range(1, R + 1)), "cpu")
    out = {name: tasks.raw_buffers(spec, R, T, n, "cpu") for name in ("eager", "compiled", "engine")}

    def eager(s: int) -> None:
        tasks._draw_torch(spec, keys, n, range(T), s, out["eager"])

    body = torch.compile(lambda s: tasks._draw_torch(spec, keys, n, range(T), s, out["compiled"]), dynamic=False)

    def compiled(s: int) -> None:
        body(torch.tensor(s, dtype=torch.int64))

    def engine(s: int) -> None:
        kernels.sample_raw(spec.input_dist, keys, n, 0, s, out["engine"], None)

    def seconds(f) -> float:
        f(1)
        t0 = time.perf_counter()
        for s in range(2, 2 + reps):
            f(s)
        return (time.perf_counter() - t0) / reps

    t0 = time.perf_counter()
    compiled(1)
    t_compile = time.perf_counter() - t0
    te, tc, tk = seconds(eager), seconds(compiled), seconds(engine)
    for f in (eager, compiled, engine):
        f(9)
    diff = {k: max(float((out["eager"][v] - out[k][v]).abs().max()) for v in out["eager"]) for k in ("compiled", "engine")}
    return (f"d={d} n={n} rows={R} tasks={T}: eager {te * 1e3:.1f} ms, compiled {tc * 1e3:.1f} ms "
            f"(compile {t_compile:.1f} s), engine {tk * 1e3:.1f} ms; eager/compiled {te / tc:.1f}x, "
            f"compiled/engine {tc / tk:.1f}x; largest difference from eager: compiled {diff['compiled']:.1e}, "
            f"engine {diff['engine']:.1e}")


def main(argv: list[str]) -> None:
    usage = "give the shapes as positive integers in groups of four: d n rows tasks (e.g. 8 200 5 256)"
    if not all(a.isdigit() and int(a) > 0 for a in argv) or len(argv) % 4:
        sys.exit(f"compile_probe.py: got {' '.join(argv)!r}; {usage}")
    nums = [int(a) for a in argv] or [8, 200, 5, 256, 5, 100, 5, 512]
    if not kernels.available():
        sys.exit("compile_probe.py: the engine is not built on this machine (softmax_icl.kernels.available() is False)")
    warnings.filterwarnings("ignore", module="torch")
    for i in range(0, len(nums), 4):
        print(probe(*nums[i:i + 4]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
