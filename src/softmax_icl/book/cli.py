"""Command line: ``softmax-icl list | run | build | audit | compare | pages``.

    softmax-icl list                                   figures, their parameters and profile values
    softmax-icl run window_adaptation --profile paper -p sigma 0.5 --device cuda
    softmax-icl build                                  every notebook at the default profile, then the HTML
    softmax-icl build --executor serial                the same, one notebook after another (progress bars)
    softmax-icl build --executor local                 the notebooks all at once (submitit; also slurm, gpus)
    softmax-icl audit --sets 5                         every figure with 5 seed sets -> book/results/audit/
    softmax-icl compare book runs/low_rank-default     the differences, within the regression tolerances
    softmax-icl compare book runs/low_rank-default --all   every number, not only the differences
    softmax-icl pages                                  regenerate the generated book pages only

Every parameter is validated before any compute; a bad value exits with status 2 and a message
naming the parameter and the allowed values. A run goes to a folder of its own (runs/<figure>-<profile>[-<what -p
changes>], numbered -2, -3, ...; --replace replaces the earlier one) and ends with its checks' verdicts, held against
the book's. Ctrl-C exits with status 130, SIGTERM with 143. Outside the checkout: --book PATH or SOFTMAX_ICL_BOOK.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

from ..profiles import BOOK_POOL, PROFILES, Figure, ParameterError, validate_device
from .places import BOOK_ENV, SLUG_CHARS, check_writable, holds_run, project_root, run_folder, run_name  # noqa: F401
from .registry import Registry, resolve
from .terminal import BOOK_PROFILE, list_lines, paper_on_cpu_note, print_run_report, signals, stopped


def parse_value(text: str):
    """``-p NAME VALUE``: Python/YAML-like literals (numbers, lists, true/false), else the string itself. A list of
    bare words, as ``softmax-icl list`` prints it (``[relu, cosine]``), is a list of strings."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    inner = text.strip()
    if len(inner) >= 2 and (inner[0], inner[-1]) in (("[", "]"), ("(", ")")):
        items = [item.strip() for item in inner[1:-1].split(",")]
        if items == [""]:
            return []
        if all(items) and not any(c in item for item in items for c in "[]()"):
            return [parse_value(item) for item in items]
    return text


def cmd_list(args) -> int:
    registry = args.registry
    names = [args.figure] if args.figure else list(registry)
    width = max(60, shutil.get_terminal_size((100, 24)).columns)
    for name in names:
        fig = registry.figure(name)
        print("\n".join(textwrap.wrap(f"{name}  ({fig.paper}): {fig.title}", width=width)))
        print("\n".join(list_lines(fig, width)))
        print()
    print("\n".join(textwrap.wrap("Common options: --profile {smoke,default,paper}  --device {auto,cpu,cuda,cuda:N}  "
                                  "--no-cache  --book PATH. A list is written [1, 4, 16] or [relu, cosine].",
                                  width=width)))
    return 0


def check_device(device: str) -> str:
    """A device that is allowed and present here (torch is imported only when a GPU is asked for)."""
    validate_device(device)
    if device in ("auto", "cpu"):
        return device
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ParameterError(f"parameter 'device' = {device!r}: no CUDA device is available on this machine "
                                 f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); allowed "
                                 "here: 'auto', 'cpu'")
        index = int(device[5:]) if device.startswith("cuda:") else 0
        if index >= torch.cuda.device_count():
            raise ParameterError(f"parameter 'device' = {device!r}: this machine has {torch.cuda.device_count()} "
                                 f"CUDA device(s); allowed: cuda:0 ... cuda:{torch.cuda.device_count() - 1}")
    elif device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ParameterError("parameter 'device' = 'mps': no MPS device is available on this machine; allowed "
                             "here: 'auto', 'cpu'")
    return device


def run_figure(root: Path, fig: Figure, profile: str, params: dict, device: str, use_cache: bool, in_place: bool,
               output: Path | None, progress: bool = True) -> Path:
    """Execute one figure notebook here: into ``output`` (default ``runs/<figure>-<profile>/``), or with ``in_place``
    into ``notebooks/`` and the book (only at the book's profile with no parameter overridden). ``params`` were
    resolved once by the caller, before any compute; the notebook's run resolves them for itself."""
    from .runner import execute_notebook

    check_device(device)
    job = figure_job(root, fig, profile, params, device, use_cache, in_place, output)
    check_writable(Path(job.destination).parent, "--output" if output is not None else "the run's folder")
    paper_on_cpu_note(profile, device)
    t = time.perf_counter()
    execute_notebook(Path(job.source), Path(job.destination), job.parameters, cwd=Path(job.cwd),
                     progress_bar=progress, env=job.env)
    dest = Path(job.destination)
    print(f"{fig.name}: executed in {time.perf_counter() - t:.0f} s"
          + (f" -> {dest} and the book's record and figures" if in_place else "; the book is unchanged"))
    return dest


def check_in_place(profile: str, params: dict) -> None:
    """The book shows one run per figure: the default profile, nothing overridden."""
    if profile != BOOK_PROFILE or params:
        raise ParameterError(f"--in-place writes the book, which shows the {BOOK_PROFILE!r} profile with no "
                             f"parameter overridden (got profile {profile!r}"
                             + (f" and -p {', '.join(params)}" if params else "") + "); leave out --in-place to "
                             "write this run to its own folder")


def seed_offset_params(fig: Figure, profile: str, offset: int, params: dict) -> dict:
    """``params`` with every ``*_seed`` parameter of ``fig`` that ``params`` does not set moved by ``offset`` from its
    ``profile`` value: a rerun of the whole figure, every verdict included, on seeds of the reader's own."""
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 1:
        raise ParameterError(f"--seed-offset must be an integer >= 1 (0 is the book's own seeds); got {offset!r}")
    return {**{name: p.value(profile) + offset for name, p in fig.params.items()
               if name.endswith("_seed") and name not in params}, **params}


def cmd_run(args) -> int:
    root = project_root(book=args.book)
    fig = args.registry.figure(args.figure)
    given = {k: parse_value(v) for k, v in args.param}
    params = dict(given)
    if args.seed_offset is not None:
        params = seed_offset_params(fig, args.profile, args.seed_offset, params)
    if args.in_place:
        check_in_place(args.profile, params)
        if args.output is not None or args.replace:
            raise ParameterError("--in-place writes the book; it takes neither --output nor --replace")
    resolve(fig, args.profile, params)      # validate before any compute (and before a folder is named)
    output = None
    if not args.in_place:
        if args.output is not None:
            output = args.output.expanduser().resolve()
            if holds_run(output, fig) and not args.replace:
                raise ParameterError(f"--output {args.output}: it holds an earlier run of {fig.name}; allowed: "
                                     "another folder, or --replace to replace that run")
        else:
            output = run_folder(root, run_name(fig, args.profile, given, args.seed_offset), args.replace)
    run_figure(root, fig, args.profile, params, args.device, not args.no_cache, args.in_place, output)
    if args.in_place:
        from .pages import write_pages
        write_pages(root / "book", args.registry)
        return 0
    print_run_report(root, fig, args.profile, given, output)
    return 0


def cmd_pages(args) -> int:
    from .pages import write_pages

    for p in write_pages(project_root(book=args.book) / "book", args.registry):
        print(f"wrote {p}")
    return 0


def figure_job(root: Path, fig: Figure, profile: str, params: dict, device: str, use_cache: bool, in_place: bool,
               output: Path | None):
    """The :class:`~softmax_icl.book.dispatch.NotebookJob` of one figure run (what :func:`run_figure` executes here)."""
    from .dispatch import NotebookJob, job_env

    name = fig.name
    src = root / "notebooks" / fig.notebook
    if in_place:
        check_in_place(profile, params)
        dest, out_dir = src, root / "book"
    else:
        out_dir = (output or root / "runs" / f"{name}-{profile}{'-custom' if params else ''}").resolve()
        dest = out_dir / fig.notebook
    return NotebookJob(label=name if not params else f"{name} {params}", source=str(src), destination=str(dest),
                       parameters=dict(params, profile=profile, device=device, use_cache=use_cache),
                       cwd=str(root / "notebooks"), env=job_env({"SOFTMAX_ICL_OUTPUT_DIR": str(out_dir)}))


def dispatch(args, root: Path, jobs: list, what: str) -> bool:
    """Run ``jobs`` through ``args.executor``; print one line per job; True when all succeeded."""
    from .dispatch import auto_executor, devices_hint, expected_seconds, profile_hint, run_jobs

    devices = args.gpus.split(",") if getattr(args, "gpus", None) else None
    if args.executor == "auto":
        args.executor = auto_executor(devices_hint(jobs), len(jobs), profile=profile_hint(jobs))
    options = {}
    if args.executor == "cores":
        options = {"expected": [expected_seconds(root, job) for job in jobs]}
    if args.executor in ("local", "slurm"):
        options = {"timeout_min": args.time}
        if args.executor == "slurm":
            options.update(slurm_partition=args.slurm_partition, slurm_gpus_per_node=args.slurm_gpus_per_node,
                           cpus_per_task=args.slurm_cpus_per_task)
    folder = root / "runs" / "submitit" / time.strftime("%Y%m%d-%H%M%S")
    print(f"{what}: {len(jobs)} notebook run(s) through the {args.executor} executor"
          + (f" (logs in {folder})" if args.executor in ("local", "slurm") else ""), flush=True)
    try:
        results = run_jobs(jobs, args.executor, folder=folder, devices=devices, **options)
    except RuntimeError as exc:       # e.g. submitit finds no Slurm here, or no GPU is visible
        raise ParameterError(f"executor {args.executor!r}: {exc}") from exc
    for r in results:
        print(f"  {r.label}: " + (f"{r.seconds:.0f} s -> {r.destination}" if r.ok else f"FAILED: {r.error}"))
    return all(r.ok for r in results)


def job_device(args) -> str:
    """The device the notebooks ask for: each ``gpus`` job sees one device; Slurm nodes are checked there."""
    if args.executor == "gpus":
        return "cuda"
    if args.executor == "slurm":
        return validate_device(args.device)
    return check_device(args.device)


def cmd_build(args) -> int:
    from .publish import publish_records
    from .pages import write_pages
    from .scales import PAPER_SUBDIR

    root = project_root(book=args.book)
    if args.publish and args.profile != PAPER_SUBDIR:
        raise ParameterError(f"--publish puts {PAPER_SUBDIR!r}-profile records beside the book's; got profile "
                             f"{args.profile!r} (the {BOOK_PROFILE!r} build writes the book itself)")
    registry = args.registry
    device = job_device(args)
    names = args.only or list(registry)
    for name in names:
        registry.resolve(name, args.profile)
    in_place = args.profile == BOOK_PROFILE     # another profile never replaces the book: runs/<figure>-<profile>/
    t0 = time.perf_counter()
    if not args.skip_run:
        if args.executor in ("auto", "serial", "cores", "local"):
            paper_on_cpu_note(args.profile, device)
        jobs = [figure_job(root, registry[name], args.profile, {}, device, not args.no_cache, in_place, None)
                for name in names]
        for folder in sorted({Path(job.destination).parent for job in jobs} | {Path(job.env[
                "SOFTMAX_ICL_OUTPUT_DIR"]) for job in jobs}):
            check_writable(folder, "the build's folder")
        if not dispatch(args, root, jobs, f"build ({args.profile} profile)"):
            print("softmax-icl: a notebook failed (its previous version was kept); pages not regenerated",
                  file=sys.stderr)
            return 1
    if not in_place:
        if args.publish:
            published = publish_records(root, names, args.profile)
            write_pages(root / "book", registry)
            print(f"{args.profile} profile: notebooks in runs/<figure>-{args.profile}/; records published to "
                  f"{', '.join(str(p.relative_to(root)) for p in published)} and the pages regenerated")
            return 0
        print(f"{args.profile} profile: notebooks and records are in runs/<figure>-{args.profile}/; the book is "
              f"unchanged (--publish puts the records beside the book's, for the appendix 'Results at both scales')")
        return 0
    write_pages(root / "book", registry)
    t1 = time.perf_counter()
    if args.skip_html:
        print(f"notebooks: {t1 - t0:.0f} s (HTML not built)")
        return 0
    jb = shutil.which("jupyter-book") or str(Path(sys.executable).with_name("jupyter-book"))
    html = root / "_build" / "html"
    if (root / "_build").exists():
        shutil.rmtree(root / "_build")
    proc = subprocess.run([jb, "build", str(root), "-W", "--keep-going"], cwd=root)
    if proc.returncode != 0:
        print("softmax-icl: jupyter-book build failed (warnings are errors)", file=sys.stderr)
        return proc.returncode
    print(f"notebooks: {t1 - t0:.0f} s, HTML: {time.perf_counter() - t1:.0f} s")
    print(f"The book is at {html / 'index.html'}")
    return 0


def cmd_audit(args) -> int:
    """The seed sets per figure (:func:`audit.set_offsets`: the earlier pool and fresh sets). At the book's profile the
    reference is the committed record; at another profile the profile's own run is run too
    (``runs/audit/<profile>/<figure>/reference/``) as the reference."""
    from . import audit

    root = project_root(book=args.book)
    registry = args.registry
    names = args.figures or list(registry)
    if args.sets < audit.MIN_SETS:
        raise ParameterError(f"parameter 'sets' = {args.sets} is out of range; allowed: an integer >= "
                             f"{audit.MIN_SETS} (fewer sets cannot tell a stable verdict from a lucky one)")
    book = args.profile == BOOK_PROFILE
    for name in names:
        registry.resolve(name, args.profile)
        if book and not (root / "book" / "results" / f"{name}.json").is_file():
            raise ParameterError(f"figure {name!r} has no committed record book/results/{name}.json to audit")
    device = job_device(args)
    offsets = ([] if book else [None]) + audit.set_offsets(args.sets)
    plan = [(name, off, {} if off is None else audit.seed_overrides(registry[name], args.profile, off))
            for name in names for off in offsets]
    for name, _, seeds in plan:
        registry.resolve(name, args.profile, seeds)
    ok = True
    if not args.no_run:
        jobs = [figure_job(root, registry[name], args.profile, seeds, device, not args.no_cache, False,
                           audit.run_folder(root, args.profile, name, off)) for name, off, seeds in plan]
        jobs = [replace(j, label=f"{name} {'reference' if off is None else audit.set_name(off)}")
                for j, (name, off, _) in zip(jobs, plan)]
        ok = dispatch(args, root, jobs, f"audit ({args.profile} profile, {args.sets} seed sets: the earlier pool "
                                        f"and {args.sets - 1} fresh)")
    for name in names:
        committed = None if book else audit.read_fresh(root, args.profile, name, None)
        if not book and committed is None:
            print(f"{name}: the reference run did not complete; no audit record", file=sys.stderr)
            ok = False
            continue
        runs = [(off, seeds, audit.read_fresh(root, args.profile, name, off))
                for n, off, seeds in plan if n == name and off is not None]
        path = audit.write_record(root, name, args.profile, runs, committed)
        print("\n".join(audit.report_lines(json.loads(path.read_text()), path)))
    if book:
        from .pages import write_pages

        write_pages(root / "book", registry)
    return 0 if ok else 1


def cmd_compare(args) -> int:
    from .compare import compare_dirs, parameter_changes, read_record, report, results_dir

    folders = []
    for d in (args.dir_a, args.dir_b):
        if not results_dir(d).is_dir() and not d.is_absolute():      # 'book' or 'runs/...' from outside the checkout
            try:
                d = project_root(book=args.book) / d if results_dir(project_root(book=args.book) / d).is_dir() else d
            except ParameterError:
                pass
        if not results_dir(d).is_dir():
            raise ParameterError(f"{d} is not a run's folder (no results/ in it) nor a results folder")
        folders.append(d)
    results = compare_dirs(*folders, args.registry, args.figures)
    if not results:
        raise ParameterError(f"no figure has a record in both {args.dir_a} and {args.dir_b}")
    changes = {name: parameter_changes((read_record(folders[0], name) or {}).get("parameters"),
                                       (read_record(folders[1], name) or {}).get("parameters")) for name in results}
    text, ok = report(results, verbose=args.all, parameters=changes)
    print(text)
    print("All verdicts equal and every number within tolerance." if ok else
          "Differences: a verdict differs or a number is outside its tolerance (the DIFF lines"
          + ("" if args.all else "; --all lists every compared number") + ").")
    return 0 if ok else 1


def build_parser(registry: Registry) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="softmax-icl", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="figures and their parameters per profile")
    p.add_argument("figure", nargs="?")
    p.set_defaults(func=cmd_list)

    def common(p):
        p.add_argument("--profile", default="default", help=f"one of {', '.join(PROFILES)} (default: default)")
        p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:N, mps")
        p.add_argument("--no-cache", action="store_true", help="retrain instead of reading the result cache")

    p = sub.add_parser("run", help="execute one figure notebook with other parameters")
    p.add_argument("figure", help=f"one of {', '.join(registry)}")
    common(p)
    p.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override one parameter (repeatable), e.g. -p sigma 0.5 -p L_values '[1, 4, 16]'")
    p.add_argument("--seed-offset", type=int, metavar="K",
                   help="rerun on seeds of your own: add K (>= 1) to every *_seed parameter the -p options do not "
                        "set (the run's folder is named seed-offset=K)")
    p.add_argument("--output", type=Path, help="folder for the executed notebook, its figures and record (default: "
                                               "runs/<figure>-<profile>[-<what -p changes>]/, numbered -2, -3, ... "
                                               "where that holds an earlier run)")
    p.add_argument("--replace", action="store_true",
                   help="replace the earlier run in that folder instead of taking a new one")
    p.add_argument("--in-place", action="store_true",
                   help="overwrite notebooks/<figure>.ipynb and the book's figures and record (only at the "
                        "default profile with no -p: the book shows that run)")
    p.set_defaults(func=cmd_run)

    def executor(p):
        from .dispatch import EXECUTORS

        p.add_argument("--executor", choices=EXECUTORS, default="auto",
                       help="where the independent notebook runs go: auto (the default: cores for CPU runs on a "
                            "machine with two or more cores, serial at the paper profile and on a GPU), serial (here, "
                            "one after another, with progress bars), cores (one notebook per CPU core at a time, one "
                            "thread each, the longest first, after building the compiled engines once), local "
                            "(submitit.LocalExecutor, all at once), slurm (submitit on a Slurm cluster), gpus (one "
                            "notebook per local GPU)")
        p.add_argument("--gpus", help="gpus executor: the device ids to use, e.g. 0,1 (default: every visible GPU)")
        p.add_argument("--slurm-partition", help="slurm executor: the partition")
        p.add_argument("--slurm-gpus-per-node", type=int, help="slurm executor: GPUs per job")
        p.add_argument("--slurm-cpus-per-task", type=int, help="slurm executor: CPU cores per job")
        p.add_argument("--time", type=int, default=120, help="local/slurm executors: time limit per job, minutes")

    p = sub.add_parser("build", help="execute every notebook in place, then build the HTML book")
    common(p)
    executor(p)
    p.add_argument("--only", nargs="+", help="execute only these figures")
    p.add_argument("--skip-run", action="store_true", help="render the book from the notebooks as they are")
    p.add_argument("--skip-html", action="store_true", help="execute the notebooks but do not render the HTML")
    p.add_argument("--publish", action="store_true",
                   help="--profile paper only: copy the records to book/results/paper/ (the appendix 'Results at both "
                        "scales'; the chapters keep the default run) and regenerate the pages")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("audit", help="rerun figures with other seed sets; write book/results/audit/ and the pages")
    common(p)
    executor(p)
    p.add_argument("--figures", nargs="+", help="audit only these figures (default: all)")
    p.add_argument("--sets", type=int, default=5, help="seed sets per figure, all told (>= 5): the earlier "
                   f"pool (offset 0) and fresh sets k = 1, 2, ... offsetting every *_seed parameter by {BOOK_POOL} + "
                   "1000 k")
    p.add_argument("--no-run", action="store_true", help="rebuild the audit records from the runs already in "
                                                        "runs/audit/ (no notebook is executed)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("compare", help="two runs' records side by side, number by number, within tolerance")
    p.add_argument("dir_a", type=Path, help="the reference: a run's folder or a results folder (e.g. book)")
    p.add_argument("dir_b", type=Path, help="the run to hold against it (e.g. runs/low_rank-default)")
    p.add_argument("--figures", nargs="+", help="compare only these figures")
    p.add_argument("--all", action="store_true", help="list every compared number, not only the differences")
    p.add_argument("--differences-only", action="store_true", help=argparse.SUPPRESS)   # the default now
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("pages", help="regenerate the settings and results-summary pages")
    p.set_defaults(func=cmd_pages)
    for p in sub.choices.values():
        p.add_argument("--book", type=Path, help=f"the book's checkout, when the command runs outside it (also "
                                                 f"${BOOK_ENV}; default: found upwards from here)")
    return ap


#: The environment switches of the numerics and their allowed values (the first is the default): read by the engines'
#: build (softmax_icl.engine.common, SOFTMAX_ICL_KERNEL) when they first run, and checked here, without importing
#: them, before any compute.
SWITCHES = {"SOFTMAX_ICL_KERNEL": ("auto", "torch")}


def _check_switches() -> None:
    """A bad value of a numerics switch stops the command before any compute (a notebook's kernel would meet it only
    at its first draw or step)."""
    for name, allowed in SWITCHES.items():
        value = os.environ.get(name, allowed[0])
        if value not in allowed:
            raise ParameterError(f"{name}={value!r} is not allowed; allowed values: "
                                 + ", ".join(f"'{v}'" + (" (default)" if v == allowed[0] else "") for v in allowed))


def main(registry: Registry, argv: list[str] | None = None) -> int:
    """The command line over the figures of ``registry`` (:data:`softmax_icl.figures.FIGURES`: the ``softmax-icl``
    command is :func:`softmax_icl.figures.main`); returns the exit status: 0, 1 when a notebook failed or a comparison
    differs, 2 for a bad input (before any compute), 130 after Ctrl-C and 143 after SIGTERM."""
    args = build_parser(registry).parse_args(argv)
    args.registry = registry
    if getattr(args, "profile", None) not in (None, *PROFILES):
        print(f"softmax-icl: parameter 'profile' = {args.profile!r} is not allowed; allowed values: "
              f"{', '.join(PROFILES)}", file=sys.stderr)
        return 2
    if getattr(args, "figure", None) and args.figure not in registry:
        print(f"softmax-icl: unknown figure {args.figure!r}; allowed values: {', '.join(registry)}", file=sys.stderr)
        return 2
    with signals() as received:
        try:
            _check_switches()
            return args.func(args)
        except ParameterError as exc:
            print(f"softmax-icl: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as exc:
            return stopped(exc, received)
        except BrokenPipeError:           # softmax-icl list | head: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except Exception as exc:  # runner failures: message already says what was kept
            from .runner import NotebookFailed
            if isinstance(exc, NotebookFailed):
                if received:          # Ctrl-C in a terminal reaches the kernel too: its cell ends first
                    return stopped(KeyboardInterrupt(), received)
                print(f"softmax-icl: {exc}", file=sys.stderr)
                return 1
            raise


