"""The stage log (app/logs.py), the engine's stage lines, versions, the diagnostics report and
`llambda doctor` (app/diagnostics.py)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sqlite3
import subprocess
import sys
from pathlib import Path


from app import diagnostics, logs
from app.cli import main
from tests.models import SMOLLM2_SHA256

ROOT = Path(__file__).resolve().parent.parent


def _log_text() -> str:
    return logs.log_path().read_text(encoding="utf-8")


# -- the log itself -------------------------------------------------------------------------------


def test_cli_log_file_rotates_and_stderr_shows_warnings_only(isolated_home, capsys, monkeypatch):
    monkeypatch.delenv("LLAMBDA_LOG", raising=False)
    path = logs.setup("cli", force=True)
    assert Path(path) == isolated_home / "logs" / "llambda.log"
    log = logs.get("test")
    log.info("an info line")
    log.debug("a debug line")
    log.warning("a warning line")
    logging.getLogger("app.text.vocab").warning("a module's own logger")  # `__name__` loggers too
    err = capsys.readouterr().err
    assert "a warning line" in err and "an info line" not in err
    text = _log_text()
    assert "INFO    llambda.test: an info line" in text and "a warning line" in text
    assert "app.text.vocab: a module's own logger" in text
    assert "a debug line" not in text
    fh = next(h for h in logging.getLogger("llambda").handlers if isinstance(h, logging.handlers.RotatingFileHandler))
    assert fh.maxBytes == logs.MAX_BYTES and fh.backupCount == logs.BACKUP_COUNT
    # configured once: a second setup keeps the same handlers
    logs.setup("cli", verbose=1)
    ours = [
        h
        for h in logging.getLogger("llambda").handlers
        if isinstance(h, logging.handlers.RotatingFileHandler) or type(h).__name__ == "_Stderr"
    ]
    assert len(ours) == 2
    log.info("now said")
    assert "now said" in capsys.readouterr().err


def test_verbose_and_llambda_log_debug(capsys, monkeypatch):
    monkeypatch.setenv("LLAMBDA_LOG", "debug")
    logs.setup("cli", force=True)
    logs.get("test").debug("a debug line")
    assert "a debug line" in capsys.readouterr().err and "a debug line" in _log_text()
    monkeypatch.delenv("LLAMBDA_LOG")
    logs.setup("cli", verbose=2, force=True)
    logs.get("test").debug("another")
    assert "another" in capsys.readouterr().err


def test_unwritable_logs_folder_means_no_file_and_one_warning(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("LLAMBDA_LOG_DIR", str(blocker / "logs"))
    assert logs.setup("cli", force=True) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "logs folder cannot be written" in err


def test_native_crash_leaves_a_faulthandler_report_and_a_clean_exit_none(tmp_path):
    env = {**os.environ, "LLAMBDA_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    clean = subprocess.run(
        [sys.executable, "-c", "from app import logs; logs.setup('cli')"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert clean.returncode == 0, clean.stderr
    assert list((tmp_path / "logs").glob("faulthandler-*.log")) == []
    crash = subprocess.run(
        [sys.executable, "-c", "from app import logs; logs.setup('cli'); import faulthandler; faulthandler._sigsegv()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crash.returncode != 0
    reports = logs.native_crash_reports(tmp_path / "logs")
    assert len(reports) == 1 and "Fatal Python error" in reports[0].read_text()


# -- stage lines ----------------------------------------------------------------------------------


def test_engine_logs_one_line_per_stage_without_the_text(smollm2_path):
    from app.engine.engine import Engine
    from app.engine.generate import GenerationRequest

    logs.setup("window", force=True)
    secret = "zebra-secret-4242"
    with Engine(smollm2_path, n_ctx=256) as eng:
        ids = eng.chat_prompt([{"role": "user", "content": f"Say {secret}"}])
        events = list(eng.generate(GenerationRequest(tuple(ids), max_tokens=6)))
    text = _log_text()
    load = [ln for ln in text.splitlines() if "model loaded:" in ln]
    gen = [ln for ln in text.splitlines() if "generation:" in ln]
    assert len(load) == 1 and len(gen) == 1
    for field in (
        "file=SmolLM2-135M-Instruct.Q4_1.gguf",
        f"sha256={SMOLLM2_SHA256[:12]}",
        "gguf=v3",
        "arch=llama",
        "types=[Q4_1 ×",
        "map=",
        "decoder=",
        "rss=",
        "size=93.8MiB",
    ):
        assert field in load[0], field
    fin = events[-1]
    for field in (
        "tokenize=",
        f"prompt_tokens={len(ids)}",
        "prefill=",
        f"generated={fin.stats.generated_tokens}",
        "decode=",
        "sampling=",
        "peak_rss=",
        f"threads={fin.stats.threads}",
        f"isa={fin.stats.isa}",
        f"stop={fin.stop_reason}",
    ):
        assert field in gen[0], field
    assert secret not in text and fin.text.strip() and fin.text not in text


def test_conversation_text_only_when_log_prompts_is_on_and_never_in_diagnostics():
    logs.setup("window", force=True)
    logs.log_text("user", "my private question")
    assert "my private question" not in _log_text()
    logs.set_log_prompts(True)
    logs.log_text("user", "my private question")
    assert "llambda.text: user: 'my private question'" in _log_text()
    report = diagnostics.diagnostics_text()
    assert "my private question" not in report and diagnostics.TEXT_REMOVED in report


# -- versions and the report ----------------------------------------------------------------------


def test_version_verbose_names_every_component(capsys):
    assert main(["--version", "--verbose"]) == 0
    out = capsys.readouterr().out
    for name in (
        "Llambda",
        "git revision",
        "kernel library",
        "kernels in use",
        "Python",
        "Qt",
        "numpy",
        "tokenizers",
        "sentencepiece",
        "jinja2",
        "OS",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "read from the git checkout" in out or "recorded at build time" in out
    assert "-O3" in out and "CPU flags" in out
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("llambda ")


def test_diagnostics_report_has_the_facts_and_hides_the_home_folder(isolated_home, monkeypatch):
    logs.setup("window", force=True)
    home = str(isolated_home)
    monkeypatch.setenv("HOME", home)
    logs.get("test").info("opened %s/models/x.gguf", home)
    report = diagnostics.diagnostics_text()
    for part in (
        "## versions",
        "## machine",
        "## folders",
        "## crash reports",
        "log's last",
        "GiB free",
        "library",
        "CPU",
        "memory",
    ):
        assert part in report, part
    assert "opened ~/models/x.gguf" in report and home not in report
    assert len(diagnostics.log_tail(3)) == 3 or len(diagnostics.log_tail()) < 3


# -- doctor ---------------------------------------------------------------------------------------


def test_doctor_all_clear_on_a_fresh_install(capsys):
    assert main(["doctor"]) == 0
    out, err = capsys.readouterr()
    assert "All clear" in out and err == ""


def test_doctor_names_a_folder_it_cannot_write(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("LLAMBDA_DATA_DIR", str(blocker / "data"))
    assert main(["doctor"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("problem: the data folder") and "cannot be written" in err[0]


def test_doctor_names_a_corrupted_database(isolated_home, capsys):
    from app.chats import ChatStore
    from app.paths import chats_db_path

    with ChatStore() as s:  # a real database, then damaged pages
        conv = s.create_conversation("t")
        for i in range(40):
            s.add_message(conv, "user", f"message number {i} " * 60)
    db = chats_db_path()
    assert main(["doctor"]) == 0
    capsys.readouterr()
    data = bytearray(db.read_bytes())
    page = 4096
    for p in range(2, len(data) // page):  # garble every page header but the first's
        data[p * page : p * page + 8] = b"\xff" * 8
    db.write_bytes(bytes(data))
    assert main(["doctor"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "conversation database" in err[0] and "is damaged" in err[0]
    db.write_bytes(b"this is not a database at all" * 100)
    assert main(["doctor"]) == 1
    assert "not a database" in capsys.readouterr().err


def test_kernel_self_test_agrees_with_the_reference():
    c = diagnostics.check_kernels()
    assert c.ok, c.message


def test_database_check_reads_quick_check(tmp_path):
    db = tmp_path / "x.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    assert diagnostics.check_database(db).ok
    assert diagnostics.check_database(tmp_path / "none.sqlite3").ok
