"""Throughput of batched sweep training, as ratios measured in one run (no absolute targets).

Prints, for a sweep of 32 configurations (2 classes x 4 L x 2 sigma x 2 seeds, d = 5, n = 50) at a small
batch and at the book's default and paper batches:

* step / sampling: cost of one full batched training step (sampling + forward + backward + Adam)
  over the cost of sampling the same tasks alone (target: <= 1.5 for >= 16 configurations);
* speed-up: time to train the configurations one at a time over the time to train them as one
  batched program (same steps, same data).

Both sides of every ratio run the trainer's own code (:class:`softmax_icl.training.SweepProgram`). Timings
on a shared machine drift, so they are measured in many short alternating blocks and the median ratio is
reported with its interquartile range. The kernel line says which implementation the forward and
backward pass used (``SOFTMAX_ICL_KERNEL=torch`` forces the PyTorch one, for comparison).

Usage:  python benchmarks/sweep_throughput.py [--steps 5] [--rounds 40] [--d 5] [--n 50] [--batches 16 128 512]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from softmax_icl.engine import regression as kernels
from softmax_icl.base import adam
from softmax_icl.training import Sweep, SweepProgram, train_sweep


def sweep(batch: int, steps: int, d: int, n: int) -> Sweep:
    return Sweep(model="softmax", classes=("relu", "cosine"), L=(0.3, 1.0, 3.0, 10.0), sigma=(0.1, 0.5), n=(n,),
                 seeds=2, d=d, steps=steps, batch_size=batch, log_every=steps)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def measure(sw: Sweep, steps: int, rounds: int) -> dict:
    """Sampling only vs full training steps of the same program, in alternating blocks of ``steps`` steps."""
    prog = SweepProgram(sw, torch.device("cpu"))
    opt = adam(list(prog.unit.parameters()), sw.lr)
    counter = iter(range(1, 1 << 62))

    def sample_only():
        for _ in range(steps):
            prog.sample(next(counter))

    def train_steps():
        for _ in range(steps):
            loss = prog.loss().sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    for _ in range(3):       # warm-up
        sample_only()
        train_steps()
    pairs = [(timed(sample_only), timed(train_steps)) for _ in range(rounds)]
    speedups = []
    for _ in range(3):
        t_batched = timed(lambda: train_sweep(sw, "cpu", progress=False))
        t_alone = timed(lambda: [train_sweep(sw, "cpu", configs=[c], progress=False) for c in prog.configs])
        speedups.append(t_alone / t_batched)
    return dict(configs=len(prog.configs), sample_ms=1e3 * statistics.median(a for a, _ in pairs) / steps,
                step_ms=1e3 * statistics.median(b for _, b in pairs) / steps,
                ratio=quartiles([b / a for a, b in pairs]), speedup=statistics.median(speedups))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="training steps per timed block")
    ap.add_argument("--rounds", type=int, default=40, help="alternating sampling / training blocks per batch size")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 128, 512])
    ap.add_argument("--train-steps", type=int, default=40, help="steps of each run in the speed-up comparison")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, d = {args.d}, n = {args.n}; "
          f"kernel: {kernels.backend()}")
    print(f"step/sample: median (interquartile range) of {args.rounds} alternating blocks of {args.steps} steps; "
          f"speed-up: {args.train_steps}-step runs")
    print(f"{'batch':>6} {'configs':>8} {'sample ms':>10} {'step ms':>9} {'step/sample':>12} {'(IQR)':>13} "
          f"{'batched speed-up':>17}")
    for batch in args.batches:
        r = measure(sweep(batch, args.train_steps, args.d, args.n), args.steps, args.rounds)
        lo, mid, hi = r["ratio"]
        print(f"{batch:>6} {r['configs']:>8} {r['sample_ms']:>10.2f} {r['step_ms']:>9.2f} {mid:>12.2f} "
              f"{f'({lo:.2f}-{hi:.2f})':>13} {r['speedup']:>16.1f}x", flush=True)


if __name__ == "__main__":
    main()
