"""Speculative decoding: guess several tokens cheaply, score them all in one pass of the model,
keep what the model agrees with.

On a CPU a token costs one read of every weight; a batch of k + 1 tokens costs one read too (plus
the arithmetic, which grows with k). So: a *proposer* guesses the next tokens, the session decodes
[the last sampled token, guess 1, .., guess k] in one call with the logits of every position
(`Session.step_all`), and the target model's own sampler walks the rows: where it picks the guessed
token, the guess is accepted and the next row is valid too; the first time it picks another token,
that token is the reply's next one and the rest of the guess leaves the cache (`Session.rollback`).
Every pass yields at least one token, and up to k + 1.

Exactness. Each reply token is drawn by the same sampler, from logits equal bit for bit to those
of one-token decoding (the batched and single-token paths compute the same floats), with the same
uniform number of the seeded generator (one per token, in order). So greedy output is token for
token the same with and without speculation, and so is sampled output with a seed. The proposers
here guess deterministically (a point mass q on the guessed token d), for which the rejection
scheme of Leviathan et al. 2023 / Chen et al. 2023 -- accept d with probability min(1, p(d)/q(d))
= p(d), else draw from the residual max(0, p - q) renormalised = p without d -- is the same law as
"draw x from p; accept if x == d, else x is the next token": P(x = d) = p(d), and x given x != d
follows p without d. That is what the sampler walk does, so the target distribution is kept
exactly.

Proposers:
- `PromptLookup`: no second model. The longest earlier n-gram of the context that matches its
  last tokens, and what followed it there (text being edited, code refactored, a document quoted).
- `DraftModel`: a second, small model with the same vocabulary (checked by `vocab_fingerprint`)
  guesses greedily, in its own KV cache, on the target's thread pool.

`Speculator` chooses k before each pass from what it has measured: the acceptance rate of recent
guesses (per match length for prompt lookup), the cost of a verify pass against one plain token,
and the draft's cost per guessed token. When no k pays, it guesses nothing and generation runs as
without it (the C runs of generate.py), probing again now and then.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Protocol, Sequence

import numpy as np

from app.engine.decoder import CDecoder
from app.engine.sampler import GREEDY, Sampler
from app.engine.session import Session
from app.engine.stats import SpecStats
from app.errors import LlambdaError, UnsupportedModelError
from app.gguf import GGUFFile, open_gguf
from app.kernels import ThreadPool
from app.library import ModelLibrary, resolve_model
from app.library.preflight import PreflightReport, memory_verdict, preflight
from app.model import config_from_gguf, require_supported

__all__ = [
    "PromptLookup",
    "DraftModel",
    "compatible_drafts",
    "library_drafts",
    "library_draft_choices",
    "resolve_draft",
    "draft_memory",
    "Speculator",
    "SpecStats",
    "verify_pass",
    "vocab_fingerprint",
    "IncompatibleDraftError",
    "K_MAX",
]

K_MAX = 16  # most guessed tokens per pass (the verify batch is K_MAX + 1)


class IncompatibleDraftError(UnsupportedModelError):
    """The draft model does not share the target's vocabulary (exit code 4 on the command line)."""


# --- proposers ----------------------------------------------------------------------------------


class Proposer(Protocol):
    """What the speculator needs of a guesser: PromptLookup, DraftModel (or a test's own)."""

    name: str  # "lookup": cheap, and its `last_match` sizes the guess

    def propose(self, context: Sequence[int], k: int) -> list[int]: ...


class PromptLookup:
    """Guesses from the context itself: find the earlier place whose tokens match the longest
    suffix of the context (at least `min_ngram`, looking back up to `max_ngram`; the latest such
    place on a tie) and propose the tokens that followed it."""

    name = "lookup"

    def __init__(self, min_ngram: int = 2, max_ngram: int = 8, max_candidates: int = 512):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError("need 1 <= min_ngram <= max_ngram")
        self.min_ngram = min_ngram
        self.max_ngram = max_ngram
        self.max_candidates = max_candidates
        self._arr = np.zeros(1024, np.int32)
        self._n = 0
        self.last_match = 0  # n-gram length of the last proposal (0: none)

    def _sync(self, context: Sequence[int]) -> np.ndarray:
        """The context as an int32 array, updated in place when it only grew or shrank at the
        end (checked on its last tokens; a wrong guess here costs speed, never correctness)."""
        n = len(context)
        m = min(self._n, n)
        a = self._arr
        ok = m > 0 and all(int(a[i]) == context[i] for i in range(max(0, m - 8), m)) and int(a[0]) == context[0]
        if not ok:
            m = 0
        if n > a.size:
            grown = np.zeros(max(n, 2 * a.size), np.int32)
            grown[:m] = a[:m]
            self._arr = a = grown
        if n > m:
            a[m:n] = context[m:n]
        self._n = n
        return a[:n]

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        self.last_match = 0
        if k < 1 or len(context) < self.min_ngram + 1:
            return []
        arr = self._sync(context)
        n = arr.size
        cand = np.flatnonzero(arr[: n - 1] == arr[n - 1])
        if cand.size == 0:
            return []
        cand = cand[-self.max_candidates :]
        length = np.ones(cand.size, np.int64)
        alive = np.ones(cand.size, bool)
        for j in range(1, self.max_ngram):
            idx = cand - j
            ok = alive & (idx >= 0)
            ok[ok] = arr[idx[ok]] == arr[n - 1 - j]
            alive = ok
            if not alive.any():
                break
            length += alive
        best = int(length.max())
        if best < self.min_ngram:
            return []
        at = int(cand[np.flatnonzero(length == best)[-1]])  # the latest of the longest
        self.last_match = best
        return [int(t) for t in arr[at + 1 : at + 1 + k]]


def vocab_fingerprint(f: GGUFFile) -> str:
    """A hash of what makes two models' token ids mean the same: the tokenizer model, the token
    strings, their types and the merges (BPE) or scores (SentencePiece)."""
    md = f.metadata
    h = hashlib.sha256()
    for key in (
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.scores",
    ):
        v = md.get(key)
        h.update(key.encode() + b"\0")
        if v is None:
            h.update(b"-")
        elif isinstance(v, np.ndarray):
            h.update(str(v.dtype).encode() + np.ascontiguousarray(v).tobytes())
        elif isinstance(v, (list, tuple)):
            h.update(str(len(v)).encode() + b":" + "\0".join(map(str, v)).encode("utf-8", "replace"))
        else:
            h.update(str(v).encode("utf-8", "replace"))
        h.update(b"\1")
    return h.hexdigest()


def compatible_drafts(
    target_path: str | os.PathLike, candidates: Sequence[str | os.PathLike], max_fraction: float = 0.5
) -> list[str]:
    """Of `candidates` (paths), those that can draft for the target: same vocabulary, a file at
    most max_fraction of the target's size (a draft must be much cheaper to pay); smallest first.
    Unreadable files are passed over."""
    size = os.path.getsize(target_path)
    with open_gguf(target_path) as f:
        want = vocab_fingerprint(f)
    found = []
    for c in candidates:
        try:
            csize = os.path.getsize(c)
            if csize > max_fraction * size or os.path.samefile(c, target_path):
                continue
            with open_gguf(c) as g:
                if vocab_fingerprint(g) == want:
                    found.append((csize, str(c)))
        except (OSError, LlambdaError):
            continue
    return [c for _, c in sorted(found)]


def library_drafts(target_path: str | os.PathLike) -> list[str]:
    """compatible_drafts over the models of the user's library (app.library)."""
    return [path for _, path in library_draft_choices(target_path)]


def library_draft_choices(target_path: str | os.PathLike, library: ModelLibrary | None = None) -> list[tuple[str, str]]:
    """(name, path) of the library's models that can draft for the target, smallest first (what
    the window's settings offer)."""
    lib = library or ModelLibrary()
    names = {str(e.file_path(lib.folder)): e.name for e in lib.list() if lib.status(e) == "ok"}
    return [(names[p], p) for p in compatible_drafts(target_path, list(names))]


def resolve_draft(target_path: str | os.PathLike, draft: str | None) -> str | None:
    """The draft model's path from what was asked: "auto" is the library's smallest compatible
    model (None when it holds none), anything else a path or a library name (resolve_model)."""
    if not draft:
        return None
    if draft == "auto":
        found = library_drafts(target_path)
        return found[0] if found else None
    return resolve_model(draft)


def draft_memory(target_report: PreflightReport, draft_path: str | os.PathLike, kv_type: str) -> tuple[str, str]:
    """The memory pre-flight of the target and its draft together, each with its KV cache at the
    target's context: (ok|warn|refuse, the one-line message). `target_report`: the target's
    app.library.preflight report at the context it will run."""
    d = preflight(draft_path, target_report.n_ctx, kv_type)
    return memory_verdict(
        target_report.needed_bytes + d.needed_bytes, target_report.available_bytes, target_report.total_bytes
    )


class DraftModel:
    """A second, small model that guesses greedily. It shares the target's thread pool (the two
    never run at once; a cancel of the target's generation stops the draft's kernels too) and
    keeps its own KV cache, fed with the target's context before each
    guess (only what is new since the last one is decoded)."""

    name = "draft"

    def __init__(
        self,
        path: str | os.PathLike,
        target_file: GGUFFile,
        n_ctx: int,
        pool: ThreadPool | None = None,
        kv_type: str = "f16",
    ):
        self.path = str(path)
        self.file = open_gguf(path)
        try:
            if vocab_fingerprint(self.file) != vocab_fingerprint(target_file):
                raise IncompatibleDraftError(
                    f"{self.path}: the draft model's vocabulary differs from the target's "
                    "(a draft must use the same tokenizer)"
                )
            require_supported(self.file)
            cfg = config_from_gguf(self.file)
            self.decoder = CDecoder(
                self.file, cfg, min(n_ctx, max(cfg.n_ctx_train, 1) * 64), kv_type=kv_type, pool=pool
            )
        except BaseException:
            self.file.close()
            raise
        self.session = Session(self.decoder)
        self._greedy = Sampler(GREEDY)
        self.last_match = 0

    def propose(self, context: Sequence[int], k: int) -> list[int]:
        self.last_match = 0
        if k < 1 or len(context) > self.session.n_ctx - k:
            return []
        logits = self.session.feed(context)
        toks, _, _ = self.session.sample_run(logits, self._greedy, k)
        self.last_match = 1
        return toks

    def close(self) -> None:
        self.decoder.close()
        self.file.close()


# --- choosing k ---------------------------------------------------------------------------------


def _ema(old: float | None, new: float, w: float) -> float:
    return new if old is None else (1 - w) * old + w * new


class Speculator:
    """A proposer plus the choice of k. One per engine: what it measures (costs, acceptance)
    carries over from one reply to the next."""

    BETA0 = 0.5  # before measuring: one more token in a verify pass costs half a token
    PROBE_EVERY = 64  # tokens between probes (one guessed token) while guessing does not pay
    MIN_GAIN = 1.03  # expected speed-up needed to guess at all
    REMEASURE = 256  # tokens made by passes before a plain run measures a token's cost again

    def __init__(self, proposer: Proposer, k_max: int = 8, adaptive: bool = True, plain_run: int = 8):
        if not 1 <= k_max <= K_MAX:
            raise ValueError(f"k_max must be in 1..{K_MAX}")
        self.proposer = proposer
        self.k_max = k_max
        self.adaptive = adaptive  # False: guess whenever the proposer can (tests)
        self.plain_run = plain_run  # most tokens of a C run between two looks for a guess
        self._plain_streak = 0  # plain runs in a row since the last verify pass
        self.t_token: float | None = None  # seconds per plain token (C runs)
        self.beta: float | None = None  # extra cost of one more verified token, in tokens
        self.gamma: float | None = None  # draft cost per guessed token, in tokens
        # acceptance per match-length bucket: [accepted, rejections] (decayed counts)
        self._acc: dict[int, list[float]] = {}
        self._since_probe = 0
        self._since_plain = 0
        self.current: SpecStats | None = None  # the running (or last) generation's figures

    def figures(self) -> dict:
        """The running generation's figures for a live display (flat, JSON-friendly)."""
        s = self.current
        if s is None:
            return {"spec_kind": self.kind}
        return {
            "spec_kind": s.kind,
            "spec_passes": s.passes,
            "spec_acceptance": round(s.acceptance, 3),
            "spec_tokens_per_pass": round(s.tokens_per_pass, 2),
            "spec_speedup": round(s.speedup if s.t_token else s.speedup_with(self.t_token), 2),
        }

    @property
    def kind(self) -> str:
        return self.proposer.name

    # -- measurements --

    def plain_run_length(self) -> int:
        """Tokens of the next plain run. Prompt lookup looks again after 1, 1, 2, 4, .. tokens
        following a pass, up to plain_run: where a guess was just rejected (the one word an edit
        changes) the text usually matches again a token or two later, and a look costs a fraction
        of a token; a chat that never repeats soon runs plain_run tokens per look. A draft's
        guess costs its own decoding, so it keeps plain_run."""
        if self.proposer.name != "lookup":
            return self.plain_run
        return min(self.plain_run, 1 << max(0, self._plain_streak - 1))

    def note_plain(self, n_decoded: int, seconds: float) -> None:
        self._plain_streak = min(self._plain_streak + 1, self.plain_run.bit_length() + 1)  # no huge shifts
        if n_decoded > 0 and seconds > 0:
            self.t_token = _ema(self.t_token, seconds / n_decoded, 0.2)
            self._since_probe += n_decoded
            self._since_plain = 0

    # before measuring: a guess from a longer match is likelier right (weight of two passes)
    PRIOR = {0: 0.5, 1: 0.6, 2: 0.4, 3: 0.5, 4: 0.65, 5: 0.75, 6: 0.8}

    def _counts(self, bucket: int) -> list[float]:
        if bucket not in self._acc:
            a = self.PRIOR.get(bucket, 0.5)
            self._acc[bucket] = [2 * a / (1 - a), 2.0]
        return self._acc[bucket]

    def note_pass(self, bucket: int, k: int, n_acc: int, verify_s: float, guess_s: float) -> None:
        acc = self._counts(bucket)
        acc[0] = 0.9 * acc[0] + n_acc
        acc[1] = 0.9 * acc[1] + (1 if n_acc < k else 0)
        if self.t_token:
            self.beta = _ema(self.beta, max(0.0, (verify_s / self.t_token - 1) / k), 0.2)
            self.gamma = _ema(self.gamma, guess_s / self.t_token / k, 0.2)
        self._since_probe = 0
        self._since_plain += n_acc + 1
        self._plain_streak = 0

    def _bucket(self, match: int) -> int:
        return min(match, 6)

    def acceptance(self, match: int) -> float:
        a, r = self._counts(self._bucket(match))
        return a / (a + r)

    def choose_k(self, a: float, k_max: int) -> int:
        """The k of the best expected tokens per unit of time, 0 when none beats plain decoding."""
        beta = self.BETA0 if self.beta is None else self.beta
        gamma = self.gamma or 0.0
        best_k, best = 0, self.MIN_GAIN
        e, p = 1.0, 1.0
        for k in range(1, k_max + 1):
            p *= a
            e += p  # expected tokens of a pass: 1 + a + .. + a^k
            gain = e / (1 + beta * k + gamma * k)
            if gain > best:
                best_k, best = k, gain
        return best_k

    # -- the guess --

    def propose(self, context: Sequence[int], k_room: int) -> tuple[list[int], int]:
        """(guessed tokens, bucket) for a context whose last token is sampled but not yet in the
        cache; at most k_room tokens."""
        k_cap = min(self.k_max, k_room)
        if k_cap < 1:
            return [], 0
        if self.adaptive and (self.t_token is None or self._since_plain >= self.REMEASURE):
            return [], 0  # a plain run first: the cost of a token, against which k is chosen
        if not self.adaptive:
            guess = self.proposer.propose(context, k_cap)
            return guess, self._bucket(getattr(self.proposer, "last_match", 0))
        if self.proposer.name == "lookup":
            guess = self.proposer.propose(context, k_cap)  # cheap: find first, then size
            if not guess:
                return [], 0
            bucket = self._bucket(getattr(self.proposer, "last_match", 0))  # PromptLookup's
            k = self.choose_k(self.acceptance(bucket), len(guess))
            if k == 0 and self._since_probe >= self.PROBE_EVERY:
                k = 1
            return guess[:k], bucket
        k = self.choose_k(self.acceptance(1), k_cap)
        if k == 0 and self._since_probe >= self.PROBE_EVERY:
            k = 1
        if k == 0:
            return [], 0
        return self.proposer.propose(context, k), 1


def verify_pass(
    session: Session, sampler: Sampler, pending: int, guess: Sequence[int], stop_ids: Sequence[int] = ()
) -> tuple[list[int], float]:
    """Decode [pending, *guess] in one pass and walk the rows with the target's sampler: the
    reply's tokens of this pass (the accepted guesses, then the sampler's own pick) and the
    seconds spent sampling. The cache ends holding pending and the accepted guesses: every
    token returned but the last, as after Session.sample_run."""
    rows = session.step_all([pending, *guess])
    base = session.n_past - len(guess)  # tokens up to and including pending
    w = sampler.n_window
    stops = frozenset(stop_ids)
    out: list[int] = []
    t0 = time.perf_counter()
    for i in range(len(guess) + 1):
        ctx = session.tokens[max(0, base + i - w) : base + i] if w else ()
        tok = sampler.sample(rows[i], ctx)
        out.append(tok)
        if tok in stops or i == len(guess) or tok != guess[i]:
            break
    ts = time.perf_counter() - t0
    session.rollback(len(guess) - (len(out) - 1))
    return out, ts
