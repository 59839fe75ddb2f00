"""What the command line shows in a terminal: the figure list within its width, a run's closing report, the one line
of a stopped run.

``softmax-icl list`` fits the terminal's width; a run ends with its checks' verdicts held against the book's; a run
stopped by Ctrl-C or SIGTERM ends with one line (exit status 130 or 143)."""

from __future__ import annotations

import shutil
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

from ..profiles import PROFILES, Figure, fmt
from .registry import resolve

#: The profile the book shows (the same as softmax_icl.book.provenance.BOOK_PROFILE, without importing torch).
BOOK_PROFILE = "default"


#: ``softmax-icl list``: the narrowest a value column gets before its values are elided, and the help column before
#: it moves to a line of its own.
LIST_VALUE_MIN, LIST_HELP_MIN = 12, 24


def _elide(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def list_lines(fig: Figure, width: int) -> list[str]:
    """The table of ``softmax-icl list`` for one figure, every line at most ``width`` columns: a parameter's name, its
    value per profile (elided with ``...`` where a column would not fit) and its meaning, wrapped."""
    rows = [["parameter", *PROFILES, "meaning"]]
    rows += [[pname, *(fmt(p.value(pr)) for pr in PROFILES), p.help] for pname, p in fig.params.items()]
    indent, gap = 4, 2
    name_w = max(len(r[0]) for r in rows) + gap
    value_w = [max(len(r[i]) for r in rows) + gap for i in range(1, len(PROFILES) + 1)]
    # narrow the widest value columns first, until the table leaves the help column LIST_HELP_MIN or the values are
    # at their narrowest
    while indent + name_w + sum(value_w) + LIST_HELP_MIN > width and max(value_w) > LIST_VALUE_MIN + gap:
        value_w[value_w.index(max(value_w))] -= 1
    help_at = indent + name_w + sum(value_w)
    help_w = width - help_at
    lines = []
    for r in rows:
        head = " " * indent + r[0].ljust(name_w) + "".join(_elide(v, w - gap).ljust(w) for v, w in zip(r[1:-1],
                                                                                                      value_w))
        if help_w >= LIST_HELP_MIN:
            wrapped = textwrap.wrap(r[-1], width=help_w) or [""]
            lines.append((head + wrapped[0]).rstrip())
            lines += [" " * help_at + more for more in wrapped[1:]]
        else:                           # too narrow: the meaning goes under the values
            lines.append(head.rstrip())
            lines += textwrap.wrap(r[-1], width=max(20, width - 2 * indent), initial_indent=" " * 2 * indent,
                                   subsequent_indent=" " * 2 * indent)
    return lines


def print_run_report(root: Path, fig: Figure, profile: str, given: dict, folder: Path) -> None:
    """The run's checks and verdicts (:func:`softmax_icl.book.compare.run_report`), held against the book's record
    and settings, then where the run is and how to compare it."""
    from .compare import read_record, run_report

    record = read_record(folder, fig.name)
    if record is None:
        print(f"{fig.name}: no record in {folder} (the notebook wrote none)", file=sys.stderr)
        return
    book = read_record(root / "book", fig.name)
    at_book = profile == BOOK_PROFILE and record.get("parameters", {}) == (book or {}).get("parameters")
    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    print()
    book_parameters = (book or {}).get("parameters") or resolve(fig, BOOK_PROFILE)   # the book's, as recorded
    print(run_report(record, book, given, None if at_book else book_parameters, width=width))
    note = None
    if profile == "smoke":
        note = ("Smoke profile: a test that the pipeline runs, at a fraction of the book's training and seeds; its "
                "verdicts are not the book's and say nothing about the claims.")
    elif profile != BOOK_PROFILE:
        note = (f"The {profile} profile: the book shows the {BOOK_PROFILE} profile's verdicts; its appendix 'Results at "
                "both scales' sets the two side by side.")
    if note:
        print("\n".join(textwrap.wrap(note, width=width)))
    print(f"Run folder: {folder}")
    print(f"Compare it with the book, number by number: softmax-icl compare book {folder}")


#: Exit status after a signal: 128 + its number, as a shell reports it.
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


def stopped(exc: BaseException, received: list) -> int:
    """One line for a run stopped by Ctrl-C or SIGTERM; the exit status a shell gives it."""
    from .runner import Terminated

    term = isinstance(exc, Terminated) or "SIGTERM" in received
    print(f"softmax-icl: stopped by {'SIGTERM' if term else 'Ctrl-C'}; nothing of this run was put in place "
          "(the stages it finished are cached: the same command resumes)", file=sys.stderr, flush=True)
    return EXIT_SIGTERM if term else EXIT_SIGINT


@contextmanager
def signals():
    """While a command runs: Ctrl-C (SIGINT) and SIGTERM raise KeyboardInterrupt (SIGTERM as
    :class:`~softmax_icl.book.runner.Terminated`) once; the signals that follow are ignored, so the kernel's shutdown
    and the clean-up are not cut short. From the first signal on, logging is off for the rest of the process: the
    notebook client's words on the kernel it shuts down would bury the one line that says the run stopped. Yields the
    list of signal names received."""
    import gc
    import logging
    import signal
    import threading

    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum, frame):
        name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
        received.append(name)
        if len(received) == 1:
            from .runner import Terminated
            # the stop is said in one line (:func:`stopped`): what the notebook client logs about the kernel it is
            # shutting down (a kernel that died waiting for a reply, a task whose exception nobody retrieved) is
            # not news to the one who stopped it
            logging.disable(logging.CRITICAL)
            raise Terminated("stopped by SIGTERM") if name == "SIGTERM" else KeyboardInterrupt()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if received:          # the client's abandoned tasks are collected (their errors dropped) while silent;
            gc.collect()      # logging stays off: the stopped command is ending, and the loop's last words too


def paper_on_cpu_note(profile: str, device: str) -> bool:
    """Before a paper-profile run that will train on the CPU, say how long it takes and how to stop and resume it
    (on stderr); True when the note was printed."""
    if profile != "paper" or device not in ("auto", "cpu"):
        return False
    if device == "auto":
        import torch

        if torch.cuda.is_available():
            return False
    print("note: the paper profile on a CPU takes from 2 to 32 minutes per figure on two cores, 37 to 64 minutes for "
          "all five one after another, by CPU (benchmarks/cpu_paper.md). Every stage it finishes is cached: stop it "
          "(Ctrl-C) whenever you like and run the same command again to resume. For a run that spans "
          "machines or restarts, put the cache on a lasting disk (SOFTMAX_ICL_CACHE_DIR) and leave the computational modules "
          "unedited until it is done (their source is part of every stage's cache key).", file=sys.stderr, flush=True)
    return True
