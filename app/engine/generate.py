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
from typing import TYPE_CHECKING, Generator, Iterator, Union

from app.engine.sampler import GREEDY, Sampler, SamplerSettings
from app.engine.session import ContextFullError, GenerationCancelled, Session
from app.engine.speculative import Speculator, verify_pass
from app.engine.stats import GenerationStats, SpecStats, peak_rss_bytes

if TYPE_CHECKING:
    import numpy as np

    from app.text.tokenizer import Tokenizer  # app.text is imported lazily at run time (jinja2)

__all__ = [
    "GenerationRequest",
    "PromptProgress",
    "TextPiece",
    "ContextShifted",
    "Finished",
    "Event",
    "generate",
    "STOP_REASONS",
    "CONTEXT_POLICIES",
]

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
    context_policy: str = "stop"  # "stop": end with "context_full"; "shift": drop and go on
    n_keep: int = 0  # tokens never dropped by a shift (BOS, system prompt)

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
    done: int  # prompt tokens decoded so far
    total: int  # prompt tokens to decode (those not already in the cache)
    reused: int = 0  # prompt tokens kept from the cache, not decoded again
    seconds: float = 0.0  # since the request began (0: not measured, an estimate)

    @property
    def prompt_tokens(self) -> int:
        return self.reused + self.total


@dataclass(frozen=True)
class TextPiece:
    text: str  # may be "" while a character or a possible stop string is pending
    token: int


@dataclass(frozen=True)
class ContextShifted:
    dropped: int  # tokens dropped after the first n_keep
    n_past: int  # tokens in the prompt / cache after the shift
    dropped_turns: int = 0  # whole conversation turns dropped (Chat), 0 inside a reply


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
    return ids[:n_keep] + ids[len(ids) - budget :]


def generate(
    session: Session, tokenizer: Tokenizer, request: GenerationRequest, speculator: Speculator | None = None
) -> Iterator[Event]:
    """Run one generation on `session`; see the module docstring for the events. With a
    `speculator` (app.engine.speculative), tokens it guesses are checked several at a time in
    one decoder pass where that pays; the reply is the same token for token."""
    session.clear_cancel()
    g = _Generation(session, tokenizer, request, speculator)
    try:
        logits = yield from g.prefill()
        if logits is not None:
            yield from g.run(logits)
    except GenerationCancelled:
        g.reason = "cancelled"
    except ContextFullError:
        g.reason = "context_full"
    finally:
        session.clear_cancel()
    yield from g.finish()


class _Generation:
    """The state of one `generate()` call, and its three steps: `prefill` (the prompt into the
    cache), `run` (sample, decode, detokenize until a stop), `finish` (the held-back text and
    the `Finished` event)."""

    def __init__(
        self, session: Session, tokenizer: Tokenizer, request: GenerationRequest, speculator: Speculator | None
    ):
        from app.text import TextStream  # lazy: app.text loads jinja2; `llambda --help` imports the engine

        self.session, self.request, self.speculator = session, request, speculator
        self.stats = GenerationStats(
            threads=getattr(session.decoder, "n_threads", 1),
            isa=getattr(session.decoder, "isa", ""),
            n_ctx=session.n_ctx,
        )
        self.t0 = time.perf_counter()
        self.t_first: float | None = None  # when the first token was sampled
        self.stats.prompt_tokens = len(request.prompt_ids)
        self.ids: list[int] = []  # the reply's tokens
        self.stream = TextStream(tokenizer, request.stop_strings, stop_on_eog=request.stop_on_eog)
        self.stop_ids = getattr(tokenizer, "eog_ids", ()) if request.stop_on_eog else ()
        self.reason = "length"
        self.stop_string: str | None = None
        self.spec: SpecStats | None = None

    # -- 1. the prompt ---------------------------------------------------------------------------

    def prefill(self) -> Generator[Event, None, np.ndarray | None]:
        """Decode the part of the prompt the cache does not hold yet (shifting a prompt that fills
        the context when the policy allows). Returns the logits after it, or None when not even
        one token fits (the reason is then "context_full")."""
        session, request = self.session, self.request
        prompt = list(request.prompt_ids)
        if len(prompt) >= session.n_ctx:  # no room for even one generated token
            shifted = (
                _shift_prompt(prompt, session.n_ctx, request.n_keep) if request.context_policy == "shift" else None
            )
            if shifted is None:
                self.reason = "context_full"
                return None
            self.stats.context_shifts += 1
            yield ContextShifted(len(prompt) - len(shifted), len(shifted))
            prompt = shifted
        for done, total in session.feed_iter(prompt):
            yield PromptProgress(done, total, len(prompt) - total, time.perf_counter() - self.t0)
        self.stats.prompt_tokens_evaluated = session.last_evaluated
        self.stats.prompt_s = time.perf_counter() - self.t0
        return session.logits

    # -- 2. the reply ----------------------------------------------------------------------------

    def run(self, logits: np.ndarray) -> Iterator[Event]:
        """Sample and decode until a stop: each round decodes the token sampled last (`pending`),
        then gets the next tokens from a verify pass of the speculator's guess, or else from a
        run of sampling and decoding in C; their text is pushed through the stream."""
        session, request, stats = self.session, self.request, self.stats
        sampler = Sampler(request.sampler)
        pending = None  # the last token sampled, not yet decoded into the cache
        step_s = 0.0  # seconds of the last single step (a plain run's share)
        run = 1  # tokens per run: the first alone (it shows at once), then RUN
        if self.speculator is not None:
            self.spec = SpecStats(kind=self.speculator.kind)
            self.speculator.current = self.spec  # live figures for a window polling from elsewhere
        stats.spec = self.spec
        while len(self.ids) < request.max_tokens:
            toks = None
            if pending is not None and self.spec is not None and session.n_past < session.n_ctx:
                toks = self._verify_guess(sampler, pending)
                if toks is not None:
                    pending, cancelled = None, False
            if pending is not None:
                if session.n_past >= session.n_ctx:
                    if request.context_policy == "stop":
                        self.reason = "context_full"
                        break
                    logits = yield from self._shift_context(pending)
                    step_s = 0.0
                else:
                    t_step = time.perf_counter()
                    logits = session.step(pending)
                    step_s = time.perf_counter() - t_step
                pending = None
            if toks is None:
                toks, cancelled = self._plain_run(logits, sampler, run, step_s)
            run = RUN if self.speculator is None else self.speculator.plain_run_length()
            taken, stop_pressed = yield from self._take(toks)
            cancelled = cancelled or stop_pressed
            if taken < len(toks):  # the cache keeps the reply's tokens but its last, as ever
                session.rollback(len(toks) - taken)
            assert self.t_first is not None  # set by the first run, which every round follows
            stats.generation_s = time.perf_counter() - self.t_first
            if cancelled:
                raise GenerationCancelled("generation cancelled")
            if self.reason != "length":
                break
            pending = toks[-1]
        if self.t_first is not None:
            stats.generation_s = time.perf_counter() - self.t_first

    def _verify_guess(self, sampler: Sampler, pending: int) -> list[int] | None:
        """One verify pass over the speculator's guess after `pending`: the tokens it accepts plus
        the one sampled after them, or None when it has no guess."""
        session, spec, speculator = self.session, self.spec, self.speculator
        assert spec is not None and speculator is not None  # only called with a speculator
        t_pass = time.perf_counter()
        room = min(self.request.max_tokens - len(self.ids) - 1, session.n_ctx - session.n_past - 1)
        guess, bucket = speculator.propose(session.tokens + [pending], room)
        t_guess = time.perf_counter()
        if not guess:
            return None
        toks, sample_s = verify_pass(session, sampler, pending, guess, self.stop_ids)
        t_end = time.perf_counter()
        speculator.note_pass(bucket, len(guess), len(toks) - 1, t_end - t_guess - sample_s, t_guess - t_pass)
        self.stats.sample_s += sample_s
        spec.passes += 1
        spec.proposed += len(guess)
        spec.accepted += len(toks) - 1
        spec.pass_tokens += len(toks)
        spec.pass_s += t_end - t_pass
        return toks

    def _shift_context(self, pending: int) -> Generator[Event, None, np.ndarray]:
        """The cache is full (policy "shift"): drop half of what follows the first n_keep tokens,
        then decode `pending`. Returns the logits after it."""
        session = self.session
        keep = min(self.request.n_keep, session.n_past - 1)
        n_drop = (session.n_past - keep) // 2
        new = session.shifted(keep, n_drop)
        session.drop(keep, n_drop)  # keys moved in place where RoPE allows
        self.stats.context_shifts += 1
        yield ContextShifted(n_drop, len(new))
        return session.feed(new + [pending])

    def _plain_run(self, logits: np.ndarray, sampler: Sampler, run: int, step_s: float) -> tuple[list[int], bool]:
        """Up to `run` tokens sampled and decoded in one C call (no interpreter lock held):
        (tokens, cancelled). The first run's end is the time to first token."""
        session, stats = self.session, self.stats
        k = min(run, self.request.max_tokens - len(self.ids), session.n_ctx - session.n_past + 1)
        t_run = time.perf_counter()
        toks, sample_s, cancelled = session.sample_run(logits, sampler, k, self.stop_ids, RUN_SECONDS)
        if self.t_first is None:
            self.t_first = time.perf_counter()
            stats.ttft_s = self.t_first - self.t0
        else:
            stats.sample_s += sample_s
            if self.spec is not None and self.speculator is not None:  # a plain run: one step, then len(toks) - 1 more
                took = time.perf_counter() - t_run + step_s
                self.speculator.note_plain(len(toks), took)
                self.spec.plain_tokens += len(toks)
                self.spec.plain_s += took
        return toks, cancelled

    def _take(self, toks: list[int]) -> Generator[Event, None, tuple[int, bool]]:
        """Push the tokens of a run through the text stream, up to a stop or a Stop press (looked
        at between tokens, as the run's text is shown). Returns (how many became the reply's,
        whether Stop cut the run)."""
        taken = 0
        for tok in toks:
            if taken and self.session.cancelled:  # Stop pressed while the run was shown
                return taken, True
            taken += 1
            self.ids.append(tok)
            self.stats.generated_tokens = len(self.ids)
            step = self.stream.push(tok)
            if step.text:
                yield TextPiece(step.text, tok)
            if step.stop is not None:
                self.reason, self.stop_string = step.stop, step.stop_string
                break
        return taken, False

    # -- 3. the end ------------------------------------------------------------------------------

    def finish(self) -> Iterator[Event]:
        """The text the stream still holds (a stop that did not come from the text: a limit or
        Stop), then the one `Finished` event."""
        stats = self.stats
        if stats.spec is not None and self.speculator is not None:  # both or neither
            stats.spec.t_token = self.speculator.t_token or 0.0
        tail = self.stream.finish() if self.reason in ("length", "context_full", "cancelled") else ""
        stats.peak_rss_bytes = peak_rss_bytes()
        if tail:
            yield TextPiece(tail, self.ids[-1] if self.ids else -1)
        yield Finished(
            self.reason, self.stream.text, tuple(self.ids), tuple(self.request.prompt_ids), stats, self.stop_string
        )
