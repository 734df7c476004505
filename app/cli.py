"""The command line: `llambda [FILE.gguf]` opens the window; subcommands run the engine headless.

Every subcommand prints one clear line on stderr for an error and exits with the code from
`app.errors` (2 usage, 3 bad file, 4 unsupported, 5 out of memory); never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from app import __version__
from app.errors import EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, LlambdaError, exit_code_for

SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def subcommand(name: str, help: str):
    """Register `func(args) -> exit code` with an `add_arguments(parser)` companion."""
    def wrap(add_arguments):
        def bind(run):
            SUBCOMMANDS[name] = (help, add_arguments, run)
            return run
        return bind
    return wrap


def isa_description() -> str:
    """Which kernels run: the instruction-set level, and a warning when it is the slow path."""
    try:
        from app.kernels import best_isa_level, isa_level, isa_name
    except ImportError:
        return "not built (reinstall Llambda)"
    name = isa_name()
    if isa_level() == 0:
        if best_isa_level() == 0:
            return f"{name} (this CPU has no AVX2: the portable kernels run, much slower)"
        return f"{name} (forced by LLAMBDA_ISA)"
    return name


def version_line() -> str:
    return f"llambda {__version__} (kernels: {isa_description()})"


# --- inspect -----------------------------------------------------------------------------------

def _inspect_args(p: argparse.ArgumentParser) -> None:
    from app.engine.cli import positive_int

    p.add_argument("model", help="path of a GGUF file")
    p.add_argument("--ctx", type=positive_int, default=None, help="context length for the memory estimate")
    p.add_argument("--json", action="store_true", help="machine-readable output")


@subcommand("inspect", "header, metadata, tensor types, support verdict, memory estimate")(_inspect_args)
def run_inspect(args: argparse.Namespace) -> int:
    from app.model.inspect import describe, format_description

    info = describe(args.model, n_ctx=args.ctx)
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
    from app.library import resolve_model
    from app.text import cli_tokenize

    try:
        return cli_tokenize(resolve_model(args.model), args.text, as_json=args.json,
                            special=args.special, add_special=not args.no_bos)
    except ValueError as e:
        if isinstance(e, LlambdaError):
            raise
        print(f"llambda: error: {e}", file=sys.stderr)
        return EXIT_USAGE


# --- generate, chat, perplexity, bench (app/engine/cli.py) --------------------------------------------------

def _engine_args(name: str):
    def add(p: argparse.ArgumentParser) -> None:
        from app.engine import cli as engine_cli

        getattr(engine_cli, f"add_{name}_args")(p)
    return add


def _engine_run(name: str):
    def run(args: argparse.Namespace) -> int:
        from app.engine import cli as engine_cli

        return getattr(engine_cli, f"run_{name}")(args)
    return run


subcommand("generate", "one completion of a prompt, with timings")(_engine_args("generate"))(_engine_run("generate"))
subcommand("chat", "interactive chat in the terminal")(_engine_args("chat"))(_engine_run("chat"))


subcommand("perplexity", "perplexity of a text; --kl-divergence: how far from a base (another quantization)")(
    _engine_args("perplexity"))(_engine_run("perplexity"))
subcommand("bench", "prompt-processing and generation speed, like llama-bench; --kernels: per type")(
    _engine_args("bench"))(_engine_run("bench"))


# --- models ------------------------------------------------------------------------------------

def _models_args(p: argparse.ArgumentParser) -> None:
    from app.library.cli import configure_parser

    configure_parser(p)


@subcommand("models", "list, import or remove models in the library")(_models_args)
def run_models(args: argparse.Namespace) -> int:
    from app.library.cli import run_models as run

    return run(args)


# --- entry point -------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llambda",
        description="Chat with GGUF language models on your own CPU. "
                    "With no command, opens the window (optionally on FILE).")
    p.add_argument("--version", action="version", version=version_line())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help, add_arguments, run) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help, description=help)
        add_arguments(sp)
        sp.set_defaults(run=run)
    return p


def _open_window(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="llambda", description="Open the Llambda window.")
    p.add_argument("--version", action="version", version=version_line())
    p.add_argument("file", nargs="?", help="a GGUF model to open")
    p.add_argument("--starter", action="store_true",
                   help="fetch the small SmolLM2-135M-Instruct model into the library and open it")
    p.add_argument("--self-test", action="store_true",
                   help="check the engine and the window on a tiny built-in model, print one line, exit")
    args = p.parse_args(argv)
    if args.self_test:
        from app.selftest import run as self_test

        return self_test()
    if args.starter and not args.file:
        args.file = str(_fetch_starter_with_progress())
    try:
        from app.ui.main import run_window
    except ImportError:
        print("llambda: error: the window is not part of this build yet; "
              "use a subcommand (llambda --help)", file=sys.stderr)
        return 1
    return run_window(args)


def _fetch_starter_with_progress():
    from app.library import ModelLibrary
    from app.starter import fetch_starter

    shown = {"stage": None, "pct": -1}

    def progress(stage: str, done: int, total: int) -> None:
        pct = done * 100 // total if total else 0
        if (stage, pct // 10) != (shown["stage"], shown["pct"] // 10):
            shown["stage"], shown["pct"] = stage, pct
            print(f"starter model: {stage} {pct}%", file=sys.stderr)

    name = fetch_starter(progress)
    return ModelLibrary().resolve(name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
            return _open_window(argv)
        args = build_parser().parse_args(argv)
        return args.run(args)
    except LlambdaError as e:
        print(f"llambda: error: {e}", file=sys.stderr)
        return exit_code_for(e)
    except KeyboardInterrupt:
        print("llambda: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # the last line of defence: one line, never a traceback
        print(f"llambda: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
