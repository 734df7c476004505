"""The Hugging Face access token for gated repositories, kept in the OS keyring.

Order of use: `HF_TOKEN` in the environment, then the keyring (service "llambda", user
"huggingface"), then whatever `huggingface_hub` itself has saved (`hf auth login`). Where no
keyring is usable (a headless Linux without a secret service), the token is not stored and
`save_token` says so: it is never written to a plain file by us.
"""

from __future__ import annotations

import os
from types import ModuleType

from app.errors import LlambdaError

SERVICE, USER = "llambda", "huggingface"


class TokenStoreError(LlambdaError, OSError):
    """The keyring cannot store the token here."""


def _keyring() -> ModuleType | None:
    try:
        import keyring  # lazy: only a gated download needs it
        from keyring.backends import fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken backend configuration: as good as none
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 1) <= 0:
        return None
    return keyring


def stored_token() -> str | None:
    """The token to send, or None (huggingface_hub may then use its own saved one)."""
    env = os.environ.get("HF_TOKEN", "").strip()
    if env:
        return env
    kr = _keyring()
    if kr is None:
        return None
    try:
        value = kr.get_password(SERVICE, USER)
    except Exception:  # locked or unavailable keyring: proceed without a token
        return None
    return value.strip() if value and value.strip() else None


def save_token(token: str) -> str:
    """Store `token` in the keyring; returns where it went. Raises TokenStoreError."""
    token = token.strip()
    if not token or any(c.isspace() for c in token):
        raise TokenStoreError("that is not an access token (it is empty or has spaces in it)")
    kr = _keyring()
    if kr is None:
        raise TokenStoreError("no keyring is available to store the token; set HF_TOKEN in the environment instead")
    try:
        kr.set_password(SERVICE, USER, token)
    except Exception as e:
        raise TokenStoreError(f"the keyring refused the token: {e}") from None
    return type(kr.get_keyring()).__name__


def clear_token() -> bool:
    """Remove the stored token; True when there was one."""
    kr = _keyring()
    if kr is None:
        return False
    try:
        if kr.get_password(SERVICE, USER) is None:
            return False
        kr.delete_password(SERVICE, USER)
        return True
    except Exception:
        return False


__all__ = ["stored_token", "save_token", "clear_token", "TokenStoreError"]
