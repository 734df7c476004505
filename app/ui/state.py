"""The window's state without widgets: conversations, the current one, the reply being streamed,
and settings, all kept in the conversation store (`app.chats`) as they change.

No Qt here, so the rules (what is sent to the model, what regenerate and edit remove) are
testable on their own. The view reads from this object and calls its methods.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.chats.settings import (
    ENGINE_DEFAULTS,
    OVERFLOW_POLICIES,
    SAMPLING_DEFAULTS,
    clean,
    engine_settings,
    sampling_defaults,
)
from app.chats.recovery import open_store
from app.chats.store import COMPLETE, ERROR, INTERRUPTED, TOKEN_KEYS, ChatStore, Conversation, Message
from app.errors import StoreError
from app.ui.prompt_meter import MIN_TOKENS_FOR_SPEED

if TYPE_CHECKING:
    from app.engine.generate import Finished

log = logging.getLogger(__name__)

NEW_TITLE = "New chat"
TITLE_CHARS = 48


def not_saved_line(what: str, e: Exception) -> str:
    """One line for the user when a write to the conversation store failed (`what`: "This reply",
    "Your message"...): why, in words, and the store's own line."""
    why = "the disk is full" if "full" in str(e).lower() else "the conversation database could not be written"
    return f"{what} could not be saved: {why} ({e})."


def reply_timings(finished: Finished | None, figures: dict) -> dict:
    """A finished reply's figures under the names the window shows and the chat store keeps
    (`completion_tokens` and `prompt_tokens` as in the store's columns and the OpenAI API; the rest
    go to its timings): the worker's `figures` (live counters, "stopped", "seconds"), and over
    them the engine's own from `finished` (an app.engine.generate.Finished; None when the reply
    ended without one). This is the one place where the engine's names become the store's."""
    out = dict(figures)
    if finished is not None:
        s = finished.stats
        out.update(
            prompt_tokens=s.prompt_tokens,
            completion_tokens=s.generated_tokens,
            prompt_evaluated=s.prompt_tokens_evaluated,
            prompt_reused=s.prompt_tokens_reused,
            prompt_tok_s=round(s.prompt_tok_s, 2),
            gen_tok_s=round(s.generation_tok_s, 2),
            ttft_s=round(s.ttft_s, 4),
            stop_reason=finished.stop_reason,
            peak_rss_bytes=s.peak_rss_bytes,
            threads=s.threads,
            isa=s.isa,
        )
        out["stopped"] = bool(out.get("stopped")) or finished.stop_reason == "cancelled"
    if int(out.get("prompt_evaluated", MIN_TOKENS_FOR_SPEED) or 0) < MIN_TOKENS_FOR_SPEED:
        out.pop("prompt_tok_s", None)  # a speed over a handful of new tokens means nothing
    return out


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


@dataclass
class Reply:
    """The assistant reply being streamed."""

    request_id: int
    conversation_id: int
    message_id: int
    text: str = ""
    shifts: list[int] = field(default_factory=list)
    continued_from: int = 0  # tokens the message had before a Continue
    versions: list = field(default_factory=list)  # earlier versions of this reply (Regenerate)


class ChatState:
    def __init__(self, store: ChatStore | None = None):
        # open_store never raises: a damaged or newer database is set aside, a folder that cannot
        # be written gives a store in memory; its `notice` says so (the window shows it).
        self.store = store if store is not None else open_store()
        self.current_id: int | None = None
        self.reply: Reply | None = None
        self._next_request = 1
        self.last_deleted: int | None = None
        # Replies whose last write failed (a full disk): message id -> what finish_reply was
        # given, written again before the next change to the store (`save_unsaved`).
        self.unsaved: dict[int, tuple[dict, str, str]] = {}
        self.save_problem: str | None = None  # one line, set when a reply could not be saved

    def close(self) -> None:
        self.save_unsaved()
        try:
            self.store.close()
        except StoreError as e:  # the last text of a reply could not be written
            log.warning("conversation store closed with unsaved text: %s", e)

    def take_save_problem(self) -> str | None:
        """The line saying a reply could not be saved (once), or None."""
        line, self.save_problem = self.save_problem, None
        return line

    def save_unsaved(self) -> bool:
        """Write the replies whose earlier write failed; True when none is left unsaved."""
        for msg_id, (timings, text, status) in list(self.unsaved.items()):
            try:
                self.store.finish_reply(msg_id, timings, text=text, status=status)
            except StoreError as e:
                if "no message" in str(e):  # deleted meanwhile (regenerate, edit)
                    del self.unsaved[msg_id]
                    continue
                log.warning("reply %d still not saved: %s", msg_id, e)
                return False
            del self.unsaved[msg_id]
            log.info("reply %d saved after an earlier failure", msg_id)
        return True

    # -- conversations -------------------------------------------------------------------------

    def conversations(self, query: str = "") -> list[Conversation]:
        convs = self.store.list_conversations()
        q = query.strip().casefold()
        if not q:
            return convs
        hits = {h.conversation_id for h in self.store.search(query)}
        return [c for c in convs if q in c.title.casefold() or c.id in hits]

    def open_id(self) -> int:
        """The current conversation's id, for what needs one (a reply, the prompt); StoreError
        when none is open."""
        if self.current_id is None:
            raise StoreError("no conversation is open")
        return self.current_id

    def current(self) -> Conversation | None:
        if self.current_id is None:
            return None
        try:
            return self.store.get_conversation(self.current_id)
        except Exception:
            return None

    def new_conversation(self, model: str | None = None) -> int:
        defaults = sampling_defaults(self.store)
        system = self.store.get_setting("system_prompt_default", "") or ""
        self.current_id = self.store.create_conversation(
            NEW_TITLE, model=model, system_prompt=system, sampling=defaults
        )
        return self.current_id

    def select(self, conv_id: int | None) -> None:
        self.current_id = conv_id

    def rename(self, conv_id: int, title: str) -> None:
        title = " ".join(title.split())
        if title:
            self.store.rename_conversation(conv_id, title)

    def delete(self, conv_id: int) -> None:
        self.store.delete_conversation(conv_id)
        self.last_deleted = conv_id
        if self.current_id == conv_id:
            self.current_id = None

    def undo_delete(self) -> int | None:
        conv_id, self.last_deleted = self.last_deleted, None
        if conv_id is not None:
            self.store.restore_conversation(conv_id)
            self.current_id = conv_id
        return conv_id

    def messages(self, conv_id: int | None = None) -> list[Message]:
        """The messages of a conversation, with the text of replies not saved yet (full disk)."""
        conv_id = self.current_id if conv_id is None else conv_id
        if conv_id is None:
            return []
        out = self.store.messages(conv_id)
        if self.unsaved:
            for i, m in enumerate(out):
                if m.id in self.unsaved:
                    timings, text, status = self.unsaved[m.id]
                    out[i] = dataclasses.replace(
                        m,
                        content=text,
                        status=status,
                        timings={k: v for k, v in timings.items() if k not in TOKEN_KEYS},
                    )
        return out

    # -- settings ------------------------------------------------------------------------------

    def sampling(self, conv_id: int | None = None) -> dict:
        s = sampling_defaults(self.store)
        conv = self.current() if conv_id is None else self.store.get_conversation(conv_id)
        return clean(conv.sampling, s) if conv is not None else s

    def engine_settings(self) -> dict:
        return engine_settings(self.store)

    def save_settings(self, system_prompt: str, sampling: dict, engine: dict) -> None:
        sampling = {k: sampling[k] for k in SAMPLING_DEFAULTS if k in sampling}
        if self.current_id is not None:
            self.store.update_conversation(self.current_id, system_prompt=system_prompt, sampling=sampling)
        self.store.set_setting("sampling_defaults", sampling)
        self.store.set_setting("engine", {k: engine[k] for k in ENGINE_DEFAULTS if k in engine})

    def get(self, key: str, default: Any = None) -> Any:
        return self.store.get_setting(key, default)

    def put(self, key: str, value: Any) -> None:
        self.store.set_setting(key, value)

    # -- turns -----------------------------------------------------------------------------------

    def prompt_messages(self, conv_id: int) -> list[dict]:
        """What the model sees: the system prompt, then every readable turn in order."""
        conv = self.store.get_conversation(conv_id)
        out = [{"role": "system", "content": conv.system_prompt}] if conv.system_prompt.strip() else []
        for m in self.messages(conv_id):
            if m.damaged or m.role not in ("user", "assistant"):
                continue
            if m.role == "assistant" and (m.status == ERROR or not m.content):
                continue
            out.append({"role": m.role, "content": m.content})
        return out

    def add_user_message(self, text: str, model: str | None = None) -> int:
        """Save the user's message (StoreError when it cannot be: the caller keeps the text)."""
        self.save_unsaved()
        conv_id = self.current_id if self.current_id is not None else self.new_conversation(model)
        conv = self.store.get_conversation(conv_id)
        if conv.title in ("", NEW_TITLE) and not self.store.messages(conv_id):
            self.store.rename_conversation(conv_id, title_from(text) or NEW_TITLE)
        return self.store.add_message(conv_id, "user", text, model=model)

    def begin_reply(self, model: str | None = None, identity: dict | None = None) -> Reply:
        """Start the streaming reply; `identity` ({"name", "sha256", "quantization"}) records
        which model file answers it (the chat view shows it on hover). StoreError when the
        reply's row cannot be written; a failure to record the identity only loses that."""
        self.save_unsaved()
        conv_id = self.open_id()
        msg_id = self.store.begin_reply(conv_id, model=model)
        if identity:
            try:
                self.store.record_model(
                    msg_id,
                    name=identity.get("name") or model,
                    sha256=identity.get("sha256"),
                    quantization=identity.get("quantization"),
                )
            except StoreError as e:
                log.warning("model of reply %d not recorded: %s", msg_id, e)
        self.reply = Reply(self._next_request, conv_id, msg_id)
        self._next_request += 1
        return self.reply

    def continue_reply(self, message_id: int) -> Reply:
        """Go on with an assistant message that stopped at the token limit: the new text is
        appended to it (the same message, its text so far kept)."""
        msg = self.store.get_message(message_id)
        self.reply = Reply(
            self._next_request,
            msg.conversation_id,
            message_id,
            text=msg.content,
            continued_from=msg.completion_tokens or 0,
        )
        self._next_request += 1
        return self.reply

    def append_reply(self, request_id: int, text: str) -> Reply | None:
        r = self.reply
        if r is None or r.request_id != request_id:
            return None
        r.text += text
        try:
            self.store.update_reply(r.message_id, r.text)
        except StoreError as e:  # the text stays here; finish_reply tries again
            if self.save_problem is None:
                log.warning("reply %d not saved: %s", r.message_id, e)
            self.save_problem = not_saved_line("This reply", e)
        return r

    def mark_shift(self, request_id: int, dropped: int) -> None:
        r = self.reply
        if r is not None and r.request_id == request_id:
            r.shifts.append(dropped)

    def finish_reply(self, request_id: int, stats: dict, error: str | None = None) -> Reply | None:
        r = self.reply
        if r is None or r.request_id != request_id:
            return None
        self.reply = None
        timings: dict[str, object] = {k: v for k, v in stats.items() if isinstance(v, (int, float, str, bool))}
        done = timings.get("completion_tokens")
        if r.continued_from and isinstance(done, int):
            timings["completion_tokens"] = done + r.continued_from
        if r.versions:  # this reply is a regeneration: the earlier ones stay beside it
            versions = r.versions + [
                {
                    "content": r.text,
                    "completion_tokens": timings.get("completion_tokens"),
                    "status": ERROR if error is not None else (INTERRUPTED if stats.get("stopped") else COMPLETE),
                }
            ]
            timings["versions"] = versions
            timings["version"] = len(versions) - 1
        if r.shifts:
            timings["context_shifts"] = len(r.shifts)
            timings["context_dropped"] = sum(r.shifts)
        if error is not None:
            timings["error"] = error
            status = ERROR
        else:
            status = INTERRUPTED if stats.get("stopped") else COMPLETE
        try:
            self.store.finish_reply(r.message_id, timings, text=r.text, status=status)
        except StoreError as e:  # kept, and written before the next change
            log.warning("reply %d not saved: %s", r.message_id, e)
            self.unsaved[r.message_id] = (timings, r.text, status)
            self.save_problem = (
                not_saved_line("This reply", e) + " It stays on screen and is saved as soon as there is room again."
            )
        return r

    # -- versions of a reply (Regenerate keeps the earlier ones) -------------------------------------

    @staticmethod
    def versions_of(m: Message) -> list[dict[str, Any]]:
        vs = (m.timings or {}).get("versions")
        if isinstance(vs, list) and vs and all(isinstance(v, dict) and isinstance(v.get("content"), str) for v in vs):
            return vs
        return [{"content": m.content, "completion_tokens": m.completion_tokens, "status": m.status}]

    @staticmethod
    def version_index(m: Message) -> int:
        vs = ChatState.versions_of(m)
        i = (m.timings or {}).get("version")
        return i if isinstance(i, int) and 0 <= i < len(vs) else len(vs) - 1

    def take_for_regenerate(self) -> list[dict]:
        """Remove the last reply for a new one, and return its versions (to keep beside the new)."""
        self.save_unsaved()
        last = self.last_assistant()
        if last is None:
            return []
        versions = [v for v in self.versions_of(last) if v.get("content")]
        self.store.delete_message(last.id)
        return versions

    def show_version(self, message_id: int, index: int) -> Message:
        """Make version `index` the reply's text (what the model reads next, and what is shown)."""
        m = self.store.get_message(message_id)
        vs = self.versions_of(m)
        index = max(0, min(len(vs) - 1, index))
        v = vs[index]
        timings = {k: val for k, val in (m.timings or {}).items()}
        timings["versions"], timings["version"] = vs, index
        status = v["status"] if v.get("status") in (COMPLETE, INTERRUPTED, ERROR) else COMPLETE
        self.store.finish_reply(
            message_id,
            {"prompt_tokens": m.prompt_tokens, "completion_tokens": v.get("completion_tokens"), **timings},
            text=v["content"],
            status=status,
        )
        return self.store.get_message(message_id)

    def truncate_from(self, message_id: int) -> None:
        """Remove a message and everything after it in the current conversation."""
        self.save_unsaved()
        if self.current_id is None:  # no conversation, no messages
            return
        for m in self.store.messages(self.current_id):
            if m.id >= message_id:
                self.store.delete_message(m.id)

    def last_assistant(self) -> Message | None:
        msgs = self.messages()
        return msgs[-1] if msgs and msgs[-1].role == "assistant" else None

    def last_user(self) -> Message | None:
        for m in reversed(self.messages()):
            if m.role == "user":
                return m
        return None


__all__ = [
    "ChatState",
    "Reply",
    "not_saved_line",
    "SAMPLING_DEFAULTS",
    "ENGINE_DEFAULTS",
    "OVERFLOW_POLICIES",
    "title_from",
]
