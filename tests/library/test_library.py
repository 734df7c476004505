"""Model library: import (progress, hashing, verify, rename), duplicates, failures leave nothing."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from app.errors import LibraryError, ModelFormatError, exit_code_for
from app.library import DuplicateModelError, ImportCancelled, ModelLibrary
from app.library import library as libmod
from app.paths import models_dir
from tests.synth import write_tiny_model


@pytest.fixture
def tiny(tmp_path) -> Path:
    (tmp_path / "src").mkdir()
    return write_tiny_model(tmp_path / "src" / "tiny.gguf", seed=1)


@pytest.fixture
def lib() -> ModelLibrary:
    return ModelLibrary()


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(libmod, "CHUNK_BYTES", 32 << 10)


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    """Files in the library folder other than the index and its lock."""
    if not folder.exists():
        return []
    return sorted(n for n in os.listdir(folder) if n not in ("index.json", ".lock"))


def test_library_lives_in_the_isolated_cache(lib, isolated_home):
    assert lib.folder == models_dir() == Path(isolated_home) / "cache" / "models"


def test_import_copies_verifies_and_indexes(lib, tiny, small_chunks):
    seen = []
    e = lib.import_model(tiny, progress=lambda done, total: seen.append((done, total)))
    digest = sha(tiny)
    assert e.sha256 == digest
    assert e.name == "tiny"
    assert (e.architecture, e.quantization, e.storage) == ("llama", "F32", "copy")
    assert e.size == tiny.stat().st_size
    assert e.n_params > 0 and e.added > 0 and e.last_used is None
    copy = lib.folder / f"{digest}.gguf"
    assert copy.read_bytes() == tiny.read_bytes()
    assert leftovers(lib.folder) == [copy.name]
    # progress: several calls, monotonic, one total, ends at the total
    assert len(seen) > 3
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len({t for _, t in seen}) == 1 and seen[-1][0] == seen[-1][1]
    # the index on disk is plain JSON and says the same
    doc = json.loads((lib.folder / "index.json").read_text())
    assert doc["models"][0]["sha256"] == digest
    assert [m.sha256 for m in ModelLibrary().list()] == [digest]


def test_duplicate_import_copies_nothing(lib, tiny, tmp_path):
    first = lib.import_model(tiny)
    elsewhere = tmp_path / "other-name.gguf"
    shutil.copyfile(tiny, elsewhere)
    for src in (tiny, elsewhere):
        with pytest.raises(DuplicateModelError, match="already in your library as tiny") as ei:
            lib.import_model(src)
        assert ei.value.entry.sha256 == first.sha256
    assert len(lib.list()) == 1
    assert leftovers(lib.folder) == [f"{first.sha256}.gguf"]


def test_damaged_file_adds_nothing(lib, tiny, tmp_path):
    bad = tmp_path / "bad.gguf"
    data = tiny.read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # truncated inside the tensor data
    with pytest.raises(ModelFormatError) as ei:
        lib.import_model(bad)
    assert exit_code_for(ei.value) == 3
    assert "\n" not in str(ei.value)
    bad.write_bytes(b"NOPE" + data[4:])  # wrong magic
    with pytest.raises(ModelFormatError):
        lib.import_model(bad)
    assert leftovers(lib.folder) == []
    assert lib.list() == []


def test_full_disk_leaves_nothing(lib, tiny, monkeypatch, small_chunks):
    real = libmod._write_all
    calls = {"n": 0}

    def write_then_fill(fd, data):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(libmod, "_write_all", write_then_fill)
    with pytest.raises(LibraryError, match="disk full") as ei:
        lib.import_model(tiny)
    assert "nothing was kept" in str(ei.value)
    assert calls["n"] == 4
    assert leftovers(lib.folder) == []
    assert lib.list() == []


def test_not_enough_free_space_is_refused_before_copying(lib, tiny, monkeypatch):
    monkeypatch.setattr(libmod.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12 - 1000, 1000))
    with pytest.raises(LibraryError, match="not enough free disk space.*1,000 bytes are free"):
        lib.import_model(tiny)
    assert leftovers(lib.folder) == []


def test_read_error_leaves_nothing(lib, tiny, monkeypatch, small_chunks):
    class Flaky:
        def __init__(self, f):
            self.f, self.n = f, 0

        def read(self, n):
            self.n += 1
            if self.n > 2:
                raise OSError(errno.EIO, "Input/output error")
            return self.f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    real_open = open
    monkeypatch.setattr(libmod, "open", lambda p, *a, **k: Flaky(real_open(p, *a, **k)), raising=False)
    with pytest.raises(LibraryError, match="Input/output error"):
        lib.import_model(tiny)
    assert leftovers(lib.folder) == []


def test_cancel_leaves_nothing(lib, tiny, small_chunks):
    stop = threading.Event()

    def progress(done, total):
        if done > total // 4:
            stop.set()

    with pytest.raises(ImportCancelled):
        lib.import_model(tiny, progress=progress, cancel=stop)
    assert leftovers(lib.folder) == []
    with pytest.raises(ImportCancelled):  # a plain callable works too
        lib.import_model(tiny, cancel=lambda: True)
    assert leftovers(lib.folder) == [] and lib.list() == []


def test_keep_in_place_hard_links_on_same_filesystem(lib, tiny):
    e = lib.import_model(tiny, keep_in_place=True)
    assert e.storage == "link"
    linked = lib.folder / f"{e.sha256}.gguf"
    assert os.path.samefile(linked, tiny)
    lib.remove(e.name)
    assert tiny.exists() and not linked.exists()


def test_keep_in_place_across_filesystems_is_a_checked_reference(lib, tiny, monkeypatch):
    def no_link(a, b):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(libmod.os, "link", no_link)
    e = lib.import_model(tiny, keep_in_place=True)
    assert e.storage == "reference" and Path(e.path) == tiny
    assert leftovers(lib.folder) == []
    assert lib.resolve(e.name) == tiny
    with open(tiny, "ab") as f:  # the file changes behind our back
        f.write(b"\0")
    with pytest.raises(LibraryError, match="changed since it was imported"):
        lib.resolve(e.name)
    assert lib.status(lib.get(e.name)) == "changed"
    lib.remove(e.name)
    assert tiny.exists()  # we never delete the user's own file
    tiny.unlink()
    assert lib.list() == []


def test_resolve_by_name_or_hash_marks_last_use(lib, tiny, tmp_path):
    e = lib.import_model(tiny)
    other = lib.import_model(write_tiny_model(tmp_path / "two.gguf", seed=2))
    p = lib.resolve(e.sha256[:10])
    assert p == lib.folder / f"{e.sha256}.gguf"
    assert lib.resolve("TINY") == p
    assert lib.get(e.name).last_used is not None
    assert lib.get(other.name).last_used is None
    with pytest.raises(LibraryError, match="no model named"):
        lib.resolve("nothing-like-it")
    p.unlink()
    with pytest.raises(LibraryError, match="gone"):
        lib.resolve(e.name)
    assert lib.status(lib.get(e.name)) == "missing"


def test_remove_and_rename(lib, tiny):
    e = lib.import_model(tiny, name="My model")
    assert e.name == "My model"
    r = lib.rename("My model", "Renamed")
    assert lib.get(r.sha256).name == "Renamed"
    lib.remove("Renamed")
    assert lib.list() == [] and leftovers(lib.folder) == []
    with pytest.raises(LibraryError):
        lib.remove("Renamed")


def test_same_name_gets_a_suffix(lib, tmp_path):
    a = lib.import_model(write_tiny_model(tmp_path / "a.gguf", seed=3), name="same")
    b = lib.import_model(write_tiny_model(tmp_path / "b.gguf", seed=4), name="same")
    assert (a.name, b.name) == ("same", "same (2)")


def test_killed_between_rename_and_index_is_adopted(lib, tiny, tmp_path):
    digest = sha(tiny)
    lib.folder.mkdir(parents=True)
    shutil.copyfile(tiny, lib.folder / f"{digest}.gguf")  # renamed, never indexed
    (lib.folder / ".import-999999999-abc.part").write_bytes(b"half")  # a dead importer's temp
    [e] = lib.list()
    assert e.sha256 == digest and e.name == "tiny-llama-seed1"
    assert leftovers(lib.folder) == [f"{digest}.gguf"]
    with pytest.raises(DuplicateModelError):
        lib.import_model(tiny)


def test_damaged_index_is_kept_aside_and_rebuilt(lib, tiny):
    e = lib.import_model(tiny)
    (lib.folder / "index.json").write_bytes(b'{"models": [tr')
    [again] = lib.list()
    assert again.sha256 == e.sha256
    assert any(n.startswith("index.json.damaged-") for n in os.listdir(lib.folder))


def test_real_model_import(lib, smollm2_path):
    e = lib.import_model(smollm2_path, keep_in_place=True)
    assert (e.architecture, e.quantization) == ("llama", "Q4_1")
    assert 100e6 < e.n_params < 200e6
    assert e.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def test_verify_rehashes(lib, tiny):
    e = lib.import_model(tiny)
    assert lib.verify(e.name)
    copy = lib.folder / e.path
    data = bytearray(copy.read_bytes())
    data[-1] ^= 0xFF
    copy.write_bytes(bytes(data))
    assert not lib.verify(e.name)


KILLED_IMPORTER = """
import sys, time
from app.library import library as libmod
libmod.CHUNK_BYTES = 16 << 10
def slow(done, total):
    if done == 16 << 10:
        print("copying", flush=True)
    time.sleep(0.002)
libmod.ModelLibrary().import_model(sys.argv[1], progress=slow)
print("imported", flush=True)
"""


def test_sigkill_during_import_leaves_nothing_behind(lib, tiny):
    import signal
    import subprocess
    import sys

    if not hasattr(signal, "SIGKILL"):
        pytest.skip("needs SIGKILL")
    repo = Path(__file__).resolve().parents[2]
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_IMPORTER, str(tiny)],
            cwd=repo,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        assert proc.stdout.readline().strip() == "copying"
        assert any(n.endswith(".part") for n in os.listdir(lib.folder))  # killed mid-copy
        proc.kill()
        proc.wait(30)
        assert lib.list() == []  # the dead importer's temp file is swept
        assert leftovers(lib.folder) == []
    e = lib.import_model(tiny)  # and a fresh import works
    assert lib.verify(e.name)


def test_a_copy_gone_from_the_cache_can_be_imported_again(lib, tiny):
    e = lib.import_model(tiny, name="keep this name")
    (lib.folder / e.path).unlink()  # the cache was wiped behind our back
    again = lib.import_model(tiny)
    assert (again.name, again.sha256) == ("keep this name", e.sha256)
    assert [m.sha256 for m in lib.list()] == [e.sha256] and lib.status(again) == "ok"
    data = bytearray((lib.folder / e.path).read_bytes())
    data[-1] ^= 1
    (lib.folder / e.path).write_bytes(bytes(data))  # or damaged in place
    os.utime(lib.folder / e.path, ns=(1, 1))
    assert lib.status(lib.get(e.name)) == "changed"
    lib.import_model(tiny, keep_in_place=True)
    [m] = lib.list()
    assert m.storage == "link" and lib.status(m) == "ok" and lib.verify(m.name)
