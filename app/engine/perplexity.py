"""Teacher-forced fidelity: perplexity of a text, and KL divergence against a saved base.

What it measures (the same as llama.cpp's `llama-perplexity`, so the figures compare):
the text is tokenized as-is, cut into chunks of n_ctx tokens (the tail that does not fill a chunk
is dropped); when the model's tokenizer adds a BOS token, the first token of every chunk is
replaced by BOS. Each chunk is decoded from an empty cache in batches (the first half in one call
for its KV cache, the second half in one call that returns every logit row); the second half of
each chunk is scored: the logits at positions first .. n_ctx - 2 (first = n_ctx // 2) predict the
tokens at first + 1 .. n_ctx - 1, so each position sees at least half a chunk of context.

- perplexity = exp(mean negative log-likelihood of the scored tokens), ± its standard error by
  the delta method (PPL × the standard error of the mean NLL);
- against a base (another quantization of the model, or another engine): per position the KL
  divergence KL(base || ours) of the next-token distributions, summarized as mean ± standard
  error, median, p99 and max; top-1 agreement (the arg-max tokens are equal), and the perplexity
  ratio PPL(ours) / PPL(base).

The base file (`--save-logits`, read by `--kl-divergence`), version 1, little-endian:

    magic    8 bytes  b"LLKLDBAS"
    version  u32      1
    hlen     u32      length of the header
    header   hlen bytes of UTF-8 JSON: format, k, n_vocab, n_ctx, n_chunks, n_scored (per chunk),
             first, chunk_sha256 (per chunk: SHA-256 of its token ids as little-endian int32),
             vocab_sha256, model (file name, general.name), text (file name), made_by
    body     P = n_chunks × n_scored records, column by column:
             target_logprob f32[P]      log p(the token that follows), in nats
             top_ids        i32[P, k]   the k most likely tokens, most likely first
             top_logprob    f32[P, k]   their log-probabilities
             rest_logmass   f32[P]      log of the probability of every other token together
    sha256   32 bytes of SHA-256 over everything above (a truncated or damaged file is refused)

Why top-k plus the rest's mass, not every logit: a full row is n_vocab floats (49,152 for
SmolLM2, 262,144 for Gemma 3), 100 MB to 500 MB for 1,000 positions even at 16 bits, where a
k = 32 record is 264 bytes (SmolLM2's 1,020 positions: 270 KB). KL over the k tokens and one
"rest" bucket is a lower bound of the full KL (merging outcomes never increases a divergence);
what it leaves out is the rest's own share, p_rest × KL(base | rest || ours | rest). Measured on
SmolLM2 Q4_1, llama.cpp at batch 1 against its batch 512 (1,020 positions): the top-32 estimate
gives a mean KLD of 0.00270 where the full vocabulary gives 0.00342, i.e. it reads ~80% of the
divergence, consistently (a rounding noise spread over the vocabulary, most of it in the
tail); the largest shortfall at one position was 0.0069. So compare KLDs made with the same k
(every base file says its k), which is what ranking quantizations and the tests' ratios to
llama.cpp's floor do. Perplexity and top-1 agreement are exact: the target's own
log-probability and the arg-max are stored.

Not here: the command line (app/engine/cli.py), printing, progress display.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import struct
import tempfile
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np

from app.errors import LlambdaError

if TYPE_CHECKING:
    from app.engine.decoder import Decoder

__all__ = [
    "MAGIC",
    "VERSION",
    "TOP_K",
    "PerplexityError",
    "TextError",
    "BaseFileError",
    "BaseMismatchError",
    "Plan",
    "make_plan",
    "read_text",
    "log_softmax_rows",
    "kl_divergence_rows",
    "ChunkScores",
    "score_chunks",
    "BaseFile",
    "write_base",
    "read_base",
    "kld_against",
    "Summary",
    "summarize",
    "vocab_sha256",
]

MAGIC = b"LLKLDBAS"
VERSION = 1
TOP_K = 32
_ROW_BLOCK = 16  # logit rows exponentiated at once (16 x 262,144 floats: 16 MB)


class PerplexityError(LlambdaError, ValueError):
    """Root of this module's errors (the CLI maps each kind to an exit code)."""


class TextError(PerplexityError):
    """The text cannot be measured: unreadable, binary, or shorter than one chunk."""


class BaseFileError(PerplexityError):
    """A base file that is not one, is truncated or damaged, or has another version."""


class BaseMismatchError(PerplexityError):
    """A well-formed base file made from other token ids, another vocabulary or --ctx."""


# --- the text and its chunks ---------------------------------------------------------------------


def read_text(path: str, max_bytes: int = 64 << 20) -> str:
    """The file's text: UTF-8 (a BOM is dropped), no NUL bytes, at most max_bytes."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise TextError(f"{path}: {size} bytes; texts up to {max_bytes >> 20} MiB are measured")
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise TextError(f"{path}: cannot read ({e.strerror or e})") from None
    if b"\0" in raw:
        raise TextError(f"{path}: a binary file (NUL bytes), not text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextError(f"{path}: not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise TextError(f"{path}: the text is empty")
    return text


def _ids_sha256(ids: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(ids, dtype="<i4").tobytes()).hexdigest()


@dataclass(frozen=True)
class Plan:
    """The chunks of a text as decoded: each n_ctx ids (BOS first where the model adds one)."""

    chunks: tuple[tuple[int, ...], ...]
    n_ctx: int
    n_tokens: int  # tokens of the whole text (with BOS if added)
    first: int = field(init=False)  # the first scored logit row of each chunk

    def __post_init__(self) -> None:
        if self.n_ctx < 4:
            raise ValueError("n_ctx must be at least 4")
        object.__setattr__(self, "first", self.n_ctx // 2)

    @property
    def n_scored(self) -> int:
        """Scored positions per chunk."""
        return self.n_ctx - 1 - self.first

    @property
    def chunk_sha256(self) -> list[str]:
        return [_ids_sha256(c) for c in self.chunks]


def make_plan(
    ids: Sequence[int], n_ctx: int, bos_id: int | None, n_chunks: int | None = None, source: str = "the text"
) -> Plan:
    """Chunks of n_ctx tokens from the tokenized text `ids`; bos_id replaces each chunk's first
    token (None: the model adds no BOS). n_chunks: at most that many (None: all that fit)."""
    fit = len(ids) // n_ctx
    if fit < 1:
        raise TextError(
            f"{source}: {len(ids)} tokens, fewer than one chunk of {n_ctx} (use a longer text or a smaller --ctx)"
        )
    n = fit if n_chunks is None else min(n_chunks, fit)
    chunks = []
    for c in range(n):
        chunk = [int(t) for t in ids[c * n_ctx : (c + 1) * n_ctx]]
        if bos_id is not None:
            chunk[0] = int(bos_id)
        chunks.append(tuple(chunk))
    return Plan(tuple(chunks), n_ctx, len(ids))


# --- scoring ---------------------------------------------------------------------------------------


def log_softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities (float64) of each row of float32 logits."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def kl_divergence_rows(base_logits: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """KL(base || ours) of each row's softmax, over the whole vocabulary (float64), in nats."""
    p, q = log_softmax_rows(base_logits), log_softmax_rows(logits)
    return np.maximum((np.exp(p) * (p - q)).sum(axis=-1), 0.0)


@dataclass
class ChunkScores:
    """What one chunk gives: per scored position, the log-probability of the token that follows,
    the arg-max, the top-k (ids, log-probs) and the log of the rest's mass, and optionally the
    KL divergence against a base (filled by kld_against)."""

    index: int
    target_logprob: np.ndarray  # f64[n]
    argmax: np.ndarray  # i32[n]
    top_ids: np.ndarray | None  # i32[n, k] (None unless asked for)
    top_logprob: np.ndarray | None  # f32[n, k]
    rest_logmass: np.ndarray | None  # f32[n]
    seconds: float
    kld: np.ndarray | None = None  # f64[n], with a base
    same_top1: np.ndarray | None = None


def _score_rows(
    logits: np.ndarray, targets: np.ndarray, k: int, base: "BaseFile | None", base_rows: slice | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Per row of float32 logits: log p(target), arg-max, and (k > 0) the top-k ids, their
    log-probabilities and the log of the rest's mass; with a base, KL(base || these rows)
    (each None when not asked for).
    Only the log-sum-exp of a row is computed over the whole vocabulary (exp in float32, summed
    in float64); log-probabilities are taken where needed, in float64."""
    n = logits.shape[0]
    lse = np.empty(n)
    for r0 in range(0, n, _ROW_BLOCK):
        x = logits[r0 : r0 + _ROW_BLOCK]
        m = x.max(axis=-1, keepdims=True)
        lse[r0 : r0 + _ROW_BLOCK] = m[:, 0] + np.log(np.exp(x - m).sum(axis=-1, dtype=np.float64))

    def lp(ids: np.ndarray) -> np.ndarray:  # log-probabilities at ids (n, ...)
        return np.take_along_axis(logits, ids, -1).astype(np.float64) - lse[:, None]

    tlp = lp(np.asarray(targets, dtype=np.int64)[:, None])[:, 0]
    am = logits.argmax(axis=-1).astype(np.int32)
    tid = tlogp = rest = None
    if k > 0:
        top = (
            np.argpartition(-logits, k - 1, axis=-1)[:, :k]
            if k < logits.shape[1]
            else np.broadcast_to(np.arange(logits.shape[1]), logits.shape).copy()
        )
        top_lp = lp(top)
        order = np.lexsort((top, -top_lp), axis=-1)  # most likely first; ties: lower id first
        tid = np.take_along_axis(top, order, -1).astype(np.int32)
        tlogp = lp(tid).astype(np.float32)
        rest = _log1mexp(np.logaddexp.reduce(lp(tid), axis=-1)).astype(np.float32)
    kld = None
    if base is not None:
        b_ids = base.top_ids[base_rows]
        kld = _kld_from(base.top_logprob[base_rows], base.rest_logmass[base_rows], lp(b_ids))
    return tlp, am, tid, tlogp, rest, kld


def _log1mexp(a: np.ndarray) -> np.ndarray:
    """log(1 - exp(a)) for a <= 0, accurately (-inf where a rounds to 0)."""
    a = np.minimum(np.asarray(a, dtype=np.float64), 0.0)
    with np.errstate(divide="ignore"):
        return np.where(a > -0.693, np.log(-np.expm1(a)), np.log1p(-np.exp(a)))


def _kld_from(b_lp: np.ndarray, b_rest: np.ndarray, q_lp: np.ndarray) -> np.ndarray:
    """KL(base || ours) over the base's top-k tokens and the rest as one outcome (a lower bound
    of the full divergence; see the module notes). b_lp (n, k), b_rest (n,): the base's
    log-probabilities; q_lp (n, k): ours at the base's top-k ids."""
    b_lp = np.asarray(b_lp, dtype=np.float64)
    b_rest = np.asarray(b_rest, dtype=np.float64)
    q_rest = _log1mexp(np.logaddexp.reduce(q_lp, axis=-1))
    kl = (np.exp(b_lp) * (b_lp - q_lp)).sum(axis=-1)
    p_rest = np.exp(b_rest)
    with np.errstate(invalid="ignore"):
        # a rest the base gives mass to but ours none: infinite in theory; ours floored at e^-69
        rest_term = np.where(p_rest > 0, p_rest * (b_rest - np.maximum(q_rest, -69.0)), 0.0)
    return np.maximum(kl + rest_term, 0.0)


def _kld_rows(base: "BaseFile", rows: slice, lp: np.ndarray) -> np.ndarray:
    """_kld_from with ours given as full log-probability rows (n, n_vocab)."""
    return _kld_from(base.top_logprob[rows], base.rest_logmass[rows], np.take_along_axis(lp, base.top_ids[rows], -1))


def score_chunks(
    decoder: Decoder, plan: Plan, k: int = 0, base: "BaseFile | None" = None, n_score: int | None = None
) -> Iterator[ChunkScores]:
    """Decode each chunk of the plan from an empty cache and score its second half, yielding
    one ChunkScores per chunk. k: keep each position's top-k (what a base file holds; 0: not
    needed). n_score: only the first n_score scored positions of each chunk (the decode stops
    there too; logits at a position never depend on later tokens)."""
    if decoder.n_ctx < plan.n_ctx:
        raise ValueError(f"the decoder's context ({decoder.n_ctx}) is shorter than a chunk ({plan.n_ctx})")
    if base is not None:
        base.check_against(plan, decoder.n_vocab)
    n = plan.n_scored if n_score is None else max(1, min(n_score, plan.n_scored))
    k = min(k, decoder.n_vocab)
    first = plan.first
    for c, chunk in enumerate(plan.chunks):
        t0 = time.perf_counter()
        decoder.decode(chunk[:first], 0)  # the context half: cache
        logits = decoder.decode(chunk[first : first + n], first, all_logits=True)
        targets = np.asarray(chunk[first + 1 : first + 1 + n], dtype=np.int64)
        base_rows = slice(c * plan.n_scored, c * plan.n_scored + n) if base is not None else None
        tlp, am, tid, tlogp, rest, kld = _score_rows(logits, targets, k, base, base_rows)
        del logits
        s = ChunkScores(c, tlp, am, tid, tlogp, rest, time.perf_counter() - t0, kld)
        if base is not None:
            s.same_top1 = am == base.top_ids[base_rows, 0]
        yield s


# --- summaries --------------------------------------------------------------------------------------


def _ppl(target_logprob: np.ndarray) -> tuple[float, float]:
    nll = -np.asarray(target_logprob, dtype=np.float64)
    m = float(nll.mean())
    se = float(nll.std(ddof=1) / math.sqrt(nll.size)) if nll.size > 1 else 0.0
    return math.exp(m), math.exp(m) * se


@dataclass(frozen=True)
class Summary:
    n_positions: int
    ppl: float
    ppl_se: float
    base_ppl: float | None = None
    ppl_ratio: float | None = None
    ppl_ratio_se: float | None = None
    kld_mean: float | None = None
    kld_se: float | None = None
    kld_median: float | None = None
    kld_p99: float | None = None
    kld_max: float | None = None
    top1: float | None = None  # fraction of positions, 0..1
    top1_se: float | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def summarize(
    target_logprob: np.ndarray,
    base_target_logprob: np.ndarray | None = None,
    kld: np.ndarray | None = None,
    same_top1: np.ndarray | None = None,
) -> Summary:
    """Perplexity ± SE; with a base: the PPL ratio (± SE of the paired log-ratio), KLD mean ±
    SE, median, p99, max, and top-1 agreement ± SE."""
    ppl, ppl_se = _ppl(target_logprob)
    n = int(np.asarray(target_logprob).size)
    if base_target_logprob is None:
        return Summary(n, ppl, ppl_se)
    base_ppl, _ = _ppl(base_target_logprob)
    d = np.asarray(base_target_logprob, np.float64) - np.asarray(target_logprob, np.float64)
    ratio = math.exp(float(d.mean()))
    ratio_se = ratio * float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    kld = np.asarray(kld, np.float64)
    assert same_top1 is not None  # given with a base, as kld is
    agree = float(np.mean(same_top1))
    return Summary(
        n,
        ppl,
        ppl_se,
        base_ppl,
        ratio,
        ratio_se,
        kld_mean=float(kld.mean()),
        kld_se=float(kld.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0,
        kld_median=float(np.median(kld)),
        kld_p99=float(np.percentile(kld, 99)),
        kld_max=float(kld.max()),
        top1=agree,
        top1_se=math.sqrt(agree * (1 - agree) / max(n - 1, 1)),
    )


# --- the base file --------------------------------------------------------------------------------


def vocab_sha256(tokens: Sequence[str]) -> str:
    """A fingerprint of a vocabulary: its token strings, in id order."""
    h = hashlib.sha256()
    for t in tokens:
        b = t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t)
        h.update(struct.pack("<I", len(b)))
        h.update(b)
    return h.hexdigest()


@dataclass
class BaseFile:
    header: dict
    target_logprob: np.ndarray  # f32[P]
    top_ids: np.ndarray  # i32[P, k]
    top_logprob: np.ndarray  # f32[P, k]
    rest_logmass: np.ndarray  # f32[P]
    path: str = ""

    @property
    def k(self) -> int:
        return int(self.header["k"])

    @property
    def n_chunks(self) -> int:
        return int(self.header["n_chunks"])

    def describe(self) -> str:
        m = self.header.get("model", {})
        return (
            f"{m.get('file') or m.get('name') or 'a model'} on "
            f"{self.header.get('text', {}).get('file') or 'a text'}"
            f" ({self.header.get('made_by', 'unknown')})"
        )

    def check_against(self, plan: Plan, n_vocab: int, vocab_hash: str | None = None) -> None:
        """Refuse (BaseMismatchError, one line) unless the plan's chunks are the base's first
        chunks token for token, with the same n_ctx and the same vocabulary."""
        h, where = self.header, self.path or "the base file"
        if int(h["n_vocab"]) != n_vocab or (vocab_hash and h.get("vocab_sha256") and h["vocab_sha256"] != vocab_hash):
            raise BaseMismatchError(
                f"{where} was made with another vocabulary "
                f"({h['n_vocab']} tokens, this model has {n_vocab}): "
                "another model family"
            )
        if int(h["n_ctx"]) != plan.n_ctx:
            raise BaseMismatchError(f"{where} was made with --ctx {h['n_ctx']}, not {plan.n_ctx}")
        if len(plan.chunks) > self.n_chunks:
            raise BaseMismatchError(f"{where} holds {self.n_chunks} chunks; {len(plan.chunks)} asked for")
        theirs = h["chunk_sha256"][: len(plan.chunks)]
        if theirs != plan.chunk_sha256:
            bad = next(i for i, (a, b) in enumerate(zip(theirs, plan.chunk_sha256)) if a != b)
            raise BaseMismatchError(
                f"{where} was made from other token ids (chunk {bad + 1} differs): another text or tokenizer"
            )


def _header(plan: Plan, k: int, n_vocab: int, vocab_hash: str, model: dict, text: dict, made_by: str) -> dict:
    return {
        "format": "llambda-kld-base",
        "version": VERSION,
        "k": k,
        "n_vocab": int(n_vocab),
        "n_ctx": plan.n_ctx,
        "n_chunks": len(plan.chunks),
        "n_scored": plan.n_scored,
        "first": plan.first,
        "chunk_sha256": plan.chunk_sha256,
        "vocab_sha256": vocab_hash,
        "model": model,
        "text": text,
        "made_by": made_by,
    }


def write_base(
    path: str,
    plan: Plan,
    scores: Sequence[ChunkScores],
    n_vocab: int,
    vocab_hash: str,
    model: dict,
    text: dict,
    made_by: str,
) -> None:
    """Write a base file atomically: a temporary file beside `path`, then a rename; nothing is
    left behind on failure."""
    if scores[0].top_ids is None:
        raise ValueError("write_base needs scores kept with their top-k (score_chunks(k=TOP_K))")
    k = scores[0].top_ids.shape[1]
    if any(s.target_logprob.size != plan.n_scored for s in scores) or len(scores) != len(plan.chunks):
        raise ValueError("write_base needs every scored position of every chunk")
    header = json.dumps(_header(plan, k, n_vocab, vocab_hash, model, text, made_by), separators=(",", ":")).encode(
        "utf-8"
    )
    buf = io.BytesIO()
    buf.write(MAGIC + struct.pack("<II", VERSION, len(header)) + header)
    buf.write(np.concatenate([s.target_logprob for s in scores]).astype("<f4").tobytes())
    buf.write(np.concatenate([s.top_ids for s in scores]).astype("<i4").tobytes())
    buf.write(np.concatenate([s.top_logprob for s in scores]).astype("<f4").tobytes())
    buf.write(np.concatenate([s.rest_logmass for s in scores]).astype("<f4").tobytes())
    body = buf.getvalue()
    _atomic_write(path, body + hashlib.sha256(body).digest())


def _atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".llambda-base-", suffix=".part", dir=d)
    except OSError as e:
        raise PerplexityError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise PerplexityError(f"{path}: cannot write ({e.strerror or e})") from None
        raise


def read_base(path: str) -> BaseFile:
    """Read and verify a base file; BaseFileError (one line) for anything malformed."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise BaseFileError(f"{path}: cannot read the base file ({e.strerror or e})") from None
    if len(raw) < 16 + 32 or raw[:8] != MAGIC:
        raise BaseFileError(f"{path}: not a llambda base file (made by `llambda perplexity --save-logits`)")
    version, hlen = struct.unpack_from("<II", raw, 8)
    if version != VERSION:
        raise BaseFileError(f"{path}: base file version {version}; this llambda reads version {VERSION}")
    if hashlib.sha256(raw[:-32]).digest() != raw[-32:]:
        raise BaseFileError(f"{path}: the base file is truncated or damaged (checksum differs)")
    try:
        if 16 + hlen > len(raw) - 32:
            raise ValueError("header longer than the file")
        h = json.loads(raw[16 : 16 + hlen].decode("utf-8"))
        k, n_chunks, n_scored = int(h["k"]), int(h["n_chunks"]), int(h["n_scored"])
        int(h["n_vocab"]), int(h["n_ctx"])
        if not (1 <= k <= 4096 and n_chunks >= 1 and n_scored >= 1 and len(h["chunk_sha256"]) == n_chunks):
            raise ValueError("inconsistent header")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise BaseFileError(f"{path}: the base file's header is malformed ({e})") from None
    p = n_chunks * n_scored
    off = 16 + hlen
    need = off + p * 4 * (2 + 2 * k) + 32
    if need != len(raw):
        raise BaseFileError(f"{path}: the base file holds {len(raw)} bytes, its header says {need}")

    def take(dtype: str, count: int, shape: tuple[int, ...]) -> np.ndarray:
        nonlocal off
        a = np.frombuffer(raw, dtype=dtype, count=count, offset=off).reshape(shape)
        off += a.nbytes
        return a

    tlp = take("<f4", p, (p,))
    ids = take("<i4", p * k, (p, k))
    top = take("<f4", p * k, (p, k))
    rest = take("<f4", p, (p,))
    if ids.size and (ids.min() < 0 or ids.max() >= int(h["n_vocab"])):
        raise BaseFileError(f"{path}: the base file holds a token id outside the vocabulary")
    return BaseFile(h, tlp, ids, top, rest, path)


def kld_against(base: BaseFile, scores: Sequence[ChunkScores]) -> Summary:
    """The summary of scored chunks that were computed with `base` (score_chunks(base=...))."""
    n = scores[0].target_logprob.size
    per = int(base.header["n_scored"])
    rows = np.concatenate([np.arange(s.index * per, s.index * per + n) for s in scores])
    return summarize(
        np.concatenate([s.target_logprob for s in scores]),
        base.target_logprob[rows].astype(np.float64),
        np.concatenate([s.kld for s in scores]),
        np.concatenate([s.same_top1 for s in scores]),
    )
