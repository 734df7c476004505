"""`Llambda --self-test`: prove that this build works, in a second or two, without a screen.

Runs the tiny model shipped in resources/selftest/ (made by packaging/make_selftest_model.py)
through the real stack: GGUF reader → support verdict → tokenizer and chat template → the C
decoder, whose logits are checked against the float64 oracle stored in the file and whose greedy
answer must be "Hello from Llambda!"; then opens and closes the window on Qt's offscreen
platform. Prints one line and returns 0 (all good) or 1.

It touches no user folder (LLAMBDA_HOME and the XDG folders point into a temporary folder that
is removed afterwards) and no network (socket connections are refused while it runs).
Not here: speed checks, real models, anything that needs a display.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODEL_NAME = "tiny.gguf"
LOGIT_TOLERANCE = 0.01      # max |ours - oracle| / max |oracle| for the logits after the prompt
MAX_ANSWER_TOKENS = 12
N_THREADS = 2
_MOVED_VARS = ("LLAMBDA_CACHE_DIR", "LLAMBDA_MODELS_DIR", "LLAMBDA_DATA_DIR", "LLAMBDA_LOG_DIR")


class SelfTestFailure(Exception):
    """One step of the self-test went wrong; the message is the one-line reason."""


def model_path() -> Path:
    """resources/selftest/tiny.gguf beside the `app` package (source tree and frozen bundle alike)."""
    return Path(__file__).resolve().parents[1] / "resources" / "selftest" / MODEL_NAME


# ---- isolation -------------------------------------------------------------------------------

@contextlib.contextmanager
def isolated(offscreen: bool = True):
    """A temporary LLAMBDA_HOME (and XDG folders), offscreen Qt and no network, all undone after."""
    saved = dict(os.environ)
    home = Path(tempfile.mkdtemp(prefix="llambda-selftest-"))
    try:
        os.environ["LLAMBDA_HOME"] = str(home)
        for var in _MOVED_VARS:
            os.environ.pop(var, None)
        for var, sub in (("XDG_CACHE_HOME", "xdg-cache"), ("XDG_CONFIG_HOME", "xdg-config"),
                         ("XDG_DATA_HOME", "xdg-data"), ("XDG_STATE_HOME", "xdg-state")):
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
def _no_network():
    def refuse(*_args, **_kwargs):
        raise OSError("llambda self-test: network access is not allowed")

    saved = socket.socket.connect, socket.socket.connect_ex, socket.create_connection
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection = saved


# ---- the steps -------------------------------------------------------------------------------

def _oracle(md) -> dict:
    return {
        "question": md.string("llambda.selftest.question"),
        "answer": md.string("llambda.selftest.answer"),
        "prompt_tokens": [int(t) for t in md.numeric_array("llambda.selftest.prompt_tokens", "int")],
        "answer_tokens": [int(t) for t in md.numeric_array("llambda.selftest.answer_tokens", "int")],
        "logits": np.asarray(md.numeric_array("llambda.selftest.logits", "float"), dtype=np.float64),
    }


def _prompt_tokens(f, tokenizer, question: str) -> tuple[list[int], str]:
    """The chat prompt through the model's template, or (without app.text.chat) the stored ids."""
    try:
        from app.text.chat import chat_prompt_tokens, load_chat_template
    except ImportError:
        return [], "template: not in this build"
    template = load_chat_template(f, tokenizer)
    ids = chat_prompt_tokens(tokenizer, template, [{"role": "user", "content": question}])
    return [int(t) for t in ids], f"template: {template.family or template.name}"


def check_model(path: Path) -> dict:
    """Open the file, ask for the support verdict, build tokenizer and prompt; the facts found."""
    from app.gguf import open_gguf
    from app.model import config_from_gguf, support_verdict
    from app.text import load_tokenizer

    f = open_gguf(path)
    try:
        verdict = support_verdict(f)
        if not verdict.supported:
            raise SelfTestFailure(f"{path.name} {verdict.summary()}")
        cfg = config_from_gguf(f)
        oracle = _oracle(f.metadata)
        tokenizer = load_tokenizer(f)
        answer_ids = tokenizer.encode(oracle["answer"], add_special=False)
        if answer_ids != oracle["answer_tokens"][: len(answer_ids)]:
            raise SelfTestFailure(f"tokenizer: {oracle['answer']!r} became {answer_ids}, "
                                  f"expected {oracle['answer_tokens'][:-1]}")
        prompt, template_note = _prompt_tokens(f, tokenizer, oracle["question"])
        if prompt and prompt != oracle["prompt_tokens"]:
            raise SelfTestFailure(f"chat template: prompt tokens {prompt} differ from {oracle['prompt_tokens']}")
    except BaseException:
        f.close()
        raise
    return {"file": f, "config": cfg, "tokenizer": tokenizer, "oracle": oracle, "template": template_note}


def _relative_error(ours: np.ndarray, oracle: np.ndarray) -> float:
    if ours.shape != oracle.shape or not np.all(np.isfinite(ours)):
        return float("inf")
    return float(np.max(np.abs(ours.astype(np.float64) - oracle)) / max(np.max(np.abs(oracle)), 1e-30))


def check_decoder(facts: dict) -> str:
    """Greedy answer through the C decoder (llk_decode), logits held to the oracle."""
    from app.engine.decoder import CDecoder

    f, cfg, tok, oracle = facts["file"], facts["config"], facts["tokenizer"], facts["oracle"]
    prompt = oracle["prompt_tokens"]
    with CDecoder(f, cfg, n_ctx=min(cfg.n_ctx_train, 128), n_threads=N_THREADS) as dec:
        t0 = time.perf_counter()
        logits = dec.decode(prompt, 0)
        err = _relative_error(logits, oracle["logits"])
        if not err <= LOGIT_TOLERANCE:
            raise SelfTestFailure(f"decoder: logits off the oracle by {err:.4f} of their range "
                                  f"(tolerance {LOGIT_TOLERANCE}) on {dec.isa}")
        answer: list[int] = []
        pos = len(prompt)
        t1 = time.perf_counter()
        while len(answer) < MAX_ANSWER_TOKENS:
            token = int(np.argmax(logits))
            answer.append(token)
            if tok.is_eog(token):
                break
            logits = dec.decode([token], pos)
            pos += 1
        t2 = time.perf_counter()
        isa = dec.isa
    text = tok.decode([t for t in answer if not tok.is_eog(t)])
    if answer != oracle["answer_tokens"] or text != oracle["answer"]:
        raise SelfTestFailure(f"decoder: greedy answer {text!r} {answer}, expected {oracle['answer']!r} "
                              f"{oracle['answer_tokens']}")
    tps = len(answer) / max(t2 - t1, 1e-9)
    return (f"{len(answer)} tokens {text!r} on {isa} ({N_THREADS} threads, prompt {1e3 * (t1 - t0):.1f} ms, "
            f"{tps:.0f} tok/s), logits within {err:.1e} of the oracle")


def check_kernels(facts: dict) -> str:
    """Without the engine: one matrix-vector product of the output matrix against numpy."""
    from app import kernels

    f, cfg = facts["file"], facts["config"]
    info = f.tensors["output.weight"]
    raw = f.tensor_bytes("output.weight").reshape(info.n_rows, -1)
    x = np.random.default_rng(0).standard_normal(cfg.n_embd).astype(np.float32)
    ours = kernels.matvec(None, info.type.id, raw, cfg.n_embd, x)
    dense = np.stack([kernels.dequantize_row(info.type.id, raw[r], cfg.n_embd, isa="ref")
                      for r in range(info.n_rows)]).astype(np.float64)
    err = _relative_error(ours, dense @ x)
    if not err <= LOGIT_TOLERANCE:
        raise SelfTestFailure(f"kernels: matvec({info.type.name}) off numpy by {err:.4f}")
    return f"engine not in this build; matvec({info.type.name}) on {kernels.isa_name()} within {err:.1e} of numpy"


def check_window() -> str:
    """Open the main window on the current Qt platform, let it paint, close it."""
    try:
        from PySide6.QtWidgets import QApplication

        from app.ui.main import make_app
        from app.ui.window import MainWindow
    except ImportError as e:
        if "PySide6" in str(e):
            raise SelfTestFailure(f"window: Qt is missing ({e})") from None
        return "window: not in this build"

    app = QApplication.instance() or make_app()
    with _quiet_qt():
        return _show_and_close(app, MainWindow)


@contextlib.contextmanager
def _quiet_qt():
    """Keep Qt's own warnings (the offscreen plug-in has a few) off the one-line output."""
    from PySide6.QtCore import qInstallMessageHandler

    previous = qInstallMessageHandler(lambda *_args: None)
    try:
        yield
    finally:
        qInstallMessageHandler(previous)


def _show_and_close(app, MainWindow) -> str:
    from PySide6.QtCore import QCoreApplication, QElapsedTimer

    window = MainWindow()
    try:
        window.show()
        clock = QElapsedTimer()
        clock.start()
        while clock.elapsed() < 300:
            QCoreApplication.processEvents()
            time.sleep(0.01)
        if not window.isVisible():
            raise SelfTestFailure("window: did not show")
        image = window.grab().toImage()
        if image.isNull() or image.width() < 100 or image.height() < 100:
            raise SelfTestFailure(f"window: drew a {image.width()}x{image.height()} image")
        colours = {image.pixel(x, y) for x in range(0, image.width(), 16) for y in range(0, image.height(), 16)}
        if len(colours) < 3:
            raise SelfTestFailure("window: painted nothing (one flat colour)")
        size = f"{image.width()}x{image.height()}"
    finally:
        window.close()
        window.deleteLater()
        QCoreApplication.processEvents()
    if window.isVisible():
        raise SelfTestFailure("window: did not close")
    return f"window {size} shown and closed ({app.platformName()})"


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
            step = "engine"
            try:
                import app.engine.decoder  # noqa: F401
            except ImportError:
                engine = check_kernels(facts)
            else:
                engine = check_decoder(facts)
            step = "window"
            window = check_window()
    except SelfTestFailure as e:
        print(f"llambda self-test: FAILED: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # the one line promised, never a traceback
        print(f"llambda self-test: FAILED at {step}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        if "file" in facts:
            facts["file"].close()
    print(f"llambda self-test: ok: {path.name} {facts['config'].arch}, {facts['template']}; {engine}; "
          f"{window}; {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":  # python -m app.selftest
    sys.exit(run())
