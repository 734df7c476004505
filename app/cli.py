"""The command line: `llambda [FILE.gguf]` opens the window; subcommands run the engine headless.

Every subcommand prints one clear line on stderr for an error and exits with the code from
`app.errors` (2 usage, 3 bad file, 4 unsupported, 5 out of memory); never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from app import logs
from app.errors import EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, LlambdaError, exit_code_for

if TYPE_CHECKING:
    from pathlib import Path

# A command's modules are imported inside its functions ("lazy: start-up"): opening the window
# and `llambda --version` load none of them (the engine, the server, the library).
AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]
SUBCOMMANDS: dict[str, tuple[str, AddArguments, Run]] = {}


def subcommand(name: str, help: str) -> Callable[[AddArguments], Callable[[Run], Run]]:
    """Register `func(args) -> exit code` with an `add_arguments(parser)` companion."""

    def wrap(add_arguments: AddArguments) -> Callable[[Run], Run]:
        def bind(run: Run) -> Run:
            SUBCOMMANDS[name] = (help, add_arguments, run)
            return run

        return bind

    return wrap


# --- inspect -----------------------------------------------------------------------------------


def _inspect_args(p: argparse.ArgumentParser) -> None:
    from app.engine.cli import positive_int  # lazy: start-up (see SUBCOMMANDS)

    p.add_argument("model", help="path of a GGUF file")
    p.add_argument("--ctx", type=positive_int, default=None, help="context length for the memory estimate")
    p.add_argument(
        "--kv-type", choices=("f16", "f32", "q8_0"), default="f16", help="KV cache precision for the memory estimate"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


@subcommand("inspect", "header, metadata, tensor types, support verdict, memory estimate")(_inspect_args)
def run_inspect(args: argparse.Namespace) -> int:
    from app.library.inspect import describe, format_description  # lazy: start-up (see SUBCOMMANDS)

    info = describe(args.model, n_ctx=args.ctx, kv_type=args.kv_type)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_description(info))
    return EXIT_OK if info["verdict"]["supported"] else EXIT_UNSUPPORTED


# --- tokenize ----------------------------------------------------------------------------------


def _tokenize_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a GGUF file, or the name of a model in the library")
    p.add_argument("text", nargs="?", help="text to tokenize; without it, one JSON string per stdin line")
    p.add_argument("--json", action="store_true", help="print a JSON array of ids")
    p.add_argument("--special", action="store_true", help="parse special-token strings such as <|im_end|>")
    p.add_argument("--no-bos", action="store_true", help="do not add the BOS/EOS tokens the model asks for")


@subcommand("tokenize", "token ids of TEXT (or of each JSON-string line on stdin)")(_tokenize_args)
def run_tokenize(args: argparse.Namespace) -> int:
    from app.library import resolve_model  # lazy: start-up (see SUBCOMMANDS)
    from app.text import cli_tokenize  # lazy: jinja2 and the tokenizers

    try:
        return cli_tokenize(
            resolve_model(args.model), args.text, as_json=args.json, special=args.special, add_special=not args.no_bos
        )
    except ValueError as e:
        if isinstance(e, LlambdaError):
            raise
        print(f"llambda: error: {e}", file=sys.stderr)
        return EXIT_USAGE


# --- generate, chat, perplexity, bench (app/engine/cli.py) --------------------------------------------------


def _engine_args(name: str) -> AddArguments:
    def add(p: argparse.ArgumentParser) -> None:
        from app.engine import cli as engine_cli  # lazy: start-up (see SUBCOMMANDS)

        getattr(engine_cli, f"add_{name}_args")(p)

    return add


def _engine_run(name: str) -> Run:
    def run(args: argparse.Namespace) -> int:
        from app.engine import cli as engine_cli  # lazy: start-up (see SUBCOMMANDS)

        return getattr(engine_cli, f"run_{name}")(args)

    return run


subcommand("generate", "one completion of a prompt, with timings")(_engine_args("generate"))(_engine_run("generate"))
subcommand("chat", "interactive chat in the terminal")(_engine_args("chat"))(_engine_run("chat"))


subcommand("perplexity", "perplexity of a text; --kl-divergence: how far from a base (another quantization)")(
    _engine_args("perplexity")
)(_engine_run("perplexity"))
subcommand("bench", "prompt-processing and generation speed, like llama-bench; --kernels: per type")(
    _engine_args("bench")
)(_engine_run("bench"))


# --- serve (app/server/cli.py) -------------------------------------------------------------------


def _serve_args(p: argparse.ArgumentParser) -> None:
    from app.server.cli import add_serve_args  # lazy: start-up (see SUBCOMMANDS)

    add_serve_args(p)


@subcommand("serve", "an OpenAI-compatible API for other programs, on localhost")(_serve_args)
def run_serve(args: argparse.Namespace) -> int:
    from app.server.cli import run_serve as run  # lazy: start-up (see SUBCOMMANDS)

    return run(args)


# --- models ------------------------------------------------------------------------------------


def _models_args(p: argparse.ArgumentParser) -> None:
    from app.hub import cli as hub_cli  # lazy: start-up (see SUBCOMMANDS)
    from app.library.cli import configure_parser

    configure_parser(p, hub_cli.add_commands, hub_cli.COMMANDS)


@subcommand("models", "list, import or remove models in the library; search and download from the Hub")(_models_args)
def run_models(args: argparse.Namespace) -> int:
    from app.hub import cli as hub_cli  # lazy: start-up (see SUBCOMMANDS)

    if args.models_command in hub_cli.COMMANDS:
        return hub_cli.run(args)
    from app.library.cli import run_models as run

    return run(args)


# --- chats -------------------------------------------------------------------------------------


def _chats_args(p: argparse.ArgumentParser) -> None:
    from app.chats.cli import configure_parser  # lazy: start-up (see SUBCOMMANDS)

    configure_parser(p)


@subcommand("chats", "list, export (Markdown, JSON) or import conversations")(_chats_args)
def run_chats(args: argparse.Namespace) -> int:
    from app.chats.cli import run_chats as run  # lazy: start-up (see SUBCOMMANDS)

    return run(args)


# --- doctor ------------------------------------------------------------------------------------


def _doctor_args(p: argparse.ArgumentParser) -> None:
    pass


@subcommand("doctor", "check folders, the conversation database and the kernels; print versions")(_doctor_args)
def run_doctor(args: argparse.Namespace) -> int:
    from app.diagnostics import run_doctor as doctor  # lazy: start-up (see SUBCOMMANDS)

    return doctor(verbose=bool(getattr(args, "verbose", 0)))


# --- entry point -------------------------------------------------------------------------------

VERBOSE_FLAGS = {"-v": 1, "--verbose": 1, "-vv": 2}


def _verbosity(argv: Sequence[str]) -> int:
    """-v / --verbose (INFO on stderr), -vv (DEBUG); they may stand anywhere on the line."""
    return min(2, sum(VERBOSE_FLAGS.get(a, 0) for a in argv))


def _add_verbose(p: argparse.ArgumentParser, default: int | str = 0) -> None:
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=default,
        help="say more on stderr (-vv: debug); LLAMBDA_LOG=debug does too",
    )


def _print_version(verbose: int) -> int:
    from app.diagnostics import version_line, version_report  # lazy: only --version needs it

    print(version_report() if verbose else version_line())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llambda",
        description="Chat with GGUF language models on your own CPU. "
        "With no command, opens the window (optionally on FILE).",
    )
    p.add_argument("--version", action="store_true", help="print the version (with -v: of every component)")
    _add_verbose(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help, add_arguments, run) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help, description=help)
        add_arguments(sp)
        _add_verbose(sp, argparse.SUPPRESS)
        sp.set_defaults(run=run)
    return p


def command_list() -> str:
    """The subcommands, one per line, for a mistyped command."""
    width = max(len(n) for n in SUBCOMMANDS)
    return "\n".join(f"  {name:<{width}}  {help}" for name, (help, _a, _r) in SUBCOMMANDS.items())


def unknown_word(argv: Sequence[str]) -> str | None:
    """The first argument when it is neither an option, a command nor an existing file."""
    word = argv[0] if argv else None
    if word is None or word.startswith("-") or word in SUBCOMMANDS or os.path.exists(word):
        return None
    return word


def display_problem() -> str | None:
    """Why the window cannot open here (no display on Linux, over SSH), or None."""
    if not sys.platform.startswith("linux"):
        return None
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith(("xcb", "wayland")):
        return None  # offscreen, vnc, eglfs...: Qt needs no display server
    hint = "use the command line instead: llambda chat MODEL, or llambda --help"
    if os.environ.get("WAYLAND_DISPLAY"):
        return None
    display = os.environ.get("DISPLAY", "")
    if not display:
        return (
            f"llambda: error: the window cannot open: no display (DISPLAY and WAYLAND_DISPLAY are "
            f"unset, e.g. over SSH); {hint}"
        )
    host, _, number = display.rpartition(":")
    number = number.split(".")[0]
    if host in ("", "unix") and number.isdigit() and not _x_socket_answers(int(number)):
        return f"llambda: error: the window cannot open: no X server answers on DISPLAY={display}; {hint}"
    return None


def _x_socket_answers(number: int) -> bool:
    """A local X server listens on /tmp/.X11-unix/XN (or the abstract socket of that name)."""
    for address in (f"\0/tmp/.X11-unix/X{number}", f"/tmp/.X11-unix/X{number}"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(2.0)
            s.connect(address)
            return True
        except OSError:
            continue
        finally:
            s.close()
    return False


def _open_window(argv: Sequence[str], verbose: int = 0) -> int:
    word = unknown_word(argv)
    if word is not None:
        print(f"llambda: error: no such command or file: {word}\ncommands:\n{command_list()}", file=sys.stderr)
        return EXIT_USAGE
    p = argparse.ArgumentParser(prog="llambda", description="Open the Llambda window.")
    p.add_argument("--version", action="store_true", help="print the version (with -v: of every component)")
    _add_verbose(p)
    p.add_argument("file", nargs="?", help="a GGUF model to open")
    p.add_argument(
        "--starter",
        action="store_true",
        help="fetch the small SmolLM2-135M-Instruct model into the library and open it",
    )
    p.add_argument(
        "--self-test",
        action="store_true",
        help="check the engine and the window on a tiny built-in model, print one line, exit",
    )
    args = p.parse_args(argv)
    if args.version:
        return _print_version(max(verbose, args.verbose))
    if args.self_test:
        from app.selftest import run as self_test  # lazy: the engine and Qt

        return self_test()
    problem = display_problem()
    if problem is not None:
        print(problem, file=sys.stderr)
        return EXIT_USAGE
    if args.starter and not args.file:
        args.file = str(_fetch_starter_with_progress())
    try:
        from app.ui.main import run_window  # lazy: PySide6; also absent from a build without the window
    except ImportError as e:
        print(
            f"llambda: error: the window cannot start: {e} (reinstall Llambda; the command-line "
            "tools still work: llambda --help)",
            file=sys.stderr,
        )
        return 1
    return run_window(args)


def _fetch_starter_with_progress() -> Path:
    from app.library import ModelLibrary  # lazy: only --starter needs these
    from app.starter import fetch_starter

    shown: dict[str, Any] = {"stage": None, "pct": -1}

    def progress(stage: str, done: int, total: int) -> None:
        pct = done * 100 // total if total else 0
        if (stage, pct // 10) != (shown["stage"], shown["pct"] // 10):
            shown["stage"], shown["pct"] = stage, pct
            print(f"starter model: {stage} {pct}%", file=sys.stderr)

    name = fetch_starter(progress)
    return ModelLibrary().resolve(name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = _verbosity(argv)
    argv = [a for a in argv if a not in VERBOSE_FLAGS]  # anywhere, even after `models list`
    command = next((a for a in argv if not a.startswith("-")), None)
    helping = any(a in ("-h", "--help") for a in argv)
    window = not (command in SUBCOMMANDS or (command is None and helping))
    if "--self-test" not in argv:  # the self-test touches no user folder, logs included
        logs.setup("window" if window and "--version" not in argv else "cli", verbose)
    log = logs.get("cli")
    try:
        if window:
            return _open_window(argv, verbose)
        args = build_parser().parse_args(argv)
        args.verbose = verbose
        if args.version:
            return _print_version(verbose)
        log.info("command: %s", args.command)
        return args.run(args)
    except LlambdaError as e:
        log.warning("%s failed: %s", command or "llambda", e, extra={"file_only": True})
        print(f"llambda: error: {e}", file=sys.stderr)
        return exit_code_for(e)
    except KeyboardInterrupt:
        print("llambda: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the last line of defence: one line, never a traceback (that goes to the log)
        log.error("internal error in %s", command or "llambda", exc_info=True, extra={"file_only": True})
        print(f"llambda: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
