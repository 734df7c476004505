"""Issue #22, item 3: read-only or missing folders at start-up (data, cache, logs).

The app starts, and says which folder and what it cannot do; conversations are never written
anywhere else. Chosen behaviour for the data folder (app/chats/recovery.py): the conversations
live in memory for the session, starting from the existing database when it can be read, and
the user is told once, at start, that nothing is being saved.

Two ways to make a folder unusable: a path under a regular FILE (the folder cannot be created;
works for every user, root included), and an existing folder made to refuse new files (chmod
0555, or for root, whom chmod does not stop, the immutable attribute); see conftest.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import logs
from app.chats import ChatStore
from app.chats.recovery import open_store
from app.paths import chats_db_path, data_dir, log_dir, models_dir, write_problem
from tests.reliability.conftest import snapshot
from tests.reliability.test_damaged_store import make_db, truncated_half

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def blocker(tmp_path):
    """A regular file: a folder "under" it can never be created."""
    f = tmp_path / "a-file"
    f.write_text("not a folder")
    return f


def use_session(store: ChatStore) -> None:
    cid = store.create_conversation("this session")
    store.add_message(cid, "user", "hello")
    m = store.begin_reply(cid)
    store.update_reply(m, "a reply", force=True)
    store.finish_reply(m)
    assert [x.content for x in store.messages(cid)] == ["hello", "a reply"]


def no_database_anywhere(*folders: Path) -> None:
    for folder in folders:
        found = [p for p in folder.rglob("*") if p.name.startswith("chats.sqlite3")]
        assert found == [], f"conversations written somewhere else: {found}"


# -- data folder ----------------------------------------------------------------------------------


def test_data_folder_that_cannot_be_created(monkeypatch, blocker, tmp_path, isolated_home):
    monkeypatch.setenv("LLAMBDA_DATA_DIR", str(blocker / "data"))
    before = snapshot(tmp_path)
    store = open_store()
    try:
        assert not store.saving
        assert store.notice.startswith("Chats are not being saved: the data folder ")
        assert str(blocker / "data") in store.notice and "\n" not in store.notice
        use_session(store)  # the window still works
    finally:
        store.close()
    assert snapshot(tmp_path) == before  # nothing written, anywhere
    no_database_anywhere(tmp_path, Path(isolated_home))


def test_read_only_data_folder_shows_the_chats_and_writes_nothing(read_only_folder, isolated_home):
    make_db(chats_db_path())
    folder = read_only_folder(data_dir())
    before = snapshot(folder)
    store = open_store()
    try:
        assert not store.saving and str(folder) in store.notice
        assert "Your conversations are shown" in store.notice
        titles = [c.title for c in store.list_conversations()]
        assert len(titles) == 12 and "conv 0" in titles  # the history is there, read-only
        use_session(store)
    finally:
        store.close()
    assert snapshot(folder) == before  # not one byte changed
    no_database_anywhere(Path(isolated_home) / "cache", Path(isolated_home) / "logs")


def test_read_only_data_folder_with_a_damaged_database(read_only_folder):
    path = chats_db_path()
    bad = truncated_half(make_db(path))
    path.write_bytes(bad)
    folder = read_only_folder(data_dir())
    store = open_store()  # cannot be set aside: no exception
    try:
        assert not store.saving and store.set_aside is None and store.notice
        use_session(store)
    finally:
        store.close()
    assert path.read_bytes() == bad and sorted(p.name for p in folder.iterdir()) == ["chats.sqlite3"]


def test_write_problem_is_tried_not_guessed(read_only_folder, blocker, tmp_path):
    assert write_problem(tmp_path / "new" / "folder") is None
    assert (tmp_path / "new" / "folder").is_dir() and list((tmp_path / "new" / "folder").iterdir()) == []
    assert write_problem(blocker / "x") is not None
    assert write_problem(read_only_folder(tmp_path / "ro")) is not None


# -- logs folder ----------------------------------------------------------------------------------


def test_logs_folder_that_cannot_be_created(monkeypatch, blocker):
    monkeypatch.setenv("LLAMBDA_LOG_DIR", str(blocker / "logs"))
    assert logs.setup("window", force=True) is None
    line = logs.problem()
    assert line.startswith("No log file") and str(blocker / "logs") in line and "\n" not in line
    logs.get("test").warning("the app goes on")  # logging still works (stderr)


def test_read_only_logs_folder_with_a_log_file_already_there(read_only_folder):
    assert logs.setup("window", force=True) is not None
    logs.get("test").info("from an earlier run")
    logs.shutdown()
    folder = read_only_folder(log_dir())
    before = snapshot(folder)
    assert logs.setup("window", force=True) is None  # no file log that could not rotate
    assert str(folder) in logs.problem()
    logs.get("test").warning("the app goes on")
    logs.shutdown()
    assert logs.problem() is None
    assert snapshot(folder) == before


# -- the window -----------------------------------------------------------------------------------


def test_the_window_starts_and_names_each_folder(monkeypatch, blocker, tmp_path, make_window):
    from tests.ui.fake_engine import FakeEngine

    monkeypatch.setenv("LLAMBDA_HOME", str(blocker / "home"))
    logs.setup("window", force=True)
    before = snapshot(tmp_path)
    w = make_window(FakeEngine)
    text = w.startup_banner.label.text()
    assert w.startup_banner.isVisible() and len(w.startup_problems) == 3
    assert text.splitlines() == w.startup_problems
    data, logs_folder, models = w.startup_problems
    assert data.startswith("Chats are not being saved") and str(data_dir()) in data
    assert models.startswith("Models cannot be added") and str(models_dir()) in models
    assert logs_folder.startswith("No log file") and str(log_dir()) in logs_folder
    w.on_conversations_new_requested()  # usable: a chat for this session
    w.state.add_user_message("hello")
    assert [m.content for m in w.state.messages()] == ["hello"]
    w.close()
    assert snapshot(tmp_path) == before


CHILD = r"""
import os, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from app.ui.main import make_app

app = make_app()
QTimer.singleShot(60000, lambda: os._exit(3))          # never hang the test

def report():
    from app.ui.window import MainWindow
    w = next(x for x in QApplication.topLevelWidgets() if isinstance(x, MainWindow))
    print("VISIBLE", w.isVisible(), w.startup_banner.isVisible(), flush=True)
    for line in w.startup_problems:
        print("PROBLEM", line, flush=True)
    w.state.new_conversation()
    w.state.add_user_message("hello")
    print("SAVING", w.state.store.saving, flush=True)
    w.close()
    app.quit()

QTimer.singleShot(1500, report)
from app.cli import main
sys.exit(main([]))
"""


def run_window(env_update: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMBDA_", "XDG_"))}
    env.update({"QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT), **env_update})
    return subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def check_start(r: subprocess.CompletedProcess, data: Path, cache: Path, logs_folder: Path) -> None:
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "VISIBLE True True", r.stdout
    problems = [line.removeprefix("PROBLEM ") for line in out if line.startswith("PROBLEM ")]
    assert len(problems) == 3, problems
    assert "Chats are not being saved" in problems[0] and str(data) in problems[0]
    assert "No log file" in problems[1] and str(logs_folder) in problems[1]
    assert "Models cannot be added" in problems[2] and str(cache) in problems[2]
    assert out[-1] == "SAVING False"


def test_llambda_starts_with_xdg_folders_that_cannot_be_created(blocker, tmp_path):
    """The real start (`llambda` with no file), the folders decided by platformdirs from XDG."""
    home = tmp_path / "home"
    home.mkdir()
    r = run_window(
        {
            "HOME": str(home),
            "XDG_DATA_HOME": str(blocker / "data"),
            "XDG_CACHE_HOME": str(blocker / "cache"),
            "XDG_STATE_HOME": str(blocker / "state"),
        }
    )
    check_start(
        r, blocker / "data" / "llambda", blocker / "cache" / "llambda" / "models", blocker / "state" / "llambda" / "log"
    )
    assert snapshot(tmp_path) == {"a-file": b"not a folder"}


def test_llambda_starts_with_a_read_only_home(read_only_folder, tmp_path):
    home = read_only_folder(tmp_path / "home")
    r = run_window({"HOME": str(home)})
    check_start(
        r,
        home / ".local" / "share" / "llambda",
        home / ".cache" / "llambda" / "models",
        home / ".local" / "state" / "llambda" / "log",
    )
    assert list(home.iterdir()) == []
