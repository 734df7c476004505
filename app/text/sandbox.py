"""The sandbox chat templates run in: Jinja2's immutable sandbox, bounded in time and size.

`compile_template(source)` and `render_bounded(template, context, ...)` compile and render within
a deadline checked on every line of Python they run, and within size bounds: every value the
template handles is measured (references counted as often as they are repeated), operations that
could build more than they are given (repetition, join, replace, format, padding...) are checked
before they run, and what a render builds is counted; see "sizes" below. Anything that goes wrong
is a one-line `TemplateError`; nothing outside the sandbox runs. app.text.chat formats
conversations with it.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import re
import sys
import threading
import time
from datetime import datetime
from types import FrameType
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import jinja2
import jinja2.compiler
import jinja2.ext
import jinja2.filters
import jinja2.idtracking
import jinja2.lexer
import jinja2.nodes
import jinja2.optimizer
import jinja2.parser
import jinja2.runtime
import jinja2.visitor
from jinja2.runtime import Namespace
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.errors import TemplateError

_V = TypeVar("_V")


TIME_LIMIT_S = 2.0  # a render that takes longer is stopped
MAX_OUTPUT_CHARS = 4_000_000  # a prompt longer than this is refused
MAX_TEMPLATE_CHARS = 128 * 1024  # template source (the longest known real ones: about 20 KB)
MAX_VALUE_CHARS = 4_000_000  # any value a template builds or turns into text (see _size)
MAX_STEP_CHARS = 16_000_000  # what one operation may build before its result is checked
MAX_BUILT_CHARS = 32_000_000  # everything one render builds, added up
MAX_INT_ARG = 1_000_000  # widths, repeat counts and other sizes passed to calls
MAX_STRFTIME_CHARS = 1000  # a strftime_now format


class TemplateRaised(TemplateError):
    """The template itself rejected the conversation (raise_exception)."""


class _Raised(Exception):
    """A template called raise_exception(message)."""


class _Timeout(BaseException):  # not swallowed by an `except Exception` on its way out
    pass


def short_reason(text: object, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unsafe(message: str) -> jinja2.sandbox.SecurityError:
    return jinja2.sandbox.SecurityError(message)


# ---- sizes ---------------------------------------------------------------------------------------
#
# Every value a template handles has a size: about what it costs as text (str() of it) and in
# memory, counting a value as often as it is referenced, so that ['x' * 4000] * 1000000 is as big
# as the 4-billion-character string it would print. A render is bounded by sizes checked before
# and after each operation the sandbox sees (binary operators, calls, filters, `~`, `{{ }}`,
# captured blocks and macro bodies): no value over MAX_VALUE_CHARS, no operation that could build
# more than MAX_STEP_CHARS, no more than MAX_BUILT_CHARS built in all (what a render keeps is part
# of what it built), no output past MAX_OUTPUT_CHARS; and by a deadline checked on every line of
# Python it runs.

_ITEM = 8  # each element of a container (a pointer, a separator)


_MEMO_MIN = 16  # containers this long have their size remembered for the render


def _size(value: object, limit: int = MAX_VALUE_CHARS) -> int:
    """The size of `value` (see above), or a number past `limit` once it is known to be bigger."""
    if type(value) is str:
        return len(value)
    memo = getattr(_render_state, "sizes", None)
    stack: list[Any] = [value]  # what is left to measure: anything a template holds
    total, steps = 0, 0
    while stack:
        steps += 1
        if not steps & 0xFFFF:
            _check_clock()
        v = stack.pop()
        if isinstance(v, (str, bytes, bytearray)):
            total += len(v)
        elif memo is not None and type(v) in (list, tuple, dict) and len(v) >= _MEMO_MIN:
            # Lists, tuples and dicts cannot change during a render (the sandbox is immutable and
            # the caller's are not touched): a long one's size is measured once. The memo keeps
            # the value itself, so its id is not reused for another.
            known = memo.get(id(v))
            if known is None:
                memo[id(v)] = (v, None)
                memo[id(v)] = known = (v, _measure(v))
            elif known[1] is None:  # met again inside itself: a cycle
                return limit + 1
            total += known[1]
        elif isinstance(v, (list, tuple, set, frozenset)):
            total += 2 + _ITEM * len(v)
            if total <= limit:
                stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 2 * _ITEM * len(v)
            if total <= limit:
                stack.extend(v.keys())
                stack.extend(v.values())
        elif isinstance(v, Namespace):
            attrs = v._Namespace__attrs  # the name-mangled private dict: what it holds is what it costs
            total += 16 + 2 * _ITEM * len(attrs)
            if total <= limit:
                stack.extend(attrs.values())
        elif isinstance(v, bool) or v is None:
            total += 5
        elif isinstance(v, int):
            total += _ITEM + v.bit_length() // 3
        else:  # floats, ranges, generators, macros, loops: short
            total += 24
        if total > limit:
            return total
    return total


def _check_clock() -> None:
    """The render's deadline, for loops here that are not traced line by line."""
    deadline = getattr(_render_state, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise _Timeout()


def _measure(container: list | tuple | dict) -> int:
    """_size of a long list, tuple or dict, up to the largest limit any check uses (past it, the
    number says only "too big for anything")."""
    limit = MAX_STEP_CHARS
    parts: Iterator[object]
    if isinstance(container, dict):
        total = 2 + 2 * _ITEM * len(container)
        parts = itertools.chain(container.keys(), container.values())
    else:
        total = 2 + _ITEM * len(container)
        parts = iter(container)
    for x in parts:
        if total > limit:
            break
        total += _size(x, limit - total)
    return min(total, limit + 1)


def _check_size(value: object, limit: int = MAX_VALUE_CHARS) -> int:
    n = _size(value, limit)
    if n > limit:
        raise _unsafe("value too large")
    return n


def _check_inputs(*values: object) -> None:
    """What an operation works on, together, is at most one value's worth."""
    _check_size(values)


def _check_step(bound: int) -> None:
    if bound > MAX_STEP_CHARS:
        raise _unsafe(f"an operation would build about {bound} characters")


_render_state = threading.local()  # the running render's deadline, what it built, sizes measured


def _shallow(value: object) -> int:
    """The memory a new value takes itself (its elements, when new, were counted as built)."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return 2 + _ITEM * len(value)
    if isinstance(value, dict):
        return 2 + 2 * _ITEM * len(value)
    return 24


def _built(value: _V) -> _V:
    """A value the template just built: checked, and added to the render's count."""
    _check_size(value)
    count = getattr(_render_state, "built", None)
    if count is not None:
        count += _shallow(value)
        _render_state.built = count
        if count > MAX_BUILT_CHARS:
            raise _unsafe(f"the template built more than {MAX_BUILT_CHARS} characters in all")
    return value


def _check_size_args(args: Iterable[object], kwargs: Mapping[str, object]) -> None:
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INT_ARG:
            raise _unsafe(f"number {v} is too large for this call")


_DIGIT_RUNS = {k: re.compile(r"\d{%d}" % k) for k in range(1, 8)}
# ASCII digits to "9" and every other byte to " ": a run of k nines is a run of k digits
_ASCII_DIGITS = bytes(57 if 48 <= b <= 57 else 32 for b in range(256))
MAX_INT_BITS = 1_000_000


def _longest_digit_run(fmt: str) -> int:
    """The longest run of decimal digits in `fmt`, capped at 7 (a width of a million or more).
    An ASCII string is scanned as bytes (a regex search over a few MB of "{0}" fields takes tens of
    milliseconds per width tried); str.format also takes other scripts' digits, found by regex."""
    if fmt.isascii():
        nines = fmt.encode("ascii").translate(_ASCII_DIGITS)
        return next((k for k in range(7, 0, -1) if b"9" * k in nines), 0)
    return next((k for k in range(7, 0, -1) if _DIGIT_RUNS[k].search(fmt)), 0)


def _format_width(fmt: str) -> int:
    """The widest number in a format string (a width, a precision or a field's index: a bound on
    the padding either way); one of a million or more is refused."""
    run = _longest_digit_run(fmt)
    if run >= 7:
        raise _unsafe("format width too large")
    return 10**run - 1


def _check_format(fmt: object) -> None:
    """Refuse printf/format strings with widths or precisions of a million or more."""
    if isinstance(fmt, str):
        _format_width(fmt)


def _format_bound(fmt: str, fields: int, values: Iterable[object]) -> int:
    """At most what a format string with `fields` fields makes of `values`: each field is one
    of them (any, as often as the string names it), padded to the widest number in it."""
    widest = _format_width(fmt)
    biggest = max((_check_size(v) for v in values), default=0)
    return len(fmt) + fields * (biggest + widest)


def _printf_values(right: object) -> list:
    if isinstance(right, tuple):
        return list(right)
    if isinstance(right, dict):
        return list(right.values())
    return [right]


def _check_result(value: object) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise _unsafe("value too large")
    _built(value)


class _BoundedNamespace(Namespace):
    """namespace() whose attributes are values like any other: checked and counted."""

    def __setitem__(self, name: str, value: Any) -> None:
        _check_size(value)
        super().__setitem__(name, value)
        _check_size(self)


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (used by some templates to mark assistant text)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _str_method_bound(name: str, s: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list | None:
    """For str methods that can build more than they are given: check what they could build.
    Returns the arguments to call with (join's iterable made a list), or None: as they are."""
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        old, new = args[0], args[1]
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        hits = len(s) + 1 if old == "" else s.count(old)
        if isinstance(count, int) and count >= 0:
            hits = min(hits, count)
        _check_step(len(s) + hits * max(0, len(new) - len(old)))
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            _check_step(len(s) + s.count("\t") * max(size, 0))
    elif name == "join" and len(args) == 1:
        items = list(args[0])
        _check_step(_size(items, MAX_STEP_CHARS) + len(s) * max(len(items) - 1, 0))
        return [items]
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        _check_step(len(s) * max(longest, 1))
    elif name in ("format", "format_map"):
        values = list(args) + list(kwargs.values())
        if name == "format_map" and args and isinstance(args[0], dict):
            values = list(args[0].values())
        _check_step(_format_bound(s, s.count("{"), values))
    elif name in _SIZED_METHODS:
        _check_size_args(args, kwargs)
    return None


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**", "%", "+"])

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**":
            if isinstance(right, int) and (
                abs(right) > 4096 or (isinstance(left, int) and left.bit_length() * abs(right) > MAX_INT_BITS)
            ):
                raise _unsafe("exponent too large")
        elif operator == "*":
            for a, b in ((left, right), (right, left)):
                if isinstance(a, (str, list, tuple)) and isinstance(b, int) and not isinstance(b, bool):
                    if max(b, 0) > MAX_VALUE_CHARS or _size(a, MAX_VALUE_CHARS) * max(b, 0) > MAX_VALUE_CHARS:
                        raise _unsafe("repetition too large")
        elif operator == "%" and isinstance(left, str):
            if "*" in left:  # widths taken from the values
                _check_size_args(_printf_values(right), {})
            _check_step(_format_bound(left, left.count("%"), _printf_values(right)))
        elif type(left) is str and type(right) is str:
            if len(left) + len(right) > MAX_VALUE_CHARS:
                raise _unsafe("value too large")
        else:
            _check_inputs(left, right)
        result = super().call_binop(context, operator, left, right)
        _check_result(result)
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, str) and attribute in ("format", "format_map"):
            _check_format(obj)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, str) and argument in ("format", "format_map"):
            _check_format(obj)
        result = super().getitem(obj, argument)
        if isinstance(argument, slice):  # a slice is a new value
            _check_result(result)
        return result

    def call(self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        target = getattr(__obj, "__wrapped__", __obj)  # str.format comes wrapped by the sandbox
        owner = getattr(target, "__self__", None)
        _check_inputs(owner if isinstance(owner, (str, list, tuple, dict)) else None, args, kwargs)
        if isinstance(owner, str):
            replaced = _str_method_bound(getattr(target, "__name__", ""), owner, args, kwargs)
            if replaced is not None:
                args = tuple(replaced)
        result = super().call(__context, __obj, *args, **kwargs)
        _check_result(result)
        return result

    @staticmethod
    def concat(pieces: Iterable[str]) -> str:
        """Captured blocks ({% set %}...{% endset %}, {% filter %}) and macro bodies."""
        pieces = list(pieces)
        _check_step(sum(len(p) for p in pieces))
        return _built("".join(pieces))

    def checked_str_join(self, values: Sequence[object]) -> str:
        """The `~` operator."""
        _check_inputs(values)
        return _built("".join(map(str, values)))


class _CodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja's code generator with `~` going through the sandbox's size checks."""

    @jinja2.compiler.optimizeconst
    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.checked_str_join((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


_Sandbox.code_generator_class = _CodeGenerator


# str methods whose numeric arguments are sizes of the string they build.
_SIZED_METHODS = frozenset(["center", "ljust", "rjust", "zfill"])

# Filters whose single steps (regular expressions over the whole text, in C) take long enough on a
# big text to overrun the deadline by seconds: they take only so much.
_SLOW_FILTERS = frozenset(["wordwrap", "urlize", "striptags"])
MAX_SLOW_FILTER_CHARS = 200_000

# Filters whose numeric arguments are sizes of what they build (widths, counts).
_SIZED_FILTERS = frozenset(["center", "indent", "wordwrap", "truncate", "batch", "slice"])


def _filter_bound(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], skip: int) -> None:
    """For filters that can build more than they are given: check what they could build."""
    value = args[skip - 1] if len(args) >= skip else None
    rest = list(args[skip:])

    def arg(i: int, key: str, default: Any = None) -> Any:
        return rest[i] if len(rest) > i else kwargs.get(key, default)

    text = value if isinstance(value, str) else None
    if name == "replace" and text is not None:
        old, new, count = arg(0, "old"), arg(1, "new"), arg(2, "count")
        if isinstance(old, str) and isinstance(new, str):
            _str_method_bound("replace", text, (old, new, -1 if count is None else count), {})
    elif name == "format" and text is not None:
        if "*" in text:  # widths taken from the values
            _check_size_args(rest, kwargs)
        _check_step(_format_bound(text, text.count("%"), rest + list(kwargs.values())))
    elif name == "indent" and text is not None:
        width = arg(0, "width", 4)
        w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        _check_step(len(text) + (text.count("\n") + 1) * max(w, 0))
    elif name in _SLOW_FILTERS and text is not None and len(text) > MAX_SLOW_FILTER_CHARS:
        raise _unsafe(f"{name} on {len(text)} characters (limit {MAX_SLOW_FILTER_CHARS})")
    elif name == "wordwrap" and text is not None:
        width, wrap = arg(0, "width", 79), arg(2, "wrapstring") or "\n"
        broken = len(text) // max(width, 1) if isinstance(width, int) else 0  # long words cut
        lines = len(text.split()) + text.count("\n") + 1 + broken
        _check_step(len(text) + lines * len(str(wrap)))
    elif name == "urlize" and text is not None:
        extra = sum(len(str(kwargs.get(k) or "")) for k in ("target", "rel")) + sum(len(str(v)) for v in rest[2:4] if v)
        _check_step(2 * len(text) + len(text.split()) * (64 + extra))
    elif name == "list" and text is not None:
        _check_step(len(text) * (1 + _ITEM))
    elif name in _SIZED_FILTERS:
        _check_size_args(rest, kwargs)


def _guard_filter(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    # The value a filter works on comes first (after the context or environment when the filter
    # asks for one); what it is given is checked, what it could build, and what it built.
    skip = 2 if getattr(f, "jinja_pass_arg", None) is not None else 1

    @functools.wraps(f)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check_inputs(args[skip - 1 :], kwargs)
        _filter_bound(name, args, kwargs, skip)
        if name == "join" and len(args) >= skip:  # a generator is measured before joining
            args = (*args[: skip - 1], list(args[skip - 1]), *args[skip:])
            sep = args[skip] if len(args) > skip else kwargs.get("d", "")
            _check_step(_size(args[skip - 1], MAX_STEP_CHARS) + len(str(sep)) * len(args[skip - 1]))
        result = f(*args, **kwargs)
        _check_result(result)
        return result

    return guarded


@jinja2.pass_environment
def _sum(
    environment: jinja2.Environment, values: Iterable[Any], attribute: str | int | None = None, start: Any = 0
) -> Any:
    """The `sum` filter, one addition at a time (adding lists is quadratic: each step is checked)."""
    if attribute is not None:
        values = map(jinja2.filters.make_attrgetter(environment, attribute), values)
    total = start
    for v in values:
        total = total + v
        _check_result(total)
    return total


def _finalize(value: _V) -> _V:
    """Each `{{ ... }}` before it becomes text."""
    _check_size(value)
    return value


def _indent_cost(value: object, limit: int) -> int:
    """The indentation json.dumps(value, indent=1) writes: each element at its depth."""
    total, stack = 0, [(value, 1)]
    while stack and total <= limit:
        v, depth = stack.pop()
        if isinstance(v, (list, tuple)):
            total += depth * len(v)
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, dict):
            total += depth * len(v)
            stack.extend((x, depth + 1) for x in v.values())
    return total


def _tojson(
    value: Any,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
) -> str:
    if indent is not None and (not isinstance(indent, int) or indent > 64):
        raise _unsafe("tojson indent too large")
    _check_step(6 * _check_size(value) + (indent or 0) * _indent_cost(value, MAX_STEP_CHARS))
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: object) -> None:
    raise _Raised(str(message))


def strftime_now_for(clock: datetime) -> Callable[[object], str]:
    def strftime_now(fmt: object) -> str:
        fmt = str(fmt)
        if len(fmt) > MAX_STRFTIME_CHARS:
            raise _unsafe("strftime_now format too long")
        return clock.strftime(fmt)

    return strftime_now


@functools.lru_cache(maxsize=1)
def _environment() -> _Sandbox:
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
        extensions=[jinja2.ext.loopcontrols, _GenerationTag],
        undefined=jinja2.Undefined,
        finalize=_finalize,
    )
    env.filters["sum"] = _sum
    env.filters["tojson"] = _tojson
    for name in list(env.filters):
        env.filters[name] = _guard_filter(name, env.filters[name])
    env.globals["raise_exception"] = _raise_exception
    env.globals["namespace"] = _BoundedNamespace
    return env


MAX_CODE_CHARS = 4_000_000  # Python source Jinja may generate from a template


@contextlib.contextmanager
def _bounded(time_limit: float) -> Iterator[None]:
    """Run the block with a deadline checked on every line of Python it runs (but see
    _QUICK_FILES), and with the render state (what was built, measured sizes) set up."""
    deadline = time.monotonic() + time_limit

    def tracer(frame: FrameType, event: str, arg: object) -> Callable | None:
        if time.monotonic() > deadline:
            raise _Timeout()
        code = frame.f_code
        return None if code.co_filename in _QUICK_FILES and code not in _LOOPING else tracer

    previous = sys.gettrace()
    _render_state.built, _render_state.sizes, _render_state.deadline = 0, {}, deadline
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)
        _render_state.built = _render_state.sizes = _render_state.deadline = None


@functools.lru_cache(maxsize=32)
def compile_template(source: str, time_limit: float | None = None) -> jinja2.Template:
    """The compiled template, or TemplateError (one line) if it does not compile, in time
    (`time_limit`, default TIME_LIMIT_S)."""
    time_limit = time_limit or TIME_LIMIT_S
    if not isinstance(source, str) or not source.strip():
        raise TemplateError("the chat template is empty")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"the chat template is {len(source)} characters long (limit {MAX_TEMPLATE_CHARS})")
    env = _environment()
    try:
        with _bounded(time_limit):
            code = env.compile(source, raw=True)  # parsed and turned into Python source
            if len(code) > MAX_CODE_CHARS:
                raise TemplateError(f"the chat template is too complex ({len(code)} characters of code)")
        return env.template_class.from_code(env, compile(code, "<template>", "exec"), env.make_globals(None))
    except TemplateError:
        raise
    except _Timeout:
        raise TemplateError(f"the chat template took more than {time_limit:g} s to compile; stopped") from None
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"the chat template does not compile: line {e.lineno}: {short_reason(e.message)}") from None
    except Exception as e:  # anything the compiler raises is a broken template
        raise TemplateError(f"the chat template does not compile: {short_reason(e)}") from None


# Code that runs no loop of the template's making: the deadline is checked as each of its
# functions starts, not on each of its lines (Jinja's compiler, whose work grows with the
# template's length, which is capped; its runtime and sandbox; the checks here, whose walks stop
# at their limits, looking at the clock now and then); everything else, the template's own code
# first, line by line.
_QUICK_FILES = frozenset(
    m.__file__
    for m in (
        jinja2.lexer,
        jinja2.parser,
        jinja2.compiler,
        jinja2.optimizer,
        jinja2.idtracking,
        jinja2.visitor,
        jinja2.nodes,
        jinja2.runtime,
        jinja2.sandbox,
        sys.modules[__name__],
    )
)
_LOOPING = frozenset(f.__code__ for f in (_sum, _indent_cost))


def _bounded_render(tmpl: jinja2.Template, context: dict, time_limit: float, max_chars: int) -> str:
    """Render within the bounds (see "sizes" above), the output cap included."""
    out, size = [], 0
    with _bounded(time_limit):
        for chunk in tmpl.generate(**context):
            size += len(chunk)
            if size > max_chars:
                raise TemplateError(f"the chat template's output passed {max_chars} characters; stopped")
            out.append(chunk)
    return "".join(out)


def render_bounded(source: str, context: dict, time_limit: float, max_chars: int) -> str:
    tmpl = compile_template(source, time_limit)
    try:
        return _bounded_render(tmpl, context, time_limit, max_chars)
    except TemplateError:
        raise
    except _Raised as e:
        raise TemplateRaised(f"the chat template refused the conversation: {short_reason(e)}") from None
    except _Timeout:
        raise TemplateError(f"the chat template ran for more than {time_limit:g} s; stopped") from None
    except jinja2.sandbox.SecurityError as e:
        raise TemplateError(f"the chat template did something unsafe: {short_reason(e)}") from None
    except RecursionError:
        raise TemplateError("the chat template recursed too deeply; stopped") from None
    except MemoryError:
        raise TemplateError("the chat template ran out of memory; stopped") from None
    except Exception as e:  # a template error of any kind is one line
        raise TemplateError(f"the chat template failed: {type(e).__name__}: {short_reason(e)}") from None
