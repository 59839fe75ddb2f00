"""Execute figure notebooks through papermill without ever losing a good notebook.

The notebook is executed into a temporary file next to its destination; only when every cell ran
does ``os.replace`` move it into place. A failed run leaves the previous notebook untouched and
keeps the partial execution as ``<name>.failed.ipynb`` for inspection; so does a run stopped by Ctrl-C or
by SIGTERM (``kill``, a scheduler's time limit), which ends the run like Ctrl-C. The cell papermill injects
with the parameters is tagged ``remove-cell`` so the book does not show it.

Progress: the kernel runs with training bars off, so no bar lands in the stored outputs; with
``progress_bar=True`` (the CLI) the training loops report through a status file instead
(:class:`softmax_icl.base.Progress`) and a second bar under papermill's cell bar shows them here.

Transport: on POSIX systems the kernel talks to this process over Unix-domain sockets (``ipc``) in a private
temporary folder of the run, not over TCP ports on localhost: nothing listens on the network, and ipykernel (>= 7)
has no reason to warn on every run that its TCP channels are unencrypted. Elsewhere jupyter_client's default (TCP)
is kept.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

import nbformat

# the names of softmax_icl.base (not imported here: base loads torch, and a runner or dispatch process never needs it)
PROGRESS_ENV = "SOFTMAX_ICL_PROGRESS"
PROGRESS_FILE_ENV = "SOFTMAX_ICL_PROGRESS_FILE"

HIDE_TAG = "remove-cell"


def kernel_manager_class(socket_dir: str | None):
    """The kernel manager papermill starts a kernel with: jupyter_client's own, over ``ipc`` with its sockets in
    ``socket_dir`` (a private folder of this run: runs at once never share one) where the platform has Unix-domain
    sockets and a folder is given; else jupyter_client's default, TCP."""
    from jupyter_client import AsyncKernelManager

    if os.name != "posix" or socket_dir is None:
        return AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:                 # the sockets are <ip>-1 ... <ip>-5
            return os.path.join(socket_dir, "kernel")

    return IPCKernelManager


class NotebookFailed(RuntimeError):
    """Execution of a notebook raised; the destination notebook was left as it was."""


@contextmanager
def _env(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _terminate_like_interrupt():
    """While a notebook runs, SIGTERM raises KeyboardInterrupt in this (main) thread, so the run ends through the
    same path as Ctrl-C: papermill shuts the kernel down and the partial notebook is kept as ``.failed``. Outside
    the main thread (where Python cannot take signals) nothing changes."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"stopped by signal {signum} (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _TrainingBar(threading.Thread):
    """Follows the status file the kernel's training loops write and draws their progress in this terminal."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.done = path, threading.Event()
        self.bar, self.current = None, None

    def _show(self) -> None:
        try:
            desc, step, total = self.path.read_text().split("\t")
            step, total = int(step), int(total)
        except (OSError, ValueError):
            return
        if self.current != (desc, total) or (self.bar is not None and step < self.bar.n):   # a new loop began
            from tqdm import tqdm

            if self.bar is not None:
                self.bar.close()
            self.bar, self.current = tqdm(total=total, desc=f"  {desc}", position=1, leave=False), (desc, total)
        self.bar.update(step - self.bar.n)      # increments, so tqdm estimates the rate and the time left

    def run(self) -> None:
        while not self.done.wait(0.5):
            self._show()
        if self.bar is not None:
            self.bar.close()


@contextmanager
def _training_progress(enabled: bool):
    """Environment for the kernel: where to write training progress (only when it is shown here)."""
    if not enabled:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="softmax-icl-progress-") as tmp:
        follower = _TrainingBar(Path(tmp) / "status")
        follower.start()
        try:
            yield {PROGRESS_FILE_ENV: str(follower.path)}
        finally:
            follower.done.set()
            follower.join(timeout=5)


def hide_injected_parameters(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and HIDE_TAG not in tags:
            tags.append(HIDE_TAG)
    nbformat.write(nb, path)


def execute_notebook(source: Path, destination: Path, parameters: dict, cwd: Path | None = None,
                     kernel_name: str = "python3", progress_bar: bool = True, env: dict | None = None) -> Path:
    """Run ``source`` with ``parameters`` and atomically place the executed notebook at ``destination``."""
    import papermill

    source, destination = Path(source), Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.stem}.running.ipynb")
    failed = destination.with_name(f"{destination.stem}.failed.ipynb")
    # the kernel inherits this environment: no progress bars inside stored outputs (training progress, if shown,
    # goes through a status file to a bar in this process)
    with _training_progress(progress_bar) as progress_env, _env(**{PROGRESS_ENV: "0"}, **progress_env,
                                                                 **(env or {})):
        try:
            with _terminate_like_interrupt(), tempfile.TemporaryDirectory(prefix="softmax-icl-kernel-") as sockets:
                papermill.execute_notebook(str(source), str(tmp), parameters=parameters, kernel_name=kernel_name,
                                           cwd=str(cwd or source.parent), progress_bar=progress_bar,
                                           kernel_manager_class=kernel_manager_class(sockets))
        except BaseException as exc:
            if tmp.exists():
                os.replace(tmp, failed)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise NotebookFailed(f"{source.name} failed; {destination} was left unchanged; the partial run is "
                                 f"in {failed}\n{exc}") from exc
    hide_injected_parameters(tmp)
    os.replace(tmp, destination)
    failed.unlink(missing_ok=True)
    return destination
