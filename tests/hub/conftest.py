"""Fixtures for the Hub tests: a fake Hub on localhost (HF_ENDPOINT points at it), an in-memory
keyring, and small model files to serve. No test here reaches the internet."""

from __future__ import annotations

import pytest

from tests.hub.fake_hub import FakeFile, FakeHub, FakeRepo
from tests.synth import write_tiny_model


class MemoryKeyring:
    """A keyring backend that keeps passwords in a dict (the tests never touch the real one)."""

    priority = 10

    def __init__(self):
        self.store = {}

    def get_password(self, service, user):
        return self.store.get((service, user))

    def set_password(self, service, user, password):
        self.store[(service, user)] = password

    def delete_password(self, service, user):
        self.store.pop((service, user), None)


@pytest.fixture(autouse=True)
def _hub_isolation(monkeypatch, tmp_path_factory):
    """Nothing of the real machine's Hub settings or tokens: own HF_HOME, no HF_TOKEN, a memory
    keyring, and an endpoint that answers nothing unless a test starts the fake Hub."""
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf-home")))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    import keyring

    from keyring.backend import KeyringBackend

    class Backend(MemoryKeyring, KeyringBackend):
        def __init__(self):
            MemoryKeyring.__init__(self)
            KeyringBackend.__init__(self)

    previous = keyring.get_keyring()
    keyring.set_keyring(Backend())
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def hub(monkeypatch):
    h = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", h.url)
    yield h
    h.stop()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama.Q8_0.gguf")


@pytest.fixture
def tiny_repo(hub, tiny_gguf):
    """A repository with one small valid GGUF file."""
    return hub.add(FakeRepo("test/tiny-GGUF", [FakeFile("tiny-llama-F32.gguf", tiny_gguf)]))


@pytest.fixture
def smol_repo(hub, smollm2_path):
    """The SmolLM2 test file as the Hub would serve it."""
    return hub.add(
        FakeRepo(
            "test/SmolLM2-135M-Instruct-GGUF",
            [FakeFile("SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)],
            downloads=5000,
        )
    )
