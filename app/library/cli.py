"""`llambda models list|import|remove [--json]`: the model library from the command line.

`configure_parser(parser)` adds the subcommands to an argparse parser (and sets `func`);
`run_models(namespace) -> int` runs one. Errors are one line on stderr; exit codes follow
`app.errors.exit_code_for` (3 for a bad model file). A duplicate import is not an error: it
says where the model already is and exits 0. Nothing here prints to stdout but the results.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable, TextIO

from app.chats import ChatStore, engine_settings
from app.errors import LlambdaError, exit_code_for
from app.library.index import ModelEntry
from app.library.library import DuplicateModelError, ModelLibrary
from app.library.preflight import preflight
from app.units import format_bytes, format_last_used


def configure_parser(
    parser: argparse.ArgumentParser,
    more: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] | None = None,
    more_names: tuple[str, ...] = (),
) -> argparse.ArgumentParser:
    """`more(subparsers)` adds commands of a layer above (the Hub's: app/hub/cli.py)."""
    names = ",".join(("list", "import", "remove") + tuple(more_names))
    sub = parser.add_subparsers(dest="models_command", metavar="{" + names + "}")
    sub.required = True
    p = sub.add_parser("list", help="list the models in the library")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("import", help="add a GGUF file to the library")
    p.add_argument("path", help="the .gguf file")
    p.add_argument(
        "--keep-in-place", action="store_true", help="do not copy: hard-link the file, or refer to it where it is"
    )
    p.add_argument("--name", help="name in the library (default: the model's own name)")
    p.add_argument(
        "--ctx",
        type=int,
        default=None,
        help="context length for the pre-flight memory check (default: the one in settings)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("remove", help="remove a model (an original kept in place is never deleted)")
    p.add_argument("model", help="name or hash (a prefix of 6+ hex digits)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    if more is not None:
        more(sub)
    parser.set_defaults(func=run_models)
    return parser


def _params(n: int) -> str:
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.1f}{suffix}".replace(".0", "") if n < 10 * div else f"{n / div:.0f}{suffix}"
    return str(n)


def _entry_json(lib: ModelLibrary, e: ModelEntry) -> dict:
    d = e.to_json()
    d["status"] = lib.status(e)
    d["file"] = str(e.file_path(lib.folder))
    return d


def _list(lib: ModelLibrary, ns: argparse.Namespace, out: TextIO) -> int:
    entries = lib.list()
    if ns.json:
        json.dump({"models": [_entry_json(lib, e) for e in entries]}, out, indent=1)
        out.write("\n")
        return 0
    if not entries:
        out.write(f"no models in the library ({lib.folder})\n")
        return 0
    rows = [("NAME", "ARCH", "PARAMS", "QUANT", "SIZE", "STORAGE", "STATUS", "LAST USED", "HASH")]
    for e in entries:
        rows.append(
            (
                e.name,
                e.architecture,
                _params(e.n_params),
                e.quantization,
                format_bytes(e.size),
                e.storage,
                lib.status(e),
                format_last_used(e.last_used),
                e.sha256[:12],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
    return 0


def _import(lib: ModelLibrary, ns: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    show = not ns.json and err.isatty()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if show and (now - last[0] > 0.1 or done == total):
            last[0] = now
            err.write(f"\rimporting: {100 * done // max(total, 1):3d}% of {format_bytes(total)}")
            err.flush()

    try:
        e = lib.import_model(ns.path, keep_in_place=ns.keep_in_place, name=ns.name, progress=progress)
    except DuplicateModelError as d:
        if show:
            err.write("\n")
        if ns.json:
            json.dump({"status": "duplicate", "message": str(d), "model": _entry_json(lib, d.entry)}, out, indent=1)
            out.write("\n")
        else:
            out.write(f"{d}\n")
        return 0
    finally:
        if show:
            err.write("\r\033[K")
    report = None
    if ns.ctx is None:
        with ChatStore() as store:
            ns.ctx = engine_settings(store)["n_ctx"]
    try:
        report = preflight(e.file_path(lib.folder), ns.ctx)
    except LlambdaError as x:  # the import stands; say why there is no verdict
        err.write(f"llambda: warning: pre-flight check failed: {x}\n")
    if ns.json:
        json.dump(
            {"status": "imported", "model": _entry_json(lib, e), "preflight": report.to_json() if report else None},
            out,
            indent=1,
        )
        out.write("\n")
    else:
        out.write(
            f"imported {e.name} ({e.architecture}, {_params(e.n_params)} parameters, "
            f"{e.quantization}, {format_bytes(e.size)}, {e.storage})\n"
        )
        if report:
            out.write(f"pre-flight at {ns.ctx} tokens of context: {report.summary()}\n")
    return 0


def _remove(lib: ModelLibrary, ns: argparse.Namespace, out: TextIO) -> int:
    e = lib.remove(ns.model)
    if ns.json:
        json.dump({"status": "removed", "model": e.to_json()}, out, indent=1)
        out.write("\n")
    else:
        kept = " (the original file was left where it is)" if e.storage == "reference" else ""
        out.write(f"removed {e.name}{kept}\n")
    return 0


def run_models(ns: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run `llambda models <command>` for a parsed namespace; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    lib = ModelLibrary()
    try:
        if ns.models_command == "list":
            return _list(lib, ns, out)
        if ns.models_command == "import":
            return _import(lib, ns, out, err)
        if ns.models_command == "remove":
            return _remove(lib, ns, out)
        err.write(f"llambda: error: unknown models command {ns.models_command!r}\n")
        return 2
    except LlambdaError as e:
        err.write(f"llambda: error: {e}\n")
        return exit_code_for(e)
    except OSError as e:
        err.write(f"llambda: error: {e.strerror or e}: {e.filename or ''}\n".replace(": \n", "\n"))
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = configure_parser(argparse.ArgumentParser(prog="llambda models"))
    ns = parser.parse_args(argv)
    return ns.func(ns)


if __name__ == "__main__":
    sys.exit(main())
