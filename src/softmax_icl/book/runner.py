"""Execute figure notebooks through papermill without ever losing a good notebook.

The notebook is executed into a temporary file next to its destination; only when every cell ran
does ``os.replace`` move it into place. A failed run leaves the previous notebook untouched and
keeps the partial execution as ``<name>.failed.ipynb`` for inspection; so does a run stopped by Ctrl-C or
by SIGTERM (``kill``, a scheduler's time limit), which ends the run like Ctrl-C. The cell papermill injects
with the parameters is tagged ``remove-cell`` so the book does not show it.

Progress: the kernel runs with training bars off, so no bar lands in the stored outputs; with
``progress_bar=True`` (the CLI) the training loops report through a status file instead
(:class:`softmax_icl.base.Progress`) and a second bar under papermill's cell bar shows them here; where stderr is
not a terminal (a log file) plain lines take the bars' place. The kernel's own stderr (its start-up and shut-down
messages, not what its cells print, which is in the notebook) goes to a log that a failure quotes when the kernel
died.

Transport: on POSIX systems the kernel talks to this process over Unix-domain sockets (``ipc``) in a private
temporary folder of the run, not over TCP ports on localhost: nothing listens on the network, and ipykernel (>= 7)
has no reason to warn on every run that its TCP channels are unencrypted. Elsewhere jupyter_client's default (TCP)
is kept.
"""

from __future__ import annotations

import logging
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
OUTPUT_DIR_ENV = "SOFTMAX_ICL_OUTPUT_DIR"

HIDE_TAG = "remove-cell"


def kernel_manager_class(socket_dir: str | None, log=None):
    """The kernel manager papermill starts a kernel with: jupyter_client's own, over ``ipc`` with its sockets in
    ``socket_dir`` (a private folder of this run: runs at once never share one) where the platform has Unix-domain
    sockets and a folder is given; else jupyter_client's default, TCP. ``log`` (an open file) takes the kernel
    process's own stderr (its start-up and shut-down messages: a kernel stopped in the middle of a cell prints a
    traceback there, which is not this run's; what its cells print is in the notebook)."""
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

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if log is not None:
                kw["stderr"] = log
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return IPCKernelManager


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


class NotebookFailed(RuntimeError):
    """Execution of a notebook raised; the destination notebook was left as it was."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's time limit): ends a run the way Ctrl-C does, and says which it was."""


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
        logging.disable(logging.CRITICAL)   # the client's words on the kernel it shuts down: the stop is said once
        raise Terminated(f"stopped by signal {signum} (SIGTERM)")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def is_terminal(stream=None) -> bool:
    """Whether ``stream`` (default stderr, where progress goes) is a terminal: bars there, plain lines elsewhere (a
    log file would fill with the bars' escape codes)."""
    import sys

    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


#: Seconds between two plain progress lines of one training loop (when the output is not a terminal).
PLAIN_EVERY_S = 30.0


class _TrainingBar(threading.Thread):
    """Follows the status file the kernel's training loops write and shows their progress here: a bar in a terminal,
    else a plain line when a loop starts, every :data:`PLAIN_EVERY_S` seconds and when it ends. A status with no step
    count (``total`` 0) is a message (the engines being compiled): one line."""

    def __init__(self, path: Path, plain: bool = False):
        super().__init__(daemon=True)
        self.path, self.done, self.plain = path, threading.Event(), plain
        self.bar, self.current = None, None
        self.step, self.said, self.started = 0, 0.0, 0.0

    def _say(self, text: str) -> None:
        import sys

        if self.bar is not None:
            from tqdm import tqdm
            tqdm.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def _show(self) -> None:
        import time

        try:
            desc, step, total = self.path.read_text().split("\t")
            step, total = int(step), int(total)
        except (OSError, ValueError):
            return
        new = self.current != (desc, total) or step < self.step
        if total == 0:                                   # a message, not a loop
            if new:
                self._say(desc)
                self.current, self.step = (desc, total), step
            return
        now = time.monotonic()
        if self.plain:
            if new:
                self.current, self.started, self.said = (desc, total), now, now
                self._say(f"  {desc}: {step}/{total}")
            elif step != self.step and (step == total or now - self.said >= PLAIN_EVERY_S):
                self.said = now
                self._say(f"  {desc}: {step}/{total}" + (f" ({now - self.started:.0f} s)" if step == total else ""))
            self.step = step
            return
        if new:                                          # a new loop began
            from tqdm import tqdm

            if self.bar is not None:
                self.bar.close()
            self.bar, self.current = tqdm(total=total, desc=f"  {desc}", position=1, leave=False), (desc, total)
        self.step = step
        self.bar.update(step - self.bar.n)      # increments, so tqdm estimates the rate and the time left

    def run(self) -> None:
        while not self.done.wait(0.5):
            self._show()
        self._show()
        if self.bar is not None:
            self.bar.close()


@contextmanager
def _training_progress(enabled: bool, plain: bool = False):
    """Environment for the kernel: where to write training progress (only when it is shown here)."""
    if not enabled:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="softmax-icl-progress-") as tmp:
        follower = _TrainingBar(Path(tmp) / "status", plain=plain)
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
    """Run ``source`` with ``parameters`` and atomically place the executed notebook at ``destination``.

    ``progress_bar``: show progress here (stderr): papermill's cell bar and the training loops' bar in a terminal,
    plain lines of the training loops' progress elsewhere (:func:`is_terminal`)."""
    import papermill

    source, destination = Path(source), Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.stem}.running.ipynb")
    failed = destination.with_name(f"{destination.stem}.failed.ipynb")
    bars = progress_bar and is_terminal()
    output_dir = (env or {}).get(OUTPUT_DIR_ENV)
    # the kernel inherits this environment: no progress bars inside stored outputs (training progress, if shown,
    # goes through a status file to a bar or plain lines in this process)
    with _training_progress(progress_bar, plain=not bars) as progress_env, _env(**{PROGRESS_ENV: "0"},
                                                                                 **progress_env, **(env or {})):
        died = ""       # a kernel that died (not a cell that raised): the end of its own stderr
        try:
            with _terminate_like_interrupt(), tempfile.TemporaryDirectory(prefix="softmax-icl-kernel-") as sockets:
                log_path = Path(sockets) / "kernel-stderr.log"
                try:
                    with open(log_path, "w") as log:
                        papermill.execute_notebook(str(source), str(tmp), parameters=parameters,
                                                   kernel_name=kernel_name, cwd=str(cwd or source.parent),
                                                   progress_bar=bars,
                                                   kernel_manager_class=kernel_manager_class(sockets, log))
                except Exception as exc:
                    if type(exc).__name__ != "PapermillExecutionError":
                        died = _tail(log_path)
                    raise
        except BaseException as exc:
            kept = tmp.exists()
            if kept:
                os.replace(tmp, failed)
            if output_dir:                 # the kernel is gone: the figures it drew never join its record
                _discard_pending_figures(Path(output_dir))
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise NotebookFailed(f"{source.name} failed; {destination} was left unchanged"
                                 + (f"; the partial run is in {failed}" if kept else "") + f"\n{exc}"
                                 + (f"\nthe kernel's stderr ended with:\n{died}" if died else "")) from exc
    hide_injected_parameters(tmp)
    os.replace(tmp, destination)
    failed.unlink(missing_ok=True)
    return destination


def _discard_pending_figures(output_dir: Path) -> None:
    """Every pending figure folder in ``output_dir`` (:data:`softmax_icl.book.run.PENDING_FIGURES`, not imported:
    that module loads torch)."""
    import shutil

    for folder in output_dir.glob(".pending-figures-*"):
        shutil.rmtree(folder, ignore_errors=True)
