"""Fallback chat templates, one per prompt format family, and how to pick and recognise them.

Used when a model carries no `tokenizer.chat_template` or one that does not compile. Each
renders the same text as llama.cpp's built-in template of that family (BOS is not written: the
tokenizer adds it when the model asks). Written for this project from the formats' published
conventions.
"""

from __future__ import annotations

from typing import Callable

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Llama 2 chat: the system prompt sits inside the first [INST] block between <<SYS>> markers.
LLAMA2 = (
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] %}"
    "{% elif message['role'] == 'user' %}"
    "{{ '[INST] ' }}{% if ns.system %}{{ '<<SYS>>\\n' + ns.system + '\\n<</SYS>>\\n\\n' }}"
    "{% set ns.system = '' %}{% endif %}{{ message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
)

LLAMA3 = (
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

# Mistral v0.1/v0.2 style: " [INST] ... [/INST] answer</s>"; the system prompt leads the first user turn.
MISTRAL = (
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] %}"
    "{% elif message['role'] == 'user' %}"
    "{{ ' [INST] ' }}{% if ns.system %}{{ ns.system + '\\n\\n' }}{% set ns.system = '' %}{% endif %}"
    "{{ message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}"
    "{% endif %}{% endfor %}"
)

# Mistral v0.3 style (vocabularies with [INST] tokens): no spaces around the markers.
MISTRAL_V3 = (
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] %}"
    "{% elif message['role'] == 'user' %}"
    "{{ '[INST] ' }}{% if ns.system %}{{ ns.system + '\\n\\n' }}{% set ns.system = '' %}{% endif %}"
    "{{ message['content'] + '[/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] | trim + eos_token }}"
    "{% endif %}{% endfor %}"
)

# Gemma: roles user and model; no system role, so the system prompt leads the first user turn.
GEMMA = (
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set ns.system = message['content'] %}"
    "{% else %}"
    "{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\\n' }}"
    "{% if ns.system and message['role'] == 'user' %}{{ ns.system + '\\n\\n' }}{% set ns.system = '' %}{% endif %}"
    "{{ message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

PHI3 = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

ZEPHYR = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)

FALLBACKS: dict[str, str] = {
    "chatml": CHATML,
    "llama2": LLAMA2,
    "llama3": LLAMA3,
    "mistral": MISTRAL,
    "mistral-v3": MISTRAL_V3,
    "gemma": GEMMA,
    "phi3": PHI3,
    "zephyr": ZEPHYR,
}


def detect_family(source: str) -> str | None:
    """The prompt format family a template string writes, from the markers it contains."""
    if "<|im_start|>" in source:
        return "chatml"
    if "<|start_header_id|>" in source:
        return "llama3"
    if "<start_of_turn>" in source:
        return "gemma"
    if "<|user|>" in source or "'<|' + message['role']" in source:
        return "phi3" if "<|end|>" in source else "zephyr"
    if "[INST]" in source:
        return "llama2" if "<<SYS>>" in source else "mistral"
    return None


def choose_fallback(architecture: str, has_token: Callable[[str], bool], spm: bool) -> str:
    """The family to fall back to, from the architecture name and which marker tokens exist.
    `has_token(text)` says whether the vocabulary holds a token spelled `text`."""
    arch = (architecture or "").lower()
    if has_token("<|im_start|>"):
        return "chatml"
    if has_token("<|start_header_id|>"):
        return "llama3"
    if has_token("<start_of_turn>") or arch.startswith("gemma"):
        return "gemma"
    if has_token("<|user|>") or arch.startswith("phi3"):
        return "phi3" if has_token("<|end|>") or arch.startswith("phi3") else "zephyr"
    if has_token("[INST]"):
        return "mistral-v3"
    if spm and arch in ("llama", "mistral"):
        return "mistral" if arch == "mistral" else "llama2"
    return "chatml"
