"""The bottom layer: what every other module may use, importing nothing from the package.

* environment variable names (one place, so the CLI, the runner and the kernel agree on them);
* where results go: the cache directory, and writes that never leave half a file (:func:`atomic_write_bytes`);
* seeds (:func:`derive_seed`) and devices (:func:`resolve_device`);
* the optimisation loop every batched trainer shares (:func:`optimise`, with :class:`Progress` for its bar).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

#: Where trained results are cached (default ``~/.cache/softmax_icl``).
CACHE_DIR_ENV = "SOFTMAX_ICL_CACHE_DIR"
#: Where a notebook run writes its record and figures when no ``output_dir`` is given.
OUTPUT_DIR_ENV = "SOFTMAX_ICL_OUTPUT_DIR"
#: ``0`` turns training progress bars off (the runner sets it for every kernel it starts).
PROGRESS_ENV = "SOFTMAX_ICL_PROGRESS"
#: A file where training loops write their progress (see :class:`Progress`).
PROGRESS_FILE_ENV = "SOFTMAX_ICL_PROGRESS_FILE"
#: ``auto`` (default: the fused CPU kernel where it builds) or ``torch``.
KERNEL_ENV = "SOFTMAX_ICL_KERNEL"
#: ``0`` runs every training step on a CUDA GPU eagerly instead of replaying it as a CUDA graph (the same numbers:
#: for benchmarks and debugging; see :func:`optimise`).
CUDA_GRAPH_ENV = "SOFTMAX_ICL_CUDA_GRAPH"
#: Eager steps before a CUDA step is captured (they build the optimiser's state and the libraries' workspaces).
GRAPH_WARMUP = 3


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "softmax_icl")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        # mkstemp makes the file private (0600); give it the mode any new file gets here (0666 less the umask),
        # so records, pages and a result cache on a shared path are readable like any other file
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def derive_seed(*parts: int) -> int:
    """A 63-bit seed derived from integers (numpy SeedSequence), stable across platforms."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, dtype=np.uint32).astype(
        np.uint64).dot(np.array([1, 2**31], dtype=np.uint64)))


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else CPU; anything else is passed to torch."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available; use 'auto' or 'cpu'")
    return dev


def progress_enabled(progress) -> bool:
    """Progress bars: on when asked, off when asked; ``None`` follows SOFTMAX_ICL_PROGRESS (default on)."""
    if progress is not None:
        return bool(progress)
    return os.environ.get(PROGRESS_ENV, "1") not in ("0", "false", "no", "")


def _bars_fit() -> bool:
    """Whether a tqdm bar can be drawn: in a terminal, or a notebook (which draws the bar's carriage returns); not
    in a log file, which would fill with them."""
    if type(sys.stderr).__module__.startswith("ipykernel"):            # a notebook kernel's output
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


#: Seconds between two plain progress lines (:class:`Progress` where no bar can be drawn).
PLAIN_EVERY_S = 30.0


class Progress:
    """Progress of a training loop, where someone can see it but never inside a notebook's stored outputs.

    A tqdm bar when bars are on (:func:`progress_enabled`: interactive use) and the output can draw one, else plain
    lines on stderr (when the loop starts, every :data:`PLAIN_EVERY_S` seconds, when it ends); and a one-line status
    ``desc<TAB>step<TAB>total`` in the file named by ``$SOFTMAX_ICL_PROGRESS_FILE`` when that is set: the notebook
    runner sets it and shows the progress in the terminal that executes the notebook
    (:mod:`softmax_icl.book.runner`).
    """

    def __init__(self, total: int, desc: str, progress=None):
        self.total, self.desc, self.bar, self._last = int(total), desc, None, 0.0
        self.plain: float | None = None            # when the last plain line was written (plain lines only)
        if progress_enabled(progress):
            if _bars_fit():
                from tqdm import tqdm
                self.bar = tqdm(total=total, desc=desc, leave=False)
            else:
                self._started = self.plain = time.monotonic()
                print(f"{desc}: 0/{self.total}", file=sys.stderr, flush=True)
        self.path = os.environ.get(PROGRESS_FILE_ENV) or None
        self._write(0)

    def _write(self, step: int) -> None:
        if self.path is None:
            return
        try:
            atomic_write_bytes(Path(self.path), f"{self.desc}\t{step}\t{self.total}\n".encode())
        except OSError:          # progress must never stop training
            self.path = None
        self._last = time.monotonic()

    def update(self, step: int) -> None:
        """Step ``step`` (1-based) is done."""
        if self.bar is not None:
            self.bar.update(1)
        if self.plain is not None and (step == self.total or time.monotonic() - self.plain >= PLAIN_EVERY_S):
            self.plain = time.monotonic()
            print(f"{self.desc}: {step}/{self.total}"
                  + (f" ({self.plain - self._started:.0f} s)" if step == self.total else ""), file=sys.stderr,
                  flush=True)
        if self.path is not None and (step == self.total or time.monotonic() - self._last >= 0.5):
            self._write(step)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def adam(params: list[torch.Tensor], lr: float, device_step: bool = False) -> torch.optim.Adam:
    """Adam over stacked parameters.

    On the CPU PyTorch's default implementation (for a handful of small stacked tensors its per-step cost is less
    than half the fused one's). With ``device_step`` (a CUDA run that :func:`optimise` captures as a graph) the
    *capturable* one, which keeps its step count on the device, and, when ``lr`` is a tensor, reads the learning
    rate from it (a schedule then writes the tensor instead of the optimiser's float).
    """
    return torch.optim.Adam(params, lr=lr, capturable=True) if device_step else torch.optim.Adam(params, lr=lr)


def cuda_graphs_enabled() -> bool:
    """Whether :func:`optimise` replays CUDA steps as graphs (``SOFTMAX_ICL_CUDA_GRAPH``, default on)."""
    return os.environ.get(CUDA_GRAPH_ENV, "1") not in ("0", "false", "no", "")


def optimise(params: list[torch.Tensor], step_loss: Callable[[], torch.Tensor], steps: int, lr: float,
             log_every: int, snapshot: Callable[[], dict], lr_factor: Callable[[int], float] | None = None,
             progress=None, desc: str = "training", step_tensor: torch.Tensor | None = None,
             update: Callable[[float], torch.Tensor] | None = None) -> tuple[dict, float]:
    """The optimisation loop every batched trainer shares: Adam over stacked parameters.

    ``step_loss()`` samples a fresh batch and returns the per-configuration loss (C,); their *sum* is
    minimised, so no configuration's gradient depends on how many others share the program.
    ``snapshot()`` returns tensors (or numpy arrays) logged at step 0, every ``log_every`` steps and at the
    end, together with each configuration's mean loss since the previous log. ``lr_factor(step)`` scales
    the learning rate of step ``step`` (1-based). Returns the history (``steps``, ``loss``, and the
    snapshot keys, each stacked over log points, as numpy arrays) and the wall time in seconds.

    ``step_tensor``: a 0-dim int64 tensor on the parameters' device from which ``step_loss`` reads the step it draws
    (instead of counting steps itself); the loop writes 1, 2, ... into it before each step. On a CUDA GPU such a step
    is a fixed sequence of kernels, and the loop runs it as one: after :data:`GRAPH_WARMUP` eager steps it captures
    the next step (draw, loss, backward, Adam, running loss) as a CUDA graph and replays the graph for every later
    step, so a step costs one launch instead of hundreds (``SOFTMAX_ICL_CUDA_GRAPH=0`` keeps every step eager). Eager
    and replayed steps run the same kernels on the same numbers; Adam is PyTorch's capturable one on the GPU
    (:func:`adam`) either way.

    The loop never waits for the device: the running loss and the snapshots stay where the parameters
    are (a snapshot tensor is copied there, since the optimiser updates parameters in place) and come to
    the host once, after the last step -- one copy per history key, instead of one per key and log point.
    Nothing in the loop reads a tensor's value from Python. (PyTorch's Adam keeps its step count as a
    host-side scalar by design, so reading it is no device sync.) A ``snapshot`` that returns numpy
    arrays still works, but then waits for the device at every log point.

    ``update(lr)``, where given, replaces ``step_loss``, the backward pass and Adam: it runs a whole step at learning
    rate ``lr`` (the loss, its gradient, and an update that is Adam's to float rounding, all in a compiled engine:
    :class:`softmax_icl.engine.common.Update`) and returns the per-configuration loss. On the CPU.
    """
    device_step = step_tensor is not None and step_tensor.device.type == "cuda"
    if update is not None and device_step:
        raise ValueError("update= runs a step on the CPU; a CUDA step_tensor has no compiled update")
    lr_value = torch.tensor(float(lr), device=step_tensor.device) if device_step and lr_factor is not None else lr
    opt = adam(params, lr_value, device_step) if update is None else None
    lr_now = lr
    hist: dict[str, list] = {"steps": [], "loss": []}
    running, since = None, 0

    def log(step):
        nonlocal running, since
        with torch.no_grad():
            for k, v in snapshot().items():
                hist.setdefault(k, []).append(v.detach().clone() if isinstance(v, torch.Tensor) else v)
        hist["loss"].append(None if running is None else running / max(since, 1))
        hist["steps"].append(step)
        if running is not None:
            running.zero_()
        since = 0

    def prepare(step):
        """What the host decides about step ``step`` before it runs: its number and its learning rate."""
        nonlocal lr_now
        if step_tensor is not None:
            step_tensor.fill_(step)
        if lr_factor is not None:
            lr_now = lr * lr_factor(step)
            for group in opt.param_groups if opt is not None else ():
                if isinstance(group["lr"], torch.Tensor):
                    group["lr"].fill_(lr * lr_factor(step))
                else:
                    group["lr"] = lr * lr_factor(step)

    def eager():
        nonlocal running
        if update is not None:
            per_config = update(lr_now)
        else:
            per_config = step_loss()
            opt.zero_grad(set_to_none=True)
            per_config.sum().backward()
            opt.step()
        if running is None:
            running = per_config.detach().clone()
        else:
            running.add_(per_config.detach())

    def finish(step):
        nonlocal since
        since += 1
        if step % log_every == 0 or step == steps:
            log(step)
        bar.update(step)

    graph = None
    bar = Progress(steps, desc, progress)
    t0 = time.perf_counter()
    log(0)
    step = 0
    if device_step and cuda_graphs_enabled() and steps > GRAPH_WARMUP + 1:
        dev = step_tensor.device
        side = torch.cuda.Stream(dev)                  # warm-up off the default stream, as a capture wants it
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for step in range(1, GRAPH_WARMUP + 1):
                prepare(step)
                eager()
                finish(step)
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = _capture(opt, step_loss, lambda loss: running.add_(loss.detach()), dev)
    for step in range(step + 1, steps + 1):
        prepare(step)
        if graph is not None:
            graph.replay()
        else:
            eager()
        finish(step)
    bar.close()
    last = hist["loss"][-1]
    hist["loss"][0] = np.zeros(0) if last is None else torch.zeros_like(last)      # nothing was trained before step 0
    out = {k: _stack_to_host(v) for k, v in hist.items() if k != "steps"}
    seconds = time.perf_counter() - t0                       # includes the one wait for the device, at the end
    return {"steps": np.array(hist["steps"]), "graph": graph is not None, **out}, seconds


def _capture(opt: torch.optim.Optimizer, step_loss: Callable[[], torch.Tensor], accumulate: Callable,
             device: torch.device):
    """One training step captured as a CUDA graph (nothing runs: :func:`optimise` replays it), or None, with a
    warning, where the step cannot be captured (it then runs eagerly, with the same numbers)."""
    import warnings

    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)                # the gradients are made inside the graph, written at each replay
    try:
        with torch.cuda.graph(graph):
            per_config = step_loss()
            per_config.sum().backward()
            opt.step()
            accumulate(per_config)
    except RuntimeError as err:
        warnings.warn(f"a CUDA training step could not be captured as a graph ({str(err).splitlines()[0]}); "
                      f"it runs eagerly (same numbers, slower). {CUDA_GRAPH_ENV}=0 skips the attempt.", stacklevel=3)
        torch.cuda.synchronize(device)
        opt.zero_grad(set_to_none=True)
        return None
    return graph


def _stack_to_host(values: list) -> np.ndarray:
    """Log points stacked along a new leading axis: on the device for tensors, then one copy to the host."""
    if all(isinstance(v, torch.Tensor) for v in values):
        return torch.stack(values).cpu().numpy()
    return np.stack([v.cpu().numpy() if isinstance(v, torch.Tensor) else v for v in values])
