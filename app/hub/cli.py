"""`llambda models search|files|download|token`: the Hub from the command line.

`add_commands(sub)` adds them to the `models` subparsers (app/library/cli.py owns the others);
`run(ns)` runs one. Results go to stdout, progress and errors to stderr, each error one line.
A download that stops (Ctrl+C, a network failure) keeps its bytes: the same command resumes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence, TextIO

from app.errors import LlambdaError, exit_code_for
from app.units import format_bytes

if TYPE_CHECKING:
    from app.hub.verdict import RemoteVerdict  # imported lazily at run time (start-up time)

COMMANDS = ("search", "files", "download", "token")


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("search", help="search the Hugging Face Hub for GGUF models")
    p.add_argument("query", nargs="?", default="", help="words in the repository name")
    p.add_argument("--limit", type=int, default=20, help="at most this many results (default 20)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("files", help="a repository's GGUF files, each with our verdict (from its header)")
    p.add_argument("repo", help="REPO as owner/name, e.g. Qwen/Qwen2.5-0.5B-Instruct-GGUF")
    p.add_argument("--no-verdict", action="store_true", help="list only; fetch no headers")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("download", help="download a GGUF file (resumable, SHA-256 checked) into the library")
    p.add_argument("repo", help="REPO as owner/name")
    p.add_argument("file", help="the file's name (a split model: its name without -0000k-of-0000n)")
    p.add_argument("--cancel", action="store_true", help="discard a paused download of this file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("token", help="the access token for gated models, kept in the OS keyring")
    p.add_argument(
        "action", choices=("set", "clear", "status"), help="set (read from stdin, or asked for), clear, or status"
    )


def _search(ns: argparse.Namespace, out: TextIO) -> int:
    from app.hub import HubClient

    hits = HubClient().search(ns.query, limit=ns.limit)
    if ns.json:
        json.dump({"results": [h.to_json() for h in hits]}, out, indent=1)
        out.write("\n")
        return 0
    if not hits:
        out.write(f"no GGUF models found for {ns.query!r}\n")
        return 0
    rows = [("REPOSITORY", "DOWNLOADS", "LIKES", "")] + [
        (h.repo_id, f"{h.downloads:,}", f"{h.likes:,}", "gated" if h.gated else "") for h in hits
    ]
    _table(rows, out)
    return 0


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")


def _files(ns: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from app.hub import HubClient, check_remote

    client = HubClient()
    repo = client.repo_files(ns.repo)
    verdicts: dict[str, RemoteVerdict | LlambdaError] = {}
    if not ns.no_verdict:
        for f in repo.files:
            try:
                verdicts[f.name] = check_remote(client, repo.repo_id, repo.revision, f)
            except LlambdaError as e:
                verdicts[f.name] = e
    if ns.json:
        files = []
        for f in repo.files:
            d = f.to_json()
            v: Any = verdicts.get(f.name)  # a RemoteVerdict, an error, or None
            d["verdict"] = v.to_json() if hasattr(v, "to_json") else ({"error": str(v)} if v else None)
            files.append(d)
        json.dump(
            {
                "repo_id": repo.repo_id,
                "revision": repo.revision,
                "licence": repo.licence,
                "gated": repo.gated,
                "files": files,
                "incomplete": list(repo.incomplete),
            },
            out,
            indent=1,
        )
        out.write("\n")
        return 0
    out.write(
        f"{repo.repo_id} at {repo.revision[:12]}; licence: {repo.licence or 'not given'}"
        f"{'; gated: accept its licence on the website first' if repo.gated else ''}\n"
    )
    if not repo.files:
        out.write("no GGUF files\n")
    rows = [("FILE", "QUANT", "SIZE", "VERDICT")]
    for f in repo.files:
        v = verdicts.get(f.name)
        if v is None:
            said = ""
        elif isinstance(v, Exception):
            said = f"unknown: {v}"
        else:
            said = f"{v.verdict}: " + "; ".join(v.messages)
        name = f.name + (f" ({len(f.parts)} parts)" if f.split else "")
        rows.append((name, f.quantization, format_bytes(f.size), said))
    _table(rows, out)
    for name in repo.incomplete:
        err.write(f"llambda: warning: split model {name} is incomplete on the Hub; not offered\n")
    return 0


def _download(ns: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from app.hub import HubClient, HubError
    from app.hub.download import job_for, pending_jobs, run_job

    if ns.cancel:
        for job in pending_jobs():
            if job.repo_id == ns.repo and (job.name == ns.file or ns.file in [p["path"] for p in job.parts]):
                job.delete()
                out.write(f"cancelled the download of {job.name}; nothing was kept\n")
                return 0
        err.write(f"llambda: error: no paused download of {ns.file} from {ns.repo}\n")
        return 1
    client = HubClient()
    repo = client.repo_files(ns.repo)
    try:
        hub_file = repo.find(ns.file)
    except KeyError:
        names = ", ".join(f.name for f in repo.files[:8]) or "none"
        raise HubError(f"{ns.repo} has no GGUF file {ns.file!r} (its GGUF files: {names})", "not_found") from None
    job = job_for(repo, hub_file)
    resuming = job.have() > 0
    show = err.isatty() and not ns.json
    shown: dict[str, Any] = {"t": 0.0, "stage": None}

    def on_event(e: dict) -> None:
        if e["event"] != "progress":
            return
        now = time.monotonic()
        if e["stage"] == shown["stage"] and now - shown["t"] < (0.2 if show else 5.0) and e["done"] < e["total"]:
            return
        shown["t"], shown["stage"] = now, e["stage"]
        pct = 100 * e["done"] // max(e["total"], 1)
        line = f"{e['stage']}: {pct:3d}% of {format_bytes(e['total'])}"
        if e["stage"] == "download" and e["speed"]:
            eta = e["eta"]
            line += f", {format_bytes(int(e['speed']))}/s" + (f", {_duration(eta)} left" if eta else "")
        err.write(("\r\033[K" + line) if show else line + "\n")
        err.flush()

    if resuming and not ns.json:
        err.write(f"resuming {hub_file.name}: {format_bytes(job.have())} of {format_bytes(job.size)} already here\n")
    try:
        entry, duplicate = run_job(job, client=client, on_event=on_event)
    except KeyboardInterrupt:
        if show:
            err.write("\n")
        err.write(f"llambda: paused {hub_file.name} at {format_bytes(job.have())}; run the same command to resume\n")
        return 130
    finally:
        if show:
            err.write("\r\033[K")
    if ns.json:
        json.dump({"status": "duplicate" if duplicate else "downloaded", "model": entry.to_json()}, out, indent=1)
        out.write("\n")
    elif duplicate:
        out.write(f"{hub_file.name} is already in your library as {entry.name}\n")
    else:
        out.write(
            f"downloaded {hub_file.name} ({format_bytes(entry.size)}, SHA-256 checked) into your library "
            f"as {entry.name}\n"
        )
    return 0


def _duration(s: float) -> str:
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


def _token(ns: argparse.Namespace, out: TextIO) -> int:
    from app.hub.token import clear_token, save_token, stored_token

    if ns.action == "status":
        out.write("a token is set\n" if stored_token() else "no token is set\n")
        return 0
    if ns.action == "clear":
        out.write("the token was removed\n" if clear_token() else "no token was stored\n")
        return 0
    if sys.stdin.isatty():
        import getpass

        token = getpass.getpass("Hugging Face access token (from its website: Settings → Access Tokens): ")
    else:
        token = sys.stdin.readline()
    where = save_token(token)
    out.write(f"the token is stored in the keyring ({where})\n")
    return 0


def run(ns: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        if ns.models_command == "search":
            return _search(ns, out)
        if ns.models_command == "files":
            return _files(ns, out, err)
        if ns.models_command == "download":
            return _download(ns, out, err)
        if ns.models_command == "token":
            return _token(ns, out)
        err.write(f"llambda: error: unknown models command {ns.models_command!r}\n")
        return 2
    except LlambdaError as e:
        err.write(f"llambda: error: {e}\n")
        return exit_code_for(e)
    except OSError as e:
        err.write(f"llambda: error: {e.strerror or e}\n")
        return 1


__all__ = ["add_commands", "run", "COMMANDS"]
