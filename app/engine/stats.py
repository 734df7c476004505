"""Figures of one generation: token counts, speeds, time to first token, memory, threads."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass

__all__ = ["GenerationStats", "SpecStats", "peak_rss_bytes", "current_rss_bytes"]


@dataclass
class SpecStats:
    """What speculation did in one generation (GenerationStats.spec)."""

    kind: str = ""
    passes: int = 0  # verify passes
    proposed: int = 0  # guessed tokens scored
    accepted: int = 0  # of those, kept
    pass_tokens: int = 0  # reply tokens that came out of verify passes
    pass_s: float = 0.0  # wall time of the passes (guessing, verifying, sampling)
    plain_tokens: int = 0  # reply tokens decoded one by one (C runs)
    plain_s: float = 0.0
    t_token: float = 0.0  # seconds per plain token the speculator measured (0: unknown)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.pass_tokens / self.passes if self.passes else 0.0

    @property
    def speedup(self) -> float:
        """Estimated speed-up of the reply against decoding it one token at a time (t_token each;
        1.0 while unknown)."""
        return self.speedup_with(self.t_token)

    def speedup_with(self, t_token: float | None) -> float:
        n = self.pass_tokens + self.plain_tokens
        spent = self.pass_s + self.plain_s
        if not t_token or self.passes == 0 or spent <= 0:
            return 1.0
        return n * t_token / spent

    def summary(self) -> str:
        return (
            f"speculation ({self.kind}): {self.passes} passes, {self.tokens_per_pass:.2f} tok/pass, "
            f"{self.accepted}/{self.proposed} guesses accepted ({100 * self.acceptance:.0f}%), "
            + (f"~{self.speedup:.2f}x" if self.t_token else "speed-up not measured")
        )


@dataclass
class GenerationStats:
    prompt_tokens: int = 0  # tokens of the prompt
    prompt_tokens_evaluated: int = 0  # of those, decoded now (the rest was in the KV cache)
    generated_tokens: int = 0
    prompt_s: float = 0.0  # wall time of prompt processing
    generation_s: float = 0.0  # wall time from the first generated token to the last
    ttft_s: float = 0.0  # request to first token (prompt processing + first sample)
    sample_s: float = 0.0  # of generation_s, time spent sampling
    peak_rss_bytes: int = 0
    threads: int = 0
    isa: str = ""
    n_ctx: int = 0
    context_shifts: int = 0
    spec: SpecStats | None = None  # speculative decoding, when on

    @property
    def prompt_tokens_reused(self) -> int:
        """Prompt tokens kept from the KV cache (not decoded again)."""
        return max(0, self.prompt_tokens - self.prompt_tokens_evaluated)

    @property
    def prompt_tok_s(self) -> float:
        return self.prompt_tokens_evaluated / self.prompt_s if self.prompt_s > 0 else 0.0

    @property
    def generation_tok_s(self) -> float:
        # the first token comes out of prompt processing; the rate counts the decode steps after it
        n = self.generated_tokens - 1
        return n / self.generation_s if n > 0 and self.generation_s > 0 else 0.0

    @property
    def sample_share(self) -> float:
        return self.sample_s / self.generation_s if self.generation_s > 0 else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(
            prompt_tok_s=round(self.prompt_tok_s, 2),
            generation_tok_s=round(self.generation_tok_s, 2),
            sample_share=round(self.sample_share, 4),
        )
        for k in ("prompt_s", "generation_s", "ttft_s", "sample_s"):
            d[k] = round(d[k], 4)
        if self.spec is not None:
            d["spec"].update(
                acceptance=round(self.spec.acceptance, 4),
                tokens_per_pass=round(self.spec.tokens_per_pass, 3),
                speedup=round(self.spec.speedup, 3),
            )
        return d

    def summary(self) -> str:
        return (
            f"prompt {self.prompt_tokens} tok ({self.prompt_tokens_evaluated} new) at "
            f"{self.prompt_tok_s:.1f} tok/s, generated {self.generated_tokens} tok at "
            f"{self.generation_tok_s:.1f} tok/s, first token {self.ttft_s * 1000:.0f} ms, "
            f"peak RSS {self.peak_rss_bytes / 2**20:.0f} MB, {self.threads} threads ({self.isa})"
            + (f"; {self.spec.summary()}" if self.spec is not None and self.spec.passes else "")
        )


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (0 where the platform will not say).

    On Linux the memory map's own high-water mark (VmHWM): getrusage's ru_maxrss also counts the
    parent's resident memory when the process was forked from it before exec."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource  # lazy: POSIX only (ImportError on Windows)

        r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(r) if sys.platform == "darwin" else int(r) * 1024
    except (ImportError, OSError):
        pass
    try:
        import psutil  # lazy: the last resort, and slow to import

        info = psutil.Process().memory_info()
        return int(getattr(info, "peak_wset", info.rss))
    except Exception:
        return 0


def current_rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
