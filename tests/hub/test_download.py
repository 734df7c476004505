"""Downloads through the real huggingface_hub client from the fake Hub: complete, verified,
imported; resumed after a drop, after a failure and after a restart, ending with the same bytes;
paused; cancelled; and each failure (wrong hash, truncated file, gated, no space) in one line with
nothing left in the library."""

from __future__ import annotations

import functools
import threading

import pytest

from app.hub import HubClient, HubError
from app.hub.download import DownloadQueue, DownloadStopped, downloads_dir, job_for, pending_jobs, run_job
from app.library import ModelLibrary
from tests.hub.fake_hub import GOOD_TOKEN, FakeFile, FakeRepo, sha256_file
from tests.models import SMOLLM2_SHA256

SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def library_files() -> list[str]:
    lib = ModelLibrary()
    return sorted(p.name for p in lib.folder.iterdir()) if lib.folder.exists() else []


def leftovers() -> list[str]:
    d = downloads_dir()
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def job(repo_id: str, name: str):
    repo = HubClient().repo_files(repo_id)
    return job_for(repo, repo.find(name))


def test_a_download_completes_verifies_and_is_imported(hub, smol_repo):
    events = []
    entry, duplicate = run_job(job(smol_repo.repo_id, SMOL), on_event=events.append)
    assert not duplicate and entry.sha256 == SMOLLM2_SHA256 and entry.name == "SmolLM2-135M-Instruct.Q4_1"
    lib = ModelLibrary()
    assert sha256_file(lib.resolve(entry.name)) == SMOLLM2_SHA256  # the bytes in the library
    assert leftovers() == []  # nothing else is kept
    stages = {e["stage"] for e in events if e["event"] == "progress"}
    assert stages == {"download", "verify", "import"}
    last = [e for e in events if e["event"] == "progress" and e["stage"] == "download"][-1]
    assert last["done"] == last["total"] == entry.size and last["speed"] > 0 and last["eta"] == 0
    assert events[-1]["event"] == "done" and events[-1]["file"].endswith(f"{SMOLLM2_SHA256}.gguf")
    # The same file again: already in the library, said so, nothing copied twice.
    entry2, duplicate2 = run_job(job(smol_repo.repo_id, SMOL))
    assert duplicate2 and entry2.sha256 == entry.sha256 and len(ModelLibrary().list()) == 1


def test_a_dropped_connection_is_resumed_and_ends_with_the_same_bytes(hub, smol_repo):
    f = smol_repo.files[0]
    f.drop_after, f.drops = 30_000_000, 1
    entry, _ = run_job(job(smol_repo.repo_id, SMOL))
    assert entry.sha256 == SMOLLM2_SHA256
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and "/resolve/" in p]
    assert ranges[0] is None and ranges[1].startswith("bytes=") and int(ranges[1][6:-1]) <= 30_000_000


def test_interrupted_then_resumed_in_a_new_run_ends_with_the_same_bytes(hub, smol_repo):
    f = smol_repo.files[0]
    f.drop_after, f.drops, f.status_after_drops, f.status_count = 40_000_000, 1, 503, 1
    with pytest.raises(HubError) as e:
        run_job(job(smol_repo.repo_id, SMOL))
    assert e.value.kind == "http" and "\n" not in str(e.value)
    (left,) = pending_jobs()  # a "restart": the job is read back from disk
    assert left.state == "failed" and 0 < left.have() <= 40_000_000
    assert library_files() in ([], ["index.json"])  # nothing half-written in the library
    have = left.have()
    entry, _ = run_job(left)
    assert entry.sha256 == SMOLLM2_SHA256 and leftovers() == []
    ranges = [h.get("Range") for m, p, h in hub.requests if m == "GET" and "/resolve/" in p]
    assert ranges[-1] == f"bytes={have}-"


def test_pause_keeps_the_bytes_and_resume_after_a_restart_finishes(hub, smol_repo):
    seen = {"done": 0}
    j = job(smol_repo.repo_id, SMOL)

    def on_event(e):
        if e["event"] == "progress" and e["stage"] == "download":
            seen["done"] = e["done"]

    with pytest.raises(DownloadStopped) as e:
        run_job(j, on_event=on_event, should_stop=lambda: "pause" if seen["done"] >= 20 << 20 else None)
    assert e.value.how == "pause"
    (left,) = pending_jobs()
    # http_get reports a chunk before writing it: the chunk that asked to stop is not kept.
    assert left.state == "paused" and (19 << 20) <= left.have() < left.size
    entry, _ = run_job(left)
    assert entry.sha256 == SMOLLM2_SHA256 and leftovers() == []


def test_cancel_leaves_nothing_behind(hub, smol_repo):
    seen = {"done": 0}

    def on_event(e):
        if e["event"] == "progress":
            seen["done"] = e["done"]

    with pytest.raises(DownloadStopped) as e:
        run_job(
            job(smol_repo.repo_id, SMOL),
            on_event=on_event,
            should_stop=lambda: "cancel" if seen["done"] >= 10 << 20 else None,
        )
    assert e.value.how == "cancel" and "nothing was kept" in str(e.value)
    assert leftovers() == [] and pending_jobs() == [] and ModelLibrary().list() == []


def test_a_wrong_hash_deletes_the_download(hub, tiny_gguf):
    hub.add(FakeRepo("test/liar-GGUF", [FakeFile("liar-F32.gguf", tiny_gguf, sha256="f" * 64)]))
    with pytest.raises(HubError) as e:
        run_job(job("test/liar-GGUF", "liar-F32.gguf"))
    msg = str(e.value)
    assert e.value.kind == "mismatch" and "\n" not in msg
    assert "does not match the Hub's ffffffffffff" in msg and "deleted" in msg
    assert leftovers() == [] and ModelLibrary().list() == []


def test_a_truncated_file_deletes_the_download(hub, tiny_gguf):
    size = tiny_gguf.stat().st_size
    hub.add(FakeRepo("test/short-GGUF", [FakeFile("short-F32.gguf", tiny_gguf, declared_size=size + 5000)]))
    with pytest.raises(HubError) as e:
        run_job(job("test/short-GGUF", "short-F32.gguf"))
    assert e.value.kind == "truncated" and f"sent {size:,} of {size + 5000:,} bytes" in str(e.value)
    assert leftovers() == [] and ModelLibrary().list() == []


def test_a_gated_download_needs_the_token(hub, tiny_gguf):
    from app.hub.token import save_token

    hub.add(FakeRepo("test/gated-GGUF", [FakeFile("g-F32.gguf", tiny_gguf)], gated=True))
    j = job("test/gated-GGUF", "g-F32.gguf")
    with pytest.raises(HubError) as e:
        run_job(j)
    assert e.value.kind == "gated" and "accept its licence" in str(e.value)
    save_token(GOOD_TOKEN)
    (left,) = pending_jobs()
    entry, _ = run_job(left)
    assert entry.sha256 == sha256_file(tiny_gguf)


def test_no_network_mid_way_keeps_the_bytes(hub, smol_repo, monkeypatch):
    j = job(smol_repo.repo_id, SMOL)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(HubError) as e:
        run_job(j)
    assert e.value.kind == "offline" and (pending_jobs()[0].state, pending_jobs()[0].message) == (
        "failed",
        str(e.value),
    )


def test_disk_space_is_checked_before_the_first_byte(hub, smol_repo, monkeypatch):
    import shutil

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=150 << 20))
    with pytest.raises(HubError) as e:
        run_job(job(smol_repo.repo_id, SMOL))
    assert e.value.kind == "disk" and "not enough free disk space" in str(e.value)
    assert hub.count("GET", "/resolve/") == 0


def test_a_split_model_is_downloaded_whole_and_joined(hub, tmp_path, monkeypatch):
    import gguf

    from app.gguf import open_gguf
    from tests.synth import write_tiny_model

    (tmp_path / "whole").mkdir()
    whole = write_tiny_model(tmp_path / "whole" / "m.gguf")
    monkeypatch.setattr(gguf, "GGUFWriter", functools.partial(gguf.GGUFWriter, split_max_tensors=8))
    (tmp_path / "split").mkdir()
    write_tiny_model(tmp_path / "split" / "m.gguf")
    monkeypatch.undo()
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    parts = sorted((tmp_path / "split").glob("m-*-of-*.gguf"))
    assert len(parts) == 3
    hub.add(
        FakeRepo("test/split-GGUF", [FakeFile(f"Tiny-F32-0000{i}-of-00003.gguf", p) for i, p in enumerate(parts, 1)])
    )
    repo = HubClient().repo_files("test/split-GGUF")
    (f,) = repo.files
    assert f.name == "Tiny-F32.gguf" and f.split and f.size == sum(p.stat().st_size for p in parts)
    from app.hub import check_remote

    v = check_remote(HubClient(), repo.repo_id, repo.revision, f)
    assert v.supported, v.summary()
    entry, _ = run_job(job_for(repo, f))
    # Oracle: the model written whole, tensor by tensor and key by key.
    with open_gguf(whole) as a, open_gguf(ModelLibrary().resolve(entry.name)) as b:
        assert list(a.tensors) == list(b.tensors)
        for name in a.tensors:
            assert (a.tensors[name].dims, a.tensors[name].type) == (b.tensors[name].dims, b.tensors[name].type)
            assert a.tensor_bytes(name).tobytes() == b.tensor_bytes(name).tobytes()
        assert [k for k in a.metadata if not k.startswith("split.")] == list(b.metadata)
        for k in b.metadata:
            va, vb = a.metadata.get(k), b.metadata.get(k)
            assert (list(va) if hasattr(va, "__len__") and not isinstance(va, str) else va) == (
                list(vb) if hasattr(vb, "__len__") and not isinstance(vb, str) else vb
            ), k
    assert leftovers() == []


def test_the_queue_runs_jobs_one_at_a_time_and_reports_plain_events(hub, tiny_gguf, tmp_path):
    import shutil

    other = tmp_path / "other.gguf"
    from tests.synth import write_tiny_model

    write_tiny_model(other, seed=1)
    shutil.copy(tiny_gguf, tmp_path / "a.gguf")
    hub.add(
        FakeRepo(
            "test/two-GGUF",
            [FakeFile("a-F32.gguf", tiny_gguf, bytes_per_s=2e6), FakeFile("b-F32.gguf", other, bytes_per_s=2e6)],
        )
    )
    events, done = [], threading.Event()
    running = []

    def on_event(e):
        events.append(e)
        if e["event"] == "state" and e["state"] == "running":
            running.append(e["key"])
        if sum(1 for x in events if x["event"] == "done") == 2:
            done.set()

    q = DownloadQueue(on_event)
    try:
        repo = HubClient().repo_files("test/two-GGUF")
        a, b = (q.add(repo, f) for f in repo.files)
        assert done.wait(60)
    finally:
        q.close()
    assert running == [a.key, b.key]
    # One at a time: b started only after a was done.
    order = [(e["event"], e.get("key")) for e in events if e["event"] in ("done",) or e.get("state") == "running"]
    assert order == [("state", a.key), ("done", a.key), ("state", b.key), ("done", b.key)]
    assert len(ModelLibrary().list()) == 2
