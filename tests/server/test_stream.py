"""How a stream is cut into chunks: the pieces that are waiting when the event loop looks go out
as one chunk (their text joined: one event for the client to parse, not one per token), and no
piece ever waits for another. The first is shown on the stream itself with the events already
queued; the second through a real server and a fake engine that makes a burst of pieces, then
waits until the client has read all of it before it makes the next."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import openai

from app.engine.generate import Finished, GenerationStats, TextPiece
from app.server.app import ServerOptions, create_app
from app.server.openai_wire import parse_chat
from app.server.owner import EngineOwner, ForwardingOwner, Job
from tests.server.conftest import start_server


def test_the_pieces_waiting_together_are_one_chunk():
    async def chunks() -> list[bytes]:
        api = create_app(ForwardingOwner(lambda job: None), "m", ServerOptions()).api
        job = Job(lambda engine: None)
        for i, piece in enumerate(["Once", " upon", " a", " time"]):
            job.events.put_nowait(TextPiece(piece, i))
        job.events.put_nowait(TextPiece("", 4))  # a token whose text is still pending
        job.events.put_nowait(Finished("length", "Once upon a time", (0, 1, 2, 3, 4), (9,), GenerationStats()))
        spec = parse_chat({"messages": [{"role": "user", "content": "Go"}], "stream": True})
        return [c async for c in api._stream(job, None, "chatcmpl-1", 1, spec, True, {})]

    out = asyncio.run(chunks())
    events = [json.loads(e[6:]) for c in out for e in c.split(b"\n\n") if e.startswith(b"data: {")]
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "Once upon a time"}, {}]
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert out[-1] == b"data: [DONE]\n\n"


class ScriptedEngine:
    """Yields `bursts` of pieces, each burst's back to back; before the next burst it waits until
    `read(text)` says the client has seen everything so far. If that does not come within 10 s
    (a piece was held back), it ends the reply as "cancelled"."""

    path = "scripted.gguf"
    n_ctx = 64

    def __init__(self, bursts: list[list[str]]):
        self.bursts = bursts
        self._seen = ""
        self._cond = threading.Condition()

    def chat_prompt(self, messages):
        return [1, 2, 3]

    def raw_prompt(self, text):
        return [1, 2, 3]

    def cancel(self):
        pass

    def read(self, text: str) -> None:
        """From the client: this is all the text it has seen."""
        with self._cond:
            self._seen = text
            self._cond.notify_all()

    def generate(self, req):
        text, ids = "", []
        for burst in self.bursts:
            for piece in burst:
                text += piece
                ids.append(len(ids))
                yield TextPiece(piece, ids[-1])
            with self._cond:
                if not self._cond.wait_for(lambda: self._seen == text, 10):
                    yield Finished("cancelled", text, tuple(ids), tuple(req.prompt_ids))
                    return
        yield Finished("length", text, tuple(ids), tuple(req.prompt_ids))


def burst_ends(bursts: list[list[str]]) -> list[int]:
    ends, n = [], 0
    for b in bursts:
        n += len("".join(b))
        ends.append(n)
    return ends


def test_no_piece_waits_for_another():
    bursts = [["Once"], [" upon", " a", " time", ","], [" there"], [" was", " a"]]
    engine = ScriptedEngine(bursts)
    owner = EngineOwner(engine)
    served = start_server(owner, engine)
    try:
        client = openai.OpenAI(base_url=served.v1, api_key="x", max_retries=0, timeout=30)
        stream = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Go"}], stream=True)
        seen, ends = "", []
        for chunk in stream:
            for c in chunk.choices:
                if c.delta.content:
                    seen += c.delta.content
                    ends.append(len(seen))
                    engine.read(seen)  # lets the engine make its next burst once it has all
        assert owner.finished[-1].stop_reason == "length"  # the engine never waited in vain
        assert seen == "".join("".join(b) for b in bursts)
        assert set(burst_ends(bursts)) <= set(ends)  # no chunk spans two bursts

        # the same through /v1/completions, read with httpx
        texts = []
        with httpx.stream("POST", served.v1 + "/completions", json={"prompt": "Go", "stream": True}) as r:
            for ln in r.iter_lines():
                if ln.startswith("data: {"):
                    texts.append(json.loads(ln[6:])["choices"][0]["text"])
                    engine.read("".join(texts))
        assert owner.finished[-1].stop_reason == "length" and "".join(texts) == seen
    finally:
        served.stop()
        owner.close()
