"""Roofline benchmark: each heavy training stage's step against the floor this machine allows.

In one run it measures

1. **the machine**, on every thread the stages use: its memory bandwidth (STREAM's triad ``a = b + s c`` over
   three float32 arrays of 256 MB, PyTorch; 12 bytes per element) and its arithmetic throughput (independent float32
   fused multiply-adds on registers, a C loop compiled with the fused kernel's flags, on the widest vectors they
   allow, 512 bits with AVX-512, in enough independent chains to fill every FMA port; 2 FLOP per FMA); each the
   best of its repetitions, measured once per round between the stages (the machine is shared: the best observed is
   what it allows). (A loop over a short array is not enough: GCC vectorises it on 256-bit registers, and on an
   AVX-512 CPU it measures half the peak, which would halve every ratio);
2. **each stage's training step**, through the trainer's own code (``train_sweep`` / ``train_cls_sweep`` on the
   stage's sweep at the paper profile with ``steps`` replaced; the time is the optimisation loop's own clock, a
   warm-up run of one step first), under each numerical backend (``SOFTMAX_ICL_KERNEL=auto``: the fused C kernel
   where it builds; ``torch``, the PyTorch path; on a GPU ``torch``, whose steps replay one CUDA graph and draw their
   words in one Triton kernel, and ``torch-eager``, without graphs, timed as the difference of a run of k and of 2k steps, so the eager warm-up and the capture are not in it), each (stage,
   backend) in a fresh process, interleaved over rounds;

and prints, per stage, ``floor = max(FLOP / throughput, bytes / bandwidth)``, the measured step (median over rounds)
and ``ratio = measured / floor`` (two decimals: 3.03 is not within 3x), for each backend, with the processor (its
model name; :func:`processor`) and the commit of the code measured (``provenance.git_revision``, as a record names
it). The same numbers go to ``benchmarks/results/roofline_<device>.json`` (``--json PATH``: there instead; a run of
some stages only is saved only with ``--json``), and ``benchmarks/results_page.py`` then rewrites
``benchmarks/RESULTS.md``. The floors are the machine's own: on an AMD EPYC (Zen 4), whose 512-bit FMAs are two
256-bit halves, the FMA loop measures two thirds to three quarters of an AVX-512 Intel Xeon's rate and every ratio is
lower (``RESULTS.md``).

**Counting convention** (per training step, at the stage's settings; the work the *task* needs, whatever the code):

* A FLOP is one add, multiply, compare, logical or integer operation on one 32-bit lane; an FMA counts 2, and the
  throughput it is held against is the FMA peak (so integer and comparison work is counted at the FMA rate: the
  floor is a lower bound). Transcendental functions (exp, log, sin, cos) count :data:`TRANSCENDENTAL` = 15 FLOP,
  the length of a vectorised polynomial with its range reduction; sqrt, rsqrt and a division count
  :data:`ROOT` = 4 (one hardware instruction of several cycles).
* Random numbers are the streams' (:mod:`softmax_icl.streams`): a Philox4x32-10 block of four words costs
  :data:`PHILOX_BLOCK` = 100 (ten rounds of two 32x32->64-bit products, counted 2 each, four xors and two key
  increments); a uniform is a quarter block and 2 (shift, scale); a normal a quarter block and half a Box-Muller
  pair (log, sqrt, cos, sin and 6 operations).
* Paper 1 (regression): every (seed, context length) draws its tasks once, shared by the configurations of that
  seed (common random numbers): per task ``n d + 2 d (+ k)`` normals (inputs, query, direction, low-rank
  coefficients), ``n`` noise normals, 4 uniforms; normalising a point ``3 d + 4``, projecting it on the task ``2 d``;
  per point the part of the labels the task's configurations share (:data:`LABEL_SHARED`, once per distinct
  :func:`label_key`: the shape of an affine or ReLU function, the cosine at one L) and per configuration its own
  part and the noise (``2 +`` :data:`LABEL_OWN`), ``q = M x_q`` and the gradient's outer product ``2 d^2`` each per
  task, and per point the forward (score ``2 d``, max, exp, sums: ``2 d + 20`` softmax, ``2 d + 2`` linear) and
  backward (``2 d + 3`` softmax, ``2 d + 1`` linear) of the readout.
* Paper 2 (classification): per seed and context, ``(n + 1) d`` input normals (when a reading other than the
  class-balanced one uses them), ``C P d`` prototype normals, ``n + 2`` uniforms; per distinct (seed, task) its
  points: uniform and subspace readings normalise every point and label it (``C P`` dot products and compares),
  clustered ones form ``c_k + tau z / sqrt(d)`` and normalise it (the label is the drawn class), the class-balanced
  reading draws, normalises and labels the candidates it scans (:func:`balanced_scan`: the mean over contexts of the
  task's distribution, 687 of a pool of 3216 at n = 200, C = d = 5); per configuration (``D = d + C``) the forward
  pass per point with ``y`` one-hot (score ``2 d + 1``, softmax 18, the weighted sums ``2 d + 1``) and twice that for
  the backward pass.
* Bytes: what must cross memory at the least. The tasks need not: a task is drawn, labelled and consumed while it
  is in cache (what a fused sampler does), so the floor's bytes are the parameters, their gradient and Adam's two
  moments, read and written once a step (7 x 4 bytes per parameter). Every stage here is therefore compute-bound
  at its floor; the table prints both terms.

**On a CUDA GPU** (``--device cuda``) the same stages train on the GPU through the PyTorch path (the only one
there), and the machine is measured on the GPU: its float32 throughput as cuBLAS's float32 matrix product with TF32
off (8192^3, the best of its repetitions; an FMA counts 2 FLOP, as above, and a large sgemm reaches close to the
chip's FMA peak) and its memory bandwidth as the triad over three float32 arrays of 1 GiB on the device. The work
model is the same: a fused kernel would keep each task in registers or shared memory, so the floor is the
arithmetic.

Stages (:data:`STAGES`) are the paper profile's heaviest; adding one is a line there (a function of the figure's
resolved configuration giving its sweep, and the work model of its paper). The step is measured at the paper's
batch: none of these steps exceeds a minute.

Usage:  python benchmarks/roofline.py [--stages NAME ...] [--backends auto torch] [--rounds 3] [--budget 12]
                                      [--threads N] [--device cpu|cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TRANSCENDENTAL = 15
ROOT = 4
PHILOX_BLOCK = 100
UNIFORM = PHILOX_BLOCK / 4 + 2
NORMAL = PHILOX_BLOCK / 4 + (3 * TRANSCENDENTAL + ROOT + 6) / 2      # Box-Muller pair: log, cos, sin, sqrt, 6 ops
#: FLOP per point of a label's part that does not depend on the configuration's L (affine and ReLU: the task's shape
#: of p; the cosines: cos(phase + L p) and its argument, shared by the configurations at one L), counted once per
#: distinct :func:`label_key` of a task's configurations ...
LABEL_SHARED = {"affine": 2, "relu": 5, "cosine": 2 + TRANSCENDENTAL, "cosine_centered": 2 + TRANSCENDENTAL,
                "lowrank_linear": 0, "lowrank_affine": 0, "lowrank_quadratic": 0,
                "lowrank_cosine": 2 + TRANSCENDENTAL}
#: ... and the part each configuration adds (its L, the centred cosine's offset; the noise adds 2 more)
LABEL_OWN = {"affine": 1, "relu": 1, "cosine": 0, "cosine_centered": 1, "lowrank_linear": 1, "lowrank_affine": 2,
             "lowrank_quadratic": 2, "lowrank_cosine": 0}


def label_key(c: dict) -> tuple:
    """What a configuration's label shares with the other configurations on the same task (:data:`LABEL_SHARED`)."""
    fc = c["function_class"]
    if fc in ("cosine", "cosine_centered"):
        return ("cos", float(c["L"]))
    if fc == "lowrank_cosine":
        return (fc, float(c["L"]))
    return (fc,)


ADAM_BYTES_PER_PARAM = 7 * 4


@dataclass(frozen=True)
class Work:
    flop: float
    bytes: float


def regression_work(sw) -> Work:
    """FLOP and bytes of one step of a paper-1 sweep (``softmax_icl.training.Sweep``; parameterisations M, KQ)."""
    if sw.param == "full":
        raise ValueError("the work model covers the M and KQ parameterisations (the readout of M), not 'full'")
    d, k, B = sw.d, sw.k, sw.batch_size
    lowrank = any(c.startswith("lowrank_") for c in sw.classes)
    configs = sw.configs()
    flop = 0.0
    for n in sorted({c["n"] for c in configs}):
        at_n = [c for c in configs if c["n"] == n]
        normals = n * d + 2 * d + (k if lowrank else 0) + n
        per_task = normals * NORMAL + 4 * UNIFORM + (n + 1) * (3 * d + 4 + 2 * d)
        point = (4 * d + 23) if sw.model == "softmax" else (4 * d + 3)              # readout forward + backward
        for seed in {c["seed"] for c in at_n}:                                       # a row: one task per batch slot
            mine = [c for c in at_n if c["seed"] == seed]
            shared = {label_key(c): LABEL_SHARED[c["function_class"]] for c in mine}
            flop += B * (per_task + (n + 1) * sum(shared.values()))
        for c in at_n:                  # q = M x_q and the gradient's outer product, the loss, labels, readout
            flop += B * (4 * d * d + 3 + (n + 1) * (2 + LABEL_OWN[c["function_class"]]) + n * point)
    params = len(configs) * d * d * (2 if sw.param == "KQ" else 1)
    return Work(flop, params * ADAM_BYTES_PER_PARAM)


@functools.lru_cache(maxsize=None)
def balanced_scan(n: int, C: int, d: int, trials: int = 2048, seed: int = 0) -> float:
    """The mean number of candidates a class-balanced context of ``n`` points (and its query) scans: candidates are
    read in pool order until every class has as many as the context's points of that class take (at most the whole
    pool, ``16 (n + 1)``; :mod:`softmax_icl.classification.tasks`). Monte Carlo over ``trials`` contexts of the task's
    distribution (NumPy's generator, ``seed``): classes uniform, C class vectors and the candidates uniform on the
    sphere of dimension ``d``, a candidate's class the argmax of its products with the class vectors. The mean has a
    heavy tail (a class whose cell is small scans far): over 512 contexts, seeds 0 and 1 gave 669 and 732 at
    n = 200, C = d = 5; over 2048 (the default), seeds 0, 1 and 2 gave 687, 679 and 671."""
    import numpy as np
    from softmax_icl.classification.tasks import pool_size
    rng = np.random.default_rng(seed)
    m, R = n + 1, pool_size(n)
    total = 0
    for t0 in range(0, trials, 256):
        t = min(256, trials - t0)
        protos = rng.standard_normal((t, C, d), dtype=np.float32)
        need = (rng.integers(0, C, (t, m))[..., None] == np.arange(C)).sum(1)                # (t, C)
        cls = (rng.standard_normal((t, R, d), dtype=np.float32) @ protos.transpose(0, 2, 1)).argmax(-1)
        have = np.cumsum(cls[..., None] == np.arange(C), axis=1) >= need[:, None]           # (t, R, C)
        done = have.all(-1)
        total += np.where(done.any(-1), done.argmax(-1) + 1, R).sum()
    return float(total / trials)


def classification_work(sw) -> Work:
    """FLOP and bytes of one step of a paper-2 sweep (``softmax_icl.classification.models.ClsSweep``)."""
    configs = sw.configs()
    n, B = max(sw.n), sw.batch_size
    flop = 0.0
    seeds = {c["seed"] for c in configs}
    for s in seeds:
        mine = [c for c in configs if c["seed"] == s]
        C, P, d = max(c["C"] for c in mine), max(c["P"] for c in mine), max(c["d"] for c in mine)
        normals = C * P * d + ((n + 1) * d if any(c["reading"] != "balanced" for c in mine) else 0)
        flop += B * (normals * NORMAL + (n + 2) * UNIFORM)
        for task in {(c["reading"], c["P"], c["tau"], c["k"], c["C"], c["d"]) for c in mine}:
            reading, P_, _, k_, C_, d_ = task
            norm = 3 * d_ + 4
            if reading == "balanced":          # the scanned candidates: drawn, normalised, labelled (first vectors)
                m = balanced_scan(n, C_, d_)
                flop += B * m * (d_ * NORMAL + norm + C_ * (2 * d_ + 1))
            elif reading == "clustered":       # x = c_k + tau z / sqrt(d), normalised; the label is the drawn class
                flop += B * (n + 1) * (2 * d_ + norm)
            else:                              # uniform, subspace: normalised, labelled by the argmax over prototypes
                dp = k_ if reading == "subspace" and 0 < k_ < d_ else d_
                flop += B * (n + 1) * (norm + C_ * P_ * (2 * dp + 1))
            flop += B * C_ * P_ * (3 * d_ + 4)                                        # the prototypes, normalised
    for c in configs:                  # y is one-hot: a score is x . u_x + u_y[label], a sum of h adds a_i to its class
        d_ = c["d"]
        forward = n * ((2 * d_ + 1) + 18 + (2 * d_ + 1)) + 2 * (d_ + c["C"]) * d_ + 2 * c["C"] * (d_ + c["C"]) \
            + c["C"] * TRANSCENDENTAL
        flop += B * 3 * forward
    D = sw.dims[1] + sw.dims[3]
    return Work(flop, len(configs) * 3 * D * D * ADAM_BYTES_PER_PARAM)


@dataclass(frozen=True)
class Stage:
    figure: str
    tag: str
    sweep: Callable[[dict], object]          # the figure's resolved configuration -> the stage's sweep
    work: Callable[[object], Work]

    @property
    def name(self) -> str:
        return f"{self.figure}/{self.tag}"


def _norm(key):
    def sweep(cfg):
        from softmax_icl.figures.norm_scaling import sweeps
        return sweeps.sweeps(cfg)[key]
    return sweep


def _window(cfg):
    from softmax_icl.figures.window_adaptation import sweeps
    return sweeps.sweep_for(cfg, "softmax")


def _generalization_theory(d):
    def sweep(cfg):
        from softmax_icl.figures.generalization import sweeps
        return sweeps.theory_sweep(cfg, d, dict(sweeps.theory_dims(cfg))[d])
    return sweep


def _classification(key):
    def sweep(cfg):
        from softmax_icl.figures.classification_kernel_gd import sweeps
        return sweeps.sweeps(cfg)[key]
    return sweep


STAGES = [
    Stage("norm_scaling", "train_t34_d8", _norm("t34_d8"), regression_work),
    Stage("norm_scaling", "train_n", _norm("n"), regression_work),
    Stage("window_adaptation", "train_softmax", _window, regression_work),
    Stage("generalization", "train_theory_d5", _generalization_theory(5), regression_work),
    Stage("classification_kernel_gd", "train_readings_n200", _classification("readings_n200"), classification_work),
]
BY_NAME = {s.name: s for s in STAGES} | {s.tag: s for s in STAGES}


def stage_sweep(stage: Stage, profile: str = "paper"):
    from softmax_icl.figures import FIGURES
    return stage.sweep(FIGURES.resolve(stage.figure, profile))


# -- the machine ------------------------------------------------------------------------------------------------

FMA_SOURCE = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* The widest float vectors the flags allow (GCC / Clang vector extension), and enough independent accumulators to
 * keep every FMA port busy: two ports of four cycles' latency need eight chains in flight; sixteen (ten where there
 * are sixteen registers) leave room. A loop over floats would be vectorised at the compiler's preferred width, which
 * on CPUs with AVX-512 is often 256 bits: half their peak. */
#if defined(__AVX512F__)
#define VB 64
#define ACC 16
#elif defined(__AVX__)
#define VB 32
#define ACC 10
#elif defined(__aarch64__)
#define VB 16
#define ACC 16
#else
#define VB 16
#define ACC 10
#endif
typedef float vec __attribute__((vector_size(VB)));
#define LANES (VB / 4)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static volatile float sink;
static void *run(void *arg) {
    vec acc[ACC];
    for (int k = 0; k < ACC; k++) acc[k] = (vec){0} + 1e-3f * k;
    const vec a = (vec){0} + 0.999999f, b = (vec){0} + 1e-7f;
    const long iters = *(long *)arg;
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int k = 0; k < ACC; k++) acc[k] = acc[k] * a + b;
    }
    float s = 0;
    for (int k = 0; k < ACC; k++)
        for (int l = 0; l < LANES; l++) s += acc[k][l];
    sink = s;
    return NULL;
}
int main(int argc, char **argv) {
    int threads = atoi(argv[1]); long iters = atol(argv[2]) * 64 / (ACC * LANES);
    pthread_t th[64];
    double t = now();
    for (int i = 1; i < threads; i++) pthread_create(&th[i], NULL, run, &iters);
    run(&iters);
    for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
    printf("%.6e %d\n", 2.0 * ACC * LANES * (double)iters * threads / (now() - t), 8 * VB);
    return 0;
}
"""


def build_fma(tmp: Path) -> Path | None:
    """The FMA loop compiled with the fused kernel's flags (None without a C compiler)."""
    from softmax_icl.engine import common
    from softmax_icl.engine import regression as kernels
    cc = common._compiler()
    if cc is None:
        return None
    src, exe = tmp / "fma.c", tmp / "fma"
    src.write_text(FMA_SOURCE)
    for flags in common.FLAG_SETS:
        if subprocess.run([cc, *flags, str(src), "-o", str(exe), "-lpthread"], capture_output=True).returncode == 0:
            return exe
    return None


def flop_rate(exe: Path | None, threads: int, reps: int = 5) -> tuple[float, str]:
    """Best float32 FLOP/s of ``reps`` runs (FMA loop; torch's sgemm where there is no compiler)."""
    if exe is not None:
        runs = [subprocess.run([str(exe), str(threads), "80000000"], capture_output=True, text=True,
                               check=True).stdout.split() for _ in range(reps)]
        return max(float(r[0]) for r in runs), f"register FMA loop (C, {runs[0][1]}-bit vectors)"
    import torch
    a = torch.randn(2048, 2048)
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        a @ a
        best = max(best, 2 * 2048**3 / (time.perf_counter() - t))
    return best, "torch sgemm (no C compiler)"


def processor(device: str = "cpu") -> str:
    """What the stages ran on, in words: the CPU's model name with its family and model numbers (``/proc/cpuinfo``;
    e.g. an AMD EPYC of family 25, model 17, a Zen 4, whose 512-bit FMAs are two 256-bit halves) or the GPU's name.
    The floors are this machine's: a table measured on one CPU says nothing of another's ratios."""
    if device != "cpu":
        import torch
        return torch.cuda.get_device_name()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        import platform
        return platform.processor() or platform.machine()
    first = text.split("\n\n")[0]
    field = dict((k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in first.splitlines()) if _)
    name = field.get("model name") or field.get("CPU part") or "unknown CPU"
    if "cpu family" in field and "model" in field:
        name += f" (family {field['cpu family']}, model {field['model']})"
    return name


def bandwidth(device: str = "cpu", reps: int = 5) -> float:
    """Best STREAM-triad bandwidth (bytes/s) over three float32 arrays on ``device`` (256 MB each on the CPU,
    1 GiB on a GPU), waiting for the device around each timed triad."""
    import torch
    n = 1 << (26 if device == "cpu" else 28)
    b, c, a = (torch.rand(n, device=device), torch.rand(n, device=device), torch.empty(n, device=device))
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    torch.add(b, c, alpha=1.5, out=a)
    sync()
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        torch.add(b, c, alpha=1.5, out=a)
        sync()
        best = max(best, 12 * n / (time.perf_counter() - t))
    return best


def gpu_flop_rate(reps: int = 5) -> tuple[float, str]:
    """Best float32 FLOP/s of ``reps`` cuBLAS sgemms (8192^3, TF32 off) on the current CUDA device."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 8192
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    a @ b
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        best = max(best, 2 * n**3 / (time.perf_counter() - t))
    return best, f"cuBLAS sgemm, TF32 off ({torch.cuda.get_device_name()})"


# -- one stage's step, in a fresh process -------------------------------------------------------------------------

def child(stage_name: str, budget: float, device: str = "cpu") -> dict:
    """Time the stage's step through its trainer on ``device`` (run in a process whose SOFTMAX_ICL_KERNEL is
    set)."""
    import torch

    from softmax_icl.engine import common
    from softmax_icl.engine import regression as kernels
    stage = BY_NAME[stage_name]
    sw = stage_sweep(stage)
    if stage.figure == "classification_kernel_gd":
        from softmax_icl.classification.models import train_cls_sweep as train
    else:
        from softmax_icl.training import train_sweep as train

    graph = []

    def run(steps: int) -> float:
        res = train(dataclasses.replace(sw, steps=steps, log_every=max(1, sw.log_every)), device, progress=False)
        graph.append(bool(res.timings.get("cuda_graph")))
        return res.timings["train_seconds"] / steps

    first = run(1)                                                   # warm-up: kernel build, first-touch pages
    if device == "cpu":
        steps = max(2, min(50, int(budget / max(first, 1e-3))))
        per_step = run(steps)
    else:
        # On the GPU a run starts with eager warm-up steps and the capture of its graph: the step is the difference
        # of two runs, of k and 2k steps, per extra step (what the later steps of a long stage cost).
        steps = max(8, min(400, int(budget / 3 / max(first, 1e-4))))
        per_step = (2 * steps * run(2 * steps) - steps * run(steps)) / steps
    out = {"seconds_per_step": per_step, "steps": steps, "warmup_step": first,
           "backend": kernels.backend() if device == "cpu" else ("torch, CUDA graph" if graph[-1] else "torch, eager"),
           "threads": torch.get_num_threads()}
    if device != "cpu":
        out["peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def run_child(stage: Stage, backend: str, budget: float, threads: int, device: str = "cpu") -> dict:
    """``backend``: ``auto``, ``torch`` or (a GPU) ``torch-eager``, the PyTorch path without CUDA graphs."""
    env = dict(os.environ, SOFTMAX_ICL_KERNEL="torch" if backend == "torch-eager" else backend,
               SOFTMAX_ICL_PROGRESS="0", OMP_NUM_THREADS=str(threads),
               SOFTMAX_ICL_CUDA_GRAPH="0" if backend == "torch-eager" else "1")
    out = subprocess.run([sys.executable, __file__, "--child", stage.name, "--budget", str(budget),
                          "--device", device], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{stage.name} ({backend}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stages", nargs="+", default=[s.name for s in STAGES], help="stages (figure/tag or tag)")
    ap.add_argument("--backends", nargs="+", default=None, choices=["auto", "torch", "torch-eager"],
                    help="default: auto torch on the CPU; torch torch-eager on a GPU (with and without CUDA graphs)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=12.0, help="seconds of timed steps per stage, backend and round")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where the stages train and the machine is measured (cuda: the PyTorch path only)")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--child", metavar="STAGE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.budget, args.device)))
        return 0
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            ap.error("--device cuda: no CUDA GPU is visible (torch.cuda.is_available() is False)")
        # off the CPU every stage takes the PyTorch path: its step replayed as a CUDA graph, and eager
        args.backends = [b for b in (args.backends or ["torch", "torch-eager"]) if b != "auto"] or ["torch"]
    elif args.backends is None:
        args.backends = ["auto", "torch"]
    elif "torch-eager" in args.backends:
        ap.error("--backends torch-eager is a variant of the GPU's step; use --device cuda")
    unknown = [s for s in args.stages if s not in BY_NAME]
    if unknown:
        ap.error(f"unknown stage(s) {unknown}; allowed: {', '.join(s.name for s in STAGES)}")
    stages = [BY_NAME[s] for s in args.stages]
    import torch
    torch.set_num_threads(args.threads)
    works = {s.name: s.work(stage_sweep(s)) for s in stages}
    times: dict[tuple[str, str], list[float]] = {(s.name, b): [] for s in stages for b in args.backends}
    info: dict[tuple[str, str], dict] = {}
    flops, bws = [], []
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_fma(Path(tmp)) if args.device == "cpu" else None
        for r in range(args.rounds):
            rate, how = flop_rate(exe, args.threads) if args.device == "cpu" else gpu_flop_rate()
            flops.append(rate)
            bws.append(bandwidth(args.device))
            print(f"round {r + 1}/{args.rounds}: {rate / 1e9:.1f} GFLOP/s ({how}), {bws[-1] / 1e9:.1f} GB/s",
                  flush=True)
            pairs = [(s, b) for s in stages for b in args.backends]
            pairs = pairs[r % len(pairs):] + pairs[:r % len(pairs)]           # rotate the order between rounds
            for s, b in pairs:
                res = run_child(s, b, args.budget, args.threads, args.device)
                times[(s.name, b)].append(res["seconds_per_step"])
                info[(s.name, b)] = res
                print(f"  {s.name:<45} {b:<6} {res['seconds_per_step']:.4f} s/step ({res['steps']} steps; "
                      f"{res['backend']})", flush=True)
    flop_s, bw = max(flops), max(bws)
    from softmax_icl.book.provenance import git_revision
    cpu, code = processor(args.device), git_revision()
    print(f"\nmachine: {args.device} ({cpu}), code {code}, {args.threads} threads, {flop_s / 1e9:.1f} GFLOP/s ({how}; "
          f"best of {len(flops)} rounds, "
          f"range {min(flops) / 1e9:.1f}-{flop_s / 1e9:.1f}), {bw / 1e9:.1f} GB/s triad "
          f"(range {min(bws) / 1e9:.1f}-{bw / 1e9:.1f})")
    head = f"{'stage':<45} {'GFLOP':>7} {'MB':>6} {'floor ms':>9}"
    for b in args.backends:
        head += f" {b + ' ms':>10} {'(range)':>13} {'ratio':>6}"
    print(head)
    report = {"machine": {"device": args.device, "processor": cpu, "code": code, "threads": args.threads,
                          "flop_per_s": flop_s, "bytes_per_s": bw,
                          "flop_source": how,
                          "flop_per_s_rounds": flops, "bytes_per_s_rounds": bws}, "stages": {}}
    for s in stages:
        w = works[s.name]
        floor = max(w.flop / flop_s, w.bytes / bw)
        line = f"{s.name:<45} {w.flop / 1e9:>7.2f} {w.bytes / 1e6:>6.2f} {1e3 * floor:>9.3f}"
        entry = {"flop": w.flop, "bytes": w.bytes, "floor_s": floor, "by_backend": {}}
        for b in args.backends:
            ts = times[(s.name, b)]
            med = statistics.median(ts)
            line += f" {1e3 * med:>10.1f} {f'({1e3 * min(ts):.0f}-{1e3 * max(ts):.0f})':>13} {med / floor:>6.2f}"
            entry["by_backend"][b] = {"measured_s": med, "ratio": med / floor, "rounds": ts,
                                      "steps": info[(s.name, b)]["steps"], "implementation": info[(s.name, b)]["backend"],
                                      "peak_memory_mb": info[(s.name, b)].get("peak_memory_mb")}
        main_b = args.backends[0]
        entry.update(measured_s=entry["by_backend"][main_b]["measured_s"], ratio=entry["by_backend"][main_b]["ratio"],
                     backend=main_b)
        report["stages"][s.name] = entry
        print(line)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import results_page
    out = (Path(args.json) if args.json else results_page.RESULTS
           / f"roofline_{results_page.device_slug(args.device, cpu)}.json")
    if args.json or set(args.stages) == set(BY_NAME):
        out.write_text(json.dumps(report, indent=1))
        print(f"wrote {out}")
        if out.resolve().parent == results_page.RESULTS.resolve():
            results_page.main([])
    else:
        print("not saved (some stages only): --json PATH saves them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
