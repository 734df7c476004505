"""The engine: a decoder (C, one call per batch), sessions with a reusable KV cache, sampling, and
generation as a generator of events. No Qt here; the UI worker and the CLI drive the same loop.

    from app.engine import Engine, Chat, GenerationRequest, SamplerSettings, TextPiece, Finished
    with Engine(path, n_ctx=4096) as eng:
        chat = Chat(eng, system="Be brief.")
        for ev in chat.send("Hello!", SamplerSettings(seed=1)):
            ...   # PromptProgress, TextPiece, ContextShifted, then one Finished (stats inside)
    # from another thread: eng.cancel()  -> Finished.stop_reason == "cancelled"
"""

from app.engine.decoder import CDecoder, DecodeCancelled, Decoder
from app.engine.engine import Chat, Engine
from app.engine.generate import ContextShifted, Finished, GenerationRequest, PromptProgress, TextPiece, generate
from app.engine.sampler import GREEDY, Sampler, SamplerSettings
from app.engine.session import ContextFullError, GenerationCancelled, Session
from app.engine.stats import GenerationStats

__all__ = [
    "CDecoder",
    "DecodeCancelled",
    "Decoder",
    "Chat",
    "Engine",
    "ContextShifted",
    "Finished",
    "GenerationRequest",
    "PromptProgress",
    "TextPiece",
    "generate",
    "GREEDY",
    "Sampler",
    "SamplerSettings",
    "ContextFullError",
    "GenerationCancelled",
    "Session",
    "GenerationStats",
]
