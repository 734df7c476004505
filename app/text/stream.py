"""Text as tokens arrive: a streaming detokenizer, stop strings, and the two together.

`Detokenizer` turns ids into text pieces that never split a UTF-8 character; bytes that can
never become valid UTF-8 turn into U+FFFD, exactly as decoding the whole reply at once would.
`StopMatcher` holds back text that might be the start of a stop string, so a partial stop string
never reaches the screen. `TextStream` chains them and stops on end-of-generation tokens.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Iterable

from app.text.tokenizer import Tokenizer


class Detokenizer:
    """Feed token ids, get text. `"".join(pieces) + flush()` equals `tokenizer.decode(ids)`."""

    def __init__(self, tokenizer: Tokenizer, special: bool = False, strip_leading_space: bool | None = None):
        self._tok = tokenizer
        self._special = special
        # Like decode(): with a SentencePiece space prefix, the first token loses one leading space.
        self._strip = tokenizer.vocab.add_space_prefix if strip_leading_space is None else strip_leading_space
        self._first = True
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token: int) -> str:
        """Text completed by `token` (often the token's own text; "" while a character is incomplete)."""
        piece = self._tok.token_to_piece(int(token), self._special)
        if self._first:
            self._first = False
            if self._strip and piece.startswith(b" "):
                piece = piece[1:]
        return self._utf8.decode(piece)

    def feed_many(self, tokens: Iterable[int]) -> str:
        return "".join(self.feed(t) for t in tokens)

    def flush(self) -> str:
        """Whatever is still pending: an incomplete character becomes U+FFFD."""
        return self._utf8.decode(b"", final=True)


class StopMatcher:
    """Finds stop strings across pieces; `push` returns the text that is safe to show now."""

    def __init__(self, stop_strings: Iterable[str] = ()):
        self.stop_strings = tuple(s for s in stop_strings if s)
        self._held = ""
        self.matched: str | None = None

    def push(self, text: str) -> str:
        """Safe text from `held + text`; after a match, the text before it and nothing more."""
        if self.matched is not None:
            return ""
        buf = self._held + text
        if not self.stop_strings:
            return buf
        first, which = -1, None
        for s in self.stop_strings:
            i = buf.find(s)
            # which is set whenever first >= 0
            if i >= 0 and (first < 0 or i < first or (i == first and len(s) > len(which))):  # type: ignore[arg-type]
                first, which = i, s
        if which is not None:
            self.matched = which
            self._held = ""
            return buf[:first]
        keep = 0  # longest tail of buf that is a proper prefix of some stop string
        for s in self.stop_strings:
            for n in range(min(len(s) - 1, len(buf)), keep, -1):
                if buf.endswith(s[:n]):
                    keep = n
                    break
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep] if keep else buf

    def flush(self) -> str:
        """The held tail, at the end of generation (it turned out not to be a stop string)."""
        out, self._held = ("" if self.matched is not None else self._held), ""
        return out


@dataclass(frozen=True)
class StreamStep:
    """One token's effect: `text` to show now, and why the stream stopped (None: it goes on)."""

    text: str
    stop: str | None = None  # "eog" or "stop_string"
    stop_string: str | None = None  # the stop string matched, for "stop_string"


class TextStream:
    """Token ids in, screen text out, with end-of-generation tokens and stop strings honoured.

    `push(token)` returns a StreamStep; once it reports a stop, further tokens are ignored.
    `finish()` returns the last pending text when generation ends for another reason (length)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        stop_strings: Iterable[str] = (),
        stop_on_eog: bool = True,
        special: bool = False,
        strip_leading_space: bool | None = None,
    ):
        self._tok = tokenizer
        self._detok = Detokenizer(tokenizer, special=special, strip_leading_space=strip_leading_space)
        self._stops = StopMatcher(stop_strings)
        self._stop_on_eog = stop_on_eog
        self.stopped: str | None = None
        self.text = ""  # everything shown so far

    def _show(self, text: str) -> str:
        self.text += text
        return text

    def push(self, token: int) -> StreamStep:
        if self.stopped is not None:
            return StreamStep("", self.stopped, self._stops.matched)
        if self._stop_on_eog and self._tok.is_eog(int(token)):
            self.stopped = "eog"
            return StreamStep(self._show(self._drain()), "eog")
        shown = self._stops.push(self._detok.feed(token))
        if self._stops.matched is not None:
            self.stopped = "stop_string"
            return StreamStep(self._show(shown), "stop_string", self._stops.matched)
        return StreamStep(self._show(shown))

    def _drain(self) -> str:
        shown = self._stops.push(self._detok.flush())
        if self._stops.matched is not None:
            self.stopped = self.stopped or "stop_string"
            return shown
        return shown + self._stops.flush()

    def finish(self) -> str:
        """Pending text at the end of generation (an incomplete character shows as U+FFFD)."""
        if self.stopped is not None:
            return ""
        return self._show(self._drain())
