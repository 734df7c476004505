"""The Get models page and the empty first screen's suggestions, in a real window, downloading
from the fake Hub through the real huggingface_hub client (tests/hub/fake_hub.py)."""

from __future__ import annotations

from app.hub.curated import CURATED
from app.library import ModelLibrary
from tests.hub import conftest as hub_fixtures
from tests.hub.fake_hub import FakeFile, FakeRepo
from tests.models import SMOLLM2_SHA256

SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"

# The fake Hub's fixtures (and its autouse isolation: own HF_HOME, memory keyring), shared with tests/hub.
globals().update({name: getattr(hub_fixtures, name) for name in ("_hub_isolation", "hub", "smol_repo", "tiny_gguf")})


def test_a_fresh_home_offers_the_suggestions_and_search(make_window):
    w = make_window()
    assert w.chat.starter.isVisible() and w.first_models.isVisible()
    assert [b.toolTip() for b in w.first_models.buttons] == [f"{m.repo_id} / {m.file}" for m in CURATED]
    assert w.first_models.query.isVisible() and w.chat.starter_button.isVisible()  # the PyPI starter stays
    assert 100e6 <= min(m.approx_bytes for m in CURATED) and max(m.approx_bytes for m in CURATED) <= 5e9


def test_search_lists_repositories_and_their_files_with_a_verdict(qtbot, make_window, hub, smol_repo):
    w = make_window()
    w.first_models.query.setText("smol")
    w.first_models.query.returnPressed.emit()  # as the Enter key would
    page = w.get_models_page
    qtbot.waitUntil(lambda: page.results.count() == 1, timeout=10000)
    assert page.results.item(0).text().startswith(smol_repo.repo_id)
    page.on_results_item_activated(page.results.item(0))
    qtbot.waitUntil(lambda: page.files.rowCount() == 1 and page.files.item(0, 3).text() != "checking…", timeout=20000)
    assert [page.files.item(0, j).text() for j in range(3)] == [SMOL, "Q4_1", "93.8 MB"]
    assert page.files.item(0, 3).text().startswith("ok: supported")


def test_a_download_completes_verifies_imports_and_opens(qtbot, make_window, hub, smol_repo):
    w = make_window()
    page = w.open_get_models()
    with (
        qtbot.waitSignal(page.model_ready, timeout=60000) as ready,
        qtbot.waitSignal(w.worker.model_loaded, timeout=90000) as loaded,
    ):
        page.download(smol_repo.repo_id, SMOL)
    assert ready.args == [SMOLLM2_SHA256]
    (e,) = ModelLibrary().list()
    assert e.sha256 == SMOLLM2_SHA256
    assert loaded.args[0]["architecture"] == "llama"
    assert w.worker.loaded_path == str(ModelLibrary().resolve(SMOLLM2_SHA256))  # the library's copy is open
    text = page.downloads.item(0).text()
    assert text == f"{SMOL} — in your library as SmolLM2-135M-Instruct.Q4_1"


def test_a_failure_is_one_line_on_the_page_and_nothing_enters_the_library(qtbot, make_window, hub, tiny_gguf):
    hub.add(FakeRepo("test/liar-GGUF", [FakeFile("liar-F32.gguf", tiny_gguf, sha256="e" * 64)]))
    w = make_window()
    page = w.open_get_models()
    page.download("test/liar-GGUF", "liar-F32.gguf")
    qtbot.waitUntil(lambda: "does not match" in page.status.text(), timeout=20000)
    assert "\n" not in page.status.text() and ModelLibrary().list() == []
    page.download("nobody/nothing", "x.gguf")
    qtbot.waitUntil(lambda: page.status.text().startswith("nobody/nothing: no such repository"), timeout=20000)
