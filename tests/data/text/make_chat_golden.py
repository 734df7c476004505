"""Writes tests/data/text/golden_chat.json with llama.cpp as the oracle for chat prompts.

Run with a Python that has llama-cpp-python installed (not needed by the suite):
    /path/to/llvenv/bin/python tests/data/text/make_chat_golden.py
- families: llama.cpp's built-in renderers (llama_chat_apply_template by name) for fixed
  conversations; our fallback template of each family must give the same text.
- smollm2: the SmolLM2 GGUF template rendered by llama-cpp-python's Jinja2 chat formatter and,
  for conversations that carry a system prompt, by llama.cpp's built-in renderer that the GGUF
  template selects; plus the token ids llama.cpp's tokenizer gives the rendered prompt
  (special tokens parsed, BOS as the model asks).
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

import llama_cpp  # noqa: E402
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402

from tests.models import require_smollm2  # noqa: E402

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are nice."}, {"role": "user", "content": "Hello"}],
    [
        {"role": "system", "content": "You are nice."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "How are you?"},
    ],
    [
        {"role": "user", "content": "Write <|im_end|> and [INST] literally."},
        {"role": "assistant", "content": "Sure: <|im_end|> [INST]"},
        {"role": "user", "content": "Thanks 🦙\n\nbye"},
    ],
    [
        {"role": "user", "content": "  spaced  \n"},
        {"role": "assistant", "content": "\tok "},
        {"role": "user", "content": "日本語で答えて"},
    ],
]

# llama.cpp built-in name -> (our fallback family, the eos text the built-in writes)
FAMILIES = {
    "chatml": ("chatml", "<|im_end|>"),
    "llama2-sys": ("llama2", "</s>"),
    "llama3": ("llama3", "<|eot_id|>"),
    "mistral-v1": ("mistral", "</s>"),
    "mistral-v3": ("mistral-v3", "</s>"),
    "gemma": ("gemma", "<eos>"),
    "phi3": ("phi3", "<|endoftext|>"),
    "zephyr": ("zephyr", "<|endoftext|>"),
}


def builtin(tmpl: str, messages: list[dict], add_ass: bool) -> str:
    keep = [(m["role"].encode(), m["content"].encode()) for m in messages]
    chat = (llama_cpp.llama_chat_message * len(keep))(
        *[llama_cpp.llama_chat_message(role=r, content=c) for r, c in keep]
    )
    cap = 1 << 16
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_chat_apply_template(tmpl.encode(), chat, len(keep), add_ass, buf, cap)
    assert n >= 0, (tmpl, n)
    return buf.raw[:n].decode()


def main() -> None:
    families = {}
    for name, (family, eos) in FAMILIES.items():
        cases = []
        for conv in CONVERSATIONS:
            for add in (True, False):
                cases.append({"messages": conv, "add_generation_prompt": add, "text": builtin(name, conv, add)})
        families[family] = {"llama_cpp_name": name, "eos_token": eos, "cases": cases}

    path = require_smollm2()
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    template = llm.metadata["tokenizer.chat_template"]
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)

    def piece(t: int) -> str:
        out = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_token_to_piece(vocab, t, out, 256, 0, True)
        return out.raw[:n].decode()

    bos, eos = piece(llama_cpp.llama_vocab_bos(vocab)), piece(llama_cpp.llama_vocab_eos(vocab))
    smol = []
    for conv in CONVERSATIONS:
        for add in (True, False):
            text = Jinja2ChatFormatter(template, eos_token=eos, bos_token=bos, add_generation_prompt=add)(
                messages=conv
            ).prompt
            case = {
                "messages": conv,
                "add_generation_prompt": add,
                "text": text,
                "ids": llm.tokenize(text.encode(), add_bos=True, special=True),
            }
            if conv[0]["role"] == "system":
                case["builtin_text"] = builtin(template, conv, add)
            smol.append(case)
    out = {
        "oracle": f"llama-cpp-python {llama_cpp.__version__}",
        "families": families,
        "smollm2": {"bos_token": bos, "eos_token": eos, "cases": smol},
    }
    (HERE / "golden_chat.json").write_text(json.dumps(out, ensure_ascii=True, indent=1) + "\n")
    print(f"{len(families)} families, {len(smol)} SmolLM2 prompts")


if __name__ == "__main__":
    main()
