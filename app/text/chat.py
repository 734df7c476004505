"""Chat templates: the model's Jinja template, run in the bounded sandbox (app.text.sandbox).

`render_chat(template, messages, ...)` renders one conversation with the helpers real templates
call (raise_exception, strftime_now, tojson, loop controls). `load_chat_template(gguf_file,
tokenizer)` reads the template (or a named variant), tries it on a short conversation, and falls
back to a family template (app.text.templates) with a warning (`ChatTemplate.note`) when it is
missing, does not compile or does not render within the bounds.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Sequence

from app.errors import TemplateError
from app.text.sandbox import (
    MAX_OUTPUT_CHARS,
    TIME_LIMIT_S,
    TemplateRaised,
    compile_template,
    render_bounded,
    short_reason,
    strftime_now_for,
)
from app.text.templates import FALLBACKS, choose_fallback, detect_family

if TYPE_CHECKING:
    from app.gguf import GGUFFile, Metadata
    from app.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)


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


def _check_messages(messages: object) -> list[dict]:
    if not isinstance(messages, (list, tuple)):
        raise TemplateError("messages must be a list of {'role': ..., 'content': ...}")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise TemplateError(f"message {i} needs a 'role' string")
        content = m.get("content")
        out.append(dict(m, content="" if content is None else content))
    return out


def render_chat(
    template: str,
    messages: Sequence[dict],
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    fold_system_prompt: bool | None = None,
    now: datetime | None = None,
    time_limit: float | None = None,
    max_chars: int = MAX_OUTPUT_CHARS,
    **extra: Any,
) -> str:
    """The prompt text `template` makes of `messages`.

    A system message that the template rejects (raise_exception) or silently drops is folded
    into the first user turn (`fold_system_prompt=None`: automatically; True: always)."""
    messages = _check_messages(messages)
    clock = now or datetime.now()
    time_limit = time_limit or TIME_LIMIT_S

    def context(msgs: list[dict]) -> dict:
        return dict(
            extra,
            messages=msgs,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            strftime_now=strftime_now_for(clock),
        )

    has_system = any(m["role"] == "system" and m.get("content") for m in messages)
    if fold_system_prompt and has_system:
        return render_bounded(template, context(fold_system(messages)), time_limit, max_chars)
    try:
        text = render_bounded(template, context(messages), time_limit, max_chars)
    except TemplateRaised:
        if not has_system or fold_system_prompt is False:
            raise
        return render_bounded(template, context(fold_system(messages)), time_limit, max_chars)
    if has_system and fold_system_prompt is None:
        system = next(m["content"] for m in messages if m["role"] == "system" and m.get("content"))
        if isinstance(system, str) and system.strip() not in text:  # the template dropped it
            return render_bounded(template, context(fold_system(messages)), time_limit, max_chars)
    return text


# ---- the model's template ------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template ready to render: its source, where it came from, and the special texts."""

    source: str
    name: str = "default"  # "default" or the variant name (tokenizer.chat_template.NAME)
    family: str | None = None  # chatml, llama2, llama3, mistral, gemma, phi3, zephyr...
    fallback: bool = False  # True when the model's own template was missing or broken
    bos_token: str = ""
    eos_token: str = ""
    note: str = ""  # why the model's own template is not used (it has one)

    def render(self, messages: Sequence[dict], add_generation_prompt: bool = True, **kwargs: Any) -> str:
        return render_chat(
            self.source,
            messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=kwargs.pop("bos_token", self.bos_token),
            eos_token=kwargs.pop("eos_token", self.eos_token),
            **kwargs,
        )


def chat_template_names(metadata: Metadata) -> list[str]:
    """Names of the templates a model carries: "default" and each tokenizer.chat_template.NAME."""
    names = ["default"] if "tokenizer.chat_template" in metadata else []
    prefix = "tokenizer.chat_template."
    names += sorted(k[len(prefix) :] for k in metadata.keys() if k.startswith(prefix))
    return names


# A conversation every usable template must take: tried once when a model's template is loaded.
TRIAL_CONVERSATION = (
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi! How can I help you?"},
    {"role": "user", "content": "What is 2 + 2?"},
)


def try_template(source: str, bos_token: str = "", eos_token: str = "") -> None:
    """Compile `source` and render a short conversation with it, within the usual bounds, or
    TemplateError. A template may refuse a system prompt or a history (raise_exception); one
    user message it must take."""
    compile_template(source)
    try:
        render_chat(source, list(TRIAL_CONVERSATION), bos_token=bos_token, eos_token=eos_token)
    except TemplateRaised:
        render_chat(source, [TRIAL_CONVERSATION[1]], bos_token=bos_token, eos_token=eos_token)


def fallback_template(
    gguf_file: GGUFFile | Metadata, tokenizer: Tokenizer | None, problem: str, name: str | None = None
) -> ChatTemplate:
    """The family template (app.text.templates) for this model, with a warning saying `problem`."""
    md = gguf_file.metadata if hasattr(gguf_file, "metadata") else gguf_file
    bos, eos = _special_texts(tokenizer)
    arch = md.string("general.architecture", "") if "general.architecture" in md else ""
    has: Callable[[str], bool] = (
        (lambda t: tokenizer.token_id(t) is not None) if tokenizer is not None else (lambda t: False)
    )
    family = choose_fallback(arch, has, tokenizer is not None and tokenizer.kind == "spm")
    message = f"{problem}; using the {family} chat format instead"
    log.warning(message)
    warnings.warn(message, stacklevel=3)
    note = "" if problem == NO_TEMPLATE else message
    return ChatTemplate(FALLBACKS[family], name or "default", family, True, bos, eos, note)


NO_TEMPLATE = "the model has no chat template"


def _special_texts(tokenizer: Tokenizer | None) -> tuple[str, str]:
    bos = eos = ""
    if tokenizer is not None:
        if tokenizer.bos_id is not None:
            bos = tokenizer.token_text(tokenizer.bos_id)
        if tokenizer.eos_id is not None:
            eos = tokenizer.token_text(tokenizer.eos_id)
    return bos, eos


def load_chat_template(
    gguf_file: GGUFFile | Metadata, tokenizer: Tokenizer | None = None, name: str | None = None
) -> ChatTemplate:
    """The model's chat template (or its variant `name`), or a fallback with a warning when it
    is missing, does not compile, or does not render a short conversation within the bounds."""
    md = gguf_file.metadata if hasattr(gguf_file, "metadata") else gguf_file
    key = "tokenizer.chat_template" if name in (None, "default") else f"tokenizer.chat_template.{name}"
    bos, eos = _special_texts(tokenizer)
    source = None
    problem = None
    if key in md:
        try:
            source = md.string(key)
        except ValueError as e:
            problem = f"{key} is not a string ({short_reason(e)})"
    elif name not in (None, "default"):
        raise TemplateError(
            f"the model has no chat template named {name!r} (it has: {', '.join(chat_template_names(md)) or 'none'})"
        )
    else:
        problem = NO_TEMPLATE
    if source is not None:
        try:
            try_template(source, bos, eos)
            return ChatTemplate(source, name or "default", detect_family(source), False, bos, eos)
        except TemplateError as e:
            problem = str(e)
    assert problem is not None  # every way here without a usable template names its problem
    return fallback_template(md, tokenizer, problem, name)


def content_spans(text: str, messages: Sequence[dict], tokenizer: Tokenizer) -> list[tuple[int, int]]:
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


def chat_prompt_tokens(
    tokenizer: Tokenizer,
    template: ChatTemplate,
    messages: Sequence[dict],
    add_generation_prompt: bool = True,
    **kwargs: Any,
) -> list[int]:
    """Token ids of a rendered conversation. Special tokens are parsed where the template writes
    them, never inside message contents (a user typing "<|im_end|>" gets plain text). BOS is added
    when the model asks for it, unless the rendered text already starts with it."""
    text = template.render(messages, add_generation_prompt=add_generation_prompt, **kwargs)
    ids = tokenizer.encode(
        text,
        add_special=False,
        parse_special=True,
        plain_spans=content_spans(text, _check_messages(messages), tokenizer),
    )
    if tokenizer.add_bos and tokenizer.bos_id is not None and (not ids or ids[0] != tokenizer.bos_id):
        ids.insert(0, tokenizer.bos_id)
    if tokenizer.add_eos and tokenizer.eos_id is not None:
        ids.append(tokenizer.eos_id)
    return ids
