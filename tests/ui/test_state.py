"""The window's state rules without widgets: what the model is sent, regenerate/edit removal,
titles, settings defaults and persistence."""

from app.chats.store import ChatStore
from app.ui.state import ChatState, ENGINE_DEFAULTS, SAMPLING_DEFAULTS, title_from


def make_state(tmp_path):
    return ChatState(ChatStore(tmp_path / "chats.sqlite3"))


def test_prompt_messages_skip_failed_and_empty_replies(tmp_path):
    s = make_state(tmp_path)
    s.new_conversation()
    s.store.update_conversation(s.current_id, system_prompt="Be brief.")
    s.add_user_message("hi")
    r = s.begin_reply()
    s.append_reply(r.request_id, "hel")
    s.append_reply(r.request_id, "lo")
    s.finish_reply(r.request_id, {"completion_tokens": 2})
    s.add_user_message("again")
    r2 = s.begin_reply()
    s.finish_reply(r2.request_id, {}, error="boom")
    assert s.prompt_messages(s.current_id) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    msgs = s.messages()
    assert msgs[1].status == "complete" and msgs[1].completion_tokens == 2
    assert msgs[3].status == "error" and msgs[3].timings["error"] == "boom"


def test_stopped_reply_is_interrupted_and_kept(tmp_path):
    s = make_state(tmp_path)
    s.add_user_message("tell me")
    r = s.begin_reply()
    s.append_reply(r.request_id, "partial")
    s.append_reply(r.request_id + 1, "ignored: another request")
    s.mark_shift(r.request_id, 12)
    s.finish_reply(r.request_id, {"stopped": True})
    m = s.messages()[-1]
    assert (m.content, m.status) == ("partial", "interrupted")
    assert m.timings["context_shifts"] == 1 and m.timings["context_dropped"] == 12


def test_truncate_from_removes_the_tail(tmp_path):
    s = make_state(tmp_path)
    a = s.add_user_message("one")
    s.store.add_message(s.current_id, "assistant", "1")
    b = s.add_user_message("two")
    s.store.add_message(s.current_id, "assistant", "2")
    s.truncate_from(b)
    assert [m.content for m in s.messages()] == ["one", "1"]
    s.truncate_from(a)
    assert s.messages() == []


def test_titles_and_settings(tmp_path):
    s = make_state(tmp_path)
    assert title_from("  a\n b  ") == "a b" and len(title_from("x" * 200)) == 48
    s.add_user_message("What is\nthe capital of France?")
    assert s.current().title == "What is the capital of France?"
    assert s.sampling() == SAMPLING_DEFAULTS and s.engine_settings() == ENGINE_DEFAULTS
    s.save_settings("sys", {**SAMPLING_DEFAULTS, "top_k": 7}, {"n_ctx": 1024, "threads": 2, "overflow": "stop"})
    s.store.close()
    s2 = make_state(tmp_path)
    s2.select(s2.conversations()[0].id)
    assert s2.current().system_prompt == "sys" and s2.sampling()["top_k"] == 7
    assert s2.engine_settings() == {
        **ENGINE_DEFAULTS,
        "n_ctx": 1024,
        "threads": 2,
        "overflow": "stop",
        "kv_type": "f16",
    }
    s2.new_conversation()
    assert s2.sampling()["top_k"] == 7  # the last settings become the defaults
