"""Export and import of conversations: Markdown and JSON from the window and from
`llambda chats export`, written atomically, and JSON that imports back to the same conversation."""

from __future__ import annotations

import json

from app.chats.export import conversation_to_dict, export_json, import_json
from app.chats.store import ChatStore


def make_chat(store: ChatStore) -> int:
    conv = store.create_conversation(
        "Numbers", model="SmolLM2", system_prompt="Be brief.", sampling={"temperature": 0.2}
    )
    store.add_message(conv, "user", "Count to three", model="SmolLM2")
    store.add_message(
        conv,
        "assistant",
        "One, two, three. ```py\nprint(3)\n```",
        model="SmolLM2",
        prompt_tokens=20,
        completion_tokens=9,
        timings={"gen_tok_s": 31.5, "stop_reason": "eog"},
    )
    store.add_message(conv, "user", "And four?")
    cut = store.begin_reply(conv, model="SmolLM2")
    store.finish_reply(cut, {"completion_tokens": 2}, text="Four", status="interrupted")
    return conv


def _comparable(d: dict) -> dict:
    d = dict(d)
    for k in ("id", "created", "updated"):
        d.pop(k)
    d["messages"] = [{k: v for k, v in m.items() if k != "created"} for m in d["messages"]]
    return d


def test_json_round_trips_through_an_import(tmp_path):
    with ChatStore(tmp_path / "a.sqlite3") as a, ChatStore(tmp_path / "b.sqlite3") as b:
        conv = make_chat(a)
        path = export_json(a, conv, tmp_path / "chat.json")
        new = import_json(b, path)
        assert _comparable(conversation_to_dict(b, new)) == _comparable(conversation_to_dict(a, conv))
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_import_refuses_what_is_not_an_export(tmp_path):
    import pytest

    from app.chats.export import ExportError

    with ChatStore(tmp_path / "s.sqlite3") as s:
        for text, words in (
            ("{}", "format"),
            ("not json", "not JSON"),
            (json.dumps({"format": "llambda-conversation", "version": 9, "messages": []}), "version"),
            (
                json.dumps(
                    {"format": "llambda-conversation", "version": 1, "messages": [{"role": "wizard", "content": "x"}]}
                ),
                "message 1",
            ),
        ):
            p = tmp_path / "bad.json"
            p.write_text(text)
            with pytest.raises(ExportError, match=words):
                import_json(s, p)
        assert s.list_conversations() == []


def test_cli_export_one_all_and_import(tmp_path, isolated_home, capsys):
    from app.cli import main

    class Result:
        def __init__(self, code, out, err):
            self.returncode, self.stdout, self.stderr = code, out, err

    def run(*args):
        code = main(["chats", *args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    with ChatStore() as store:
        conv = make_chat(store)
    r = run("export", str(conv))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# Numbers") and "## Assistant" in r.stdout and "## Assistant (interrupted)" in r.stdout
    r = run("export", str(conv), "--format", "json", "-o", str(tmp_path / "one.json"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "one.json").read_text())["title"] == "Numbers"
    r = run("export", "--all", "--format", "md", "-o", str(tmp_path / "all"))
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp_path / "all").iterdir()] == [f"{conv}-numbers.md"]
    r = run("import", str(tmp_path / "one.json"))
    assert r.returncode == 0 and "imported as conversation" in r.stdout, r.stderr
    r = run("list", "--json")
    rows = json.loads(r.stdout)
    assert len(rows) == 2 and all(row["messages"] == 4 for row in rows)
    # mistakes: one line, exit 2
    for args in (("export",), ("export", "999"), ("export", "1", "--all"), ("import", str(tmp_path / "all"))):
        r = run(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (args, r.stderr)
