# This file is dual licensed under the terms of the Apache License, Version
# 2.0, and the BSD License. See the LICENSE file in the root of this repository
# for complete details.

from __future__ import annotations

from cryptography.hazmat.primitives._cipheralgorithm import (
    BlockCipherAlgorithm,
    CipherAlgorithm,
)
from cryptography.hazmat.primitives.ciphers.base import (
    AEADCipherContext,
    AEADDecryptionContext,
    AEADEncryptionContext,
    Cipher,
    CipherContext,
)

__all__ = [
    "AEADCipherContext",
    "AEADDecryptionContext",
    "AEADEncryptionContext",
    "BlockCipherAlgorithm",
    "Cipher",
    "CipherAlgorithm",
    "CipherContext",
]
