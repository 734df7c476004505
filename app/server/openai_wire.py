"""The OpenAI wire format, both ways: request bodies checked field by field into plain specs, and
the response objects (chat.completion, chat.completion.chunk, text_completion, model list,
error) built as dicts with the field names of the `openai` package's types.

Every problem with a request is a `WireError` carrying an HTTP status and an OpenAI-style error
object; nothing here raises anything else for bad input. No HTTP, no engine: pure functions.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.engine.generate import Finished
from app.engine.sampler import SamplerSettings

__all__ = [
    "WireError",
    "ChatSpec",
    "CompletionSpec",
    "parse_chat",
    "parse_completion",
    "error_body",
    "finish_reason",
    "usage",
    "timings",
    "chat_response",
    "chat_chunk",
    "completion_response",
    "completion_chunk",
    "model_list",
    "new_id",
]

ROLES = ("system", "developer", "user", "assistant")  # developer: OpenAI's newer name for system
MAX_STOP = 4  # as OpenAI: up to 4 stop sequences
MAX_STOP_CHARS = 256
MAX_SEED = 2**63 - 1


class WireError(Exception):
    """A request the server refuses: HTTP `status` and an OpenAI-style error object."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
    ):
        super().__init__(message)
        self.status, self.param, self.code = status, param, code
        self.type = type or ("invalid_request_error" if status < 500 else "server_error")

    def body(self) -> dict:
        return error_body(str(self), self.type, self.param, self.code)


def error_body(
    message: str, type: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


# -- request fields --------------------------------------------------------------------------------


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _number(body: dict, name: str, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if not _is_number(v):
        raise WireError(f"'{name}' must be a number", param=name)
    if not lo <= v <= hi:
        raise WireError(f"'{name}' must be between {lo:g} and {hi:g}, not {v}", param=name)
    return float(v)


def _integer(body: dict, name: str, lo: int, hi: int):  # -> int | None (unannotated: _sampler's seed needs narrowing)
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
        raise WireError(f"'{name}' must be an integer", param=name)
    v = int(v)
    if not lo <= v <= hi:
        raise WireError(f"'{name}' must be between {lo} and {hi}, not {v}", param=name)
    return v


def _boolean(body: dict, name: str, default: bool = False) -> bool:
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise WireError(f"'{name}' must be true or false", param=name)
    return v


def _stop(body: dict) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise WireError("'stop' must be a string or a list of strings", param="stop")
    if len(v) > MAX_STOP:
        raise WireError(f"'stop' takes at most {MAX_STOP} strings", param="stop")
    if any(len(s) > MAX_STOP_CHARS for s in v):
        raise WireError(f"a stop string is longer than {MAX_STOP_CHARS} characters", param="stop")
    return tuple(s for s in v if s)


def _refuse_unsupported(body: dict) -> None:
    n = _integer(body, "n", 1, 128)
    if n is not None and n != 1:
        raise WireError(f"'n' must be 1: this server makes one choice per request, not {n}", param="n")
    if body.get("logprobs") not in (None, False, 0) or body.get("top_logprobs"):
        raise WireError("logprobs are not supported by this server", param="logprobs")
    for name in ("tools", "functions", "logit_bias"):
        if body.get(name):
            raise WireError(f"'{name}' is not supported by this server", param=name)
    fmt = body.get("response_format")
    if fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        raise WireError('\'response_format\' other than {"type": "text"} is not supported', param="response_format")
    best_of = body.get("best_of")
    if best_of not in (None, 1):
        raise WireError("'best_of' must be 1", param="best_of")
    if body.get("suffix"):
        raise WireError("'suffix' is not supported by this server", param="suffix")
    if _boolean(body, "echo"):
        raise WireError("'echo' is not supported by this server", param="echo")


def _sampler(body: dict) -> SamplerSettings:
    """Sampling settings: the engine's defaults (those of `llambda generate`) for what the
    request leaves out, so the same seed and settings give the same text as the command line.
    Beside OpenAI's fields, top_k, min_p and repeat_penalty are taken as extras."""
    kw: dict[str, Any] = {}
    for name, lo, hi in (
        ("temperature", 0.0, 2.0),
        ("top_p", 0.0, 1.0),
        ("min_p", 0.0, 1.0),
        ("presence_penalty", -2.0, 2.0),
        ("frequency_penalty", -2.0, 2.0),
        ("repeat_penalty", 0.01, 10.0),
    ):
        v = _number(body, name, lo, hi)
        if v is not None:
            kw[name] = v
    if kw.get("top_p") == 0.0:
        kw["top_p"] = 1e-9  # "only the most likely token": (0, 1] is what the sampler takes
    top_k = _integer(body, "top_k", 0, 1 << 30)
    if top_k is not None:
        kw["top_k"] = top_k
    seed = body.get("seed")
    if seed is not None:
        seed = _integer(body, "seed", -MAX_SEED - 1, MAX_SEED)
        kw["seed"] = seed % (1 << 64)  # numpy takes non-negative seeds; -1 and 2**64-1 agree
    try:
        return SamplerSettings(**kw)
    except ValueError as e:
        raise WireError(str(e)) from None


def _max_tokens(body: dict) -> int | None:
    a = _integer(body, "max_completion_tokens", 1, 1 << 31)
    b = _integer(body, "max_tokens", 1, 1 << 31)
    return a if a is not None else b


def _stream(body: dict) -> tuple[bool, bool]:
    stream = _boolean(body, "stream")
    opts = body.get("stream_options")
    include_usage = False
    if opts is not None:
        if not isinstance(opts, dict):
            raise WireError("'stream_options' must be an object", param="stream_options")
        include_usage = _boolean(opts, "include_usage")
    return stream, include_usage


def _model(body: dict) -> str | None:
    m = body.get("model")
    if m is not None and not isinstance(m, str):
        raise WireError("'model' must be a string", param="model")
    return m


def _text_of(content: object, i: int) -> str:
    """A message's content: a string, or a list of text parts (other parts are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise WireError(
                    f"messages[{i}].content: only text parts are supported, not {kind!r}",
                    param=f"messages[{i}].content",
                )
            out.append(part["text"])
        return "".join(out)
    raise WireError(f"messages[{i}].content must be a string or a list of text parts", param=f"messages[{i}].content")


@dataclass(frozen=True)
class ChatSpec:
    messages: tuple[dict, ...]  # {"role": system|user|assistant, "content": str}
    sampler: SamplerSettings
    max_tokens: int | None  # None: up to the end of the context
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    model: str | None
    ignore_eos: bool = False  # extra: go on past end-of-turn tokens (benchmarks)


@dataclass(frozen=True)
class CompletionSpec:
    prompt: str | tuple[int, ...]  # text (tokenized as-is) or token ids
    sampler: SamplerSettings
    max_tokens: int | None
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    model: str | None
    ignore_eos: bool = False


def _object(body: Any) -> dict:  # body: parsed JSON
    if not isinstance(body, dict):
        raise WireError("the request body must be a JSON object")
    return body


def parse_chat(body: Any) -> ChatSpec:
    body = _object(body)
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        raise WireError('\'messages\' must be a list of {"role", "content"} objects', param="messages")
    if not msgs:
        raise WireError("'messages' is empty: at least one message is needed", param="messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise WireError(f"messages[{i}] must be an object", param=f"messages[{i}]")
        role = m.get("role")
        if not isinstance(role, str):
            raise WireError(f"messages[{i}].role must be a string", param=f"messages[{i}].role")
        if role not in ROLES:
            shown = role if len(role) <= 40 else role[:39] + "…"
            raise WireError(
                f"messages[{i}].role {shown!r} is not supported: use system, user or assistant",
                param=f"messages[{i}].role",
            )
        content = m.get("content")
        if content is None and role != "assistant":
            raise WireError(f"messages[{i}].content is missing", param=f"messages[{i}].content")
        text = "" if content is None else _text_of(content, i)
        out.append({"role": "system" if role == "developer" else role, "content": text})
    if all(m["role"] == "assistant" for m in out):
        raise WireError("'messages' needs a system or user message", param="messages")
    _refuse_unsupported(body)
    stream, include_usage = _stream(body)
    return ChatSpec(
        tuple(out),
        _sampler(body),
        _max_tokens(body),
        _stop(body),
        stream,
        include_usage,
        _model(body),
        _boolean(body, "ignore_eos"),
    )


def parse_completion(body: Any) -> CompletionSpec:
    body = _object(body)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise WireError("'prompt' is empty", param="prompt")
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        prompt = tuple(prompt)
    elif isinstance(prompt, list) and len(prompt) > 1:
        raise WireError("'prompt' must be one string: batches are not supported", param="prompt")
    else:
        raise WireError("'prompt' must be a non-empty string (or a list of token ids)", param="prompt")
    _refuse_unsupported(body)
    stream, include_usage = _stream(body)
    return CompletionSpec(
        prompt,
        _sampler(body),
        _max_tokens(body),
        _stop(body),
        stream,
        include_usage,
        _model(body),
        _boolean(body, "ignore_eos"),
    )


# -- responses ---------------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def finish_reason(fin: Finished) -> str:
    """OpenAI's two: "stop" (end of turn or a stop string) and "length" (max_tokens or context)."""
    return "length" if fin.stop_reason in ("length", "context_full") else "stop"


def usage(fin: Finished) -> dict:
    s = fin.stats
    cached = s.prompt_tokens_reused
    return {
        "prompt_tokens": len(fin.prompt_ids),
        "completion_tokens": len(fin.ids),
        "total_tokens": len(fin.prompt_ids) + len(fin.ids),
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def timings(fin: Finished) -> dict:
    """Extra beside the standard fields: how fast this request ran."""
    s = fin.stats
    return {
        "prompt_tokens_evaluated": s.prompt_tokens_evaluated,
        "prompt_ms": round(s.prompt_s * 1000, 2),
        "prompt_tok_s": round(s.prompt_tok_s, 2),
        "generated_tokens": s.generated_tokens,
        "generation_ms": round(s.generation_s * 1000, 2),
        "generation_tok_s": round(s.generation_tok_s, 2),
        "ttft_ms": round(s.ttft_s * 1000, 2),
        "threads": s.threads,
    }


def chat_response(rid: str, model: str, created: int, fin: Finished) -> dict:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": fin.text},
                "logprobs": None,
                "finish_reason": finish_reason(fin),
            }
        ],
        "usage": usage(fin),
        "system_fingerprint": None,
        "timings": timings(fin),
    }


def chat_chunk(
    rid: str,
    model: str,
    created: int,
    delta: dict | None = None,
    finish: str | None = None,
    usage_: dict | None = None,
    extra: dict | None = None,
) -> dict:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    out = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
        "system_fingerprint": None,
    }
    if usage_ is not None:
        out["usage"] = usage_
    if extra:
        out.update(extra)
    return out


def completion_response(rid: str, model: str, created: int, fin: Finished) -> dict:
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": fin.text, "logprobs": None, "finish_reason": finish_reason(fin)}],
        "usage": usage(fin),
        "system_fingerprint": None,
        "timings": timings(fin),
    }


def completion_chunk(
    rid: str,
    model: str,
    created: int,
    text: str | None,
    finish: str | None = None,
    usage_: dict | None = None,
    extra: dict | None = None,
) -> dict:
    choices = [] if text is None else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}]
    out = {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "system_fingerprint": None,
    }
    if usage_ is not None:
        out["usage"] = usage_
    if extra:
        out.update(extra)
    return out


def model_list(model_id: str, created: int | None = None) -> dict:
    return {
        "object": "list",
        "data": [
            {
                "id": model_id,
                "object": "model",
                "created": int(created if created is not None else time.time()),
                "owned_by": "llambda",
            }
        ],
    }
