"""Throughput of batched sweep training, as ratios measured in one run (no absolute targets).

Prints, for a sweep of configurations (classes x L x sigma x seeds) at a small and a large batch:

* step / sampling: cost of one full batched training step (sampling + forward + backward + Adam)
  over the cost of sampling the same tasks alone (target: <= 1.5 for >= 16 configurations);
* speed-up: time to train the configurations one at a time over the time to train them as one
  batched program (same steps, same data).

Usage:  python benchmarks/sweep_throughput.py [--steps 40] [--d 5] [--n 50]
"""

from __future__ import annotations

import argparse
import time

import torch

from softmax_icl.models import AttentionUnit
from softmax_icl.training import Sweep, TaskStream, derive_seed, train_sweep


def sweep(batch: int, steps: int, d: int, n: int) -> Sweep:
    return Sweep(model="softmax", classes=("relu", "cosine"), L=(0.3, 1.0, 3.0, 10.0), sigma=(0.1, 0.5), n=(n,),
                 seeds=2, d=d, steps=steps, batch_size=batch, log_every=steps)


def best_of(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(sw: Sweep, steps: int) -> dict:
    configs = sw.configs()
    stream = TaskStream(sw.input_spec, configs, list(sw.classes), max(sw.n),
                        [derive_seed(sw.data_seed, s) for s in range(sw.seeds)], "cpu")
    unit = AttentionUnit(sw.model, sw.param, sw.d, stream.seed_idx, [derive_seed(sw.init_seed, s) for s in range(sw.seeds)],
                         sw.init_scale, "cpu")
    opt = torch.optim.Adam(unit.parameters(), lr=sw.lr)

    def sample_only():
        for _ in range(steps):
            stream.sample(sw.batch_size)

    def train_steps():
        for _ in range(steps):
            b = stream.sample(sw.batch_size)
            loss = ((unit(b) - b.f_q) ** 2).mean(-1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    train_steps()  # warm-up
    t_sample, t_step = best_of(sample_only), best_of(train_steps)
    t_batched = best_of(lambda: train_sweep(sw, "cpu", progress=False), 1)
    t_alone = best_of(lambda: [train_sweep(sw, "cpu", configs=[c], progress=False) for c in configs], 1)
    return dict(configs=len(configs), sample_ms=1e3 * t_sample / steps, step_ms=1e3 * t_step / steps,
                step_over_sample=t_step / t_sample, speedup=t_alone / t_batched)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, d = {args.d}, n = {args.n}, "
          f"{args.steps} steps per measurement")
    print(f"{'batch':>6} {'configs':>8} {'sample ms':>10} {'step ms':>9} {'step/sample':>12} {'batched speed-up':>17}")
    for batch in (16, 256):
        r = measure(sweep(batch, args.steps, args.d, args.n), args.steps)
        print(f"{batch:>6} {r['configs']:>8} {r['sample_ms']:>10.2f} {r['step_ms']:>9.2f} "
              f"{r['step_over_sample']:>12.2f} {r['speedup']:>16.1f}x")


if __name__ == "__main__":
    main()
