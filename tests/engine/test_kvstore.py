"""Saved KV states (app/engine/kvstore.py) on SmolLM2: a restored state gives the very logits of
the state it was saved from; reopening a conversation decodes only what is new; every kind of
hostile or foreign file is ignored with a log line and the answer equals the uncached one; the
size budget evicts the least recently used."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import struct

import numpy as np
import pytest

from app.engine.engine import Chat, Engine
from app.engine.kvstore import FORMAT_VERSION, KVStore, model_identity
from app.engine.sampler import SamplerSettings

GREEDY = SamplerSettings(temperature=0.0)
SYSTEM = "You answer in one short sentence."
FIRST = "Name three colours of the rainbow and say which one is in the middle."
SECOND = "And which one comes last?"
N_CTX = 480  # under 512: no attention split, so batch sizes change no bit of the cache


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


@pytest.fixture(scope="module")
def engines(smollm2_path):
    a = Engine(smollm2_path, n_ctx=N_CTX, n_threads=2)
    b = Engine(smollm2_path, n_ctx=N_CTX, n_threads=2)
    yield a, b
    a.close()
    b.close()


def reply(eng, history, text, max_tokens=12):
    chat = Chat(eng, system=SYSTEM)
    chat.messages = [dict(m) for m in history]
    fin = list(chat.send(text, GREEDY, max_tokens=max_tokens))[-1]
    return chat, fin


@pytest.fixture(scope="module")
def conversation(engines, tmp_path_factory):
    """The first exchange made on engine a, its state saved; the uncached answer to the second
    message (a fresh session on engine b, no store)."""
    a, b = engines
    store = KVStore(tmp_path_factory.mktemp("kv"))
    a.kv_store, b.kv_store = store, None
    a.session.reset()
    chat, fin = reply(a, [], FIRST)
    assert chat.save_state()
    history = [{"role": "user", "content": FIRST}, {"role": "assistant", "content": fin.text}]
    b.session.reset()
    _, cold = reply(b, history, SECOND)
    path = store.path_for(a.model_id, chat.state_key)
    return {
        "store": store,
        "history": history,
        "cold": cold,
        "path": path,
        "good": path.read_bytes(),
        "key": chat.state_key,
        "saved_tokens": list(a.session.tokens),
    }


@pytest.mark.parametrize("kv_type", ["f16", "q8_0", "f32"])
def test_restored_state_gives_the_same_logits_bit_for_bit(smollm2_path, tmp_path, kv_type):
    with (
        Engine(smollm2_path, n_ctx=N_CTX, n_threads=2, kv_type=kv_type, kv_store=KVStore(tmp_path)) as a,
        Engine(smollm2_path, n_ctx=N_CTX, n_threads=1, kv_type=kv_type, kv_store=KVStore(tmp_path)) as b,
    ):
        ids = a.chat_prompt([{"role": "user", "content": FIRST * 3}])
        a.session.feed(ids)
        assert a.save_state("k")
        assert not a.save_state("k")  # unchanged: not written again
        assert b.restore_state("k", ids + [42]) == len(ids)
        assert b.session.tokens == ids
        np.testing.assert_array_equal(b.decoder.kv_read(len(ids)), a.decoder.kv_read(len(ids)))
        for tok in (42, 7, 1000):  # the next steps agree bit for bit
            assert np.array_equal(bits(a.session.step(tok)), bits(b.session.step(tok)))


def test_a_state_saved_in_the_background_is_the_cache_at_the_save_bit_for_bit(smollm2_path, tmp_path):
    """Through the keeper (kvkeeper.py): the write is held back while the engine goes on and
    overwrites its cache with another prompt; the file written afterwards still restores the
    cache as it was at the save, and the next steps' logits agree bit for bit."""
    from app.engine.kvkeeper import StateKeeper
    from tests.engine.test_kvkeeper import SlowStore

    slow = SlowStore(tmp_path)
    with (
        Engine(smollm2_path, n_ctx=N_CTX, n_threads=2, kv_store=StateKeeper(slow)) as a,
        Engine(smollm2_path, n_ctx=N_CTX, n_threads=1, kv_store=KVStore(tmp_path)) as b,
    ):
        ids = a.chat_prompt([{"role": "user", "content": FIRST * 3}])
        a.session.feed(ids)
        want = a.decoder.kv_read(len(ids))
        assert a.save_state("k")  # a snapshot; the writer waits
        assert slow.started.wait(30) and slow.writes == []
        a.session.feed(a.chat_prompt([{"role": "user", "content": SECOND * 5}]))  # cache overwritten
        assert not np.array_equal(a.decoder.kv_read(len(ids)), want)
        slow.release.set()
        assert a.kv_store.close(30) and slow.writes == [("k", len(ids))]
        assert b.restore_state("k", ids + [42]) == len(ids)
        np.testing.assert_array_equal(b.decoder.kv_read(len(ids)), want)
        a.session.reset()
        a.session.feed(ids)  # decoded afresh: the cache at the save again
        np.testing.assert_array_equal(a.decoder.kv_read(len(ids)), want)
        for tok in (42, 7, 1000):
            assert np.array_equal(bits(a.session.step(tok)), bits(b.session.step(tok)))


def test_reopening_decodes_only_what_is_new_and_answers_as_uncached(engines, conversation):
    a, b = engines
    b.kv_store = conversation["store"]
    b.session.reset()
    chat, warm = reply(b, conversation["history"], SECOND)
    cold = conversation["cold"]
    assert warm.text == cold.text and warm.ids == cold.ids
    new = cold.stats.prompt_tokens - len(conversation["saved_tokens"])
    assert warm.stats.prompt_tokens_evaluated == new
    assert cold.stats.prompt_tokens_evaluated == cold.stats.prompt_tokens


def _fields(raw: bytes):
    magic, version, hlen = struct.unpack_from("<8sII", raw)
    header = json.loads(raw[16 : 16 + hlen])
    return magic, version, header, raw[16 + hlen : -32]


def _rebuild(magic, version, header, body) -> bytes:
    h = json.dumps(header, sort_keys=True).encode()
    out = struct.pack("<8sII", magic, version, len(h)) + h + body
    return out + hashlib.sha256(out).digest()


def _edit_header(**changes):
    def f(raw):
        magic, version, header, body = _fields(raw)
        header.update(changes)
        return _rebuild(magic, version, header, body)

    return f


def _flip(where):
    def f(raw):
        b = bytearray(raw)
        _, _, header, _ = _fields(raw)
        hlen = struct.unpack_from("<I", raw, 12)[0]
        at = {"header": 16 + hlen // 2, "tokens": 16 + hlen + 5, "image": len(raw) - 32 - 1000, "digest": len(raw) - 3}[
            where
        ]
        b[at] ^= 0x10
        return bytes(b)

    return f


def _bad_tokens(raw):
    magic, version, header, body = _fields(raw)
    body = bytearray(body)
    n = header["n_tokens"]
    body[4 * (n - 1) : 4 * n] = struct.pack("<i", 10**8)  # the last: the rest still matches
    return _rebuild(magic, version, header, bytes(body))


DAMAGE = {
    "empty": lambda raw: b"",
    "truncated_in_header": lambda raw: raw[:40],
    "truncated_in_tokens": lambda raw: raw[: 16 + struct.unpack_from("<I", raw, 12)[0] + 8],
    "truncated_in_image": lambda raw: raw[: len(raw) // 2],
    "truncated_last_byte": lambda raw: raw[:-1],
    "one_byte_more": lambda raw: raw + b"\0",
    "flipped_header": _flip("header"),
    "flipped_tokens": _flip("tokens"),
    "flipped_image": _flip("image"),
    "flipped_digest": _flip("digest"),
    "other_model": _edit_header(model="sha256:" + "ab" * 32),
    "other_engine": _edit_header(engine="0.0.1/old"),
    "other_kv_type": lambda raw: _edit_header(signature={**_fields(raw)[2]["signature"], "kv_type": "q8_0"})(raw),
    "image_size_lie": lambda raw: _edit_header(image_bytes=_fields(raw)[2]["image_bytes"] - 64)(raw),
    "future_version": lambda raw: _rebuild(b"LLKVSAVE", FORMAT_VERSION + 1, *_fields(raw)[2:]),
    # version 1 held the q8_0 cache unrotated: read now, its keys would give wrong scores
    "older_version": lambda raw: _rebuild(b"LLKVSAVE", FORMAT_VERSION - 1, *_fields(raw)[2:]),
    "not_our_magic": lambda raw: _rebuild(b"GGUF\0\0\0\0", FORMAT_VERSION, *_fields(raw)[2:]),
    "tokens_outside_vocab": _bad_tokens,
    "huge_token_count": _edit_header(n_tokens=10**9),
}


# every case answers end to end in the default run for these; the rest check the restore step
# (nothing loaded, a log line) by default and answer end to end with -m slow
ANSWERED = {"truncated_in_image", "flipped_image", "other_model", "future_version", "symlink_elsewhere", "directory"}
CASES = (
    [pytest.param(d, True, id=f"{d}-answer") for d in sorted(ANSWERED)]
    + [pytest.param(d, False, id=d) for d in sorted(DAMAGE) + ["symlink_elsewhere", "directory"]]
    + [pytest.param(d, True, id=f"{d}-answer", marks=pytest.mark.slow) for d in sorted(DAMAGE) if d not in ANSWERED]
)


@pytest.mark.parametrize("damage,answer", CASES)
def test_hostile_state_files_are_ignored_and_the_answer_equals_the_uncached_one(
    engines, conversation, damage, answer, tmp_path, caplog
):
    a, b = engines
    path, good = conversation["path"], conversation["good"]
    path.unlink()
    if damage == "symlink_elsewhere":
        elsewhere = tmp_path / "elsewhere.llkv"
        elsewhere.write_bytes(good)  # even a valid state is not read through a link
        os.symlink(elsewhere, path)
    elif damage == "directory":
        path.mkdir()
    else:
        path.write_bytes(DAMAGE[damage](good))
    b.kv_store = conversation["store"]
    b.session.reset()
    try:
        with caplog.at_level(logging.INFO, logger="app.engine"):
            if answer:
                chat, got = reply(b, conversation["history"], SECOND)
                assert got.stats.prompt_tokens_evaluated == got.stats.prompt_tokens  # none restored
                assert got.text == conversation["cold"].text and got.ids == conversation["cold"].ids
            else:
                chat = Chat(b, system=SYSTEM)
                chat.messages = [dict(m) for m in conversation["history"]]
                ids = b.chat_prompt(
                    [{"role": "system", "content": SYSTEM}] + chat.messages + [{"role": "user", "content": SECOND}]
                )
                assert b.restore_state(conversation["key"], ids) == 0 and b.session.n_past == 0
        assert any("ignored" in r.getMessage() for r in caplog.records), caplog.text
        if damage == "directory" and answer:  # saving over it fails cleanly, with a log line
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="app.engine.kvstore"):
                assert chat.save_state() is False
            assert any("not saved" in r.getMessage() for r in caplog.records)
    finally:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            path.rmdir()
        path.write_bytes(good)


def test_the_budget_evicts_the_least_recently_used(tmp_path):
    store = KVStore(tmp_path)
    sig = {"kv_type": "f16"}
    image = np.arange(1000, dtype=np.uint8)
    size = store.save("m", "a", sig, [1, 2, 3], image).stat().st_size
    store.budget_bytes = 3 * size + size // 2  # room for three states
    for i, key in enumerate(["a", "b", "c"]):
        assert store.save("m", key, sig, [1, 2, 3], image) is not None or key == "a"
        os.utime(store.path_for("m", key), (1000 + i, 1000 + i))
    assert store.load("m", "a", sig, 100) is not None  # "a" is now the most recent
    assert store.save("m", "d", sig, [1, 2, 3, 4], image) is not None
    left = {k for k in "abcd" if store.path_for("m", k).exists()}
    assert left == {"a", "c", "d"}
    assert store.save("m", "big", sig, [1], np.zeros(5 * size, np.uint8)) is None  # over the budget
    assert store.peek("m", "c", sig, 2) is None  # 3 tokens do not fit n_ctx 2


def test_model_identity_is_the_library_hash_or_a_sampled_hash(tmp_path):
    lib = tmp_path / ("ab" * 32 + ".gguf")
    lib.write_bytes(b"x" * 10)
    assert model_identity(lib) == "sha256:" + "ab" * 32
    one, two = tmp_path / "one.gguf", tmp_path / "two.gguf"
    data = random.Random(3).randbytes(3 << 20)
    one.write_bytes(data)
    two.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))  # differs in the last byte only
    assert model_identity(one).startswith("sampled:")
    assert model_identity(one) != model_identity(two)


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGKILL"), reason="needs SIGKILL (POSIX)")
def test_sigkill_while_saving_leaves_the_old_state_or_the_new_one(tmp_path):
    """A writer killed at random moments: the state file then loads (checksum and all) as the last
    state saved or the one in flight, never as anything half-written."""
    import random
    import signal
    import subprocess
    import sys
    import threading
    import time
    from pathlib import Path

    from tests.engine.kv_crash_child import KEY, MODEL, SIG, image, tokens

    repo = Path(__file__).resolve().parents[2]
    rnd = random.Random(17)
    store = KVStore(tmp_path)
    path = store.path_for(MODEL, KEY)
    previous, runs_that_saved = None, 0
    for run in range(8):
        start = 1000 * (run + 1)
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.engine.kv_crash_child", str(tmp_path), str(start)],
            cwd=repo,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        lines: list[str] = []
        ready = threading.Event()

        def reader():
            for line in proc.stdout:
                lines.append(line.strip())
                ready.set()

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        assert ready.wait(60), "writer never started"
        time.sleep(rnd.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        t.join(30)
        saved = [int(x.split()[1]) for x in lines if x.startswith("saved ")]
        # the last state saved, or the one being written when the kill came
        allowed = {saved[-1], saved[-1] + 1} if saved else {previous, start + 1}
        runs_that_saved += bool(saved)
        got = store.load(MODEL, KEY, SIG, 100)
        if got is None:
            assert None in allowed and not path.exists(), (lines, previous)
            continue
        toks, img = got
        n = toks[0]
        assert n in allowed, (n, allowed)
        assert toks == tokens(n)
        assert np.array_equal(img, image(n))
        previous = n
    assert runs_that_saved >= 4  # most runs were killed after saving something
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".llkv" and p != path]
