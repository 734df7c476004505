"""Speculative decoding in the window's settings (issue 18, item 3): the choice (off, prompt
lookup, a draft model: automatic or one of the library's compatible drafts by name) and the most
guesses per pass are saved with the other settings and reach the engine; the live stats show
how many guesses were kept; a draft of another vocabulary is refused in one line.

The engine double checks the plumbing; tiny synthetic models (tests/synth.py) and SmolLM2
drafting for itself check it with the real engine.
"""

from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import Qt

from app import defaults as D
from app.bundled import resource
from app.ui.qt_fix import emit
from tests.synth import TinySpec, write_tiny_model, write_tiny_spm_model
from tests.ui.conftest import drop_file
from tests.ui.fake_engine import FakeEngine

TINY = str(resource("selftest/tiny.gguf"))


def loaded(qtbot, make_window, path, engine_factory=None):
    w = make_window(engine_factory)
    assert drop_file(w.chat.viewport(), str(path))
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    return w


def reload_with(qtbot, w, choice: int | None = None, draft_max: int | None = None):
    """Pick a speculation choice (its index) in the settings and save: the model reloads."""
    dlg = w.open_settings()
    if choice is not None:
        dlg.speculation.setCurrentIndex(choice)
    if draft_max is not None:
        dlg.draft_max.setValue(draft_max)
    dlg.accept()
    assert w.model_busy  # the reload is on its way (queued to the worker)
    w.model_info = None
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    return dlg


def test_settings_offer_speculation_save_it_and_pass_it_to_the_engine(qtbot, make_window):
    from app.chats.settings import clean

    engine = FakeEngine()
    w = loaded(qtbot, make_window, TINY, lambda: engine)
    assert "speculation" not in engine.load_options  # the defaults: nothing to say
    w.model_info = {**w.model_info, "drafts": {"/lib/little.gguf": "Little-Draft.Q4_0"}}
    dlg = w.open_settings()
    labels = [dlg.speculation.itemText(i) for i in range(dlg.speculation.count())]
    assert labels[:3] == [
        "Off: one token at a time",
        "From the conversation (prompt lookup)",
        "Draft model: automatic (the smallest compatible in the library)",
    ]
    assert labels[3] == "Draft model: Little-Draft.Q4_0" and len(labels) == 4
    assert dlg.speculation.currentIndex() == 1 and dlg.draft_max.value() == D.DRAFT_MAX
    dlg.speculation.setCurrentIndex(0)
    assert not dlg.draft_max.isEnabled()  # nothing is guessed when it is off
    dlg.speculation.setCurrentIndex(3)
    dlg.draft_max.setValue(5)
    w.model_info = {**w.model_info, "drafts": {}}
    dlg.accept()
    saved = w.state.engine_settings()
    assert (saved["speculation"], saved["draft"], saved["draft_max"]) == ("draft", "/lib/little.gguf", 5)
    qtbot.waitUntil(lambda: "speculation" in engine.load_options, timeout=10000)
    assert engine.load_options["speculation"] == {"speculation": "draft", "draft": "/lib/little.gguf", "draft_max": 5}
    # a saved draft that is no longer among the choices is kept, said so, not silently lost
    qtbot.waitUntil(lambda: not w.model_busy, timeout=10000)
    dlg = w.open_settings()
    assert dlg.speculation.currentText().startswith("Draft model: little.gguf (not in")
    assert dlg.values()[2]["draft"] == "/lib/little.gguf"
    qtbot.mouseClick(dlg.reset_button, Qt.LeftButton)
    assert {k: dlg.values()[2][k] for k in ("speculation", "draft", "draft_max")} == {
        "speculation": D.SPECULATION,
        "draft": D.DRAFT,
        "draft_max": D.DRAFT_MAX,
    }
    dlg.reject()
    # stored values that make no sense fall back to the defaults, each on its own
    got = clean({"speculation": "warp", "draft": "", "draft_max": 17}, dict(D.ENGINE))
    assert (got["speculation"], got["draft"], got["draft_max"]) == (D.SPECULATION, D.DRAFT, D.DRAFT_MAX)


@pytest.fixture
def tiny_models(tmp_path):
    """A target, a draft of its vocabulary at a quarter of its size, and a model of another
    vocabulary; the target and the draft in the (test's own) library."""
    from app.library import ModelLibrary

    target = write_tiny_model(tmp_path / "target.gguf", TinySpec(n_embd=128, n_layer=4, n_ff=256), seed=3)
    draft = write_tiny_model(tmp_path / "draft.gguf", TinySpec(), seed=4)
    other = write_tiny_spm_model(tmp_path / "other.gguf")
    lib = ModelLibrary()
    entry = lib.import_model(str(draft))
    return target, str(entry.file_path(lib.folder)), entry.name, other


def test_a_library_draft_is_offered_by_name_loaded_and_a_foreign_one_refused(qtbot, make_window, tiny_models):
    target, draft, draft_name, other = tiny_models
    w = loaded(qtbot, make_window, target)  # the default factory: the real engine
    assert w.model_info["drafts"] == {draft: draft_name}
    assert w.model_info["speculation_kind"] == "lookup"
    dlg = reload_with(qtbot, w, 2, draft_max=3)  # a draft model, automatic
    assert dlg.speculation.itemText(3) == f"Draft model: {draft_name}"
    spec = w.worker._engine.engine.speculator
    assert spec.kind == "draft" and spec.proposer.path == draft and spec.k_max == 3
    assert w.model_info["speculation_kind"] == "draft" and not w.notice.isVisible()
    reload_with(qtbot, w, 0)  # off
    assert w.worker._engine.engine.speculator is None and w.model_info["speculation_kind"] == "off"

    # a draft of another vocabulary (chosen before for another model): prompt lookup, one line
    w.state.save_settings(
        "", w.state.sampling(), {**w.state.engine_settings(), "speculation": "draft", "draft": str(other)}
    )
    w.model_info = None
    w.model_busy = True
    emit(w.load_requested, w.worker.loaded_path, w.engine_options())  # what a reload sends
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    note = w.notice.text()
    assert w.notice.isVisible() and "\n" not in note and "vocabulary" in note, note
    assert note.startswith("The draft model is not used:")
    assert w.worker._engine.engine.speculator.kind == "lookup"


PROMPT = "List the days of the week."  # 40 tokens: past the plain run that measures a token's cost


def test_smollm2_drafting_for_itself_shows_the_guesses_kept(qtbot, make_window, smollm2_path, tmp_path):
    """The draft chosen in the settings drafts for real (SmolLM2 drafting for a copy of itself:
    greedy, so every guess is kept), the live stats say how many, and the reply is the one
    prompt lookup gives. A fresh engine's first reply guesses once its plain run has measured a
    token's cost; the speculator then learns that this draft costs as much as the target."""
    path = tmp_path / "SmolLM2-draft.gguf"
    shutil.copyfile(smollm2_path, path)
    w = make_window()
    w.state.put("sampling_defaults", {"temperature": 0.0, "max_tokens": 40, "seed": 1})
    w.state.save_settings(
        "",
        w.state.sampling(),
        {**w.state.engine_settings(), "n_ctx": 512, "speculation": "draft", "draft": str(path), "draft_max": 4},
    )
    assert drop_file(w.chat.viewport(), str(smollm2_path))
    qtbot.waitUntil(lambda: w.model_info is not None or bool(w.errors), timeout=60000)
    assert not w.errors, w.errors
    assert w.model_info["speculation_kind"] == "draft" and not w.notice.isVisible()
    assert w.worker._engine.engine.speculator.proposer.path == str(path)
    w.input.setPlainText(PROMPT)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=60000)
    reply = w.state.messages()[-1]
    assert reply.status == "complete", reply.timings
    assert reply.timings.get("spec_kind") == "draft" and reply.timings.get("spec_passes", 0) >= 1
    assert reply.timings["spec_acceptance"] == 1.0  # the same model: every guess kept
    assert "100% of guesses kept" in w.stats.labels["gen"].text()
    with_draft = reply.content

    reload_with(qtbot, w, 1)  # prompt lookup: the same reply
    w.on_conversations_new_requested()  # a new chat: the same prompt
    w.input.setPlainText(PROMPT)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=60000)
    assert w.state.messages()[-1].content == with_draft
