# This file is dual licensed under the terms of the Apache License, Version
# 2.0, and the BSD License. See the LICENSE file in the root of this repository
# for complete details.

from __future__ import annotations

from cryptography.hazmat.asn1.asn1 import (
    TLV,
    BitString,
    Default,
    Explicit,
    GeneralizedTime,
    IA5String,
    Implicit,
    Null,
    PrintableString,
    SetOf,
    Size,
    UTCTime,
    Variant,
    decode_der,
    encode_der,
    sequence,
    set,
    value_set,
)

__all__ = [
    "TLV",
    "BitString",
    "Default",
    "Explicit",
    "GeneralizedTime",
    "IA5String",
    "Implicit",
    "Null",
    "PrintableString",
    "SetOf",
    "Size",
    "UTCTime",
    "Variant",
    "decode_der",
    "encode_der",
    "sequence",
    "set",
    "value_set",
]
