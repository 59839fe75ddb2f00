"""Would ``torch.compile`` bring the PyTorch path's task draws near the C engine on the CPU?

Times one batch of raw task randomness (Philox words, Box-Muller, inputs normalised onto the sphere; the part of the
PyTorch path's step that dominates it on the CPU: ``benchmarks/RESULTS.md``) three ways, in one process:

* eager PyTorch (``softmax_icl.tasks._draw_torch``, what ``SOFTMAX_ICL_KERNEL=torch`` and every GPU run use);
* the same function under ``torch.compile`` (inductor's C++ backend; the step passed as a tensor so that one compiled
  program serves every step), with its compile time;
* the engine (``softmax_icl.engine.regression.sample_raw``), the fused CPU path.

and prints the times, the ratios and the largest difference of the three outputs (the same counter scheme: equal to
float32 rounding). Usage: ``python benchmarks/compile_probe.py [d n rows tasks ...]`` (groups of four; default two
paper-sized shapes). Run it on an otherwise idle machine.

``--words [rows tasks blocks ...]`` (groups of three) times the integer part alone: ``softmax_icl.streams.blocks``
eager against its rounds (``streams._rounds``) under ``torch.compile`` with dynamic shapes (one compiled program for
every shape; the floats stay eager), checks that the words are the same integers, and prints the first call's time
(the compile, with an empty inductor cache or a warm one).
"""

from __future__ import annotations

import sys
import time
import warnings

import torch

from softmax_icl import streams, tasks
from softmax_icl.engine import regression as kernels


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


def _rounds(c0, c1, c2, c3, k0, k1):
    """``streams._rounds`` itself (the function a compiled PyTorch path would compile) on copies of the counters:
    their words (R, T, J, 4) under the key ``(k0, k1)``."""
    return torch.stack(streams._rounds([c.clone() for c in (c0, c1, c2, c3)], k0, k1), dim=-1)


def words_probe(R: int, T: int, J: int, compiled, reps: int = 3) -> str:
    """Blocks (R, T, J) of one step: ``streams.blocks`` eager against ``compiled`` (:func:`_rounds` under
    ``torch.compile``)."""
    keys = streams.keys(list(range(1, R + 1)), "cpu")
    block, tag = torch.arange(J, dtype=torch.int64), torch.full((J,), streams.TAGS["x"], dtype=torch.int64)
    shape = (R, T, J)

    def comp(s: int) -> torch.Tensor:
        return compiled(block.view(1, 1, J).expand(shape), torch.arange(T).view(1, T, 1).expand(shape),
                        torch.tensor(s).view(1, 1, 1).expand(shape), tag.view(1, 1, J).expand(shape),
                        keys[:, 0].view(R, 1, 1), keys[:, 1].view(R, 1, 1))

    def eager(s: int) -> torch.Tensor:
        return streams.blocks(keys, s, range(T), block, tag)

    t0 = time.perf_counter()
    comp(1)
    first = time.perf_counter() - t0
    times = {}
    for name, f in (("eager", eager), ("compiled", comp)):
        t0 = time.perf_counter()
        for s in range(2, 2 + reps):
            f(s)
        times[name] = (time.perf_counter() - t0) / reps
    same = torch.equal(eager(7), comp(7))
    return (f"rows={R} tasks={T} blocks={J}: eager {times['eager'] * 1e3:.1f} ms, compiled "
            f"{times['compiled'] * 1e3:.1f} ms (first call {first:.1f} s); eager/compiled "
            f"{times['eager'] / times['compiled']:.1f}x; the same words: {same}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--words"]:
        argv = argv[1:]
        usage = "give the shapes as positive integers in groups of three: rows tasks blocks (e.g. 5 128 1024)"
        if not all(a.isdigit() and int(a) > 0 for a in argv) or len(argv) % 3:
            sys.exit(f"compile_probe.py --words: got {' '.join(argv)!r}; {usage}")
        nums = [int(a) for a in argv] or [5, 128, 1024, 5, 512, 256, 5, 64, 4000]
        warnings.filterwarnings("ignore", module="torch")
        compiled = torch.compile(_rounds, dynamic=True)
        for i in range(0, len(nums), 3):
            print(words_probe(*nums[i:i + 3], compiled), flush=True)
        return
    usage = "give the shapes as positive integers in groups of four: d n rows tasks (e.g. 8 200 5 256)"
    if not all(a.isdigit() and int(a) > 0 for a in argv) or len(argv) % 4:
        sys.exit(f"compile_probe.py: got {' '.join(argv)!r}; {usage}")
    nums = [int(a) for a in argv] or [8, 200, 5, 256, 5, 100, 5, 512]
    if not kernels.available():
        sys.exit("compile_probe.py: the engine is not built on this machine (softmax_icl.engine.regression.available() is False)")
    warnings.filterwarnings("ignore", module="torch")
    for i in range(0, len(nums), 4):
        print(probe(*nums[i:i + 4]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
