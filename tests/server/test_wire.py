"""The OpenAI wire format without a server: request checks (each bad field a 400 with an
OpenAI-style error object) and response objects checked against the `openai` package's types."""

from __future__ import annotations

import pytest

from app.engine.generate import Finished
from app.engine.stats import GenerationStats
from app.server import openai_wire as wire

OK = {"messages": [{"role": "user", "content": "hi"}]}


def chat(**extra):
    return wire.parse_chat(dict(OK, **extra))


def test_a_plain_request_takes_the_engine_defaults_for_what_it_leaves_out():
    from app.engine.sampler import SamplerSettings

    spec = chat()
    assert spec.messages == ({"role": "user", "content": "hi"},)
    assert spec.sampler == SamplerSettings()  # the same defaults as `llambda generate`
    assert spec.max_tokens is None and spec.stop == () and not spec.stream


def test_fields_map_to_the_sampler_and_the_request():
    spec = chat(
        temperature=0.3,
        top_p=0.5,
        seed=-1,
        presence_penalty=0.5,
        frequency_penalty=-0.5,
        max_tokens=7,
        stop="END",
        stream=True,
        stream_options={"include_usage": True},
        top_k=5,
        min_p=0.1,
    )
    s = spec.sampler
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (0.3, 0.5, 5, 0.1)
    assert (s.presence_penalty, s.frequency_penalty, s.seed) == (0.5, -0.5, 2**64 - 1)
    assert spec.max_tokens == 7 and spec.stop == ("END",) and spec.stream and spec.include_usage
    assert chat(max_completion_tokens=3, max_tokens=9).max_tokens == 3


def test_message_content_parts_and_roles():
    spec = wire.parse_chat(
        {
            "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": None},
            ]
        }
    )
    assert [m["role"] for m in spec.messages] == ["system", "user", "assistant"]
    assert spec.messages[1]["content"] == "ab" and spec.messages[2]["content"] == ""


BAD_CHAT = [
    ([], "JSON object"),
    ({"messages": "hi"}, "'messages' must be a list"),
    ({"messages": []}, "'messages' is empty"),
    ({}, "'messages' must be a list"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "role 'wizard' is not supported"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "role 'tool' is not supported"),
    ({"messages": [{"content": "x"}]}, "role must be a string"),
    ({"messages": ["hi"]}, "messages[0] must be an object"),
    ({"messages": [{"role": "user"}]}, "content is missing"),
    ({"messages": [{"role": "user", "content": 5}]}, "must be a string or a list of text parts"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "only text parts"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "needs a system or user message"),
    (dict(OK, n=2), "'n' must be 1"),
    (dict(OK, n="1"), "'n' must be an integer"),
    (dict(OK, temperature="hot"), "'temperature' must be a number"),
    (dict(OK, temperature=3), "between 0 and 2"),
    (dict(OK, temperature=float("nan")), "'temperature' must be a number"),
    (dict(OK, top_p=True), "'top_p' must be a number"),
    (dict(OK, max_tokens=-1), "'max_tokens' must be between 1"),
    (dict(OK, max_tokens=0), "'max_tokens' must be between 1"),
    (dict(OK, max_tokens=1.5), "'max_tokens' must be an integer"),
    (dict(OK, max_completion_tokens=True), "must be an integer"),
    (dict(OK, seed="x"), "'seed' must be an integer"),
    (dict(OK, stop=["a", "b", "c", "d", "e"]), "at most 4"),
    (dict(OK, stop=[1]), "'stop' must be a string or a list of strings"),
    (dict(OK, stream="yes"), "'stream' must be true or false"),
    (dict(OK, stream_options=[]), "'stream_options' must be an object"),
    (dict(OK, logprobs=True), "logprobs are not supported"),
    (dict(OK, tools=[{"type": "function"}]), "'tools' is not supported"),
    (dict(OK, response_format={"type": "json_object"}), "'response_format'"),
    (dict(OK, model=3), "'model' must be a string"),
]


@pytest.mark.parametrize("body,says", BAD_CHAT)
def test_bad_chat_requests_are_400_with_an_openai_error_object(body, says):
    with pytest.raises(wire.WireError) as e:
        wire.parse_chat(body)
    assert e.value.status == 400
    assert says in str(e.value)
    err = e.value.body()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "body,says",
    [
        ({"prompt": ""}, "'prompt' is empty"),
        ({"prompt": 5}, "'prompt' must be a non-empty string"),
        ({}, "'prompt' must be a non-empty string"),
        ({"prompt": ["a", "b"]}, "batches are not supported"),
        ({"prompt": "x", "echo": True}, "'echo'"),
        ({"prompt": "x", "suffix": "y"}, "'suffix'"),
        ({"prompt": "x", "best_of": 3}, "'best_of'"),
        ({"prompt": "x", "logprobs": 2}, "logprobs"),
    ],
)
def test_bad_completion_requests(body, says):
    with pytest.raises(wire.WireError) as e:
        wire.parse_completion(body)
    assert says in str(e.value)


def test_completion_prompts():
    assert wire.parse_completion({"prompt": "Once"}).prompt == "Once"
    assert wire.parse_completion({"prompt": ["Once"]}).prompt == "Once"
    assert wire.parse_completion({"prompt": [1, 2, 3]}).prompt == (1, 2, 3)


def _finished(reason="eog"):
    st = GenerationStats(prompt_tokens=5, prompt_tokens_evaluated=2, generated_tokens=3, prompt_s=0.1, generation_s=0.2)
    return Finished(reason, "Hello!", (1, 2, 3), (9, 9, 9, 9, 9), st)


def test_finish_reasons():
    assert [wire.finish_reason(_finished(r)) for r in ("eog", "stop_string", "length", "context_full")] == [
        "stop",
        "stop",
        "length",
        "length",
    ]


def test_responses_parse_as_the_openai_package_types():
    from openai.types import Completion, CompletionUsage
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    fin = _finished()
    c = ChatCompletion.model_validate(wire.chat_response("chatcmpl-1", "m", 1, fin))
    assert c.choices[0].message.content == "Hello!" and c.choices[0].finish_reason == "stop"
    assert c.usage == CompletionUsage.model_validate(
        {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8, "prompt_tokens_details": {"cached_tokens": 3}}
    )
    assert c.model_extra["timings"]["generated_tokens"] == 3
    ch = ChatCompletionChunk.model_validate(wire.chat_chunk("chatcmpl-1", "m", 1, {"content": "He"}))
    assert ch.choices[0].delta.content == "He"
    last = ChatCompletionChunk.model_validate(wire.chat_chunk("chatcmpl-1", "m", 1, None, usage_=wire.usage(fin)))
    assert last.choices == [] and last.usage.total_tokens == 8
    t = Completion.model_validate(wire.completion_response("cmpl-1", "m", 1, fin))
    assert t.choices[0].text == "Hello!"
    # every field we send is one the package knows, but for our documented extra
    known = set(ChatCompletion.model_fields) | {"timings"}
    assert set(wire.chat_response("x", "m", 1, fin)) <= known
    assert set(wire.chat_response("x", "m", 1, fin)["choices"][0]) <= set(
        ChatCompletion.model_fields["choices"].annotation.__args__[0].model_fields
    )


def test_model_list_parses_as_openai_models():
    from openai.types import Model

    d = wire.model_list("SmolLM2", 123)
    assert d["object"] == "list" and Model.model_validate(d["data"][0]).id == "SmolLM2"
