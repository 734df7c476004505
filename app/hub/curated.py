"""A short list of chat models known to run well here, for a first choice: each one's repository
and file on the Hub, its size, one line on what it is good for, and its licence.

Every architecture below is one the engine runs (app/model/config.py). Sizes are approximate
(what the Hub listed when the entry was written); the real size, SHA-256 and our verdict come
from the Hub when one is picked. The starter model (SmolLM2-135M) comes from PyPI as before.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CuratedModel:
    title: str
    repo_id: str
    file: str
    approx_bytes: int
    description: str
    licence: str

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "repo_id": self.repo_id,
            "file": self.file,
            "approx_bytes": self.approx_bytes,
            "description": self.description,
            "licence": self.licence,
        }


MB, GB = 10**6, 10**9

CURATED: tuple[CuratedModel, ...] = (
    CuratedModel(
        "Qwen2.5 0.5B Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "qwen2.5-0.5b-instruct-q4_k_m.gguf",
        491 * MB,
        "Tiny and quick; fine for short questions and trying things out.",
        "Apache-2.0",
    ),
    CuratedModel(
        "Llama 3.2 1B Instruct",
        "bartowski/Llama-3.2-1B-Instruct-GGUF",
        "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        808 * MB,
        "Small general chat model from Meta; fast on any recent laptop.",
        "Llama 3.2 Community Licence",
    ),
    CuratedModel(
        "SmolLM2 1.7B Instruct",
        "bartowski/SmolLM2-1.7B-Instruct-GGUF",
        "SmolLM2-1.7B-Instruct-Q4_K_M.gguf",
        1056 * MB,
        "Hugging Face's small model; good English for its size.",
        "Apache-2.0",
    ),
    CuratedModel(
        "Qwen2.5 1.5B Instruct",
        "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        1120 * MB,
        "Multilingual, good at short code and structured answers.",
        "Apache-2.0",
    ),
    CuratedModel(
        "Gemma 2 2B Instruct",
        "bartowski/gemma-2-2b-it-GGUF",
        "gemma-2-2b-it-Q4_K_M.gguf",
        1710 * MB,
        "Google's small model; careful, well-written replies.",
        "Gemma Terms of Use",
    ),
    CuratedModel(
        "Llama 3.2 3B Instruct",
        "bartowski/Llama-3.2-3B-Instruct-GGUF",
        "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
        2020 * MB,
        "A step up in quality that still runs on 8 GB of memory.",
        "Llama 3.2 Community Licence",
    ),
    CuratedModel(
        "Phi-3.5 mini Instruct",
        "bartowski/Phi-3.5-mini-instruct-GGUF",
        "Phi-3.5-mini-instruct-Q4_K_M.gguf",
        2390 * MB,
        "Microsoft's 3.8B model; strong at reasoning and maths for its size.",
        "MIT",
    ),
    CuratedModel(
        "Qwen2.5 7B Instruct",
        "bartowski/Qwen2.5-7B-Instruct-GGUF",
        "Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        4680 * MB,
        "The largest here: best answers, needs about 8 GB of free memory.",
        "Apache-2.0",
    ),
)

__all__ = ["CURATED", "CuratedModel"]
