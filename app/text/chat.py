"""Chat templates: the model's Jinja template rendered in a sandbox, bounded in time and size.

`render_chat(template, messages, ...)` renders one conversation with Jinja2's immutable sandbox
and the helpers real templates call (raise_exception, strftime_now, tojson, loop controls).
Rendering is bounded: a deadline checked on every template line, a cap on output size, and
guards on operations that could allocate without limit (string repetition, padding widths,
recursion). Anything that goes wrong is one-line `TemplateError`; nothing outside runs.
`load_chat_template(gguf_file, tokenizer)` reads the template (or a named variant) and falls
back to a family template (app.text.templates) with a warning when it is missing or broken.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.runtime import Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.errors import TemplateError
from app.text.templates import FALLBACKS, choose_fallback, detect_family

log = logging.getLogger(__name__)

TIME_LIMIT_S = 2.0                # a render that takes longer is stopped
MAX_OUTPUT_CHARS = 4_000_000      # a prompt longer than this is refused
MAX_TEMPLATE_CHARS = 512 * 1024   # template source
MAX_VALUE_CHARS = 4_000_000       # any string or list a template builds
MAX_INT_ARG = 1_000_000           # widths, repeat counts and other sizes passed to calls


class _Raised(Exception):
    """A template called raise_exception(message)."""


class _Timeout(Exception):
    pass


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _too_big(value) -> bool:
    try:
        return isinstance(value, (str, bytes, list, tuple, dict)) and len(value) > MAX_VALUE_CHARS
    except TypeError:
        return False


def _check_size_args(args, kwargs) -> None:
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INT_ARG:
            raise jinja2.sandbox.SecurityError(f"number {v} is too large for this call")


_BIG_NUMBER_IN_FORMAT = re.compile(r"\d{7,}")
MAX_INT_BITS = 1_000_000


def _check_format(fmt) -> None:
    """Refuse printf/format strings with widths or precisions of a million or more."""
    if isinstance(fmt, str) and _BIG_NUMBER_IN_FORMAT.search(fmt):
        raise jinja2.sandbox.SecurityError("format width too large")


def _check_result(value) -> None:
    if _too_big(value) or (isinstance(value, int) and value.bit_length() > MAX_INT_BITS):
        raise jinja2.sandbox.SecurityError("value too large")


class _BoundedNamespace(Namespace):
    """namespace() whose attributes cannot grow beyond the value limit."""

    def __setitem__(self, name, value):
        if _too_big(value):
            raise jinja2.sandbox.SecurityError("a namespace value grew too large")
        super().__setitem__(name, value)


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (used by some templates to mark assistant text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**", "%", "+"])

    def call_binop(self, context, operator, left, right):
        if operator == "**":
            if isinstance(right, int) and (abs(right) > 4096 or (
                    isinstance(left, int) and left.bit_length() * abs(right) > MAX_INT_BITS)):
                raise jinja2.sandbox.SecurityError("exponent too large")
        elif operator == "*":
            for a, b in ((left, right), (right, left)):
                if isinstance(a, (str, list, tuple)) and isinstance(b, int) and len(a) * max(b, 0) > MAX_VALUE_CHARS:
                    raise jinja2.sandbox.SecurityError("repetition too large")
        elif operator == "%" and isinstance(left, str):
            _check_format(left)
            _check_size_args(right if isinstance(right, tuple) else (right,), {})
        result = super().call_binop(context, operator, left, right)
        _check_result(result)
        return result

    def getattr(self, obj, attribute):
        if isinstance(obj, str) and attribute in ("format", "format_map"):
            _check_format(obj)
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):
        if isinstance(obj, str) and argument in ("format", "format_map"):
            _check_format(obj)
        return super().getitem(obj, argument)

    def call(self, __context, __obj, *args, **kwargs):
        if getattr(__obj, "__name__", "") in _SIZED_METHODS:
            _check_size_args(args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        _check_result(result)
        return result


# str methods whose numeric arguments are sizes of the string they build.
_SIZED_METHODS = frozenset(["center", "ljust", "rjust", "zfill", "expandtabs"])

# Filters whose numeric arguments are sizes of what they build (widths, counts).
_SIZED_FILTERS = frozenset(["center", "indent", "wordwrap", "truncate", "batch", "slice"])


def _guard_filter(name, f):
    # The value a filter works on comes first (after the context when the filter asks for one);
    # for sized filters the arguments after it are checked before anything is built.
    skip = 2 if getattr(f, "jinja_pass_arg", None) is not None else 1
    sized = name in _SIZED_FILTERS

    @functools.wraps(f)
    def guarded(*args, **kwargs):
        if sized:
            _check_size_args(args[skip:], kwargs)
        elif name == "format" and len(args) > skip - 1:
            _check_format(args[skip - 1])
        result = f(*args, **kwargs)
        _check_result(result)
        return result

    return guarded


def _tojson(value, indent=None, separators=None, sort_keys=False, ensure_ascii=False):
    if indent is not None and (not isinstance(indent, int) or indent > 64):
        raise jinja2.sandbox.SecurityError("tojson indent too large")
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message):
    raise _Raised(str(message))


@functools.lru_cache(maxsize=1)
def _environment() -> _Sandbox:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, autoescape=False,
                   extensions=[jinja2.ext.loopcontrols, _GenerationTag], undefined=jinja2.Undefined)
    for name in list(env.filters):
        env.filters[name] = _guard_filter(name, env.filters[name])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["namespace"] = _BoundedNamespace
    return env


@functools.lru_cache(maxsize=32)
def compile_template(source: str) -> jinja2.Template:
    """The compiled template, or TemplateError (one line) if it does not compile."""
    if not isinstance(source, str) or not source.strip():
        raise TemplateError("the chat template is empty")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"the chat template is {len(source)} characters long (limit {MAX_TEMPLATE_CHARS})")
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"the chat template does not compile: line {e.lineno}: {_one_line(e.message)}") from None
    except Exception as e:  # noqa: BLE001 - anything the compiler raises is a broken template
        raise TemplateError(f"the chat template does not compile: {_one_line(e)}") from None


def _bounded_render(tmpl: jinja2.Template, context: dict, time_limit: float, max_chars: int) -> str:
    deadline = time.monotonic() + time_limit
    filename = "<template>"

    def local(frame, event, arg):
        if time.monotonic() > deadline:
            raise _Timeout()
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != filename:
            return None
        if time.monotonic() > deadline:
            raise _Timeout()
        for v in frame.f_locals.values():  # macro arguments built by recursion
            if _too_big(v):
                raise jinja2.sandbox.SecurityError("value too large")
        return local

    previous = sys.gettrace()
    out, size = [], 0
    sys.settrace(tracer)
    try:
        for chunk in tmpl.generate(**context):
            size += len(chunk)
            if size > max_chars:
                raise TemplateError(f"the chat template's output passed {max_chars} characters; stopped")
            out.append(chunk)
    finally:
        sys.settrace(previous)
    return "".join(out)


def _render_once(source: str, context: dict, time_limit: float, max_chars: int) -> str:
    tmpl = compile_template(source)
    try:
        return _bounded_render(tmpl, context, time_limit, max_chars)
    except TemplateError:
        raise
    except _Raised as e:
        raise TemplateRaised(f"the chat template refused the conversation: {_one_line(e)}") from None
    except _Timeout:
        raise TemplateError(f"the chat template ran for more than {time_limit:g} s; stopped") from None
    except jinja2.sandbox.SecurityError as e:
        raise TemplateError(f"the chat template did something unsafe: {_one_line(e)}") from None
    except RecursionError:
        raise TemplateError("the chat template recursed too deeply; stopped") from None
    except MemoryError:
        raise TemplateError("the chat template ran out of memory; stopped") from None
    except Exception as e:  # noqa: BLE001 - a template error of any kind is one line
        raise TemplateError(f"the chat template failed: {type(e).__name__}: {_one_line(e)}") from None


class TemplateRaised(TemplateError):
    """The template itself rejected the conversation (raise_exception)."""


def fold_system(messages: list[dict]) -> list[dict]:
    """Messages with the system prompt(s) folded into the first user turn."""
    system = "\n\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    for m in rest:
        if m.get("role") == "user":
            m["content"] = system + "\n\n" + str(m.get("content", ""))
            return rest
    return [{"role": "user", "content": system}] + rest


def _check_messages(messages) -> list[dict]:
    if not isinstance(messages, (list, tuple)):
        raise TemplateError("messages must be a list of {'role': ..., 'content': ...}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise TemplateError(f"message {i} needs a 'role' string")
        content = m.get("content")
        out.append(dict(m, content="" if content is None else content))
    return out


def render_chat(template: str, messages, add_generation_prompt: bool = True, bos_token: str = "",
                eos_token: str = "", fold_system_prompt: bool | None = None, now: datetime | None = None,
                time_limit: float = TIME_LIMIT_S, max_chars: int = MAX_OUTPUT_CHARS, **extra) -> str:
    """The prompt text `template` makes of `messages`.

    A system message that the template rejects (raise_exception) or silently drops is folded
    into the first user turn (`fold_system_prompt=None`: automatically; True: always)."""
    messages = _check_messages(messages)
    clock = now or datetime.now()

    def context(msgs):
        return dict(extra, messages=msgs, add_generation_prompt=add_generation_prompt, bos_token=bos_token,
                    eos_token=eos_token, strftime_now=lambda fmt: clock.strftime(str(fmt)))

    has_system = any(m["role"] == "system" and m.get("content") for m in messages)
    if fold_system_prompt and has_system:
        return _render_once(template, context(fold_system(messages)), time_limit, max_chars)
    try:
        text = _render_once(template, context(messages), time_limit, max_chars)
    except TemplateRaised:
        if not has_system or fold_system_prompt is False:
            raise
        return _render_once(template, context(fold_system(messages)), time_limit, max_chars)
    if has_system and fold_system_prompt is None:
        system = next(m["content"] for m in messages if m["role"] == "system" and m.get("content"))
        if isinstance(system, str) and system.strip() not in text:  # the template dropped it
            return _render_once(template, context(fold_system(messages)), time_limit, max_chars)
    return text


# ---- the model's template ------------------------------------------------------------------------

@dataclass(frozen=True)
class ChatTemplate:
    """A chat template ready to render: its source, where it came from, and the special texts."""

    source: str
    name: str = "default"           # "default" or the variant name (tokenizer.chat_template.NAME)
    family: str | None = None       # chatml, llama2, llama3, mistral, gemma, phi3, zephyr...
    fallback: bool = False          # True when the model's own template was missing or broken
    bos_token: str = ""
    eos_token: str = ""

    def render(self, messages, add_generation_prompt: bool = True, **kwargs) -> str:
        return render_chat(self.source, messages, add_generation_prompt=add_generation_prompt,
                           bos_token=kwargs.pop("bos_token", self.bos_token),
                           eos_token=kwargs.pop("eos_token", self.eos_token), **kwargs)


def chat_template_names(metadata) -> list[str]:
    """Names of the templates a model carries: "default" and each tokenizer.chat_template.NAME."""
    names = ["default"] if "tokenizer.chat_template" in metadata else []
    prefix = "tokenizer.chat_template."
    names += sorted(k[len(prefix):] for k in metadata.keys() if k.startswith(prefix))
    return names


def load_chat_template(gguf_file, tokenizer=None, name: str | None = None) -> ChatTemplate:
    """The model's chat template (or its variant `name`), or a fallback with a warning."""
    md = gguf_file.metadata if hasattr(gguf_file, "metadata") else gguf_file
    key = "tokenizer.chat_template" if name in (None, "default") else f"tokenizer.chat_template.{name}"
    bos = eos = ""
    if tokenizer is not None:
        if tokenizer.bos_id is not None:
            bos = tokenizer.token_text(tokenizer.bos_id)
        if tokenizer.eos_id is not None:
            eos = tokenizer.token_text(tokenizer.eos_id)
    source = None
    problem = None
    if key in md:
        try:
            source = md.string(key)
        except ValueError as e:
            problem = f"{key} is not a string ({_one_line(e)})"
    elif name not in (None, "default"):
        raise TemplateError(f"the model has no chat template named {name!r} "
                            f"(it has: {', '.join(chat_template_names(md)) or 'none'})")
    else:
        problem = "the model has no chat template"
    if source is not None:
        try:
            compile_template(source)
            return ChatTemplate(source, name or "default", detect_family(source), False, bos, eos)
        except TemplateError as e:
            problem = str(e)
    arch = md.string("general.architecture", "") if "general.architecture" in md else ""
    has = (lambda t: tokenizer.token_id(t) is not None) if tokenizer is not None else (lambda t: False)
    family = choose_fallback(arch, has, tokenizer is not None and tokenizer.kind == "spm")
    message = f"{problem}; using the {family} chat format instead"
    log.warning(message)
    warnings.warn(message, stacklevel=2)
    return ChatTemplate(FALLBACKS[family], name or "default", family, True, bos, eos)


def content_spans(text: str, messages, tokenizer) -> list[tuple[int, int]]:
    """Where the contents that spell a control token appear in the rendered `text`, in order:
    the spans the tokenizer must treat as plain user text."""
    spans, pos = [], 0
    for m in messages:
        content = m.get("content")
        if not isinstance(content, str) or not tokenizer.contains_control_text(content):
            continue
        for variant in (content, content.strip()):
            if not variant:
                continue
            i = text.find(variant, pos)
            if i >= 0:
                spans.append((i, i + len(variant)))
                pos = i + len(variant)
                break
    return spans


def chat_prompt_tokens(tokenizer, template: ChatTemplate, messages, add_generation_prompt: bool = True,
                       **kwargs) -> list[int]:
    """Token ids of a rendered conversation. Special tokens are parsed where the template writes
    them, never inside message contents (a user typing "<|im_end|>" gets plain text). BOS is added
    when the model asks for it, unless the rendered text already starts with it."""
    text = template.render(messages, add_generation_prompt=add_generation_prompt, **kwargs)
    ids = tokenizer.encode(text, add_special=False, parse_special=True,
                           plain_spans=content_spans(text, _check_messages(messages), tokenizer))
    if tokenizer.add_bos and tokenizer.bos_id is not None and (not ids or ids[0] != tokenizer.bos_id):
        ids.insert(0, tokenizer.bos_id)
    if tokenizer.add_eos and tokenizer.eos_id is not None:
        ids.append(tokenizer.eos_id)
    return ids
