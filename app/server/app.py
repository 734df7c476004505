"""The HTTP face of a loaded model: an OpenAI-compatible API as a Starlette (ASGI) app.

Starlette on uvicorn, because it is a small, typed ASGI toolkit with streaming responses and
middleware hooks and nothing else (no ORM, no validation layer to work around), served by a
mature HTTP/1.1 implementation, so this package writes no HTTP parsing of its own.

Routes: GET /health, GET /v1/models, POST /v1/chat/completions, POST /v1/completions.
Guards, outermost first: one log line per request; Host and Origin checks (a web page cannot
reach a loopback server through DNS rebinding or a cross-site POST); CORS only for the one
origin given; Bearer key in constant time; bodies capped. Decoding happens on the engine owner's
thread (app/server/owner.py); this module only awaits its events.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncGenerator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.engine.generate import Finished, GenerationRequest, TextPiece
from app.errors import TemplateError
from app.server import openai_wire as wire
from app.server.owner import EngineOwner, ForwardingOwner, Job, JobFailed, RequestRejected

if TYPE_CHECKING:
    from app.engine.engine import Engine

Prepare = Callable[["Engine"], GenerationRequest]  # a job's request, built on the engine's thread
Spec = wire.ChatSpec | wire.CompletionSpec

log = logging.getLogger(__name__)

__all__ = ["ServerOptions", "create_app", "is_loopback_host", "MAX_BODY_BYTES"]

MAX_BODY_BYTES = 1 << 20
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback_host(host: str) -> bool:
    """True for names and addresses that only this computer can reach."""
    h = host.strip().strip("[]").lower().rstrip(".")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> str:
    """The host part of a Host header or an origin's authority ("[::1]:8080" -> "::1")."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    cors_origin: str | None = None
    log_prompts: bool = False
    max_body_bytes: int = MAX_BODY_BYTES

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)


def _error(
    status: int,
    message: str,
    type: str | None = None,
    code: str | None = None,
    param: str | None = None,
    headers: dict | None = None,
) -> JSONResponse:
    type = type or ("invalid_request_error" if status < 500 else "server_error")
    return JSONResponse(wire.error_body(message, type, param, code), status_code=status, headers=headers)


# -- guards (plain ASGI middleware: they never buffer or wrap a streamed body) ------------------


class RequestLog:
    """One log line per request: method, path, status, tokens, seconds (never the prompt). It is
    written just before the answer's last byte goes out, so a client that has its whole answer
    finds the line already in the log; a request that never sends one logs as it ends."""

    api: Api  # set by create_app on the outermost layer, for tests and the CLI to reach the API

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = [0]
        logged = [False]
        scope.setdefault("state", {})

        def write_line() -> None:
            logged[0] = True
            st = scope["state"]
            tokens = st.get("tokens")
            extra = f" {tokens[0]}+{tokens[1]} tok" if tokens else ""
            if st.get("note"):
                extra += f" ({st['note']})"
            log.info(
                "%s %s %s%s %.3fs",
                scope.get("method"),
                scope.get("path"),
                status[0] or "-",
                extra,
                time.perf_counter() - t0,
            )

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body") and not logged[0]:
                write_line()
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            if not logged[0]:
                write_line()


class HostGuard:
    """Bound to loopback: the Host header must name loopback (else 403: DNS rebinding), and a
    browser's Origin must be loopback or the --cors-origin (else 403: a cross-site request)."""

    def __init__(self, app: ASGIApp, options: ServerOptions):
        self.app = app
        self.options = options

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        problem = None
        if self.options.loopback and not is_loopback_host(_split_host(host)):
            problem = "this server answers only requests addressed to localhost (Host header refused)"
        elif origin and origin != self.options.cors_origin and not _loopback_origin(origin):
            problem = "requests from web pages of other sites are refused (Origin header)"
        if problem:
            scope["state"]["note"] = "refused host" if "Host" in problem else "refused origin"
            return await _error(403, problem, code="forbidden")(scope, receive, send)
        await self.app(scope, receive, send)


def _loopback_origin(origin: str) -> bool:
    scheme, _, rest = origin.partition("://")
    return scheme in ("http", "https") and bool(rest) and is_loopback_host(_split_host(rest))


class BearerGuard:
    """With a key: every route but /health needs `Authorization: Bearer KEY` (constant time)."""

    OPEN = ("/health",)

    def __init__(self, app: ASGIApp, api_key: str | None):
        self.app = app
        self.digest = hashlib.sha256(api_key.encode()).digest() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.digest is None or scope.get("path") in self.OPEN:
            return await self.app(scope, receive, send)
        given = b""
        for k, v in scope.get("headers") or ():
            if k == b"authorization":
                given = v
                break
        scheme, _, token = given.partition(b" ")
        ok = hmac.compare_digest(hashlib.sha256(token.strip()).digest(), self.digest)
        if not (ok and scheme.lower() == b"bearer"):
            scope["state"]["note"] = "no or wrong key"
            return await _error(
                401,
                "a valid API key is needed: Authorization: Bearer KEY",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )(scope, receive, send)
        await self.app(scope, receive, send)


# -- the API ----------------------------------------------------------------------------------------


class Api:
    def __init__(
        self, owner: EngineOwner | ForwardingOwner, model_id: str, options: ServerOptions, created: int | None = None
    ):
        self.owner = owner
        self.model_id = model_id  # may change (the window loads another model)
        self.options = options
        self.created = int(created or time.time())
        self.requests_served = 0

    async def read_json(self, request: Request) -> Any:  # the parsed JSON
        cap = self.options.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > cap):
            raise wire.WireError(f"the request body is larger than {cap} bytes", status=413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > cap:
                raise wire.WireError(f"the request body is larger than {cap} bytes", status=413)
            chunks.append(chunk)
        body = b"".join(chunks)
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as e:
            detail = e.msg if isinstance(e, json.JSONDecodeError) else "too deeply nested"
            raise wire.WireError(f"the request body is not valid JSON: {detail}") from None

    # -- routes ---------------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "queue": self.owner.queue_length})

    async def models(self, request: Request) -> Response:
        return JSONResponse(wire.model_list(self.model_id, self.created))

    async def chat_completions(self, request: Request) -> Response:
        try:
            spec = wire.parse_chat(await self.read_json(request))
        except wire.WireError as e:
            return JSONResponse(e.body(), status_code=e.status)
        if self.options.log_prompts:
            log.info("chat messages: %s", json.dumps(list(spec.messages), ensure_ascii=False))

        def prepare(engine: Engine) -> GenerationRequest:
            try:
                ids = engine.chat_prompt(list(spec.messages))
            except TemplateError as e:
                raise RequestRejected(str(e)) from None
            return self._request(ids, spec, "messages", engine.n_ctx)

        return await self._run(request, prepare, spec, chat=True)

    async def completions(self, request: Request) -> Response:
        try:
            spec = wire.parse_completion(await self.read_json(request))
        except wire.WireError as e:
            return JSONResponse(e.body(), status_code=e.status)
        if self.options.log_prompts:
            log.info("completion prompt: %s", json.dumps(spec.prompt, ensure_ascii=False))

        def prepare(engine) -> GenerationRequest:  # engine: Engine (unannotated: Tokenizer has no len())
            if isinstance(spec.prompt, str):
                ids = engine.raw_prompt(spec.prompt)
            else:
                n_vocab = getattr(engine.tokenizer, "n_vocab", None) or len(engine.tokenizer)
                if any(not 0 <= t < n_vocab for t in spec.prompt):
                    raise RequestRejected(f"'prompt' has token ids outside 0..{n_vocab - 1}", param="prompt")
                ids = list(spec.prompt)
            return self._request(ids, spec, "prompt", engine.n_ctx)

        return await self._run(request, prepare, spec, chat=False)

    def _request(self, ids: list[int], spec: Spec, what: str, n_ctx: int) -> GenerationRequest:
        """The engine request, bounded by the context: the prompt and max_tokens must fit."""
        n = len(ids)
        if n == 0:
            raise RequestRejected(f"the {what} make no tokens", param=what)
        if n >= n_ctx:
            raise RequestRejected(
                f"the {what} are {n} tokens, and this model's context holds {n_ctx} "
                f"(room is needed for at least one token of reply)",
                code="context_length_exceeded",
                param=what,
            )
        max_tokens = n_ctx - n if spec.max_tokens is None else spec.max_tokens
        if n + max_tokens > n_ctx:
            raise RequestRejected(
                f"the {what} ({n} tokens) and max_tokens ({max_tokens}) are {n + max_tokens} "
                f"tokens; this model's context holds {n_ctx}",
                code="context_length_exceeded",
                param="max_tokens",
            )
        return GenerationRequest(
            tuple(ids),
            max_tokens=max_tokens,
            sampler=spec.sampler,
            stop_strings=spec.stop,
            stop_on_eog=not spec.ignore_eos,
            context_policy="stop",
        )

    async def _run(self, request: Request, prepare: Prepare, spec: Spec, chat: bool) -> Response:
        job = self.owner.submit(Job(prepare))
        state = request.scope["state"]
        watcher = asyncio.ensure_future(_watch_disconnect(request.receive, job))
        try:
            first = await _next_event(job)
        except _Disconnected:
            job.cancel()
            state["note"] = "client left while queued"
            return Response(status_code=499)
        except BaseException:
            job.cancel()
            watcher.cancel()
            raise
        if isinstance(first, JobFailed):
            watcher.cancel()
            return _error(first.status, first.message, code=first.code, param=first.param)
        rid = wire.new_id("chatcmpl" if chat else "cmpl")
        created = int(time.time())
        if spec.stream:
            return SSEResponse(self._stream(job, watcher, rid, created, spec, chat, state), job, watcher)
        try:
            fin = None
            while fin is None:
                ev = await _next_event(job)
                if isinstance(ev, JobFailed):
                    return _error(ev.status, ev.message, code=ev.code)
                if isinstance(ev, Finished):
                    fin = ev
        except _Disconnected:
            job.cancel()
            state["note"] = "client left"
            return Response(status_code=499)
        finally:
            watcher.cancel()
            job.cancel()  # a no-op after Finished; stops the engine on any other way out
        self._done(state, fin)
        build = wire.chat_response if chat else wire.completion_response
        return JSONResponse(build(rid, self.model_id, created, fin))

    def _done(self, state: dict, fin: Finished) -> None:
        self.requests_served += 1
        state["tokens"] = (len(fin.prompt_ids), len(fin.ids))
        if fin.stop_reason == "cancelled":
            state["note"] = "cancelled"

    async def _stream(
        self, job: Job, watcher: asyncio.Future, rid: str, created: int, spec: Spec, chat: bool, state: dict
    ) -> AsyncGenerator[bytes, None]:
        model = self.model_id
        if chat:
            yield _sse(wire.chat_chunk(rid, model, created, {"role": "assistant", "content": ""}))
        ended = False
        while not ended:
            try:
                events = [await _next_event(job)]
            except _Disconnected:
                job.cancel()
                state["note"] = "client left mid-stream"
                return
            while not job.events.empty():  # what arrived together is written together
                events.append(job.events.get_nowait())
            if _GONE in events:
                state["note"] = "client left mid-stream"
                return
            # The pieces that arrived together (a run of tokens the engine decoded in one call)
            # go out as one chunk: one event for the client to parse, not one per token. Nothing
            # waits for more: what the loop found is written now.
            text = "".join(ev.text for ev in events if isinstance(ev, TextPiece))
            out = []
            if text:
                out.append(
                    _sse(
                        wire.chat_chunk(rid, model, created, {"content": text})
                        if chat
                        else wire.completion_chunk(rid, model, created, text)
                    )
                )
            last = events[-1]  # a Finished or a JobFailed is a job's last event
            if isinstance(last, JobFailed):
                out.append(_sse(wire.error_body(last.message, "server_error")))
                ended = True
            elif isinstance(last, Finished):
                out += self._last_chunks(last, rid, created, spec, chat, state)
                ended = True
            if out:
                yield b"".join(out)
        yield b"data: [DONE]\n\n"

    def _last_chunks(self, fin: Finished, rid: str, created: int, spec: Spec, chat: bool, state: dict) -> list[bytes]:
        """The chunk with the finish reason (and timings), then usage if the client asked."""
        self._done(state, fin)
        build = wire.chat_chunk if chat else wire.completion_chunk
        first: Any = {} if chat else ""
        out = [
            _sse(
                build(rid, self.model_id, created, first, wire.finish_reason(fin), extra={"timings": wire.timings(fin)})
            )
        ]
        if spec.include_usage:
            out.append(_sse(build(rid, self.model_id, created, None, usage_=wire.usage(fin))))
        return out


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


class _Disconnected(Exception):
    pass


_GONE = object()  # put in a job's event queue when its client disconnects


async def _watch_disconnect(receive: Receive, job: Job) -> None:
    """Waits for the client to go (the request body is already read); then cancels the job and
    wakes whoever waits on its events."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            job.events.put_nowait(_GONE)
            return


async def _next_event(job: Job) -> object:
    """The job's next event, or _Disconnected when the client went first."""
    ev = await job.events.get()
    if ev is _GONE:
        job.events.put_nowait(_GONE)  # stays gone for any later read
        raise _Disconnected()
    return ev


class SSEResponse(Response):
    """Server-sent events from an async iterator of byte chunks. The client going away ends the
    iterator (and with it, the job): the disconnect watcher is the one started by the route."""

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncGenerator[bytes, None], job: Job, watcher: asyncio.Future):
        self.chunks = chunks
        self.job = job
        self.watcher = watcher
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the connection broke while writing: the client is gone
            scope["state"]["note"] = "client left mid-stream"
        finally:
            self.job.cancel()  # a no-op once Finished arrived
            self.watcher.cancel()
            await self.chunks.aclose()


# -- the application ------------------------------------------------------------------------------


def create_app(
    owner: EngineOwner | ForwardingOwner,
    model_id: str,
    options: ServerOptions | None = None,
    created: int | None = None,
) -> RequestLog:
    """The ASGI app (with its guards) serving `owner`'s engine as `model_id`; its `.api` is the
    Api object (model_id, requests_served)."""
    options = options or ServerOptions()
    api = Api(owner, model_id, options, created)

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)  # registered for HTTPException only
        if exc.status_code == 405:
            return _error(405, f"{request.method} is not allowed on {request.url.path}")
        if exc.status_code == 404:
            return _error(404, f"no such endpoint: {request.url.path}", code="not_found")
        return _error(exc.status_code, str(exc.detail))

    async def internal(request: Request, exc: Exception) -> Response:
        log.error("internal error on %s: %s: %s", request.url.path, type(exc).__name__, exc)
        return _error(500, "internal server error")

    routes = [
        Route("/health", api.health, methods=["GET"]),
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/chat/completions", api.chat_completions, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, Exception: internal})
    app.state.api = api
    inner: ASGIApp = BearerGuard(app, options.api_key)
    if options.cors_origin:
        inner = CORSMiddleware(
            inner,
            allow_origins=[options.cors_origin],
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )
    guarded = RequestLog(HostGuard(inner, options))
    guarded.api = api
    return guarded
