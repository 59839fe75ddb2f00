"""Command line: ``softmax-icl list | run | build | pages``.

    softmax-icl list                                   figures, their parameters and profile values
    softmax-icl run window_adaptation --profile paper -p sigma 0.5 --device cuda
    softmax-icl build                                  every notebook at the default profile, then the HTML
    softmax-icl pages                                  regenerate the generated book pages only

Every parameter is validated before any compute; a bad value exits with status 2 and a message
naming the parameter and the allowed values.
"""

from __future__ import annotations

import argparse
import ast
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .profiles import PROFILES, ParameterError, fmt, validate_device
from .registry import FIGURES, resolve

#: The profile the book shows (the same as softmax_icl.records.BOOK_PROFILE, without importing torch).
BOOK_PROFILE = "default"


def project_root(start: Path | None = None) -> Path:
    """The checkout that holds ``_config.yml`` and ``notebooks/`` (searched upwards from the cwd)."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "_config.yml").is_file() and (p / "notebooks").is_dir():
            return p
    raise SystemExit("softmax-icl: run this inside the repository checkout (no _config.yml and notebooks/ "
                     f"found above {here})")


def parse_value(text: str):
    """``-p NAME VALUE``: Python/YAML-like literals (numbers, lists, true/false), else the string itself."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def cmd_list(args) -> int:
    names = [args.figure] if args.figure else list(FIGURES)
    for name in names:
        if name not in FIGURES:
            raise ParameterError(f"unknown figure {name!r}; allowed values: {', '.join(sorted(FIGURES))}")
        fig = FIGURES[name]
        print(f"{name}  ({fig.paper}): {fig.title}")
        print(f"    {'parameter':<16}" + "".join(f"{p:<22}" for p in PROFILES) + "meaning")
        for pname, p in fig.params.items():
            print(f"    {pname:<16}" + "".join(f"{fmt(p.value(pr)):<22}" for pr in PROFILES) + p.help)
        print()
    print("Common options: --profile {smoke,default,paper}  --device {auto,cpu,cuda,cuda:N}  --no-cache")
    return 0


def run_figure(root: Path, name: str, profile: str, params: dict, device: str, use_cache: bool, in_place: bool,
               output: Path | None, progress: bool = True) -> Path:
    """Execute one figure notebook: into ``output`` (default ``runs/<figure>-<profile>/``), or with ``in_place``
    into ``notebooks/`` and the book (only at the book's profile with no parameter overridden)."""
    from .runner import execute_notebook

    resolve(name, profile, params)      # validate before any compute
    validate_device(device)
    src = root / "notebooks" / FIGURES[name].notebook
    env = {}
    if in_place:
        check_in_place(profile, params)
        dest = src
        env["SOFTMAX_ICL_OUTPUT_DIR"] = str(root / "book")      # the one way a run writes the book
    else:
        out_dir = (output or root / "runs" / f"{name}-{profile}{'-custom' if params else ''}").resolve()
        dest = out_dir / FIGURES[name].notebook
        env["SOFTMAX_ICL_OUTPUT_DIR"] = str(out_dir)
    parameters = dict(params, profile=profile, device=device, use_cache=use_cache)
    t = time.perf_counter()
    execute_notebook(src, dest, parameters, cwd=root / "notebooks", progress_bar=progress, env=env)
    print(f"{name}: executed in {time.perf_counter() - t:.0f} s -> {dest}"
          + ("" if in_place else f" (record and figures in {dest.parent}; the book is unchanged)"))
    return dest


def check_in_place(profile: str, params: dict) -> None:
    """The book shows one run per figure: the default profile, nothing overridden."""
    if profile != BOOK_PROFILE or params:
        raise ParameterError(f"--in-place writes the book, which shows the {BOOK_PROFILE!r} profile with no "
                             f"parameter overridden (got profile {profile!r}"
                             + (f" and -p {', '.join(params)}" if params else "") + "); leave out --in-place to "
                             "write this run to its own folder")


def cmd_run(args) -> int:
    root = project_root()
    params = {k: parse_value(v) for k, v in args.param}
    if args.in_place:
        check_in_place(args.profile, params)
    run_figure(root, args.figure, args.profile, params, args.device, not args.no_cache, args.in_place, args.output)
    if args.in_place:
        from .bookgen import write_pages
        write_pages(root / "book")
    return 0


def cmd_pages(args) -> int:
    from .bookgen import write_pages

    for p in write_pages(project_root() / "book"):
        print(f"wrote {p}")
    return 0


def cmd_build(args) -> int:
    from .bookgen import write_pages

    root = project_root()
    validate_device(args.device)
    names = args.only or list(FIGURES)
    for name in names:
        resolve(name, args.profile)
    in_place = args.profile == BOOK_PROFILE     # another profile never replaces the book: runs/<figure>-<profile>/
    t0 = time.perf_counter()
    if not args.skip_run:
        for i, name in enumerate(names, 1):
            print(f"[{i}/{len(names)}] {name} ({args.profile} profile)", flush=True)
            run_figure(root, name, args.profile, {}, args.device, not args.no_cache, in_place, None)
    if not in_place:
        print(f"{args.profile} profile: notebooks and records are in runs/<figure>-{args.profile}/; the book is "
              f"unchanged")
        return 0
    write_pages(root / "book")
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


def build_parser() -> argparse.ArgumentParser:
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
    p.add_argument("figure", help=f"one of {', '.join(FIGURES)}")
    common(p)
    p.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="override one parameter (repeatable), e.g. -p sigma 0.5 -p L_values '[1, 4, 16]'")
    p.add_argument("--output", type=Path, help="directory for the executed notebook, its figures and record "
                                               "(default: runs/<figure>-<profile>/)")
    p.add_argument("--in-place", action="store_true",
                   help="overwrite notebooks/<figure>.ipynb and the book's figures and record")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("build", help="execute every notebook in place, then build the HTML book")
    common(p)
    p.add_argument("--only", nargs="+", help="execute only these figures")
    p.add_argument("--skip-run", action="store_true", help="render the book from the notebooks as they are")
    p.add_argument("--skip-html", action="store_true", help="execute the notebooks but do not render the HTML")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("pages", help="regenerate the settings and results-summary pages")
    p.set_defaults(func=cmd_pages)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "profile", None) not in (None, *PROFILES):
        print(f"softmax-icl: parameter 'profile' = {args.profile!r} is not allowed; allowed values: "
              f"{', '.join(PROFILES)}", file=sys.stderr)
        return 2
    if getattr(args, "figure", None) and args.figure not in FIGURES:
        print(f"softmax-icl: unknown figure {args.figure!r}; allowed values: {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except ParameterError as exc:
        print(f"softmax-icl: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # runner failures: message already says what was kept
        from .runner import NotebookFailed
        if isinstance(exc, NotebookFailed):
            print(f"softmax-icl: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
