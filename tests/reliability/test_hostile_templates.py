"""Issue #22, item 6: chat templates built to hurt.

A GGUF file carries its chat template as Jinja source, run by `app.text.chat` in an immutable
sandbox. Templates that loop for ever, recurse, build enormous strings (directly, or by
repeating references and then joining, replacing, formatting, padding...) are stopped within the
render's deadline and size bounds, in one line; the model then uses its family's template (the
fallback of app/text/templates.py) and the window says so. The sandbox's refusal of Python
internals is tested with the other sandbox cases in tests/text/test_chat.py (HOSTILE).

Every render here runs with a 0.25 s deadline: the whole file takes a few seconds.
"""

from __future__ import annotations

import time
import tracemalloc
import warnings

import pytest

from app.errors import TemplateError
from app.text import chat
from app.text.chat import load_chat_template, render_chat
from tests.synth import write_tiny_spm_model

LIMIT_S = 0.25
MB = 1 << 20

# name: (template, what stops it). "time": the deadline; "size": a size bound (before the work).
HOSTILE = {
    # run for ever
    "nested loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "time"),
    "lipsum": ("{{ lipsum(100000) }}", "time"),
    "quadratic sum": ("{{ (range(99999)|map('string')|list)|sum(start='') }}", "time"),
    "sum of many lists": ("{% set one = [1] %}{{ ([one] * 3000000)|sum(start=[])|length }}", "size"),
    "long wordwrap": ("{{ ('a ' * 90000)|wordwrap(1) }}", "time"),
    "huge wordwrap": ("{{ ('a ' * 1900000)|wordwrap(1) }}", "size"),
    "deep tojson": (
        "{% set ns = namespace(x=1) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}"
        "{{ ns.x|tojson(indent=64) }}",
        "time",
    ),
    # recurse
    "endless recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed"),
    "recursive loop": ("{% for m in [[[[[[]]]]]] recursive %}{{ loop([m]) }}{% endfor %}", "recursed"),
    "recursion keeping copies": (
        "{% set s = 'x' * 3900000 %}"
        "{% macro f(t, n) %}{{ f(t ~ '', n - 1) if n else t|length }}{% endmacro %}"
        "{{ f(s, 500) }}",
        "size",
    ),
    # build 10^8 characters and more
    "10^8-character string": ("{{ 'x' * 100000000 }}", "size"),
    "10^8 by doubling": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
        "size",
    ),
    "joined references": ("{% set s = 'x' * 4000 %}{{ ([s] * 1000000)|join }}", "size"),
    "join separator": ("{% set s = 'x' * 3000000 %}{{ range(99999)|join(s) }}", "size"),
    "replace the empty string": ("{% set s = 'x' * 40000 %}{{ s.replace('', s) }}", "size"),
    "replace filter": ("{% set s = 'x' * 40000 %}{{ s|replace('x', s) }}", "size"),
    "expandtabs": ("{% set s = '\t' * 4000 %}{{ s.expandtabs(999999) }}", "size"),
    "format fields": ("{{ ('{0}' * 1000000).format('x' * 4000) }}", "size"),
    "printf fields": ("{{ ('%(a)s' * 100000) % {'a': 'x' * 4000} }}", "size"),
    "translate": ("{% set s = 'a' * 40000 %}{{ s.translate({97: s}) }}", "size"),
    "indent": ("{{ ('\n' * 3000000)|indent(999999) }}", "size"),
    "printed references": ("{% set s = 'x' * 3000000 %}{% set l = [" + "s," * 500 + "] %}{{ l }}", "size"),
    "concatenated references": ("{% set s = 'x' * 3000000 %}{% set l = [" + "s," * 500 + "] %}{{ l ~ '' }}", "size"),
    "captured block": (
        "{% set s = 'x' * 100000 %}{% set big %}{% for i in range(100000) %}{{ s }}{% endfor %}"
        "{% endset %}{{ big|length }}",
        "size",
    ),
    "kept values": (
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
        "{% set ns.l = ns.l + ['x' * 3999999] %}{% endfor %}{{ ns.l|length }}",
        "size",
    ),
    "fromkeys": ("{{ dict.fromkeys(range(99999), 'x' * 100000)|length }}", "size"),
    "list of characters": ("{{ ('\u20ac' * 3900000)|list|length }}", "size"),
    "strftime": ("{{ strftime_now('%c' * 1000000) }}", "size"),
    "huge power": ("{{ 7 ** 99999999 }}", "size"),
    "long source": ("{{ x }}" * 20000, "compile"),
}

# What the message says. A size bound is checked before the work it bounds, but on a slow or
# busy machine the deadline may come first (tracemalloc slows the renders here down).
EXPECTED = {
    "time": ("ran for more than",),
    "recursed": ("recursed too deeply",),
    "size": ("did something unsafe", "ran for more than", "took more than"),
    "compile": ("characters long",),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_template_is_stopped_in_time_and_memory(name):
    template, stopper = HOSTILE[name]
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(TemplateError) as e:
            render_chat(template, [{"role": "user", "content": "hi"}], time_limit=LIMIT_S)
        spent = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(e.value)
    assert any(words in message for words in EXPECTED[stopper]), message
    assert "\n" not in message and len(message) < 300
    assert spent < LIMIT_S + 0.5, spent  # the deadline, plus one check's walk at most
    assert peak < 200 * MB, peak / MB  # traced Python allocations during the render


def test_real_templates_still_render_within_the_bounds(smollm2_path):
    """The bounds cost ordinary templates nothing but time (about twice the unbounded render)."""
    from app.gguf import open_gguf
    from app.text.templates import FALLBACKS

    with open_gguf(smollm2_path) as f:
        smollm2 = f.metadata.string("tokenizer.chat_template")
    msgs = [{"role": "system", "content": "Be brief. " * 50}]
    msgs += [{"role": ("user", "assistant")[i % 2], "content": f"message {i} " * 100} for i in range(199)]
    for template in (smollm2, *FALLBACKS.values()):
        t0 = time.monotonic()
        out = render_chat(template, msgs)
        assert time.monotonic() - t0 < 1.0
        assert all(m["content"].strip() in out for m in msgs[1:])


def test_a_hostile_template_in_a_model_gives_way_to_the_family_template(tmp_path, monkeypatch):
    from app.gguf import open_gguf
    from app.text import load_tokenizer

    monkeypatch.setattr(chat, "TIME_LIMIT_S", LIMIT_S)
    path = write_tiny_spm_model(tmp_path / "m.gguf", chat_template=HOSTILE["nested loops"][0])
    t0 = time.monotonic()
    with open_gguf(path) as f, pytest.warns(UserWarning, match="ran for more than .* chatml chat format"):
        template = load_chat_template(f, load_tokenizer(f))
    assert time.monotonic() - t0 < 2 * LIMIT_S + 0.5  # compiled, tried once, given up
    assert template.fallback and template.family == "chatml"
    assert template.note == (
        f"the chat template ran for more than {LIMIT_S:g} s; stopped; using the chatml chat format instead"
    )
    assert (
        template.render([{"role": "user", "content": "Hi"}])
        == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_a_template_that_refuses_every_conversation_gives_way_too(tmp_path):
    from app.gguf import open_gguf
    from app.text import load_tokenizer

    path = write_tiny_spm_model(tmp_path / "m.gguf", chat_template="{{ raise_exception('no') }}")
    with open_gguf(path) as f, pytest.warns(UserWarning, match="refused the conversation: no"):
        assert load_chat_template(f, load_tokenizer(f)).fallback


# A template that is fine on a short conversation and runs for ever on a longer one.
LATE = (
    "{% if messages|length > 4 %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
    "{% endfor %}{% endif %}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
)


def test_a_template_that_fails_later_gives_way_during_the_session(tmp_path, monkeypatch):
    from app.engine.engine import Engine

    monkeypatch.setattr(chat, "TIME_LIMIT_S", LIMIT_S)
    path = write_tiny_spm_model(tmp_path / "m.gguf", chat_template=LATE)
    with Engine.load(path, n_ctx=128, n_threads=1) as eng:
        short = [{"role": "user", "content": "hi"}]
        eng.chat_prompt(short)
        assert not eng.chat_template.fallback
        with pytest.warns(UserWarning, match="ran for more than"):
            ids = eng.chat_prompt(
                [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}] * 2
                + [{"role": "user", "content": "again"}]
            )
        assert ids and eng.chat_template.fallback and "ran for more than" in eng.chat_template.note
        assert eng.chat_prompt(short)  # the rest of the session uses the fallback


# ---- the window (real engine, tiny model) ---------------------------------------------------------


def _window_with(qtbot, make_window, path):
    from tests.ui.conftest import drop_file

    w = make_window()
    w.state.put("import_mode", "in_place")
    w.state.put("sampling_defaults", {"temperature": 0.0, "max_tokens": 4, "seed": 1})
    assert drop_file(w.chat.viewport(), str(path))
    qtbot.waitUntil(lambda: not w.model_busy, timeout=60000)
    assert w.model_info is not None, w.errors
    return w


def _send(qtbot, w, text):
    from PySide6.QtCore import Qt

    w.input.setPlainText(text)
    qtbot.keyClick(w.input, Qt.Key_Return)
    qtbot.waitUntil(lambda: not w.generating, timeout=60000)


def test_the_window_says_the_template_is_not_used_and_chats(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setattr(chat, "TIME_LIMIT_S", LIMIT_S)
    path = write_tiny_spm_model(tmp_path / "hostile.gguf", chat_template=HOSTILE["joined references"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = _window_with(qtbot, make_window, path)
        assert w.notice.isVisible()
        assert w.notice.text().startswith(
            "This model's chat template cannot be used: the chat template did "
            "something unsafe: repetition too large; using the chatml chat format"
        )
        assert w.info_panel.values["Chat template"].text().startswith("not used: the chat template did")
        _send(qtbot, w, "Hi")
    reply = w.state.messages()[-1]
    assert reply.role == "assistant" and reply.status == "complete" and not w.errors


def test_the_window_says_so_when_the_template_gives_way_mid_session(qtbot, make_window, tmp_path, monkeypatch):
    monkeypatch.setattr(chat, "TIME_LIMIT_S", LIMIT_S)
    path = write_tiny_spm_model(tmp_path / "late.gguf", chat_template=LATE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = _window_with(qtbot, make_window, path)
        assert not w.notice.isVisible()
        for text in ("one", "two", "three"):  # the third turn has five messages
            _send(qtbot, w, text)
            assert w.state.messages()[-1].status == "complete", w.errors
    assert "This model's chat template cannot be used: the chat template ran for more than" in w.notice.text()
    assert w.info_panel.values["Chat template"].text().startswith("not used: the chat template ran")
    assert not w.errors
