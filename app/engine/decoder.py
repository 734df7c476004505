"""The decoder interface and its C implementation: tokens in, logits out, KV cache inside.

`Decoder.decode(tokens, start_pos, all_logits=False)` runs a batch of tokens at positions
start_pos.. through the whole model in one call into the C library (`llk_decode`) and returns the
logits of the last position (n_vocab,) or of every position (n_tok, n_vocab). Weights stay in the
GGUF file's memory map; this module only binds tensor names to the C structs. Before each call
into C the file is checked (`GGUFFile.check_unchanged`): one truncated or rewritten in place since
it was loaded gives ModelFileChangedError instead of a pass over pages that may be gone.
Not here: which tokens to feed, sampling, stopping (see session.py and generate.py).
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from app import kernels
from app.errors import KernelError, ModelFormatError, UnsupportedModelError
from app.gguf import GGUFFile
from app.engine.sampler import Sampler
from app.kernels import CPointer, KernelAborted, ThreadPool, ffi, lib
from app.model import DecoderConfig

__all__ = ["Decoder", "CDecoder", "DecodeCancelled", "KV_TYPES"]

KV_TYPES = ("f16", "f32", "q8_0")
KV_TYPE_IDS = {"f32": 0, "f16": 1, "q8_0": 8}  # llk_type of the cache
_ROPE_SCALING = {"none": 0, "linear": 1, "yarn": 2}
_FFN_ACT = {"silu": 0, "gelu": 1, "gelu_erf": 2}
_NORM = {"rms": 0, "layer": 1}


class DecodeCancelled(KernelAborted):
    """decode() stopped because abort() was called from another thread."""


class Decoder(Protocol):
    """What the session needs from a decoder (the C one, or a test double)."""

    n_ctx: int
    n_vocab: int

    def decode(self, tokens: Sequence[int], start_pos: int, all_logits: bool = False) -> np.ndarray:
        """Logits (n_vocab,) of the last token, or (n_tok, n_vocab) of each; fills the KV cache
        at positions start_pos .. start_pos + n_tok - 1 (later positions become stale)."""

    def abort(self) -> None:
        """From any thread: the running (or next) decode raises DecodeCancelled."""

    def clear_abort(self) -> None: ...

    def kv_write(self, image: np.ndarray | bytes, n: int) -> None:
        """Put a saved image of cache positions [0, n) back (Session.restore; app.engine.kvstore)."""


def layer_window(cfg: DecoderConfig, il: int) -> int:
    """The sliding window of layer il (0 = attends to the whole context)."""
    if cfg.sliding_window <= 0 or not cfg.swa_layers or not cfg.swa_layers[il]:
        return 0
    return cfg.sliding_window


def layer_rope_base(cfg: DecoderConfig, il: int) -> float:
    """The RoPE base of layer il: its own for gemma3's sliding-window layers, else 0 (the model's)."""
    return cfg.rope_base_swa if cfg.rope_base_swa > 0 and layer_window(cfg, il) > 0 else 0.0


def _rows(t: CPointer, first: int, n: int) -> CPointer:
    """Rows [first, first + n) of a bound matrix, as another llk_tensor (same memory): the
    parts of a fused weight. Rows are whole blocks of any type, so any split is exact."""
    v = ffi.new("llk_tensor *")
    v.data = ffi.cast("const char *", t.data) + first * t.row_stride
    v.type, v.n_rows, v.n_cols, v.row_stride = t.type, n, t.n_cols, t.row_stride
    return v


class CDecoder:
    """`llk_decode` over the tensors of an open GGUF file (kept open while the decoder lives).

    n_threads <= 0: one per physical core. kv_type: "f16" (default), "f32" or "q8_0" (8-bit blocks
    of 32, read directly by attention; needs head_dim % 32 == 0). isa: None for the
    dispatched level, or "ref" / "avx2" / "avx512" for the matrix products (tests pin levels).
    """

    def __init__(
        self,
        f: GGUFFile,
        cfg: DecoderConfig,
        n_ctx: int,
        *,
        kv_type: str = "f16",
        n_threads: int = 0,
        n_batch: int = 512,
        isa: int | str | None = None,
        pool: ThreadPool | None = None,
    ):
        if kv_type not in KV_TYPES:
            raise ValueError(f"kv_type must be one of {KV_TYPES}, not {kv_type!r}")
        if kv_type == "q8_0" and cfg.head_dim % 32:
            raise ValueError(
                f"a q8_0 KV cache needs a head size that is a multiple of 32; this model's is {cfg.head_dim} (use f16)"
            )
        if not 1 <= n_ctx <= max(cfg.n_ctx_train, 1) * 64:
            raise ValueError(f"n_ctx {n_ctx} out of range for a model trained on {cfg.n_ctx_train}")
        if cfg.spec.activation not in _FFN_ACT or cfg.spec.norm_kind not in _NORM:
            raise UnsupportedModelError(
                f"{cfg.arch}: activation {cfg.spec.activation!r} / "
                f"norm {cfg.spec.norm_kind!r} not supported by the decoder"
            )
        self.config = cfg
        self.n_ctx = int(n_ctx)
        self.n_vocab = cfg.n_vocab
        self.kv_type = kv_type
        self._file = f
        self._keep: list = []  # numpy views and cdata the C structs point into
        self._own_pool = pool is None
        self.pool = ThreadPool(n_threads) if pool is None else pool
        self.n_threads = self.pool.size
        c = ffi.new("llk_decoder_config *")
        lib.llk_decoder_config_default(c)
        c.n_vocab, c.n_embd, c.n_layer = cfg.n_vocab, cfg.n_embd, cfg.n_layer
        c.n_head, c.n_head_kv, c.head_dim, c.n_ff = cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.n_ff
        c.n_ctx, c.n_batch, c.kv_type = self.n_ctx, int(n_batch), KV_TYPE_IDS[kv_type]
        c.norm_kind, c.norm_eps = _NORM[cfg.spec.norm_kind], cfg.norm_eps
        c.norm_weight_offset = cfg.spec.norm_weight_offset
        c.ffn_act = _FFN_ACT[cfg.spec.activation]
        c.qkv_bias, c.qk_norm = int(cfg.spec.qkv_bias), int(cfg.spec.qk_norm)
        c.post_norms, c.tied_output = int(cfg.spec.post_norms), int(cfg.tied_output)
        c.embd_scale = float(np.sqrt(cfg.n_embd)) if cfg.spec.embd_scale_sqrt else 1.0
        c.attn_softcap, c.final_softcap = cfg.attn_softcap, cfg.final_softcap
        c.attn_scale = cfg.attn_scale
        self._fill_rope(ffi.addressof(c, "rope"), cfg)
        if cfg.rope_freqs:
            ff = self._vector("rope_freqs.weight")  # n_rot/2 divisors, length checked
            if not np.all(self._keep[-1] > 0):  # also refuses NaN
                raise ModelFormatError(f"{f.path}: rope_freqs.weight holds a value that is not positive")
            c.rope.freq_factors = ffi.cast("const float *", ff.data)
        elif cfg.rope_longrope:
            # LongRoPE (phi3): the long factors once the context passes the original one
            which = "long" if self.n_ctx > (cfg.rope_orig_ctx or cfg.n_ctx_train) else "short"
            ff = self._vector(f"rope_factors_{which}.weight")
            if not np.all(self._keep[-1] > 0):
                raise ModelFormatError(f"{f.path}: rope_factors_{which}.weight holds a value that is not positive")
            c.rope.freq_factors = ffi.cast("const float *", ff.data)
            self.rope_factors = which
        c.isa = kernels._isa(isa)
        # the weights are views of the file's read-only mapping: where the level packs a weight
        # for its matrix kernels, the packed copy replaces the mapped pages instead of doubling them
        c.pack = 2
        self.isa = kernels.isa_name(c.isa if c.isa >= 0 else None)
        layers = ffi.new("llk_layer[]", cfg.n_layer)
        for il in range(cfg.n_layer):
            self._bind_layer(layers[il], il)
        tok_embd = self._matrix("token_embd.weight")
        out_norm = self._vector("output_norm.weight")
        out_norm_b = self._vector("output_norm.bias", required=False)
        output = tok_embd if cfg.tied_output else self._matrix("output.weight")
        out = ffi.new("llk_decoder **")
        st = lib.llk_decoder_new(c, tok_embd, out_norm, out_norm_b, output, layers, self.pool.ptr, out)
        if st:
            self.close()
            kernels._check(st, f"{f.path}: decoder")
        self._ptr = out[0]
        self._cfg_c = c
        self.kv_bytes = int(lib.llk_decoder_kv_bytes(self._ptr))
        self.rope_factors = getattr(self, "rope_factors", "")
        self.packed_bytes = int(lib.llk_decoder_packed_bytes(self._ptr))

    # -- binding -----------------------------------------------------------------------------

    @staticmethod
    def _fill_rope(r: CPointer, cfg: DecoderConfig) -> None:
        lib.llk_rope_params_default(r, cfg.head_dim)
        r.n_rot = cfg.rope_dim
        r.neox = int(cfg.spec.rope_kind == "neox")
        r.freq_base = cfg.rope_base
        r.scaling = _ROPE_SCALING[cfg.rope_scaling]
        if cfg.rope_scaling in ("linear", "yarn") and cfg.rope_scale > 0:
            r.freq_scale = 1.0 / cfg.rope_scale
        r.n_ctx_orig = cfg.rope_orig_ctx or cfg.n_ctx_train
        r.attn_factor = cfg.rope_attn_factor

    def _expected_shape(self, name: str) -> tuple[int, int] | None:
        """(rows, row length) the decoder needs for a weight matrix, by its GGUF name."""
        c = self.config
        hd, kd = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        table = {
            "attn_q": (hd, c.n_embd),
            "attn_k": (kd, c.n_embd),
            "attn_v": (kd, c.n_embd),
            "attn_qkv": (hd + 2 * kd, c.n_embd),
            "attn_output": (c.n_embd, hd),
            "ffn_gate": (c.n_ff, c.n_embd),
            "ffn_up": ((2 if c.spec.fused_ffn else 1) * c.n_ff, c.n_embd),
            "ffn_down": (c.n_embd, c.n_ff),
            "token_embd": (c.n_vocab, c.n_embd),
            "output": (c.n_vocab, c.n_embd),
        }
        return table.get(name.split(".")[-2])

    def _matrix(self, name: str, required: bool = True) -> CPointer:
        t = ffi.new("llk_tensor *")
        info = self._file.tensors.get(name)
        if info is None:
            if required:
                raise UnsupportedModelError(f"{self._file.path}: tensor {name} is missing")
            return t
        want = self._expected_shape(name)
        got = (info.n_rows, info.dims[0])
        if len(info.dims) != 2 or (want is not None and got != want):
            raise ModelFormatError(
                f"{self._file.path}: tensor {name} is {list(info.dims)}, "
                f"the hyper-parameters need "
                f"{f'[{want[1]}, {want[0]}]' if want else 'two dimensions'}"
            )
        if info.type.id not in kernels.SUPPORTED_TYPES:
            raise UnsupportedModelError(
                f"{self._file.path}: tensor {name} has type {info.type.name}, which the engine cannot run"
            )
        raw = self._file.tensor_bytes(name)
        self._keep.append(raw)
        t.data = ffi.cast("const void *", raw.ctypes.data)
        t.type, t.n_rows, t.n_cols, t.row_stride = info.type.id, info.n_rows, info.dims[0], info.row_bytes
        return t

    def _vector(self, name: str, required: bool = True) -> CPointer:
        t = ffi.new("llk_tensor *")
        info = self._file.tensors.get(name)
        if info is None:
            if required:
                raise UnsupportedModelError(f"{self._file.path}: tensor {name} is missing")
            return t
        n = info.n_elements
        want = self._vector_length(name)
        if want is not None and n != want:
            raise ModelFormatError(f"{self._file.path}: tensor {name} has {n} values, the hyper-parameters need {want}")
        if info.type.name == "F32":
            arr = np.ascontiguousarray(self._file.tensor_array(name).reshape(-1))
        else:
            arr = kernels.dequantize_row(info.type.id, self._file.tensor_bytes(name).reshape(-1), n)
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        self._keep.append(arr)
        t.data = ffi.cast("const void *", arr.ctypes.data)
        t.type, t.n_rows, t.n_cols, t.row_stride = 0, 1, n, 4 * n
        return t

    def _vector_length(self, name: str) -> int | None:
        c = self.config
        stem = name.rsplit(".", 1)[0].split(".")[-1]
        if stem in ("attn_q_norm", "attn_k_norm"):
            return c.head_dim
        if stem in ("rope_freqs", "rope_factors_short", "rope_factors_long"):
            return c.rope_dim // 2
        if stem == "attn_q" and name.endswith(".bias"):
            return c.n_head * c.head_dim
        if stem in ("attn_k", "attn_v") and name.endswith(".bias"):
            return c.n_head_kv * c.head_dim
        return c.n_embd

    def _bind_layer(self, L: CPointer, il: int) -> None:
        p = f"blk.{il}."
        cfg = self.config
        hd, kd = cfg.n_head * cfg.head_dim, cfg.n_head_kv * cfg.head_dim
        if cfg.spec.fused_qkv_ok and p + "attn_qkv.weight" in self._file.tensors:
            qkv = self._matrix(p + "attn_qkv.weight")  # Q rows, then K, then V
            L.wq = _rows(qkv, 0, hd)[0]
            L.wk = _rows(qkv, hd, kd)[0]
            L.wv = _rows(qkv, hd + kd, kd)[0]
        else:
            for field in ("attn_q", "attn_k", "attn_v"):
                setattr(L, "w" + field[-1], self._matrix(p + field + ".weight")[0])
        if cfg.spec.fused_ffn:
            up = self._matrix(p + "ffn_up.weight")  # gate rows, then up rows
            L.ffn_gate = _rows(up, 0, cfg.n_ff)[0]
            L.ffn_up = _rows(up, cfg.n_ff, cfg.n_ff)[0]
        else:
            L.ffn_gate = self._matrix(p + "ffn_gate.weight")[0]
            L.ffn_up = self._matrix(p + "ffn_up.weight")[0]
        L.wo = self._matrix(p + "attn_output.weight")[0]
        L.ffn_down = self._matrix(p + "ffn_down.weight")[0]
        optional = [
            ("attn_norm_b", "attn_norm.bias"),
            ("bq", "attn_q.bias"),
            ("bk", "attn_k.bias"),
            ("bv", "attn_v.bias"),
            ("bo", "attn_output.bias"),
            ("q_norm", "attn_q_norm.weight"),
            ("k_norm", "attn_k_norm.weight"),
            ("attn_post_norm", "post_attention_norm.weight"),
            ("ffn_norm_b", "ffn_norm.bias"),
            ("ffn_post_norm", "post_ffw_norm.weight"),
        ]
        L.attn_norm = self._vector(p + "attn_norm.weight")[0]
        L.ffn_norm = self._vector(p + "ffn_norm.weight")[0]
        for field, name in optional:
            setattr(L, field, self._vector(p + name, required=False)[0])
        L.window = layer_window(cfg, il)
        L.rope_base = layer_rope_base(cfg, il)

    # -- running -----------------------------------------------------------------------------

    def decode(self, tokens: Sequence[int], start_pos: int, all_logits: bool = False) -> np.ndarray:
        ids = np.ascontiguousarray(tokens, dtype=np.int32).reshape(-1)
        n = ids.size
        if n == 0:
            raise ValueError("decode: no tokens")
        if start_pos < 0 or start_pos + n > self.n_ctx:
            raise ValueError(f"decode: positions {start_pos}..{start_pos + n - 1} outside the context of {self.n_ctx}")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError(f"decode: token id outside 0..{self.n_vocab - 1}")
        self._file.check_unchanged()  # a truncated mapping would kill the process in C
        out = np.empty((n, self.n_vocab) if all_logits else self.n_vocab, np.float32)
        st = lib.llk_decode(
            self.ptr,
            ffi.from_buffer("int32_t[]", ids),
            n,
            int(start_pos),
            int(bool(all_logits)),
            ffi.from_buffer("float[]", out),
        )
        if st == lib.LLK_ERR_ABORTED:
            raise DecodeCancelled("decode cancelled")
        kernels._check(st, "decode")
        return out

    def generate(
        self,
        logits: np.ndarray,
        start_pos: int,
        context: Sequence[int],
        sampler: Sampler,
        max_tokens: int,
        stop_ids: Sequence[int] = (),
        max_seconds: float = 0.03,
    ) -> tuple[list[int], float, bool]:
        """A run of tokens made in C (llk_generate), the interpreter lock released throughout:
        sample from `logits` (after the token at start_pos - 1; overwritten), decode, repeat, up
        to max_tokens, a token of stop_ids, or max_seconds. Returns (tokens, seconds spent
        sampling, cancelled by abort()): every token but the last is decoded, at start_pos on."""
        if max_tokens < 1:
            raise ValueError("generate: max_tokens must be >= 1")
        if start_pos + max_tokens - 1 > self.n_ctx:
            raise ValueError(f"generate: {max_tokens} tokens from {start_pos} overflow the context")
        if logits.dtype != np.float32 or not logits.flags.c_contiguous or logits.size != self.n_vocab:
            raise ValueError("generate: logits must be the decoder's float32 row")
        self._file.check_unchanged()
        w = sampler.n_window
        hist = np.empty(w + max_tokens, np.int32)
        tail = list(context[-w:]) if w else []
        hist[: len(tail)] = tail
        u = sampler.uniforms(max_tokens)
        stop = np.asarray(sorted(stop_ids), dtype=np.int32)
        out = np.empty(max_tokens, np.int32)
        n_out = ffi.new("int64_t *")
        ts = ffi.new("double *")
        st = lib.llk_generate(
            self.ptr,
            ffi.from_buffer("float[]", logits),
            self.n_vocab,
            int(start_pos),
            ffi.from_buffer("int32_t[]", hist),
            len(tail),
            w,
            sampler.params,
            ffi.from_buffer("double[]", u),
            ffi.from_buffer("int32_t[]", stop),
            stop.size,
            max_tokens,
            float(max_seconds),
            ffi.from_buffer(sampler.scratch(self.n_vocab)),
            ffi.from_buffer("int32_t[]", out),
            n_out,
            ts,
        )
        tokens = [int(t) for t in out[: n_out[0]]]
        sampler.used(len(tokens))
        if st == lib.LLK_ERR_ABORTED:
            return tokens, ts[0], True
        kernels._check(st, "generate")
        return tokens, ts[0], False

    def kv_shift(self, p0: int, n_drop: int, n_past: int) -> bool:
        """Drop cache positions [p0, p0 + n_drop) of n_past, moving the later ones down (keys
        re-rotated). False where the RoPE kind cannot be re-rotated: decode those tokens again."""
        if not 0 <= p0 <= p0 + n_drop <= n_past <= self.n_ctx:
            raise ValueError(f"kv_shift: bad range {p0}+{n_drop} of {n_past}")
        st = lib.llk_decoder_kv_shift(self.ptr, int(p0), int(n_drop), int(n_past))
        if st == lib.LLK_ERR_ARG:
            return False
        kernels._check(st, "kv_shift")
        return True

    # -- saving and restoring the KV cache (kvstore.py) ----------------------------------------

    def kv_signature(self) -> dict:
        """What a saved cache image depends on besides the model file and the tokens."""
        c = self.config
        return {
            "kv_type": self.kv_type,
            "n_layer": c.n_layer,
            "n_head_kv": c.n_head_kv,
            "head_dim": c.head_dim,
            "rope_factors": self.rope_factors,
        }

    def kv_image_bytes(self, n: int) -> int:
        """Bytes of the cache image of positions [0, n) (K and V of every layer)."""
        if not 0 <= n <= self.n_ctx:
            raise ValueError(f"kv image: {n} positions outside the context of {self.n_ctx}")
        return int(lib.llk_decoder_kv_range_bytes(self.ptr, int(n)))

    def kv_read(self, n: int) -> np.ndarray:
        """The cache image of positions [0, n): uint8, layer by layer, K rows then V rows."""
        out = np.empty(self.kv_image_bytes(n), np.uint8)
        kernels._check(lib.llk_decoder_kv_read(self.ptr, 0, int(n), ffi.from_buffer(out), out.size), "kv_read")
        return out

    def kv_write(self, image: np.ndarray | bytes, n: int) -> None:
        """Put back an image made by kv_read(n) into positions [0, n)."""
        buf = np.frombuffer(image, np.uint8) if not isinstance(image, np.ndarray) else image
        if buf.size != self.kv_image_bytes(n):
            raise ValueError(f"kv_write: {buf.size} bytes, {n} positions need {self.kv_image_bytes(n)}")
        kernels._check(lib.llk_decoder_kv_write(self.ptr, 0, int(n), ffi.from_buffer(buf), buf.size), "kv_write")

    def abort(self) -> None:
        self.pool.abort()

    def clear_abort(self) -> None:
        self.pool.clear_abort()

    @property
    def ptr(self) -> CPointer:
        if getattr(self, "_ptr", None) is None:
            raise KernelError("decoder is closed")
        return self._ptr

    def close(self) -> None:
        if getattr(self, "_ptr", None) is not None:
            lib.llk_decoder_free(self._ptr)
            self._ptr = None
        if getattr(self, "_own_pool", False) and getattr(self, "pool", None) is not None:
            self.pool.close()
            self.pool = None  # type: ignore[assignment]  # closed: the decoder is not used after close()
        self._keep = []

    def __enter__(self) -> "CDecoder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
