"""One log line per engine stage: the model load and each generation (logger "llambda.engine").

The figures come from the engine's own counters (GenerationStats, the decoder, the GGUF header);
nothing here reads conversation text. `model_identity` says which file answered (SHA-256 from the
library's name for it, or hashed here once per process for files up to HASH_LIMIT bytes).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.stats import current_rss_bytes
from app.library import describe_model
from app.library.index import load_index
from app.logs import get

if TYPE_CHECKING:
    from app.engine.generate import Finished
    from app.gguf import GGUFFile
from app.paths import models_dir

log = get("engine")

HASH_LIMIT = 1 << 28  # files outside the library larger than this are not hashed
_HASH_NAME = re.compile(r"^([0-9a-f]{64})\.gguf$")
_hash_cache: dict[tuple, str] = {}


def file_sha256(path: str | os.PathLike) -> str | None:
    """The file's SHA-256: from its library name (`<sha256>.gguf`), from the library index (a
    model kept in place), or computed (once per process and file state). None when the file is
    outside the library and larger than HASH_LIMIT."""
    p = Path(path)
    m = _HASH_NAME.match(p.name)
    if m:
        return m.group(1)
    try:
        st = p.stat()
    except OSError:
        return None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key in _hash_cache:
        return _hash_cache[key]
    digest = _library_hash(p, st)
    if digest is None and st.st_size <= HASH_LIMIT:
        h = hashlib.sha256()
        try:
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(4 << 20), b""):
                    h.update(chunk)
        except OSError:
            return None
        digest = h.hexdigest()
    if digest is not None:
        _hash_cache[key] = digest
    return digest


def _library_hash(p: Path, st: os.stat_result) -> str | None:
    try:
        entries, _ = load_index(models_dir())
    except Exception:  # no library, or a damaged index: hash the file instead
        return None
    for e in entries:
        if e.storage == "reference" and e.size == st.st_size and e.mtime_ns == st.st_mtime_ns:
            try:
                if os.path.samefile(e.path, p):
                    return e.sha256
            except OSError:
                continue
    return None


def model_identity(path: str | os.PathLike, gguf_file: GGUFFile | None = None) -> dict:
    """{"sha256", "name", "quantization", "architecture"} of a model file, for the load line and
    the conversation record. Reads the header when `gguf_file` is not given."""
    out = {"sha256": file_sha256(path), "name": None, "quantization": None, "architecture": None}
    try:
        info = describe_model(path)
        out.update(name=info.name, quantization=info.quantization, architecture=info.architecture)
    except Exception as e:  # the load itself reports a bad file; this is only a label
        log.debug("model identity of %s: %s", path, e)
    return out


def tensor_types(gguf_file: GGUFFile) -> str:
    """'Q4_1 ×169, F32 ×61': tensor types by count, most first."""
    counts = Counter(t.type.name for t in gguf_file.tensors.values())
    return ", ".join(f"{name} ×{n}" for name, n in counts.most_common())


def log_model_load(engine: Any, map_s: float, decoder_s: float) -> None:  # Any: an Engine (its module imports this one)
    """The load line: file, size, hash prefix, GGUF version, architecture, tensor types, the
    time to map the file and to set up the decoder (repack), memory after the load."""
    if not log.isEnabledFor(logging.INFO):  # logging not set up: skip the hashing too
        return
    f = engine.file
    digest = file_sha256(engine.path)
    log.info(
        "model loaded: file=%s size=%.1fMiB sha256=%s gguf=v%s arch=%s types=[%s] n_ctx=%d "
        "threads=%d isa=%s map=%.1fms decoder=%.1fms rss=%.0fMiB",
        os.path.basename(engine.path),
        f.file_size / 2**20,
        digest[:12] if digest else "unhashed",
        getattr(f, "version", "?"),
        engine.config.arch,
        tensor_types(f),
        engine.n_ctx,
        engine.n_threads,
        getattr(engine.decoder, "isa", "?"),
        map_s * 1000,
        decoder_s * 1000,
        current_rss_bytes() / 2**20,
    )


def log_generation(finished: Finished, tokenize_s: float | None) -> None:
    """The generation line: tokenize, prompt and prefill, generated tokens and decode time,
    sampling's share of decoding, peak memory, threads, ISA, stop reason. No text."""
    if not log.isEnabledFor(logging.INFO):
        return
    s = finished.stats
    log.info(
        "generation: tokenize=%s prompt_tokens=%d new=%d prefill=%.1fms (%.1f tok/s) "
        "generated=%d decode=%.1fms (%.1f tok/s) ttft=%.1fms sampling=%.1f%% shifts=%d "
        "peak_rss=%.0fMiB threads=%d isa=%s n_ctx=%d stop=%s",
        "?" if tokenize_s is None else f"{tokenize_s * 1000:.1f}ms",
        s.prompt_tokens,
        s.prompt_tokens_evaluated,
        s.prompt_s * 1000,
        s.prompt_tok_s,
        s.generated_tokens,
        s.generation_s * 1000,
        s.generation_tok_s,
        s.ttft_s * 1000,
        100 * s.sample_share,
        s.context_shifts,
        s.peak_rss_bytes / 2**20,
        s.threads,
        s.isa,
        s.n_ctx,
        finished.stop_reason,
    )


__all__ = ["file_sha256", "model_identity", "tensor_types", "log_model_load", "log_generation"]
