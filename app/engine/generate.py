"""Generation as a generator of events: prompt progress, text pieces, context shifts, and one
final event with the stop reason, the token ids and the statistics. The UI worker, the command
line and the tests all drive this same loop:

    for event in generate(session, tokenizer, request):
        if isinstance(event, TextPiece): show(event.text)

Stop reasons: "eog" (end-of-generation token), "stop_string", "length" (max_tokens),
"context_full" (policy "stop"), "cancelled" (Session.cancel() from another thread).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator, Union

from app.engine.sampler import GREEDY, Sampler, SamplerSettings
from app.engine.session import ContextFullError, GenerationCancelled, Session
from app.engine.speculative import verify_pass
from app.engine.stats import GenerationStats, SpecStats, peak_rss_bytes

__all__ = ["GenerationRequest", "PromptProgress", "TextPiece", "ContextShifted", "Finished",
           "Event", "generate", "STOP_REASONS", "CONTEXT_POLICIES"]

STOP_REASONS = ("eog", "stop_string", "length", "context_full", "cancelled")

# Tokens are made in runs (Session.sample_run: one C call, no interpreter lock held) of up to RUN
# tokens or RUN_SECONDS, whichever comes first; the text is looked at between runs. A stop string
# can so cost up to one run of decoding that is thrown away (its tokens leave the cache).
RUN = 64
RUN_SECONDS = 0.03
CONTEXT_POLICIES = ("stop", "shift")


@dataclass(frozen=True)
class GenerationRequest:
    prompt_ids: tuple[int, ...]
    max_tokens: int = 256
    sampler: SamplerSettings = GREEDY
    stop_strings: tuple[str, ...] = ()
    stop_on_eog: bool = True
    context_policy: str = "stop"      # "stop": end with "context_full"; "shift": drop and go on
    n_keep: int = 0                   # tokens never dropped by a shift (BOS, system prompt)

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("the prompt has no tokens")
        if self.max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        if self.context_policy not in CONTEXT_POLICIES:
            raise ValueError(f"context_policy must be one of {CONTEXT_POLICIES}")
        object.__setattr__(self, "prompt_ids", tuple(int(t) for t in self.prompt_ids))
        object.__setattr__(self, "stop_strings", tuple(self.stop_strings))


@dataclass(frozen=True)
class PromptProgress:
    done: int                 # prompt tokens decoded so far
    total: int                # prompt tokens to decode (those not already in the cache)


@dataclass(frozen=True)
class TextPiece:
    text: str                 # may be "" while a character or a possible stop string is pending
    token: int


@dataclass(frozen=True)
class ContextShifted:
    dropped: int              # tokens dropped after the first n_keep
    n_past: int               # tokens in the prompt / cache after the shift
    dropped_turns: int = 0    # whole conversation turns dropped (Chat), 0 inside a reply


@dataclass(frozen=True)
class Finished:
    stop_reason: str
    text: str
    ids: tuple[int, ...]
    prompt_ids: tuple[int, ...]
    stats: GenerationStats = field(default_factory=GenerationStats)
    stop_string: str | None = None


Event = Union[PromptProgress, TextPiece, ContextShifted, Finished]


def _shift_prompt(ids: list[int], n_ctx: int, n_keep: int) -> list[int] | None:
    """A prompt too long for the context: keep the first n_keep, then the newest tokens up to
    half the context (room to answer). None when even that cannot fit."""
    budget = n_ctx // 2 - n_keep
    if budget < 1:
        return None
    return ids[:n_keep] + ids[len(ids) - budget:]


def generate(session: Session, tokenizer, request: GenerationRequest,
             speculator=None) -> Iterator[Event]:
    """Run one generation on `session`; see the module docstring for the events. With a
    `speculator` (app.engine.speculative), tokens it guesses are checked several at a time in
    one decoder pass where that pays; the reply is the same token for token."""
    from app.text import TextStream   # lazy: app.text loads jinja2; `llambda --help` imports the engine

    stats = GenerationStats(threads=getattr(session.decoder, "n_threads", 1),
                            isa=getattr(session.decoder, "isa", ""), n_ctx=session.n_ctx)
    session.clear_cancel()
    t0 = time.perf_counter()
    prompt = list(request.prompt_ids)
    stats.prompt_tokens = len(prompt)
    ids: list[int] = []
    stream = TextStream(tokenizer, request.stop_strings, stop_on_eog=request.stop_on_eog)
    reason, stop_string = "length", None

    def finished() -> Finished:
        if stats.spec is not None:
            stats.spec.t_token = speculator.t_token or 0.0
        text_tail = stream.finish() if reason in ("length", "context_full", "cancelled") else ""
        stats.peak_rss_bytes = peak_rss_bytes()
        return Finished(reason, stream.text, tuple(ids), tuple(request.prompt_ids), stats,
                        stop_string), text_tail

    try:
        if len(prompt) >= session.n_ctx:     # no room for even one generated token
            shifted = _shift_prompt(prompt, session.n_ctx, request.n_keep) \
                if request.context_policy == "shift" else None
            if shifted is None:
                reason = "context_full"
                fin, _ = finished()
                yield fin
                return
            stats.context_shifts += 1
            yield ContextShifted(len(prompt) - len(shifted), len(shifted))
            prompt = shifted
        for done, total in session.feed_iter(prompt):
            yield PromptProgress(done, total)
        logits = session.logits
        stats.prompt_tokens_evaluated = session.last_evaluated
        stats.prompt_s = time.perf_counter() - t0
        sampler = Sampler(request.sampler)
        stop_ids = getattr(tokenizer, "eog_ids", ()) if request.stop_on_eog else ()
        t_first = None
        pending = None          # the last token sampled, not yet decoded into the cache
        step_s = 0.0
        run = 1                 # tokens per run: the first alone (it shows at once), then RUN
        spec = SpecStats(kind=speculator.kind) if speculator is not None else None
        stats.spec = spec
        if speculator is not None:
            speculator.current = spec       # live figures for a window polling from elsewhere
        while len(ids) < request.max_tokens:
            toks = None
            if pending is not None and spec is not None and session.n_past < session.n_ctx:
                t_pass = time.perf_counter()
                room = min(request.max_tokens - len(ids) - 1, session.n_ctx - session.n_past - 1)
                guess, bucket = speculator.propose(session.tokens + [pending], room)
                t_guess = time.perf_counter()
                if guess:
                    toks, sample_s = verify_pass(session, sampler, pending, guess, stop_ids)
                    pending, cancelled = None, False
                    t_end = time.perf_counter()
                    speculator.note_pass(bucket, len(guess), len(toks) - 1, t_end - t_guess - sample_s,
                                         t_guess - t_pass)
                    stats.sample_s += sample_s
                    spec.passes += 1
                    spec.proposed += len(guess)
                    spec.accepted += len(toks) - 1
                    spec.pass_tokens += len(toks)
                    spec.pass_s += t_end - t_pass
            if pending is not None:
                if session.n_past >= session.n_ctx:
                    if request.context_policy == "stop":
                        reason = "context_full"
                        break
                    keep = min(request.n_keep, session.n_past - 1)
                    n_drop = (session.n_past - keep) // 2
                    new = session.shifted(keep, n_drop)
                    session.drop(keep, n_drop)      # keys moved in place where RoPE allows
                    stats.context_shifts += 1
                    yield ContextShifted(n_drop, len(new))
                    logits = session.feed(new + [pending])
                    step_s = 0.0
                else:
                    t_step = time.perf_counter()
                    logits = session.step(pending)
                    step_s = time.perf_counter() - t_step
                pending = None
            if toks is None:
                k = min(run, request.max_tokens - len(ids), session.n_ctx - session.n_past + 1)
                t_run = time.perf_counter()
                toks, sample_s, cancelled = session.sample_run(logits, sampler, k, stop_ids,
                                                               RUN_SECONDS)
                if t_first is None:
                    t_first = time.perf_counter()
                    stats.ttft_s = t_first - t0
                else:
                    stats.sample_s += sample_s
                    if spec is not None:        # a plain run: one step, then len(toks) - 1 more
                        took = time.perf_counter() - t_run + step_s
                        speculator.note_plain(len(toks), took)
                        spec.plain_tokens += len(toks)
                        spec.plain_s += took
                run = RUN if spec is None else speculator.plain_run
            taken = 0               # tokens of the run that become the reply's
            for tok in toks:
                if taken and session.cancelled:     # Stop pressed while the run was shown
                    cancelled = True
                    break
                taken += 1
                ids.append(tok)
                stats.generated_tokens = len(ids)
                step = stream.push(tok)
                if step.text:
                    yield TextPiece(step.text, tok)
                if step.stop is not None:
                    reason, stop_string = step.stop, step.stop_string
                    break
            if taken < len(toks):   # the cache keeps the reply's tokens but its last, as ever
                session.rollback(len(toks) - taken)
            stats.generation_s = time.perf_counter() - t_first
            if cancelled:
                raise GenerationCancelled("generation cancelled")
            if reason != "length":
                break
            pending = toks[-1]
        if t_first is not None:
            stats.generation_s = time.perf_counter() - t_first
    except GenerationCancelled:
        reason = "cancelled"
    except ContextFullError:
        reason = "context_full"
    finally:
        session.clear_cancel()
    fin, tail = finished()
    if tail:
        yield TextPiece(tail, ids[-1] if ids else -1)
    yield fin
