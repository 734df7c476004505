"""The only Python module that talks to the compiled kernel library (`app._llk`, built by cffi).

Thin typed wrappers: validate -> allocate -> call (GIL released) -> check the status -> return
numpy arrays. C returns a status; this module raises `KernelError` (`KernelAborted` when a pool's
abort flag stopped the job). Not here: model logic, file parsing, the decoder loop.

  dispatch   isa_name(), isa_level(), best_isa_level(), isa_description(), describe(), version(),
             ISA_NAMES
  types      SUPPORTED_TYPES, TYPE_NAMES, block_size(), row_bytes(), act_row_bytes(),
             dequantize_row(), quantize_activations(), vec_dot(), random_weights()
  threads    ThreadPool (size, abort, clear_abort, busy_ns, chunks, jobs, waits), cpu_count_*()
  products   matvec(), matmul()
  decoder    rms_norm(), layer_norm(), softmax(), silu(), gelu(), gelu_erf(), swiglu(),
             geglu(), add(), mul(), RopeConfig + rope(), AttentionConfig + attention()
  measure    bench_kernels() + format_bench() (matrix x vector vs read bandwidth; what
             `llambda bench --kernels` prints), bench_matmul(), bench_in_cache(),
             read_bandwidth() (in app/kernels/bench.py); `python -m app.kernels --help`

Every per-row / product function takes `isa=None|"ref"|"avx2"|"avx512"` (None: the level in use,
which LLAMBDA_ISA=ref|avx2|avx512 can lower).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from app.errors import KernelError
from app.gguf.constants import TENSOR_TYPES

try:
    from app._llk import ffi, lib
except ImportError as exc:  # pragma: no cover - a broken install
    raise ImportError("the kernel library app._llk is not built; run `pip install -e .` in the source tree") from exc

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

CPointer = Any  # a cffi pointer (cdata): cffi has no type stubs

__all__ = [
    "ISA_NAMES",
    "SUPPORTED_TYPES",
    "TYPE_NAMES",
    "KernelAborted",
    "ThreadPool",
    "RopeConfig",
    "AttentionConfig",
    "isa_name",
    "isa_level",
    "best_isa_level",
    "version",
    "row_bytes",
    "act_row_bytes",
    "block_size",
    "dequantize_row",
    "quantize_activations",
    "vec_dot",
    "matvec",
    "matmul",
    "rms_norm",
    "layer_norm",
    "softmax",
    "silu",
    "gelu",
    "gelu_erf",
    "swiglu",
    "geglu",
    "add",
    "mul",
    "rope",
    "attention",
    "kv_blocked",
    "read_bandwidth",
    "int8_peak",
    "bench_kernels",
    "format_bench",
    "cpu_count_allowed",
    "cpu_count_physical",
    "describe",
    "isa_description",
    "random_weights",
    "bench_matmul",
    "format_bench_matmul",
    "bench_in_cache",
    "quantize_kv_q8_0",
    "dequantize_kv_q8_0",
]

ISA_NAMES = ("ref", "avx2", "avx512")  # index = level

# The tensor types the C library knows (its llk_type enum in kernels/llk.h: a block size for the
# id), named as in the one Python table of types, app.gguf.constants (tests/kernels/test_types.py
# holds the two together: ids, names, block sizes and bytes).
TYPE_NAMES = {t.id: t.name for t in TENSOR_TYPES.values() if lib.llk_type_block_size(t.id)}
SUPPORTED_TYPES = frozenset(t for t in range(64) if lib.llk_type_supported(t))

_STATUS = {  # llk_status (kernels/llk.h), by name
    lib.LLK_ERR_ARG: "bad argument",
    lib.LLK_ERR_TYPE: "unsupported tensor type",
    lib.LLK_ERR_NOMEM: "out of memory",
    lib.LLK_ERR_ABORTED: "aborted",
    lib.LLK_ERR_THREAD: "could not start a thread",
    lib.LLK_ERR_ISA: "instruction set not available on this CPU",
    lib.LLK_ERR_BUSY: "thread pool busy with another thread's job",
}


class KernelAborted(KernelError):
    """A job stopped because the pool's abort flag was set."""


def _check(status: int, what: str) -> None:
    if status:
        msg = f"{what}: {_STATUS.get(status, f'status {status}')}"
        raise (KernelAborted if status == lib.LLK_ERR_ABORTED else KernelError)(msg)


def _isa(isa: int | str | None) -> int:
    if isa is None:
        return -1
    if isinstance(isa, str):
        if isa not in ISA_NAMES:
            raise KernelError(f"unknown instruction-set level {isa!r}; expected one of {ISA_NAMES}")
        isa = ISA_NAMES.index(isa)
    if not -1 <= isa <= lib.llk_isa_best():
        raise KernelError(f"instruction-set level {isa} not available (best is {lib.llk_isa_best()})")
    return int(isa)


def _type(type_id: int) -> int:
    t = int(type_id)
    if t not in SUPPORTED_TYPES:
        raise KernelError(f"tensor type {type_id} is not supported by the kernel library")
    return t


# --- dispatch info ----------------------------------------------------------------------------


def isa_level() -> int:
    """The level in use: 0 ref, 1 avx2, 2 avx512 (lowered by LLAMBDA_ISA)."""
    return int(lib.llk_isa())


def best_isa_level() -> int:
    """The best level this CPU and build support."""
    return int(lib.llk_isa_best())


def isa_name(level: int | None = None) -> str:
    """'ref', 'avx2' (or 'avx2-vnni' with AVX-VNNI), 'avx512' or 'avx512-vnni': the level in use (or the one given)."""
    return ffi.string(lib.llk_isa_name(-1 if level is None else int(level))).decode()


def version() -> str:
    return ffi.string(lib.llk_version()).decode()


def isa_description() -> str:
    """Which kernels run: the instruction-set level, and a warning when it is the slow path
    (`llambda --version`, `llambda inspect`, the window's error details)."""
    name = isa_name()
    if isa_level() == 0:
        if best_isa_level() == 0:
            return f"{name} (this CPU has no AVX2: the portable kernels run, much slower)"
        return f"{name} (forced by LLAMBDA_ISA)"
    return name


def describe() -> str:
    """One line: library, level in use, best level, cores."""
    used, best = isa_level(), best_isa_level()
    note = "" if used == best else f" (forced by LLAMBDA_ISA; best {isa_name(best)})"
    slow = " - no AVX2: reference kernels, expect slow generation" if best == lib.LLK_ISA_REF else ""
    return (
        f"{version()}, kernels {isa_name()}{note}{slow}, "
        f"{cpu_count_physical()} physical cores of {cpu_count_allowed()} usable CPUs"
    )


def cpu_count_allowed() -> int:
    return int(lib.llk_cpu_count_allowed())


def cpu_count_physical() -> int:
    return int(lib.llk_cpu_count_physical())


# --- type traits and per-row kernels -----------------------------------------------------------


def block_size(type_id: int) -> int:
    return int(lib.llk_type_block_size(_type(type_id)))


def row_bytes(type_id: int, n: int) -> int:
    """Bytes of an n-element row of the type."""
    b = int(lib.llk_row_bytes(_type(type_id), int(n)))
    if b == 0 and n:
        raise KernelError(f"row of {n} elements is not a whole number of {TYPE_NAMES[type_id]} blocks")
    return b


def act_row_bytes(type_id: int, n: int) -> int:
    """Bytes of the quantized activations a row of the type is multiplied with."""
    b = int(lib.llk_act_row_bytes(_type(type_id), int(n)))
    if b == 0 and n:
        raise KernelError(f"row of {n} elements is not a whole number of {TYPE_NAMES[type_id]} blocks")
    return b


def _bytes_view(raw: ArrayLike, need: int, what: str) -> np.ndarray:
    arr = np.asarray(raw)
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    arr = arr.reshape(-1).view(np.uint8)
    if arr.nbytes < need:
        raise KernelError(f"{what}: {arr.nbytes} bytes given, {need} needed")
    return arr


def _f32(x: ArrayLike, what: str) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _fp(a: np.ndarray) -> CPointer:
    """float * to a contiguous float32 array (kept alive by the caller's reference)."""
    return ffi.from_buffer("float[]", a)


def dequantize_row(type_id: int, raw: ArrayLike, n: int, isa: int | str | None = None) -> np.ndarray:
    """float32[n]: the n values held by one row of `type_id` in raw (bytes, any alignment)."""
    t, n = _type(type_id), int(n)
    src = _bytes_view(raw, row_bytes(t, n), "dequantize_row")
    out = np.empty(n, dtype=np.float32)
    _check(
        lib.llk_dequantize_row(_isa(isa), t, ffi.from_buffer(src), ffi.from_buffer("float[]", out), n),
        f"dequantize_row({TYPE_NAMES[t]}, n={n})",
    )
    return out


def quantize_activations(type_id: int, x: ArrayLike, isa: int | str | None = None) -> np.ndarray:
    """uint8 bytes: x (float32[n]) in the activation format a row of `type_id` consumes."""
    t = _type(type_id)
    xf = _f32(x, "x").reshape(-1)
    n = xf.size
    out = np.empty(act_row_bytes(t, n), dtype=np.uint8)
    _check(
        lib.llk_quantize_act(_isa(isa), t, _fp(xf), ffi.from_buffer(out), n),
        f"quantize_activations({TYPE_NAMES[t]}, n={n})",
    )
    return out


def vec_dot(type_id: int, w_raw: ArrayLike, act: ArrayLike, n: int, isa: int | str | None = None) -> float:
    """dot(row of `type_id`, activations from quantize_activations) as a Python float."""
    t, n = _type(type_id), int(n)
    w = _bytes_view(w_raw, row_bytes(t, n), "vec_dot weights")
    a = _bytes_view(act, act_row_bytes(t, n), "vec_dot activations")
    out = ffi.new("float *")
    _check(
        lib.llk_vec_dot(_isa(isa), t, ffi.from_buffer(w), ffi.from_buffer(a), n, out),
        f"vec_dot({TYPE_NAMES[t]}, n={n})",
    )
    return float(out[0])


# --- thread pool --------------------------------------------------------------------------------


class ThreadPool:
    """A persistent pool of kernel threads (the caller is thread 0). Close it, or use `with`.

    n_threads <= 0 means one per physical core; never more than the CPUs this process may use.
    One thread drives a pool at a time; `abort()` may be called from any thread.
    """

    def __init__(self, n_threads: int = 0):
        out = ffi.new("llk_pool **")
        _check(lib.llk_pool_new(int(n_threads), out), f"ThreadPool({n_threads})")
        self._ptr = out[0]

    @property
    def ptr(self) -> CPointer:
        if self._ptr is None:
            raise KernelError("thread pool is closed")
        return self._ptr

    @property
    def size(self) -> int:
        return int(lib.llk_pool_size(self.ptr))

    def abort(self) -> None:
        """Stop running and later jobs at their next chunk (KernelAborted) until clear_abort()."""
        lib.llk_pool_abort(self.ptr)

    def clear_abort(self) -> None:
        lib.llk_pool_clear_abort(self.ptr)

    @property
    def aborted(self) -> bool:
        return bool(lib.llk_pool_aborted(self.ptr))

    def busy_ns(self) -> list[int]:
        """Nanoseconds each thread has spent inside jobs since the pool started."""
        return [int(lib.llk_pool_busy_ns(self.ptr, i)) for i in range(self.size)]

    def chunks(self) -> list[int]:
        """Work chunks each thread has done since the pool started."""
        return [int(lib.llk_pool_chunks(self.ptr, i)) for i in range(self.size)]

    @property
    def jobs(self) -> int:
        return int(lib.llk_pool_jobs(self.ptr))

    def waits(self) -> tuple[int, int]:
        """(ns, stalls) since the pool started: the time the driving thread spent waiting for
        chunks other threads had taken, and the jobs in which it waited more than 100 us (a
        thread the OS or the hypervisor stopped mid-chunk holds the whole job up)."""
        return int(lib.llk_pool_wait_ns(self.ptr)), int(lib.llk_pool_stalls(self.ptr))

    @property
    def width(self) -> int:
        """Threads taking part in jobs now: fewer than `size` while other processes hold the
        cores (the pool narrows when its jobs keep waiting on threads the OS does not run)."""
        return int(lib.llk_pool_width(self.ptr))

    def set_adaptive(self, on: bool) -> None:
        """False: keep every thread in every job, whatever the waits."""
        lib.llk_pool_set_adaptive(self.ptr, int(bool(on)))

    def set_spin(self, microseconds: int) -> None:
        """How long an idle worker spins before it sleeps."""
        lib.llk_pool_set_spin(self.ptr, int(microseconds))

    def test_job(self, n_items: int, chunk: int = 1, work: int = 0, counts: np.ndarray | None = None) -> None:
        """A synthetic job (for tests): each item burns `work` units and bumps counts[item]."""
        if counts is not None:
            if counts.dtype != np.int32 or counts.size < n_items or not counts.flags.c_contiguous:
                raise KernelError("counts must be a contiguous int32 array of n_items")
            cptr = ffi.cast("int32_t *", ffi.from_buffer(counts))
        else:
            cptr = ffi.NULL
        _check(lib.llk_pool_test_job(self.ptr, int(n_items), int(chunk), int(work), cptr), "test_job")

    def close(self) -> None:
        if self._ptr is not None:
            lib.llk_pool_free(self._ptr)
            self._ptr = None

    def __enter__(self) -> "ThreadPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _pool_ptr(pool: ThreadPool | None) -> CPointer:
    return ffi.NULL if pool is None else pool.ptr


# --- matrix products -----------------------------------------------------------------------------


def _weights(type_id: int, w: ArrayLike, n_cols: int) -> tuple[np.ndarray, int, int]:
    """(uint8 view, n_rows, row_stride) of a weight matrix given as rows of raw bytes."""
    a = np.asarray(w)
    if a.ndim != 2:
        raise KernelError("weights must be 2-D: (n_rows, row bytes)")
    rb = row_bytes(type_id, n_cols)
    a8 = a.view(np.uint8) if a.dtype != np.uint8 else a
    if a8.shape[1] < rb:
        raise KernelError(f"weight rows hold {a8.shape[1]} bytes, {rb} needed for {n_cols} columns")
    if a8.strides[1] != 1 or a8.strides[0] < rb:
        a8 = np.ascontiguousarray(a8)
    return a8, a8.shape[0], a8.strides[0]


def matvec(
    pool: ThreadPool | None,
    type_id: int,
    w: ArrayLike,
    n_cols: int,
    x: ArrayLike,
    isa: int | str | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """y[r] = dot(W row r, x): W is (n_rows, >= row bytes) raw rows of `type_id`, x float32[n_cols]."""
    t = _type(type_id)
    w8, n_rows, stride = _weights(t, w, n_cols)
    xf = _f32(x, "x").reshape(-1)
    if xf.size != n_cols:
        raise KernelError(f"matvec: x has {xf.size} values, {n_cols} expected")
    y = out if out is not None else np.empty(n_rows, dtype=np.float32)
    if y.dtype != np.float32 or y.size < n_rows or not y.flags.c_contiguous:
        raise KernelError("matvec: out must be a contiguous float32 array of n_rows")
    _check(
        lib.llk_matvec(
            _pool_ptr(pool),
            _isa(isa),
            t,
            ffi.from_buffer(w8),
            stride,
            n_rows,
            n_cols,
            ffi.from_buffer("float[]", xf),
            ffi.from_buffer("float[]", y),
        ),
        f"matvec({TYPE_NAMES[t]})",
    )
    return y


def matmul(
    pool: ThreadPool | None,
    type_id: int,
    w: ArrayLike,
    n_cols: int,
    x: ArrayLike,
    isa: int | str | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Y (n_tok, n_rows) = X (n_tok, n_cols) @ W^T, W as in matvec."""
    t = _type(type_id)
    w8, n_rows, stride = _weights(t, w, n_cols)
    xf = _f32(x, "x")
    if xf.ndim != 2 or xf.shape[1] != n_cols:
        raise KernelError(f"matmul: x must be (n_tok, {n_cols})")
    n_tok = xf.shape[0]
    y = out if out is not None else np.empty((n_tok, n_rows), dtype=np.float32)
    if y.dtype != np.float32 or y.shape != (n_tok, n_rows) or not y.flags.c_contiguous:
        raise KernelError("matmul: out must be a contiguous float32 (n_tok, n_rows) array")
    _check(
        lib.llk_matmul(
            _pool_ptr(pool),
            _isa(isa),
            t,
            ffi.from_buffer(w8),
            stride,
            n_rows,
            n_cols,
            ffi.from_buffer("float[]", xf),
            n_cols,
            n_tok,
            ffi.from_buffer("float[]", y),
            n_rows,
        ),
        f"matmul({TYPE_NAMES[t]})",
    )
    return y


def isa_packs(type_id: int, isa: int | str | None = None) -> bool:
    """Whether the decoder packs weights of this type into panels at this level."""
    return bool(lib.llk_isa_packs(_isa(isa), _type(type_id)))


def pack(pool: ThreadPool | None, type_id: int, w: ArrayLike, n_cols: int) -> np.ndarray:
    """W (n_rows, >= row bytes) packed into panels of 8 rows: the matrix x matrix layout."""
    t = _type(type_id)
    w8, n_rows, stride = _weights(t, w, n_cols)
    n = lib.llk_packed_bytes(t, n_rows, n_cols)
    if n == 0:
        raise KernelError(f"{TYPE_NAMES[t]} with {n_rows} rows has no packed layout")
    out = np.empty(n, dtype=np.uint8)
    _check(
        lib.llk_pack(_pool_ptr(pool), t, ffi.from_buffer(w8), stride, n_rows, n_cols, ffi.from_buffer(out)),
        f"pack({TYPE_NAMES[t]})",
    )
    return out


def matmul_packed(
    pool: ThreadPool | None,
    type_id: int,
    packed: np.ndarray,
    n_rows: int,
    n_cols: int,
    x: ArrayLike,
    isa: int | str | None = None,
) -> np.ndarray:
    """Y (n_tok, n_rows) = X @ W^T with W made by pack(): the same floats as matmul()."""
    t = _type(type_id)
    need = lib.llk_packed_bytes(t, n_rows, n_cols)
    p8 = np.ascontiguousarray(packed).view(np.uint8).reshape(-1)
    if need == 0 or p8.size < need:
        raise KernelError(f"matmul_packed: {p8.size} packed bytes, {need} needed")
    xf = _f32(x, "x")
    if xf.ndim != 2 or xf.shape[1] != n_cols:
        raise KernelError(f"matmul_packed: x must be (n_tok, {n_cols})")
    n_tok = xf.shape[0]
    y = np.empty((n_tok, n_rows), dtype=np.float32)
    _check(
        lib.llk_matmul_packed(
            _pool_ptr(pool),
            _isa(isa),
            t,
            ffi.from_buffer(p8),
            n_rows,
            n_cols,
            ffi.from_buffer("float[]", xf),
            n_cols,
            n_tok,
            ffi.from_buffer("float[]", y),
            n_rows,
        ),
        f"matmul_packed({TYPE_NAMES[t]})",
    )
    return y


# --- decoder operations ----------------------------------------------------------------------------


def _rows(x: ArrayLike) -> tuple[np.ndarray, int, int]:
    a = np.array(x, dtype=np.float32, copy=True, order="C")
    n = a.shape[-1] if a.ndim else 1
    return a, (a.size // n if n else 0), n


def rms_norm(x: ArrayLike, weight: ArrayLike | None = None, eps: float = 1e-6) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    y, n_rows, n = _rows(x)
    w = None if weight is None else _f32(weight, "weight").reshape(-1)
    if w is not None and w.size != n:
        raise KernelError(f"rms_norm: weight has {w.size} values, {n} expected")
    _check(lib.llk_rms_norm(_fp(y), ffi.NULL if w is None else _fp(w), _fp(y), n_rows, n, float(eps)), "rms_norm")
    return y


def layer_norm(
    x: ArrayLike, weight: ArrayLike | None = None, bias: ArrayLike | None = None, eps: float = 1e-5
) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    y, n_rows, n = _rows(x)
    w = None if weight is None else _f32(weight, "weight").reshape(-1)
    b = None if bias is None else _f32(bias, "bias").reshape(-1)
    for v, name in ((w, "weight"), (b, "bias")):
        if v is not None and v.size != n:
            raise KernelError(f"layer_norm: {name} has {v.size} values, {n} expected")
    _check(
        lib.llk_layer_norm(
            _fp(y), ffi.NULL if w is None else _fp(w), ffi.NULL if b is None else _fp(b), _fp(y), n_rows, n, float(eps)
        ),
        "layer_norm",
    )
    return y


def softmax(x: ArrayLike) -> np.ndarray:
    """Softmax over the last axis (rows of -inf give zeros)."""
    y, n_rows, n = _rows(x)
    fp = _fp(y)
    for r in range(n_rows):
        lib.llk_softmax(fp + r * n, n)
    return y


def _unary(fn: Callable[[CPointer, CPointer, int], None], x: ArrayLike) -> np.ndarray:
    y, _, _ = _rows(x)
    fn(_fp(y), _fp(y), y.size)
    return y


def _binary(
    fn: Callable[[CPointer, CPointer, CPointer, int], None], a: ArrayLike, b: ArrayLike, name: str
) -> np.ndarray:
    y, _, _ = _rows(a)
    bb = _f32(b, name)
    if bb.shape != y.shape:
        bb = np.ascontiguousarray(np.broadcast_to(bb, y.shape), dtype=np.float32)
    fn(_fp(y), _fp(bb), _fp(y), y.size)
    return y


def silu(x: ArrayLike) -> np.ndarray:
    return _unary(lib.llk_silu, x)


def gelu(x: ArrayLike) -> np.ndarray:
    """GELU, tanh approximation."""
    return _unary(lib.llk_gelu, x)


def gelu_erf(x: ArrayLike) -> np.ndarray:
    """GELU, exact (erf)."""
    return _unary(lib.llk_gelu_erf, x)


def _gated(act: int, what: str, gate: ArrayLike, up: ArrayLike, isa: int | str | None) -> np.ndarray:
    """act(gate) * up by llk_glu_isa (act an llk_ffn_act) through _binary."""
    level = _isa(isa)

    def at_level(g: CPointer, u: CPointer, y: CPointer, n: int) -> None:
        _check(lib.llk_glu_isa(level, act, g, u, y, n), what)

    return _binary(at_level, gate, up, "up")


def swiglu(gate: ArrayLike, up: ArrayLike, isa: int | str | None = None) -> np.ndarray:
    """silu(gate) * up, at instruction-set level `isa` (the same floats at every level)."""
    return _gated(lib.LLK_FFN_SILU, "swiglu", gate, up, isa)


def geglu(gate: ArrayLike, up: ArrayLike, isa: int | str | None = None) -> np.ndarray:
    """gelu(gate) * up (tanh approximation), at instruction-set level `isa` (the same floats at every
    level)."""
    return _gated(lib.LLK_FFN_GELU, "geglu", gate, up, isa)


def softcap(x: ArrayLike, cap: float, scale: float = 1.0, isa: int | str | None = None) -> tuple[np.ndarray, float]:
    """cap * tanh(x * scale / cap) (Gemma 2's soft-capped attention scores and logits) and its
    largest value, at instruction-set level `isa` (the same floats at every level)."""
    y, _, _ = _rows(x)
    mx = ffi.new("float *")
    _check(lib.llk_softcap_isa(_isa(isa), _fp(y), y.size, float(scale), float(cap), mx), "softcap")
    return y, float(mx[0])


def add(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    return _binary(lib.llk_add, a, b, "b")


def mul(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    return _binary(lib.llk_mul, a, b, "b")


@dataclasses.dataclass(frozen=True)
class RopeConfig:
    """Rotary position embedding settings (GGUF: rope.dimension_count, rope.freq_base, rope.scaling.*)."""

    head_dim: int
    n_rot: int | None = None  # rotated dims; None = head_dim
    neox: bool = False  # rotate (i, i + n_rot/2) instead of (2i, 2i+1)
    freq_base: float = 10000.0
    scaling: str = "none"  # none | linear | yarn | llama3
    freq_scale: float = 1.0  # linear / yarn: 1 / factor
    n_ctx_orig: int = 0
    ext_factor: float = -1.0  # yarn: < 0 means 1
    attn_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    factor: float = 8.0  # llama3
    freq_factors: tuple | None = None  # n_rot/2 frequency divisors (GGUF rope_freqs.weight)

    SCALINGS = ("none", "linear", "yarn", "llama3")

    def __post_init__(self) -> None:
        n_rot = self.head_dim if self.n_rot is None else self.n_rot
        if self.head_dim <= 0 or n_rot <= 0 or n_rot > self.head_dim or n_rot % 2:
            raise ValueError(f"rope: n_rot {n_rot} must be even and within head_dim {self.head_dim}")
        if self.scaling not in self.SCALINGS:
            raise ValueError(f"rope: unknown scaling {self.scaling!r}")
        if self.freq_factors is not None:
            ff = tuple(float(v) for v in self.freq_factors)
            if len(ff) != n_rot // 2 or not all(v > 0 for v in ff):
                raise ValueError(f"rope: freq_factors needs {n_rot // 2} positive values")
            object.__setattr__(self, "freq_factors", ff)

    def _c(self) -> tuple[CPointer, CPointer | None]:
        """(llk_rope_params *, the freq_factors buffer it points into, to keep alive)."""
        p = ffi.new("llk_rope_params *")
        lib.llk_rope_params_default(p, self.head_dim)
        p.n_rot = self.head_dim if self.n_rot is None else self.n_rot
        p.neox = int(self.neox)
        p.freq_base = self.freq_base
        p.scaling = self.SCALINGS.index(self.scaling)
        p.freq_scale = self.freq_scale
        p.n_ctx_orig = self.n_ctx_orig
        p.ext_factor = self.ext_factor
        p.attn_factor = self.attn_factor
        p.beta_fast, p.beta_slow = self.beta_fast, self.beta_slow
        p.low_freq_factor, p.high_freq_factor = self.low_freq_factor, self.high_freq_factor
        p.factor = self.factor
        keep = None
        if self.freq_factors is not None:
            keep = ffi.new("float[]", list(self.freq_factors))
            p.freq_factors = keep
        return p, keep


def rope(cfg: RopeConfig, x: ArrayLike, positions: ArrayLike) -> np.ndarray:
    """x: (n_tok, n_head, head_dim) rotated copy; positions: int[n_tok]."""
    y = np.array(x, dtype=np.float32, copy=True, order="C")
    if y.ndim != 3 or y.shape[2] != cfg.head_dim:
        raise KernelError(f"rope: x must be (n_tok, n_head, {cfg.head_dim})")
    pos = np.ascontiguousarray(positions, dtype=np.int32).reshape(-1)
    if pos.size != y.shape[0]:
        raise KernelError("rope: one position per token")
    params, _keep = cfg._c()  # _keep holds the freq_factors buffer through the call
    _check(lib.llk_rope(params, _fp(y), y.shape[0], y.shape[1], ffi.from_buffer("int32_t[]", pos)), "rope")
    return y


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    n_head: int
    n_head_kv: int
    head_dim: int
    scale: float | None = None  # None = 1/sqrt(head_dim)
    softcap: float = 0.0  # > 0: logits = softcap * tanh(logits / softcap)
    window: int = 0  # > 0: sliding window of that many positions
    causal: bool = True

    def __post_init__(self) -> None:
        if min(self.n_head, self.n_head_kv, self.head_dim) <= 0 or self.n_head % self.n_head_kv:
            raise ValueError("attention: n_head must be a positive multiple of n_head_kv")


def attention(
    pool: ThreadPool | None,
    cfg: AttentionConfig,
    q: ArrayLike,
    k_cache: ArrayLike,
    v_cache: ArrayLike,
    positions: ArrayLike,
    isa: int | str | None = None,
    kv_block: int = 0,
    blocked: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """q: (n_tok, n_head, head_dim) f32; k_cache, v_cache: (n_kv, n_head_kv, head_dim), both f16 or
    both f32, or both Q8_0 rows as uint8 (n_kv, row bytes) from `quantize_kv_q8_0`; positions:
    int[n_tok]. kv_block > 0: the kernels read the caches rearranged into blocks of that many
    positions, head after head in each (the decoder's layout; the same result); `blocked`, the
    two caches already so arranged by `kv_blocked` (k_cache and v_cache then give only the shape
    and type), saves rearranging them on every call. Returns (n_tok, n_head, head_dim) f32."""
    qf = np.ascontiguousarray(q, dtype=np.float32)
    if qf.ndim != 3 or qf.shape[1:] != (cfg.n_head, cfg.head_dim):
        raise KernelError("attention: q must be (n_tok, n_head, head_dim)")
    kc, vc = np.ascontiguousarray(k_cache), np.ascontiguousarray(v_cache)
    if kc.dtype != vc.dtype or kc.dtype not in (np.float16, np.float32, np.uint8) or kc.shape != vc.shape:
        raise KernelError("attention: k and v caches must match in shape and be float16, float32 or Q8_0")
    if kc.dtype == np.uint8:
        if cfg.head_dim % 32 or kc.ndim != 2 or kc.shape[1] != cfg.n_head_kv * cfg.head_dim // 32 * 34:
            raise KernelError("attention: a Q8_0 cache is (n_kv, n_head_kv * head_dim / 32 * 34) bytes")
    elif kc.ndim != 3 or kc.shape[1:] != (cfg.n_head_kv, cfg.head_dim):
        raise KernelError("attention: caches must be (n_kv, n_head_kv, head_dim)")
    pos = np.ascontiguousarray(positions, dtype=np.int32).reshape(-1)
    if pos.size != qf.shape[0]:
        raise KernelError("attention: one position per query token")
    p = ffi.new("llk_attn_params *")
    p.n_head, p.n_head_kv, p.head_dim = cfg.n_head, cfg.n_head_kv, cfg.head_dim
    p.kv_type = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint8): 8}[kc.dtype]
    p.scale = cfg.scale if cfg.scale is not None else 1.0 / float(np.sqrt(cfg.head_dim))
    p.softcap, p.window, p.causal = cfg.softcap, cfg.window, int(cfg.causal)
    if kv_block < 0:
        raise KernelError("attention: kv_block must be 0 (position-major) or a positive block size")
    n_kv = kc.shape[0]
    if blocked is not None and not kv_block:
        raise KernelError("attention: blocked caches need their kv_block")
    if kv_block:
        p.kv_block, p.kv_ctx = kv_block, n_kv
        if blocked is None:
            kc, vc = (kv_blocked(x, cfg.n_head_kv, kv_block) for x in (kc, vc))
        else:
            bk, bv = (np.ascontiguousarray(x) for x in blocked)
            if bk.nbytes != kc.nbytes or bv.nbytes != vc.nbytes:
                raise KernelError("attention: blocked caches must hold as many bytes as the caches")
            kc, vc = bk, bv
    out = np.empty_like(qf)
    _check(
        lib.llk_attention_isa(
            _pool_ptr(pool),
            _isa(isa),
            p,
            _fp(qf),
            ffi.from_buffer(kc),
            ffi.from_buffer(vc),
            n_kv,
            qf.shape[0],
            ffi.from_buffer("int32_t[]", pos),
            _fp(out),
        ),
        "attention",
    )
    return out


def kv_blocked(cache: np.ndarray, n_head_kv: int, block: int) -> np.ndarray:
    """A position-major cache's bytes laid out in blocks of `block` positions, each block head after
    head (llk_kv_at)."""
    rows = cache.view(np.uint8).reshape(cache.shape[0], n_head_kv, -1)
    return np.concatenate(
        [rows[b : b + block].transpose(1, 0, 2).reshape(-1) for b in range(0, rows.shape[0], block)]
        or [rows.reshape(-1)]
    )


def quantize_kv_q8_0(x: ArrayLike) -> np.ndarray:
    """Rows of float32 values (a multiple of 32 each) as the decoder's Q8_0 KV cache holds them:
    per block of 32, float16 d = max|x| / 127, then int8 round(x / d) (ties to even). (rows, bytes)."""
    xf = np.ascontiguousarray(x, dtype=np.float32)
    xf = xf.reshape(xf.shape[0], -1)
    if xf.shape[1] % 32:
        raise KernelError("quantize_kv_q8_0: rows must hold a multiple of 32 values")
    blocks = xf.reshape(xf.shape[0], -1, 32)
    d = np.abs(blocks).max(axis=2) / np.float32(127.0)
    inv = np.divide(np.float32(1.0), d, out=np.zeros_like(d), where=d > 0)
    q = np.rint(blocks * inv[..., None]).astype(np.int8)
    out = np.empty(blocks.shape[:2] + (34,), np.uint8)
    out[..., :2] = d.astype(np.float16)[..., None].view(np.uint8)
    out[..., 2:] = q.view(np.uint8)
    return out.reshape(xf.shape[0], -1)


def dequantize_kv_q8_0(rows: np.ndarray, n: int) -> np.ndarray:
    """The float32 values a Q8_0 cache row holds (d * q, exact), n per row."""
    b = np.ascontiguousarray(rows, dtype=np.uint8).reshape(len(rows), -1, 34)
    d = b[..., :2].copy().view(np.float16).astype(np.float32)
    return (d * b[..., 2:].view(np.int8).astype(np.float32)).reshape(len(rows), n)


# --- measurement (app/kernels/bench.py) ----------------------------------------------------------

from app.kernels.bench import (  # noqa: E402  (after the API it builds on)
    bench_in_cache,
    bench_kernels,
    bench_matmul,
    format_bench,
    format_bench_matmul,
    int8_peak,
    random_weights,
    read_bandwidth,
)
