"""`llambda serve [MODEL]`: load a model and answer the OpenAI API on localhost.

Safe by default: binds 127.0.0.1; any other address needs --api-key (the command refuses to start
without one). The socket is bound here, before uvicorn starts, so a taken port is one line of
error and --port 0 picks a free one (the line on stderr says which).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING

from app import defaults as D
from app.engine.cli import open_engine, positive_int
from app.errors import EXIT_OK, EXIT_USAGE
from app.library import ModelLibrary

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = ["add_serve_args", "run_serve", "bind_socket", "model_id_of", "make_server"]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64  # beyond this many open connections uvicorn answers 503


def add_serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "model",
        nargs="?",
        help="a GGUF file, or the name of a model in the library (default: the library's most recently used model)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this computer only; any other address needs --api-key)",
    )
    p.add_argument("--port", type=_port, default=8080, help="TCP port (0: any free port)")
    p.add_argument(
        "--api-key", default=None, help="clients must send 'Authorization: Bearer KEY' (also read from LLAMBDA_API_KEY)"
    )
    p.add_argument(
        "--ctx",
        type=positive_int,
        default=None,
        help="context length in tokens (default: the training length, capped by what fits in memory)",
    )
    p.add_argument("--threads", type=int, default=D.THREADS, help="worker threads (default: physical cores)")
    p.add_argument(
        "--kv-type", choices=D.KV_TYPES, default=D.KV_TYPE, help="KV cache precision (q8_0: half the memory of f16)"
    )
    p.add_argument("--batch", type=positive_int, default=D.N_BATCH, help="prompt tokens per decoder call")
    p.add_argument(
        "--cors-origin",
        default=None,
        metavar="ORIGIN",
        help="let web pages of this one origin (e.g. http://localhost:3000) call the "
        "server; without it no CORS headers are sent",
    )
    p.add_argument("--log-prompts", action="store_true", help="also log the prompts' text (never logged otherwise)")


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"{v} is not a port number (0..65535)")
    return v


def check_exposure(host: str, api_key: str | None, cors_origin: str | None) -> str | None:
    """The reason to refuse these settings, or None."""
    from app.server.app import is_loopback_host  # lazy: starlette; `llambda --help` loads this module

    if not host:
        return "--host is empty"
    if not is_loopback_host(host) and not api_key:
        return f"--host {host} lets other computers connect: give an --api-key (or keep the default 127.0.0.1)"
    if api_key is not None and len(api_key) < 8:
        return "--api-key must be at least 8 characters"
    if cors_origin is not None and (cors_origin == "*" or "://" not in cors_origin):
        return "--cors-origin takes one origin such as http://localhost:3000 (not '*')"
    return None


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (OSError with the reason if it cannot be had)."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def model_id_of(path: str) -> str:
    name = os.path.basename(path)
    return name[:-5] if name.lower().endswith(".gguf") else name


def _default_model() -> str | None:
    entries = [e for e in ModelLibrary().list()]
    if not entries:
        return None
    entries.sort(key=lambda e: (e.last_used or 0, e.added))
    return entries[-1].name


def _setup_logging() -> None:
    """What serve needs of logging, only if nothing configured it: its lines on stderr."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("app.server", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False


def make_server(app: ASGIApp, sock: socket.socket) -> uvicorn.Server:
    """A uvicorn server for `app` (run it with `server.run(sockets=[sock])`; stop it by setting
    `server.should_exit`)."""
    import uvicorn  # lazy: heavy; `llambda --help` loads this module

    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=3,
        server_header=False,
    )
    return uvicorn.Server(config)  # catches Ctrl+C / SIGTERM when run on the main thread


def run_serve(args: argparse.Namespace) -> int:
    from app.server.app import ServerOptions, create_app  # lazy: starlette and asyncio; `llambda --help`
    from app.server.owner import EngineOwner  # loads this module

    api_key = args.api_key or os.environ.get("LLAMBDA_API_KEY") or None
    problem = check_exposure(args.host, api_key, args.cors_origin)
    if problem is None and args.model is None:
        args.model = _default_model()
        if args.model is None:
            problem = "name a MODEL (the library is empty: llambda models import FILE)"
    if problem:
        print(f"llambda serve: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as e:
        print(f"llambda serve: error: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    _setup_logging()
    with sock:
        eng = open_engine(args)
        owner = EngineOwner(eng)
        try:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            options = ServerOptions(
                host=args.host, port=port, api_key=api_key, cors_origin=args.cors_origin, log_prompts=args.log_prompts
            )
            # a library name is the model's id; a file is known by its name
            model_id = model_id_of(args.model) if os.path.exists(args.model) else args.model
            app = create_app(owner, model_id, options)
            print(
                f"llambda serve: {model_id} on http://{shown}:{port}/v1 "
                f"(context {eng.n_ctx}, {eng.kv_type} KV cache, {eng.n_threads} threads"
                f"{', key required' if api_key else ''}); Ctrl+C stops",
                file=sys.stderr,
                flush=True,
            )
            try:
                make_server(app, sock).run(sockets=[sock])
            except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it shut down for
                pass
            print("llambda serve: stopped", file=sys.stderr)
        finally:
            owner.close()
            eng.close()
    return EXIT_OK
