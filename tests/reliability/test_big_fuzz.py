"""The big fuzz (issue #22, item 7), behind `slow`: 100,000 mutated GGUF headers and 10,000
mutated chat templates per run. The default run keeps the quick fuzz (tests/gguf/test_fuzz.py).

Every mutant comes from its own generator, `random.Random(f"{seed}/{i}")`, so any failure is
replayed alone: the seed is printed (and in every failure message); `LLAMBDA_FUZZ_SEED=S` sets
it, `LLAMBDA_FUZZ_ONLY=i` runs mutant i only.

    LLAMBDA_FUZZ_SEED=S LLAMBDA_FUZZ_ONLY=i python -m pytest -m slow tests/reliability/test_big_fuzz.py
"""

from __future__ import annotations

import os
import random
import resource
import time
import tracemalloc

import pytest

from app.errors import LlambdaError, ModelFormatError, TemplateError
from app.gguf import open_gguf
from app.model import support_verdict
from app.text import templates as T
from app.text.chat import render_chat
from tests.gguf.craft import small_valid
from tests.gguf.test_fuzz import mutate
from tests.synth import SPECIALS, TinySpec, write_tiny_model

pytestmark = pytest.mark.slow

N_HEADERS = 100_000
N_TEMPLATES = 10_000
HEADER_SECONDS = 1.0  # the quick fuzz's bound on one parse
TEMPLATE_LIMIT_S = 0.1  # the render deadline in this fuzz (the app's is 2 s)
TEMPLATE_OVERRUN_S = 0.5  # how far past it a render may stop (one C step; RELIABILITY.md)
RSS_GROWTH_BYTES = 512 << 20  # the whole template run, measured as the process's peak


def fuzz_seed() -> int:
    seed = int(os.environ.get("LLAMBDA_FUZZ_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"fuzz seed {seed}: replay with LLAMBDA_FUZZ_SEED={seed} (and LLAMBDA_FUZZ_ONLY=<mutant>)")
    return seed


def mutant_indices(n: int) -> range | list[int]:
    only = os.environ.get("LLAMBDA_FUZZ_ONLY")
    return [int(only)] if only else range(n)


# -- GGUF headers ----------------------------------------------------------------------------------


def parse(path, verdict: bool, where: str, traced: bool = True) -> tuple[str, int]:
    """("parsed" or "refused", bytes allocated at the peak beyond the file's own size, or 0 when
    not `traced`: tracing makes a parse 3 to 4 times slower)."""
    if traced:
        tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        with open_gguf(path) as f:
            if verdict:  # the inspect path too: a verdict or one of our errors
                try:
                    support_verdict(f)
                except LlambdaError as e:
                    assert "\n" not in str(e), f"{where}: {e!r}"
        outcome = "parsed"
    except ModelFormatError as e:
        assert "\n" not in str(e), f"{where}: {e!r}"
        outcome = "refused"
    finally:
        over = tracemalloc.get_traced_memory()[1] - base - path.stat().st_size if traced else 0
        tracemalloc.stop()
    return outcome, over


def test_100k_mutated_gguf_headers(tmp_path):
    seed = fuzz_seed()
    seeds = [small_valid()]
    for k, spec in enumerate(
        [
            TinySpec(n_layer=1, n_embd=32, n_ff=64),
            TinySpec(arch="qwen2", n_layer=1),
            TinySpec(arch="gemma3", n_layer=1, tied_output=True),
        ]
    ):
        try:
            seeds.append(write_tiny_model(tmp_path / f"seed{k}.gguf", spec, seed=k).read_bytes()[:8192])
        except Exception:  # an architecture the synthetic writer lacks: fewer seeds
            pass
    print(f"headers: {len(seeds)} valid seeds")
    path = tmp_path / "m.gguf"
    outcomes = {"parsed": 0, "refused": 0}
    slowest, peak_over, traced = 0.0, 0, 0
    for i in mutant_indices(N_HEADERS):
        rng = random.Random(f"{seed}/{i}")
        data = rng.choice(seeds)
        for _ in range(rng.choice((1, 1, 1, 2, 3))):  # mostly one mutation, some stacked
            data = mutate(rng, data, rng.choice(seeds)) if len(data) > 16 else data
        path.write_bytes(data)
        t = time.perf_counter()
        outcome, over = parse(path, i % 10 == 0, f"seed {seed} mutant {i}", traced=i % 4 == 0)
        slowest = max(slowest, time.perf_counter() - t)
        if over >= 256 * 1024:  # a first use of some code path imports modules: again
            outcome, over = parse(path, i % 10 == 0, f"seed {seed} mutant {i}")
        traced += i % 4 == 0
        outcomes[outcome] += 1
        peak_over = max(peak_over, over)
        assert over < 256 * 1024, f"seed {seed} mutant {i}: {over} bytes over the file's size allocated"
    print(
        f"headers: {outcomes}, slowest parse {1000 * slowest:.1f} ms, {traced} traced: "
        f"most allocated beyond the file {peak_over} bytes"
    )
    assert slowest < HEADER_SECONDS, f"seed {seed}: a parse took {slowest:.2f} s"


# -- chat templates --------------------------------------------------------------------------------

SEED_TEMPLATES = [T.CHATML, T.LLAMA2, T.LLAMA3, T.MISTRAL, T.MISTRAL_V3, T.GEMMA, T.PHI3, T.ZEPHYR]

CANARY = "llambda-fuzz-canary"  # a file no template may ever create

# Pieces a mutation inserts: Jinja syntax, the app's helpers, loops and sizes near the bounds,
# and every known way out of the sandbox (each aimed at creating the canary file).
FRAGMENTS = [
    "{% for m in messages %}",
    "{% endfor %}",
    "{% if add_generation_prompt %}",
    "{% endif %}",
    "{% else %}",
    "{{ ",
    " }}",
    "{%- ",
    " -%}",
    "{# ",
    " #}",
    "{% set x = ",
    "%}",
    "{% raw %}",
    "{% macro f(a) %}{{ f(a) }}{% endmacro %}{{ f(1) }}",
    "{% set ns = namespace(v='') %}",
    "{% for i in range(100000) %}{% set ns.v = ns.v ~ 'x' %}{% endfor %}",
    "{% for i in range(10**7) %}{% endfor %}",
    "{{ 'x' * 10**8 }}",
    "{{ ('x' * 4000) * 1000000 }}",
    "{{ messages * 100000 }}",
    "{{ lipsum(100000) }}",
    "{{ range(10**9) | list }}",
    "{{ (['x' * 4000] * 1000000) | join }}",
    "{{ 'a'.replace('', 'a' * 40000) }}",
    "{{ '%s' * 100000 % ('a',) }}",
    "{{ 'x' | indent(1000000) }}",
    "{{ 9 ** 9 ** 9 }}",
    "{{ messages[0]['content'] }}",
    "{{ message['role'] }}",
    "{{ messages | tojson(indent=1000000) }}",
    "{{ raise_exception('refused') }}",
    "{{ strftime_now('%Y' * 10000) }}",
    "{{ bos_token }}",
    "{{ eos_token }}",
    "{{ messages | length }}",
    "{{ loop.index }}",
    "{{ loop.cycle(1, 2) }}",
    "{{ cycler.__init__.__globals__.os.system('touch " + CANARY + "') }}",
    "{{ lipsum.__globals__['os'].system('touch " + CANARY + "') }}",
    "{{ self.__init__.__globals__.__builtins__.open('" + CANARY + "', 'w') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages | attr('__class__') | attr('__init__') | attr('__globals__') }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ '{0.__class__.__init__.__globals__}'.format(messages) }}",
    "{{ joiner.__init__.__globals__.os.popen('touch " + CANARY + "') }}",
    "{% set _ = messages.append({'role': 'x'}) %}",
    "{{ messages.pop() }}",
    "{% include 'x' %}",
    "{% import 'x' as y %}",
    "{% extends 'x' %}",
    "{{ x.y.z }}",
    "{{ undefined() }}",
    "{{ 1 / 0 }}",
    "{{ 'é✓🦙' * 3 }}",
    "\x00",
    "\udcff",
    "{{ '\\x00' }}",
    "{%",
    "}}",
    "{{",
    "%}",
]

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello! <|im_end|> {{ 7 * 7 }}"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "What is 2 + 2?"},
]


def mutate_template(rng: random.Random, source: str) -> str:
    s = source
    for _ in range(rng.choice((1, 1, 2, 3))):
        kind = rng.randrange(6)
        pos = rng.randrange(len(s) + 1)
        if kind == 0:  # insert a fragment
            s = s[:pos] + rng.choice(FRAGMENTS) + s[pos:]
        elif kind == 1:  # delete a span
            s = s[:pos] + s[pos + rng.randint(1, 40) :]
        elif kind == 2:  # replace a character
            s = s[:pos] + rng.choice("{}%#|~'\"()[]-+*/ \n") + s[pos + 1 :]
        elif kind == 3:  # splice with another template
            other = rng.choice(SEED_TEMPLATES)
            s = s[:pos] + other[rng.randrange(len(other)) :]
        elif kind == 4:  # duplicate a span (nests loops and blocks)
            a = rng.randrange(len(s) + 1)
            s = s[:pos] + s[a : a + rng.randint(1, 200)] + s[pos:]
        else:  # wrap the whole template in a loop
            s = "{% for _ in range(" + str(rng.choice((2, 50, 1000, 10**6))) + ") %}" + s + "{% endfor %}"
    return s


def test_10k_mutated_chat_templates(tmp_path, monkeypatch):
    seed = fuzz_seed()
    monkeypatch.chdir(tmp_path)  # where a sandbox escape would write
    outcomes = {"rendered": 0, "refused": 0, "timed out": 0}
    slowest, slowest_at = 0.0, None
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for i in mutant_indices(N_TEMPLATES):
        rng = random.Random(f"{seed}/{i}")
        source = mutate_template(rng, rng.choice(SEED_TEMPLATES))
        t = time.perf_counter()
        try:
            text = render_chat(
                source, CONVERSATION, bos_token="<s>", eos_token=SPECIALS[0], time_limit=TEMPLATE_LIMIT_S
            )
            assert isinstance(text, str)
            outcomes["rendered"] += 1
        except TemplateError as e:
            assert "\n" not in str(e), f"seed {seed} mutant {i}: {e!r}"
            outcomes["timed out" if "ran for more than" in str(e) else "refused"] += 1
        took = time.perf_counter() - t
        if took > slowest:
            slowest, slowest_at = took, i
        assert took < TEMPLATE_LIMIT_S * 2 + TEMPLATE_OVERRUN_S, (
            f"seed {seed} mutant {i}: {took:.2f} s (compile and render each have {TEMPLATE_LIMIT_S} s)"
        )
        assert not (tmp_path / CANARY).exists(), f"seed {seed} mutant {i}: the sandbox was escaped"
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    print(
        f"templates: {outcomes}, slowest {1000 * slowest:.0f} ms (mutant {slowest_at}), peak RSS grew {grew >> 20} MB"
    )
    assert grew < RSS_GROWTH_BYTES, f"seed {seed}: peak RSS grew {grew >> 20} MB"
    assert outcomes["rendered"] > 0 and outcomes["refused"] > 0, outcomes
