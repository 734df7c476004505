"""`Llambda --self-test`: prove that this build works, in a second or two, without a screen.

Runs the tiny model shipped in resources/selftest/ (made by packaging/make_selftest_model.py)
through the real stack: GGUF reader → support verdict → the engine (tokenizer, chat template,
C decoder), whose logits are checked against the float64 oracle stored in the file and whose
greedy answer must be "Hello from Llambda!"; tokenizes with a SentencePiece vocabulary (the
native sentencepiece library); then opens the window on Qt's offscreen platform, asks the same
question there (model imported into a temporary library, loaded and run by the window's worker
thread) and closes it. Prints one line and returns 0 (all good) or 1.

It touches no user folder (LLAMBDA_HOME and the XDG folders point into a temporary folder that
is removed afterwards) and no network (socket connections are refused while it runs).
Not here: speed checks, real models, anything that needs a display.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from app.bundled import resource
from app.errors import one_line

if TYPE_CHECKING:
    from app.gguf import Metadata
    from app.ui.window import MainWindow  # imported by the window step only (PySide6)

MODEL_NAME = "tiny.gguf"
SPM_VOCAB_NAME = "tiny-spm.gguf"  # vocabulary only: runs the sentencepiece library
LOGIT_TOLERANCE = 0.01  # max |ours - oracle| / max |oracle| for the logits after the prompt
MAX_ANSWER_TOKENS = 12
N_THREADS = 2
WINDOW_TIMEOUT_S = 60  # to load the model, and again to answer, in the window
_MOVED_VARS = ("LLAMBDA_CACHE_DIR", "LLAMBDA_MODELS_DIR", "LLAMBDA_DATA_DIR", "LLAMBDA_LOG_DIR")


class SelfTestFailure(Exception):
    """One step of the self-test went wrong; the message is the one-line reason."""


def model_path() -> Path:
    """resources/selftest/tiny.gguf: inside the package (wheel) or beside it (source tree, bundle)."""
    return resource("selftest") / MODEL_NAME


# ---- isolation -------------------------------------------------------------------------------


@contextlib.contextmanager
def isolated(offscreen: bool = True) -> Iterator[Path]:
    """A temporary LLAMBDA_HOME (and XDG folders), offscreen Qt and no network, all undone after."""
    saved = dict(os.environ)
    home = Path(tempfile.mkdtemp(prefix="llambda-selftest-"))
    try:
        os.environ["LLAMBDA_HOME"] = str(home)
        for var in _MOVED_VARS:
            os.environ.pop(var, None)
        for var, sub in (
            ("XDG_CACHE_HOME", "xdg-cache"),
            ("XDG_CONFIG_HOME", "xdg-config"),
            ("XDG_DATA_HOME", "xdg-data"),
            ("XDG_STATE_HOME", "xdg-state"),
        ):
            os.environ[var] = str(home / sub)
        if offscreen:
            os.environ["QT_QPA_PLATFORM"] = "offscreen"
        with _no_network():
            yield home
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def _no_network() -> Iterator[None]:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError("llambda self-test: network access is not allowed")

    # setattr: mypy refuses assignments to methods, and replacing them is the point here
    targets = ((socket.socket, "connect"), (socket.socket, "connect_ex"), (socket, "create_connection"))
    saved = [getattr(owner, name) for owner, name in targets]
    for owner, name in targets:
        setattr(owner, name, refuse)
    try:
        yield
    finally:
        for (where, name), original in zip(targets, saved):
            setattr(where, name, original)


# ---- the steps -------------------------------------------------------------------------------


def _oracle(md: Metadata) -> dict:
    return {
        "question": md.string("llambda.selftest.question"),
        "answer": md.string("llambda.selftest.answer"),
        "prompt_tokens": [int(t) for t in md.numeric_array("llambda.selftest.prompt_tokens", "int")],
        "answer_tokens": [int(t) for t in md.numeric_array("llambda.selftest.answer_tokens", "int")],
        "logits": np.asarray(md.numeric_array("llambda.selftest.logits", "float"), dtype=np.float64),
    }


def check_model(path: Path) -> dict:
    """Open the file, ask for the support verdict, read the oracle; the facts found."""
    from app.gguf import open_gguf  # lazy: a module missing from the build fails this step, in one line
    from app.model import (
        config_from_gguf,
        support_verdict,
    )  # lazy: a module missing from the build fails this step, in one line

    with open_gguf(path) as f:
        verdict = support_verdict(f)
        if not verdict.supported:
            raise SelfTestFailure(f"{path.name} {verdict.summary()}")
        return {"config": config_from_gguf(f), "oracle": _oracle(f.metadata)}


def check_sentencepiece(path: Path) -> str:
    """Tokenize and detokenize with a SentencePiece-style vocabulary (the native sentencepiece
    library: merges by score, byte fallback) against ids written by construction."""
    from app.gguf import open_gguf  # lazy: a module missing from the build fails this step, in one line
    from app.text import load_tokenizer  # lazy: a module missing from the build fails this step, in one line

    with open_gguf(path) as f:
        tokenizer = load_tokenizer(f)
        text = f.metadata.string("llambda.selftest.text")
        want = [int(t) for t in f.metadata.numeric_array("llambda.selftest.ids", "int")]
    if tokenizer.kind != "spm":
        raise SelfTestFailure(f"sentencepiece: {path.name} was not read as a SentencePiece vocabulary")
    got = tokenizer.encode(text)
    if got != want:
        raise SelfTestFailure(f"sentencepiece: {text!r} became {got}, expected {want}")
    back = tokenizer.decode(got[1:])  # without BOS, whose piece is empty
    if back != text:
        raise SelfTestFailure(f"sentencepiece: {want} decoded to {back!r}, expected {text!r}")
    return f"sentencepiece {len(got)} tokens"


def _relative_error(ours: np.ndarray, oracle: np.ndarray) -> float:
    if ours.shape != oracle.shape or not np.all(np.isfinite(ours)):
        return float("inf")
    return float(np.max(np.abs(ours.astype(np.float64) - oracle)) / max(np.max(np.abs(oracle)), 1e-30))


def check_engine(path: Path, facts: dict) -> str:
    """The engine as the window drives it: chat prompt through the model's template, logits after
    it held to the oracle, then a greedy `Engine.generate` that must answer the oracle's text."""
    from app.engine.engine import Engine  # lazy: a module missing from the build fails this step, in one line
    from app.engine.generate import Finished, GenerationRequest, TextPiece

    oracle = facts["oracle"]
    with Engine.load(path, n_ctx=128, n_threads=N_THREADS) as engine:
        prompt = engine.chat_prompt([{"role": "user", "content": oracle["question"]}])
        if list(prompt) != oracle["prompt_tokens"]:
            raise SelfTestFailure(
                f"engine: chat prompt tokens {list(prompt)} differ from the oracle's {oracle['prompt_tokens']}"
            )
        facts["template"] = f"template {engine.chat_template.family or engine.chat_template.name}"
        err = _relative_error(engine.session.feed(prompt), oracle["logits"])
        if not err <= LOGIT_TOLERANCE:
            raise SelfTestFailure(
                f"engine: logits off the oracle by {err:.4f} of their range "
                f"(tolerance {LOGIT_TOLERANCE}) on {engine.decoder.isa}"
            )
        pieces: list[str] = []
        done = None
        for event in engine.generate(GenerationRequest(tuple(prompt), max_tokens=MAX_ANSWER_TOKENS)):
            if isinstance(event, TextPiece):
                pieces.append(event.text)
            elif isinstance(event, Finished):
                done = event
    if done is None:
        raise SelfTestFailure("engine: generation ended without a Finished event")
    text = "".join(pieces)
    if (
        done.stop_reason != "eog"
        or list(done.ids) != oracle["answer_tokens"]
        or text != oracle["answer"]
        or done.text != oracle["answer"]
    ):
        raise SelfTestFailure(
            f"engine: greedy answer {text!r} {list(done.ids)} ({done.stop_reason}), "
            f"expected {oracle['answer']!r} {oracle['answer_tokens']} (eog)"
        )
    st = done.stats
    return (
        f"{st.generated_tokens} tokens {text!r} on {st.isa} ({st.threads} threads, "
        f"{st.generation_tok_s:.0f} tok/s), logits within {err:.1e} of the oracle"
    )


def check_window(path: Path, oracle: dict) -> str:
    """Open the main window on the current Qt platform and let it paint; where the window has its
    engine, open the model in it (pre-flight, import into the temporary library, load in the
    worker thread), ask the oracle's question and wait for the answer; close it."""
    from app.ui.main import make_app  # lazy: a module missing from the build fails this step, in one line
    from app.ui.qt_fix import application
    from app.ui.window import MainWindow

    app = application() or make_app()
    with _quiet_qt():
        window = MainWindow()
        try:
            window.show()
            size = _check_painted(window)
            if importlib.util.find_spec("app.ui.engine_adapter") is None:
                chat = "no engine in the window yet"
            else:
                chat = _converse(window, path, oracle)
        finally:
            window.close()
            window.deleteLater()
            _pump(0.05)
        if window.isVisible():
            raise SelfTestFailure("window: did not close")
    return f"window {size} on {app.platformName()}: {chat}, closed"


@contextlib.contextmanager
def _quiet_qt() -> Iterator[None]:
    """Keep Qt's own warnings (the offscreen plug-in has a few) off the one-line output."""
    from PySide6.QtCore import qInstallMessageHandler  # lazy: Qt only for the window step

    previous = qInstallMessageHandler(lambda *_args: None)
    try:
        yield
    finally:
        qInstallMessageHandler(previous)


def _pump(seconds: float, until: Callable[[], bool] = lambda: False) -> bool:
    """Run the Qt event loop for up to `seconds`, or until `until()` is true (returned)."""
    from PySide6.QtCore import QCoreApplication, QEventLoop  # lazy: Qt only for the window step

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)
        if until():
            return True
        time.sleep(0.005)
    return until()


def _check_painted(window: MainWindow) -> str:
    _pump(0.3)
    if not window.isVisible():
        raise SelfTestFailure("window: did not show")
    image = window.grab().toImage()
    if image.isNull() or image.width() < 100 or image.height() < 100:
        raise SelfTestFailure(f"window: drew a {image.width()}x{image.height()} image")
    colours = {image.pixel(x, y) for x in range(0, image.width(), 16) for y in range(0, image.height(), 16)}
    if len(colours) < 3:
        raise SelfTestFailure("window: painted nothing (one flat colour)")
    return f"{image.width()}x{image.height()}"


def _converse(window: MainWindow, path: Path, oracle: dict) -> str:
    def failed() -> bool:
        return bool(window.errors)

    window.open_model_file(str(path))
    if not _pump(WINDOW_TIMEOUT_S, lambda: failed() or (window.model_info is not None and not window.model_busy)):
        raise SelfTestFailure(f"window: the model did not load within {WINDOW_TIMEOUT_S} s")
    if failed():
        raise SelfTestFailure(f"window: opening the model failed: {window.errors[-1]}")
    window.input.setPlainText(oracle["question"])
    window.send()

    def answered() -> bool:
        last = window.state.last_assistant()
        return not window.generating and last is not None and bool(last.content)

    if not _pump(WINDOW_TIMEOUT_S, lambda: failed() or answered()):
        raise SelfTestFailure(f"window: no answer within {WINDOW_TIMEOUT_S} s")
    if failed():
        raise SelfTestFailure(f"window: the reply failed: {window.errors[-1]}")
    last = window.state.last_assistant()
    text = last.content if last is not None else ""  # answered(): it is there
    if text != oracle["answer"]:
        raise SelfTestFailure(f"window: answered {text!r}, expected {oracle['answer']!r}")
    return f"asked {oracle['question']!r}, answered {text!r}"


# ---- entry point ----------------------------------------------------------------------------


def run() -> int:
    """The whole self-test; prints one line on stdout (ok) or stderr (failed); returns 0 or 1."""
    t0 = time.perf_counter()
    step = "start"
    facts: dict = {}
    try:
        with isolated():
            step = "model"
            path = model_path()
            if not path.is_file():
                raise SelfTestFailure(f"{path} is missing from this build")
            facts = check_model(path)
            step = "sentencepiece"
            spm = check_sentencepiece(path.with_name(SPM_VOCAB_NAME))
            step = "engine"
            engine = check_engine(path, facts)
            step = "window"
            window = check_window(path, facts["oracle"])
    except SelfTestFailure as e:
        print(f"llambda self-test: FAILED: {one_line(str(e))}", file=sys.stderr)
        return 1
    except Exception as e:  # the one line promised, never a traceback
        print(f"llambda self-test: FAILED at {step}: {type(e).__name__}: {one_line(str(e))}", file=sys.stderr)
        return 1
    print(
        f"llambda self-test: ok: {path.name} {facts['config'].arch}, {facts['template']}; {engine}; "
        f"{spm}; {window}; {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":  # python -m app.selftest
    sys.exit(run())
