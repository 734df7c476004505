"""The engine: a decoder (C, one call per batch), sessions with a reusable KV cache, sampling, and
generation as a generator of events. No Qt here; the UI worker and the CLI drive the same loop.
"""
