"""Time of one training step of the PyTorch path against batch size (and, on a GPU, eager vs compiled vs graphed).

The units are tiny (d <= 10), so a step may be bound by the launch of its many small kernels rather than by
arithmetic. This script times the step the trainer runs (:class:`softmax_icl.training.SweepProgram`: sample one
batch per context length, forward, backward, Adam) -- always the PyTorch path, never the fused CPU kernel
(``SOFTMAX_ICL_KERNEL=torch`` is set before anything loads it) -- and fits ``t(B) = a + b B`` over the batch sizes:
``a`` is the fixed cost of a step (launches, Python), ``b`` the cost per task, and ``a / b`` the batch below which
the fixed cost dominates.

On a CUDA GPU it also compares, at every batch size and in one run, three ways of running the same step:

* **eager**: the step run eagerly, as the trainer did before it captured its step (and does with
  ``SOFTMAX_ICL_CUDA_GRAPH=0``);
* **compile**: ``torch.compile`` of the sampling + loss (backward through AOTAutograd; Adam eager);
* **graph**: forward, backward and Adam (``capturable=True``) captured once as a CUDA graph and replayed, with the
  sampling run eagerly into its static inputs (this probe keeps the sampler outside the graph, as it was written
  before the trainer read its step from a device tensor; the trainer's own graph of the whole step, sampling
  included, is timed against its eager step by ``benchmarks/roofline.py --device cuda``).

The variants are timed in interleaved blocks (every round times each once, in rotating order), so drift on a shared
machine hits them alike; the ratios eager / variant are medians over rounds with their interquartile range. A
variant that fails (e.g. no compiler toolchain for ``torch.compile``) is reported as such, never hidden. Peak GPU
memory of the eager step is printed per batch size. Without CUDA the GPU part is skipped, and the script says so.

Usage:  python benchmarks/step_time.py [--batches 16 64 256 1024] [--steps 5] [--rounds 15] [--d 5] [--n 50]
                                       [--threads N] [--no-cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["SOFTMAX_ICL_KERNEL"] = "torch"       # the PyTorch path, also on the CPU (before softmax_icl loads it)

import torch  # noqa: E402

from softmax_icl.engine import regression as kernels  # noqa: E402
from softmax_icl.training import Sweep, SweepProgram  # noqa: E402


def sweep(batch: int, d: int, n: int) -> Sweep:
    """32 configurations (2 classes x 4 L x 2 sigma x 2 seeds), one context length: a default-profile-sized sweep."""
    return Sweep(model="softmax", classes=("relu", "cosine"), L=(0.3, 1.0, 3.0, 10.0), sigma=(0.1, 0.5), n=(n,),
                 seeds=2, d=d, batch_size=batch, param="KQ")


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


# ---------------------------------------------------------------------------------------------------------------
# The step, three ways


def _adam_step(sw: Sweep, dev: torch.device, wrap=None):
    """The trainer's step on a fresh program; ``wrap`` (e.g. ``torch.compile``) wraps its sampling + loss."""
    prog = SweepProgram(sw, dev)
    opt = torch.optim.Adam(list(prog.unit.parameters()), lr=sw.lr)
    loss_fn = prog.loss if wrap is None else wrap(prog.loss)

    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        opt.step()
    return step


def eager_step(sw: Sweep, dev: torch.device):
    return _adam_step(sw, dev), "eager"


def compiled_step(sw: Sweep, dev: torch.device):
    return _adam_step(sw, dev, torch.compile), "torch.compile (sampling + loss; backward through AOTAutograd)"


def graphed_step(sw: Sweep, dev: torch.device):
    """The step as a CUDA graph (see the module docstring); returns the replay and what it holds."""
    prog = SweepProgram(sw, dev)
    params = list(prog.unit.parameters())
    opt = torch.optim.Adam(params, lr=sw.lr, capturable=True)

    def body(batches=None):
        loss = prog.loss(batches)
        loss.sum().backward()
        opt.step()
        return loss

    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):                        # warm-up (allocations, Adam state) off the capture
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            body()
    torch.cuda.current_stream(dev).wait_stream(side)
    opt.zero_grad(set_to_none=False)                     # gradients stay allocated: the graph accumulates into them

    def capture(fn):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            opt.zero_grad(set_to_none=False)
            fn()
        return graph

    # Sampling stays outside this graph (the probe predates the trainer's device-side step): the graph holds
    # forward, backward and Adam, and sampling runs eagerly into static copies of the batches.
    static = [type(b)(*(t.clone() for t in (b.x_ctx, b.y_ctx, b.x_q, b.f_q))) for b in prog.sample(1)]
    graph = capture(lambda: body(static))
    counter = iter(range(2, 1 << 62))

    def step():
        for dst, src in zip(static, prog.sample(next(counter))):
            for name in ("x_ctx", "y_ctx", "x_q", "f_q"):
                getattr(dst, name).copy_(getattr(src, name))
        graph.replay()
    return step, "CUDA graph of forward + backward + Adam, sampling eager into static inputs"


# ---------------------------------------------------------------------------------------------------------------
# Timing


def block(step, steps: int, dev: torch.device) -> float:
    """Seconds per step over a block of ``steps`` steps, waiting for the device at both ends."""
    sync(dev)
    t = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    return (time.perf_counter() - t) / steps


def interleaved(variants: dict, steps: int, rounds: int, dev: torch.device) -> dict[str, list[float]]:
    names = list(variants)
    for fn in variants.values():                       # warm-up (compilation, caches)
        for _ in range(3):
            block(fn, steps, dev)
    times = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(block(variants[k], steps, dev))
    return times


def fit(batches: list[int], ms: list[float]) -> tuple[float, float]:
    """Least squares ``ms = a + b * batch``."""
    mb, mt = statistics.fmean(batches), statistics.fmean(ms)
    sxx = sum((b - mb) ** 2 for b in batches)
    b = sum((x - mb) * (y - mt) for x, y in zip(batches, ms)) / sxx if sxx else 0.0
    return mt - b * mb, b


def report_fit(batches: list[int], ms: list[float]) -> str:
    if len(batches) < 2:
        return "fit: needs at least two batch sizes"
    a, b = fit(batches, ms)
    if b <= 0:
        cross = "no growth with batch size: launch-bound at every batch measured"
    elif a <= 0:
        cross = "no fixed cost resolved: compute-bound at every batch measured"
    else:
        cross = f"fixed cost dominates below batch {a / b:.0f}"
    return f"fit t = a + b B: a = {a:.3f} ms per step (fixed), b = {1e3 * b:.2f} us per task; {cross}"


def cpu_part(args) -> None:
    dev = torch.device("cpu")
    print(f"\n== CPU, PyTorch path ({torch.get_num_threads()} threads; kernel: {kernels.backend()}) ==")
    print(f"median (interquartile range) over {args.rounds} blocks of {args.steps} steps; 32 configurations, "
          f"d = {args.d}, n = {args.n}; us/task: per task of the batch (all 32 configurations)")
    print(f"{'batch':>6} {'ms/step':>9} {'(IQR)':>15} {'us/task':>8}")
    meds = []
    for B in args.batches:
        step, _ = eager_step(sweep(B, args.d, args.n), dev)
        lo, mid, hi = quartiles([1e3 * t for t in interleaved({"eager": step}, args.steps, args.rounds, dev)["eager"]])
        meds.append(mid)
        print(f"{B:>6} {mid:>9.2f} {f'({lo:.2f}-{hi:.2f})':>15} {1e3 * mid / B:>8.2f}", flush=True)
    print(report_fit(args.batches, meds))


def cuda_part(args) -> None:
    dev = torch.device("cuda")
    print(f"\n== CUDA: {torch.cuda.get_device_name(dev)} ==")
    print(f"ratios eager / variant: median (interquartile range) over {args.rounds} interleaved rounds of "
          f"{args.steps} steps; > 1 means the variant is faster")
    eager_ms, makers = [], {"compile": compiled_step, "graph": graphed_step}
    described = {}
    print(f"{'batch':>6} {'eager ms':>9} {'peak MiB':>9} " + " ".join(f"{k + ' ratio':>13} {'(IQR)':>13}"
                                                                       for k in makers))
    for B in args.batches:
        sw = sweep(B, args.d, args.n)
        torch.cuda.reset_peak_memory_stats(dev)
        variants = {"eager": eager_step(sw, dev)[0]}
        block(variants["eager"], 2, dev)
        peak = torch.cuda.max_memory_allocated(dev) / 2**20
        failed = {}
        for k, make in makers.items():
            try:
                fn, what = make(sw, dev)
                block(fn, 2, dev)
                variants[k] = fn
                described.setdefault(k, what)
            except Exception as exc:                    # report, never hide
                failed[k] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
        times = interleaved(variants, args.steps, args.rounds, dev)
        mid_e = statistics.median(times["eager"]) * 1e3
        eager_ms.append(mid_e)
        cells = []
        for k in makers:
            if k in failed:
                cells.append(f"{'failed':>13} {'':>13}")
                described.setdefault(k, f"failed: {failed[k]}")
                continue
            lo, mid, hi = quartiles([e / v for e, v in zip(times["eager"], times[k])])
            cells.append(f"{mid:>13.2f} {f'({lo:.2f}-{hi:.2f})':>13}")
        print(f"{B:>6} {mid_e:>9.3f} {peak:>9.1f} " + " ".join(cells), flush=True)
    print(report_fit(args.batches, eager_ms) + " (eager)")
    for k, what in described.items():
        print(f"{k}: {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 64, 256, 1024])
    ap.add_argument("--steps", type=int, default=5, help="training steps per timed block")
    ap.add_argument("--rounds", type=int, default=15, help="timed blocks per batch size (interleaved on the GPU)")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU part")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads (default: PyTorch's choice); on a machine shared with other jobs, 1 avoids "
                         "intra-op threads waiting for each other's time slices")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}; one training step = sample + forward + backward + Adam (PyTorch path)")
    assert kernels.backend().startswith("torch"), kernels.backend()
    if not args.no_cpu:
        cpu_part(args)
    if torch.cuda.is_available():
        cuda_part(args)
    else:
        print("\n== CUDA: skipped (no CUDA device here); eager vs torch.compile vs CUDA graphs was not measured ==")


if __name__ == "__main__":
    main()
