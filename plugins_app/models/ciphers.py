"""Fernet keys derived from the operator's secrets: one derivation for everything the hub stores encrypted."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

from cryptography.fernet import Fernet, MultiFernet


def _fernet(label: bytes, secret: str) -> Fernet:
    # The label keeps the keys of different stores apart: an SSH key's ciphertext never decrypts as a secret.
    digest = hashlib.sha256(label + b"\0" + secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def derived_cipher(label: bytes, primary: str, fallbacks: Iterable[str]) -> MultiFernet:
    """Encrypts with the key derived from `primary`; decrypts with that and every fallback's."""
    secrets = [s for s in dict.fromkeys([primary, *fallbacks]) if s]
    return MultiFernet([_fernet(label, s) for s in secrets])
