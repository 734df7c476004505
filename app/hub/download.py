"""Downloads from the Hub: resumable across restarts, SHA-256 checked, imported into the library.

A job is `downloads/<key>.json` in the cache folder, beside its parts `<key>.<i>.part`; the
bytes there are what arrived, so a paused, failed or interrupted job resumes from them (a Range
request through huggingface_hub's `http_get`, pinned to the commit the file was listed at).
hf_hub_download is not used: its temporary file is unique to the process and deleted on any
failure, so nothing could resume after a restart. Before the first byte: the free disk space
for what is left plus the library's copy. After the last: each part's SHA-256 against the
Hub's LFS metadata (a mismatch deletes the job), a split model is joined into one file, and the
file is imported like a dropped one (`ModelLibrary.import_model`: copy, verify, rename; dedupe).
Cancel deletes everything of the job. `DownloadQueue` runs jobs one at a time on its own thread
and reports plain dicts through a callback; `download_now` runs one in the caller's thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from app.errors import LlambdaError
from app.hub.client import HubClient, HubError, SilentBar, hf, translate
from app.hub.files import HubFile, RepoFiles
from app.paths import atomic_write_text, cache_dir, ensure_dir

if TYPE_CHECKING:
    from app.library import ModelLibrary
    from app.library.index import ModelEntry

HASH_CHUNK = 4 << 20
TRANSFER_CHUNK = 1 << 20  # progress (and a pause) every MiB instead of the library's 10 MiB
FREE_MARGIN_BYTES = 64 << 20
RATE_WINDOW_S = 5.0

Event = Callable[[dict], None]


class DownloadStopped(LlambdaError):
    """The job was paused (its bytes are kept) or cancelled (nothing is kept): `how` says which."""

    def __init__(self, message: str, how: str):
        super().__init__(message)
        self.how = how


def downloads_dir() -> Path:
    return cache_dir() / "downloads"


@dataclass
class DownloadJob:
    key: str
    repo_id: str
    revision: str
    name: str  # the model's file name (a split model's without the part suffix)
    quantization: str
    parts: list[dict]  # [{"path", "size", "sha256"}] in order
    state: str = "queued"  # queued | running | paused | failed | done
    message: str = ""
    added: float = field(default_factory=time.time)

    @property
    def size(self) -> int:
        return sum(int(p["size"]) for p in self.parts)

    def part_path(self, i: int) -> Path:
        return downloads_dir() / f"{self.key}.{i}.part"

    @property
    def joined_path(self) -> Path:
        return downloads_dir() / f"{self.key}.joined.part"

    @property
    def json_path(self) -> Path:
        return downloads_dir() / f"{self.key}.json"

    def have(self) -> int:
        """Bytes on disk so far."""
        total = 0
        for i, p in enumerate(self.parts):
            try:
                total += min(self.part_path(i).stat().st_size, int(p["size"]))
            except OSError:
                pass
        return total

    def save(self) -> None:
        ensure_dir(downloads_dir())
        atomic_write_text(self.json_path, json.dumps(asdict(self), indent=1))

    def delete(self) -> None:
        """Remove every file of the job."""
        for path in [self.part_path(i) for i in range(len(self.parts))] + [self.joined_path, self.json_path]:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def to_json(self) -> dict:
        d = asdict(self)
        d["size"], d["have"] = self.size, self.have()
        return d


def job_key(repo_id: str, revision: str, name: str) -> str:
    return hashlib.sha256(f"{repo_id}\0{revision}\0{name}".encode()).hexdigest()[:16]


def job_for(repo: RepoFiles, hub_file: HubFile) -> DownloadJob:
    """The job for this file: the one already on disk (to resume), or a new one (saved)."""
    key = job_key(repo.repo_id, repo.revision, hub_file.name)
    for job in pending_jobs():
        if job.key == key:
            return job
    for p in hub_file.parts:
        if not p.sha256:
            raise HubError(
                f"{repo.repo_id}/{p.path}: the Hub gives no SHA-256 for it, so the download "
                "could not be verified; not downloaded",
                "mismatch",
            )
    job = DownloadJob(
        key,
        repo.repo_id,
        repo.revision,
        hub_file.name,
        hub_file.quantization,
        [{"path": p.path, "size": p.size, "sha256": p.sha256} for p in hub_file.parts],
    )
    job.save()
    return job


def pending_jobs() -> list[DownloadJob]:
    """Jobs left on disk (paused, failed or interrupted by a restart), oldest first."""
    folder = downloads_dir()
    jobs: list[DownloadJob] = []
    if not folder.is_dir():
        return jobs
    for path in sorted(folder.glob("*.json")):
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            job = DownloadJob(**d)
            if not (isinstance(job.parts, list) and job.parts and job.key == path.stem):
                raise ValueError("no parts")
        except (OSError, ValueError, TypeError):
            continue  # not ours, or damaged: left alone
        if job.state in ("running", "queued"):
            job.state = "paused"  # a previous run ended while it was going
        jobs.append(job)
    jobs.sort(key=lambda j: j.added)
    return jobs


class Rate:
    """Bytes per second over the last few seconds, and the time left at that speed."""

    def __init__(self, done: int, total: int):
        self.total = total
        self.samples: deque[tuple[float, int]] = deque([(time.monotonic(), done)])

    def add(self, done: int) -> tuple[float, float | None]:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > RATE_WINDOW_S:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        speed = (done - d0) / (now - t0) if now > t0 else 0.0
        eta = (self.total - done) / speed if speed > 0 else None
        return speed, eta


class _Stop(Exception):
    """Raised from the progress hook to end http_get between two chunks."""


def _meter(on_bytes: Callable[[int], None]) -> type[SilentBar]:
    """A class that http_get takes for its progress bar; it reports bytes and may stop the transfer."""

    class Meter(SilentBar):
        def update(self, n: int = 1) -> None:
            on_bytes(int(n))

    return Meter


def _check_space(job: DownloadJob, library_folder: Path) -> None:
    left = job.size - job.have()
    need_here = left + (job.size if len(job.parts) > 1 else 0)  # + the joined file
    folder = ensure_dir(downloads_dir())
    ensure_dir(library_folder)
    same = os.stat(folder).st_dev == os.stat(library_folder).st_dev
    checks = [(folder, need_here + (job.size if same else 0))]
    if not same:
        checks.append((library_folder, job.size))
    for where, need in checks:
        free = shutil.disk_usage(where).free
        if free < need + FREE_MARGIN_BYTES:
            raise HubError(
                f"not enough free disk space for {job.name}: it needs {need / 1e9:.2f} GB "
                f"(+{FREE_MARGIN_BYTES >> 20} MB margin) in {where}, {free / 1e9:.2f} GB are free",
                "disk",
            )


def _sha256(path: Path, on_bytes: Callable[[int], None]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
            on_bytes(len(chunk))
    return h.hexdigest()


def run_job(
    job: DownloadJob,
    *,
    client: HubClient | None = None,
    library: ModelLibrary | None = None,
    on_event: Event | None = None,
    should_stop: Callable[[], str | None] = lambda: None,
) -> tuple[ModelEntry, bool]:
    """Download, verify and import `job`; returns (library entry, duplicate?).

    `should_stop()` is asked between chunks: "pause" keeps the bytes (DownloadStopped how=pause),
    "cancel" deletes them (how=cancel). Raises HubError with one line for every failure; a
    failure that more bytes can mend (network, 401, 5xx) keeps the bytes and leaves the job
    `failed` to resume, one that cannot (wrong hash, truncated file) deletes the job."""
    hf()
    from huggingface_hub import constants
    from huggingface_hub.file_download import http_get

    from app.library import DuplicateModelError, ModelLibrary

    client = client or HubClient()
    library = library or ModelLibrary()
    emit = on_event or (lambda _e: None)

    def stopping() -> None:
        how = should_stop()
        if how:
            raise _Stop(how)

    def stage(name: str, done: int, total: int, rate: Rate | None = None) -> None:
        speed, eta = rate.add(done) if rate else (0.0, None)
        emit(
            {
                "event": "progress",
                "key": job.key,
                "stage": name,
                "done": done,
                "total": total,
                "speed": speed,
                "eta": eta,
            }
        )

    def set_state(state: str, message: str = "") -> None:
        job.state, job.message = state, message
        if state != "done":
            job.save()
        emit({"event": "state", "key": job.key, "state": state, "message": message})

    set_state("running")
    try:
        try:
            _check_space(job, Path(library.folder))
            done = job.have()
            rate = Rate(done, job.size)
            stage("download", done, job.size, rate)
            constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, TRANSFER_CHUNK)
            for i, p in enumerate(job.parts):
                path, size = job.part_path(i), int(p["size"])
                have = path.stat().st_size if path.exists() else 0
                if have > size:  # more than the file holds: start this part again
                    path.unlink()
                    have = 0
                if have == size:
                    continue
                stopping()
                what = f"{job.repo_id}/{p['path']}"
                location, headers, _ = client.file_location(job.repo_id, p["path"], job.revision)
                got = [done - have]

                def on_bytes(n: int, got: list[int] = got) -> None:
                    got[0] += n
                    stage("download", got[0] + have, job.size, rate)
                    stopping()

                try:
                    with open(path, "ab") as out:
                        http_get(
                            location,
                            out,
                            resume_size=have,
                            headers=headers,
                            expected_size=size,
                            tqdm_class=_meter(on_bytes),
                        )
                except _Stop:
                    raise
                except Exception as e:
                    if isinstance(e, OSError) and "Consistency check failed" in str(e):
                        arrived = path.stat().st_size if path.exists() else 0
                        job.delete()
                        raise HubError(
                            f"{what}: the server sent {arrived:,} of {size:,} bytes (the file is "
                            "truncated); nothing was kept",
                            "truncated",
                        ) from None
                    raise translate(e, what, repo_id=job.repo_id) from None
                done = job.have()
            stopping()
            verified = 0
            for i, p in enumerate(job.parts):

                def on_hash(n: int) -> None:
                    nonlocal verified
                    verified += n
                    stage("verify", verified, job.size)
                    stopping()

                digest = _sha256(job.part_path(i), on_hash)
                if digest != p["sha256"]:
                    job.delete()
                    raise HubError(
                        f"{job.repo_id}/{p['path']}: SHA-256 {digest[:12]}… does not match the Hub's "
                        f"{str(p['sha256'])[:12]}…; the download was deleted",
                        "mismatch",
                    )
            stopping()
            if len(job.parts) > 1:
                from app.hub.split import join_split

                join_split(
                    [job.part_path(i) for i in range(len(job.parts))],
                    job.joined_path,
                    progress=lambda d, t: stage("join", d, t),
                )
                source = job.joined_path
            else:
                source = job.part_path(0)
            safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in job.name).lstrip(".") or "model.gguf"
            named = source.with_name(safe)  # the library names a model after its file
            os.replace(source, named)
            try:
                try:
                    entry = library.import_model(named, progress=lambda d, t: stage("import", d, t))
                    duplicate = False
                except DuplicateModelError as d:
                    entry, duplicate = d.entry, True
            except BaseException:
                os.replace(named, source)
                raise
            named.unlink()
        except _Stop as s:
            if str(s) == "cancel":
                job.delete()
                emit({"event": "state", "key": job.key, "state": "cancelled", "message": "cancelled"})
                raise DownloadStopped(f"{job.name}: cancelled; nothing was kept", "cancel") from None
            set_state("paused", f"paused at {job.have() / max(job.size, 1):.0%}")
            raise DownloadStopped(f"{job.name}: paused; its {job.have():,} bytes are kept", "pause") from None
        except KeyboardInterrupt:
            set_state("paused", f"interrupted at {job.have() / max(job.size, 1):.0%}")
            raise
    except HubError as e:
        if e.kind in ("mismatch", "truncated"):
            emit({"event": "state", "key": job.key, "state": "deleted", "message": str(e)})
        else:
            set_state("failed", str(e))
        raise
    except LlambdaError as e:  # the import refused the file (bad GGUF, disk): nothing is kept
        if not isinstance(e, DownloadStopped):
            job.delete()
            emit({"event": "state", "key": job.key, "state": "deleted", "message": str(e)})
        raise
    for i in range(len(job.parts)):
        try:
            job.part_path(i).unlink()
        except FileNotFoundError:
            pass
    job.delete()
    set_state("done", f"in your library as {entry.name}" + (" (it was already there)" if duplicate else ""))
    emit(
        {
            "event": "done",
            "key": job.key,
            "entry": entry.to_json(),
            "duplicate": duplicate,
            "file": str(entry.file_path(library.folder)),
        }
    )
    return entry, duplicate


def download_now(
    repo_id: str,
    file_name: str,
    *,
    client: HubClient | None = None,
    library: ModelLibrary | None = None,
    on_event: Event | None = None,
) -> tuple[ModelEntry, bool]:
    """List `repo_id`, find `file_name` there and run its job now (resuming one on disk)."""
    client = client or HubClient()
    repo = client.repo_files(repo_id)
    try:
        hub_file = repo.find(file_name)
    except KeyError:
        names = ", ".join(f.name for f in repo.files[:8]) or "none"
        raise HubError(f"{repo_id} has no GGUF file {file_name!r} (its GGUF files: {names})", "not_found") from None
    job = job_for(repo, hub_file)
    return run_job(job, client=client, library=library, on_event=on_event)


class DownloadQueue:
    """Jobs run one at a time on a thread of their own; `on_event(dict)` is called from it.

    Events: {"event": "state", "key", "state", "message"}, {"event": "progress", "key", "stage",
    "done", "total", "speed", "eta"}, {"event": "done", "key", "entry", "duplicate", "file"},
    {"event": "added", "job"}."""

    def __init__(
        self,
        on_event: Event,
        *,
        client_factory: Callable[[], HubClient] = HubClient,
        library_factory: Callable[[], ModelLibrary] | None = None,
    ):
        self.on_event = on_event
        self.client_factory = client_factory
        self.library_factory = library_factory
        self.jobs: dict[str, DownloadJob] = {}
        self._stop: dict[str, str] = {}
        self._cv = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="llambda-downloads", daemon=True)
        self._thread.start()

    def restore(self) -> list[DownloadJob]:
        """Jobs left from before (paused): listed, not started."""
        with self._cv:
            for job in pending_jobs():
                if job.key not in self.jobs:
                    self.jobs[job.key] = job
                    self.on_event({"event": "added", "job": job.to_json()})
            return list(self.jobs.values())

    def add(self, repo: RepoFiles, hub_file: HubFile) -> DownloadJob:
        job = job_for(repo, hub_file)
        with self._cv:
            job = self.jobs.setdefault(job.key, job)
            if job.state != "running":
                job.state = "queued"
                job.save()
            self.on_event({"event": "added", "job": job.to_json()})
            self._cv.notify_all()
        return job

    def resume(self, key: str) -> None:
        with self._cv:
            job = self.jobs.get(key)
            if job is not None and job.state in ("paused", "failed"):
                job.state, job.message = "queued", ""
                job.save()
                self.on_event({"event": "state", "key": key, "state": "queued", "message": ""})
                self._cv.notify_all()

    def pause(self, key: str) -> None:
        with self._cv:
            job = self.jobs.get(key)
            if job is None:
                return
            if job.state == "running":
                self._stop[key] = "pause"
            elif job.state == "queued":
                job.state = "paused"
                job.save()
                self.on_event({"event": "state", "key": key, "state": "paused", "message": "paused"})

    def cancel(self, key: str) -> None:
        with self._cv:
            job = self.jobs.get(key)
            if job is None:
                return
            if job.state == "running":
                self._stop[key] = "cancel"
                return
            del self.jobs[key]
        job.delete()
        self.on_event({"event": "state", "key": key, "state": "cancelled", "message": "cancelled"})

    def close(self, timeout: float = 10.0) -> None:
        """Pause the running job (its bytes are kept for next time) and end the thread."""
        with self._cv:
            self._closing = True
            for key, job in self.jobs.items():
                if job.state == "running":
                    self._stop[key] = "pause"
            self._cv.notify_all()
        self._thread.join(timeout)

    def _next(self) -> DownloadJob | None:
        with self._cv:
            while not self._closing:
                job = next((j for j in self.jobs.values() if j.state == "queued"), None)
                if job is not None:
                    job.state = "running"
                    return job
                self._cv.wait()
            return None

    def _run(self) -> None:
        while (job := self._next()) is not None:
            try:
                run_job(
                    job,
                    client=self.client_factory(),
                    library=self.library_factory() if self.library_factory else None,
                    on_event=self.on_event,
                    should_stop=lambda k=job.key: self._stop.get(k),  # type: ignore[misc]  # default arg
                )
            except DownloadStopped:
                pass
            except LlambdaError:
                pass  # run_job has reported it as a state event
            except Exception as e:  # the thread must go on; the person hears of it in one line
                job.state, job.message = "failed", f"{type(e).__name__}: {e}"
                self.on_event({"event": "state", "key": job.key, "state": "failed", "message": job.message})
            with self._cv:
                self._stop.pop(job.key, None)
                if job.state in ("done", "cancelled") or not job.json_path.exists():
                    self.jobs.pop(job.key, None)


__all__ = [
    "DownloadJob",
    "DownloadQueue",
    "DownloadStopped",
    "Rate",
    "download_now",
    "job_for",
    "pending_jobs",
    "run_job",
    "downloads_dir",
]
