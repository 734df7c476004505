"""Shared engine fixtures: the SmolLM2 goldens, ISA levels this CPU has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import kernels

DATA = Path(__file__).resolve().parent.parent / "data" / "engine"
ISA_LEVELS = [kernels.ISA_NAMES[i] for i in range(kernels.best_isa_level() + 1)]


@pytest.fixture(scope="session")
def smollm2_goldens():
    return json.loads((DATA / "smollm2_q4_1_greedy.json").read_text())


@pytest.fixture(scope="session")
def smollm2_file(smollm2_path):
    from app.gguf import open_gguf

    f = open_gguf(smollm2_path)
    yield f
    f.close()
