"""Pre-flight check before a model loads: memory needed vs available, support, chat template.

Memory needed is `app.model.estimate_memory` (mapped weights + KV cache + scratch) at a context
length; available is what psutil says the machine can give now. The verdict, with the numbers:
ok (needs at most 80% of available memory), warn (fits in available memory with little room,
or only by pushing other programs out: at most 90% of physical memory), refuse (more than that).
An unsupported model is refused too; a missing or broken chat template only warns (a fallback
template is used). Used by `llambda inspect`, `llambda models import` and the window.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from app.errors import LlambdaError
from app.gguf import GGUFFile, open_gguf
from app.model import config_from_gguf, estimate_memory, support_verdict
from app.units import format_bytes

OK, WARN, REFUSE = "ok", "warn", "refuse"
OK_FRACTION_OF_AVAILABLE = 0.80
MAX_FRACTION_OF_TOTAL = 0.90


def memory_verdict(needed: int, available: int, total: int) -> tuple[str, str]:
    """(ok|warn|refuse, a one-line message with the numbers)."""
    nums = f"needs {format_bytes(needed)}, {format_bytes(available)} available of {format_bytes(total)}"
    if needed <= OK_FRACTION_OF_AVAILABLE * available:
        return OK, f"memory: {nums}"
    if needed <= available:
        return WARN, f"memory: {nums}; little room is left for other programs"
    if needed <= MAX_FRACTION_OF_TOTAL * total:
        return WARN, f"memory: {nums}; other programs will be pushed to swap and it may run slowly"
    return (
        REFUSE,
        f"memory: {nums}; this machine does not have enough memory (try a shorter context or a smaller model)",
    )


CTX_STEP = 256


def fitting_context(f: GGUFFile, kv_type: str = "f16", *, available_bytes: int | None = None) -> tuple[int, str]:
    """The default context length and why: the model's training length, capped by what the
    memory estimate says fits ("ok": at most 80% of the available memory) with this KV type,
    in steps of 256 (never below 256, or the training length if that is shorter)."""
    cfg = config_from_gguf(f)
    train = max(1, cfg.n_ctx_train)
    avail = _system_memory()[0] if available_bytes is None else available_bytes
    limit = OK_FRACTION_OF_AVAILABLE * avail

    def fits(n: int) -> bool:
        return estimate_memory(f, n, kv_type=kv_type, cfg=cfg).total_bytes <= limit

    if fits(train):
        return train, f"the model's training length, which fits in memory with a {kv_type} KV cache"
    lo, hi = 0, train // CTX_STEP  # the largest multiple of the step that fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid * CTX_STEP):
            lo = mid
        else:
            hi = mid - 1
    n = max(lo * CTX_STEP, min(train, CTX_STEP))
    return n, (
        f"what fits in {format_bytes(avail)} of available memory with a {kv_type} KV cache "
        f"(the model was trained on {train})"
    )


def chat_template_status(f: GGUFFile) -> tuple[str, str]:
    """("ok" | "missing" | "invalid", message). Compiles the template in a Jinja sandbox."""
    tmpl = f.metadata.get("tokenizer.chat_template")
    if tmpl is None:
        return "missing", "chat template: none in the file; a fallback template will be used"
    if not isinstance(tmpl, str) or not tmpl.strip():
        return "invalid", "chat template: not a text; a fallback template will be used"
    try:
        from jinja2.sandbox import (
            ImmutableSandboxedEnvironment,
        )  # lazy: jinja2 is slow to import; `llambda --help` loads this module

        ImmutableSandboxedEnvironment().from_string(tmpl)
    except Exception as e:  # any compile failure: the model still loads, with a fallback
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return "invalid", f"chat template: does not compile ({first}); a fallback template will be used"
    return "ok", "chat template: present"


@dataclass(frozen=True)
class PreflightReport:
    verdict: str  # overall: ok | warn | refuse
    memory_verdict: str  # ok | warn | refuse | unknown (no estimate possible)
    n_ctx: int | None
    weights_bytes: int
    kv_cache_bytes: int
    scratch_bytes: int
    needed_bytes: int
    available_bytes: int
    total_bytes: int
    supported: bool
    support_reasons: tuple[str, ...]
    template_status: str  # ok | missing | invalid
    messages: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        return f"{self.verdict}: " + "; ".join(self.messages)

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["support_reasons"] = list(self.support_reasons)
        d["messages"] = list(self.messages)
        return d


def _system_memory() -> tuple[int, int]:
    import psutil  # lazy: slow to import; `llambda --help` loads this module

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def preflight(
    model: GGUFFile | str | os.PathLike,
    n_ctx: int | None = None,
    kv_type: str = "f16",
    *,
    available_bytes: int | None = None,
    total_bytes: int | None = None,
) -> PreflightReport:
    """Check a model (an open GGUFFile or a path) at `n_ctx` (default: its training context).

    Raises ModelFormatError for a malformed file; every other finding is in the report.
    """
    if not isinstance(model, GGUFFile):
        with open_gguf(model) as f:
            return preflight(f, n_ctx, kv_type, available_bytes=available_bytes, total_bytes=total_bytes)
    f = model
    if available_bytes is None or total_bytes is None:
        avail, total = _system_memory()
        available_bytes = avail if available_bytes is None else available_bytes
        total_bytes = total if total_bytes is None else total_bytes

    messages: list[str] = []
    verdict = support_verdict(f)
    supported, reasons = bool(verdict.supported), tuple(verdict.reasons)
    messages.append("supported" if supported else "not supported: " + "; ".join(reasons))

    try:
        est = estimate_memory(f, n_ctx, kv_type=kv_type)
    except LlambdaError as e:  # unknown architecture etc.: no estimate, already a support reason
        est = None
        mem, mem_msg = "unknown", f"memory: no estimate ({e})"
    if est is not None:
        mem, mem_msg = memory_verdict(est.total_bytes, available_bytes, total_bytes)
        mem_msg += (
            f" (weights {format_bytes(est.weights_bytes)}, KV cache "
            f"{format_bytes(est.kv_cache_bytes)}, scratch {format_bytes(est.scratch_bytes)})"
        )
    messages.append(mem_msg)

    tstatus, tmsg = chat_template_status(f)
    messages.append(tmsg)

    if not supported or mem == REFUSE:
        overall = REFUSE
    elif mem in (WARN, "unknown") or tstatus != "ok":
        overall = WARN
    else:
        overall = OK
    if n_ctx is None and est is not None:
        try:
            n_ctx = config_from_gguf(f).n_ctx_train
        except LlambdaError:
            pass
    return PreflightReport(
        verdict=overall,
        memory_verdict=mem,
        n_ctx=n_ctx,
        weights_bytes=est.weights_bytes if est else 0,
        kv_cache_bytes=est.kv_cache_bytes if est else 0,
        scratch_bytes=est.scratch_bytes if est else 0,
        needed_bytes=est.total_bytes if est else 0,
        available_bytes=available_bytes,
        total_bytes=total_bytes,
        supported=supported,
        support_reasons=reasons,
        template_status=tstatus,
        messages=tuple(messages),
    )


__all__ = [
    "PreflightReport",
    "preflight",
    "memory_verdict",
    "chat_template_status",
    "fitting_context",
    "OK",
    "WARN",
    "REFUSE",
]
