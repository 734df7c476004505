"""Shared fixtures: real test models and isolation from the user's real folders."""

from __future__ import annotations

import os

import pytest

from tests.models import require_smollm2

# GUI tests never need a screen.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def smollm2_path():
    """SmolLM2-135M-Instruct Q4_1 (98 MB), verified by SHA-256."""
    return require_smollm2()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Every test gets its own LLAMBDA_HOME, so no test touches the real user folders."""
    home = tmp_path_factory.mktemp("llambda-home")
    monkeypatch.setenv("LLAMBDA_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _logging_set_up_in_a_test_ends_with_it():
    """A test that runs `llambda` in-process sets the stage log up in its own LLAMBDA_HOME; the
    next test starts without it."""
    yield
    from app import logs

    logs.shutdown()
    logs.set_log_prompts(None)
