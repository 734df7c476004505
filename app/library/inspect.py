"""What `llambda inspect` shows: the facts of a model file as plain data, and as text."""

from __future__ import annotations

import os

from app.diagnostics import kernels_description
from app.gguf import FILE_TYPES, open_gguf
from app.library.preflight import preflight
from app.units import format_bytes


def describe(path: str | os.PathLike, n_ctx: int | None = None, kv_type: str = "f16") -> dict:
    """Plain-data description of a GGUF file. Raises ModelFormatError for a malformed file."""
    with open_gguf(path) as f:
        md = f.metadata
        types: dict[str, dict[str, int]] = {}
        for t in f.tensors.values():
            e = types.setdefault(t.type.name, {"count": 0, "bytes": 0})
            e["count"] += 1
            e["bytes"] += t.n_bytes
        arch = md.string("general.architecture", None)
        p = f"{arch}."
        ft = md.integer("general.file_type", None)
        report = preflight(f, n_ctx, kv_type)
        info = {
            "path": os.path.abspath(f.path),
            "file_size": f.file_size,
            "gguf_version": f.version,
            "architecture": arch,
            "name": md.string("general.name", None),
            "parameters": f.n_params,
            "file_type": None if ft is None else FILE_TYPES.get(ft, f"unknown ({ft})"),
            "tensor_count": len(f.tensors),
            "tensor_types": dict(sorted(types.items(), key=lambda kv: -kv[1]["bytes"])),
            "context_length": md.integer(p + "context_length", None),
            "embedding_length": md.integer(p + "embedding_length", None),
            "block_count": md.integer(p + "block_count", None),
            "head_count": md.integer(p + "attention.head_count", None),
            "head_count_kv": md.get(p + "attention.head_count_kv"),
            "tokenizer_model": md.string("tokenizer.ggml.model", None),
            "tokenizer_pre": md.string("tokenizer.ggml.pre", None),
            "vocab_size": md.array_length("tokenizer.ggml.tokens"),
            "chat_template": "tokenizer.chat_template" in md,
            "chat_template_status": report.template_status,
            "verdict": {"supported": report.supported, "reasons": list(report.support_reasons)},
            "kernels": kernels_description(),
            "memory": None,
        }
        if info["head_count_kv"] is not None and not isinstance(info["head_count_kv"], int):
            info["head_count_kv"] = [int(v) for v in info["head_count_kv"]]
        if report.memory_verdict != "unknown":
            info["memory"] = {
                "n_ctx": report.n_ctx,
                "weights": report.weights_bytes,
                "kv_cache": report.kv_cache_bytes,
                "scratch": report.scratch_bytes,
                "total": report.needed_bytes,
                "available": report.available_bytes,
                "kv_type": kv_type,
                "verdict": report.memory_verdict,
            }
    return info


def format_description(info: dict) -> str:
    def row(label: str, value: object) -> str:
        return f"  {label:<18}{value}"

    out = [
        f"{info['path']}",
        row("architecture", info["architecture"]),
        row("name", info["name"]),
        row("parameters", f"{info['parameters']:,} ({info['parameters'] / 1e6:.1f} M)"),
        row("file type", info["file_type"]),
        row("file size", f"{format_bytes(info['file_size'])} (GGUF v{info['gguf_version']})"),
        row("context length", info["context_length"]),
        row("embedding size", info["embedding_length"]),
        row("layers", info["block_count"]),
        row("heads", f"{info['head_count']} (KV {info['head_count_kv']})"),
        row("tokenizer", f"{info['tokenizer_model']} ({info['tokenizer_pre'] or '-'}), {info['vocab_size']} tokens"),
        row(
            "chat template",
            {
                "ok": "present",
                "missing": "absent (a fallback will be used)",
                "invalid": "does not compile (a fallback will be used)",
            }[info["chat_template_status"]],
        ),
        row("tensors", info["tensor_count"]),
    ]
    for name, t in info["tensor_types"].items():
        out.append(f"  {'':<18}  {name:<8}{t['count']:>5} tensors {format_bytes(t['bytes']):>10}")
    m = info["memory"]
    if m:
        out.append(
            row(
                "memory",
                f"{m['verdict']}: {format_bytes(m['total'])} at context {m['n_ctx']}, "
                f"{format_bytes(m['available'])} available "
                f"(weights {format_bytes(m['weights'])}, KV cache {format_bytes(m['kv_cache'])} {m.get('kv_type', 'f16')}, "
                f"scratch {format_bytes(m['scratch'])})",
            )
        )
    out.append(row("kernels", info["kernels"]))
    v = info["verdict"]
    out.append(row("verdict", "supported" if v["supported"] else "NOT SUPPORTED"))
    for r in v["reasons"]:
        out.append(f"  {'':<18}- {r}")
    return "\n".join(out)
