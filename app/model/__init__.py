"""From a GGUF file to what the decoder needs: config, support verdict, memory estimate."""

from app.model.config import ARCHITECTURES, ArchSpec, DecoderConfig, config_from_gguf
from app.model.memory import MemoryEstimate, estimate_memory
from app.model.support import Verdict, check_tokenizer_metadata, require_supported, support_verdict

__all__ = [
    "ARCHITECTURES",
    "ArchSpec",
    "DecoderConfig",
    "config_from_gguf",
    "MemoryEstimate",
    "estimate_memory",
    "Verdict",
    "check_tokenizer_metadata",
    "require_supported",
    "support_verdict",
]
