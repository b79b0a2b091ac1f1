"""Who sent a request: Kafka's ``KafkaPrincipal`` (``User:alice``).

A PLAINTEXT or SSL-without-client-auth connection is ``User:ANONYMOUS``, as in Kafka; SASL sets the authenticated
user name, mTLS the certificate's distinguished name after ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from klog.protocol import codegen
from klog.protocol.codegen import read_uvarint, uvarint


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    #: logged in with a delegation token (SCRAM ``tokenauth=true``): such a principal may not manage tokens.
    #: Not part of equality, as in Kafka: the token's owner is the same principal however it logged in.
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` -> KafkaPrincipal("User", "alice"); a ValueError names the text when it has no type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not of the form <type>:<name> (for example User:alice)")
        return cls(principal_type, name)

    @classmethod
    def stored(cls, text: str) -> KafkaPrincipal:
        """A principal as stored in a record (Kafka's ``SecurityUtils.parseKafkaPrincipal``): split at the first
        colon, either part possibly empty (a delegation token's renewer ``User:``, an owner ``:z``)."""
        principal_type, _, name = text.partition(":")
        return cls(principal_type, name)


#: the principal of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


#: DefaultPrincipalData's version (Kafka's DefaultKafkaPrincipalBuilder.serialize: a version-prefixed, flexible v0
#: struct of Type, Name and TokenAuthenticated), what an EnvelopeRequest's request_principal holds
PRINCIPAL_DATA_VERSION = 0
_VERSION = struct.Struct(">h")


def serialize_principal(principal: KafkaPrincipal) -> bytes:
    """``principal`` as Kafka's brokers put it in an EnvelopeRequest (``DefaultPrincipalData`` v0)."""
    out = bytearray(_VERSION.pack(PRINCIPAL_DATA_VERSION))
    for text in (principal.principal_type, principal.name):
        data = text.encode()
        out += uvarint(len(data) + 1) + data
    out += b"\x01" if principal.token_authenticated else b"\x00"
    out += b"\x00"   # no tagged fields
    return bytes(out)


def deserialize_principal(data: bytes | bytearray | memoryview) -> KafkaPrincipal:
    """The principal of an EnvelopeRequest's request_principal; a ValueError says why it cannot be read (the
    controller answers it PRINCIPAL_DESERIALIZATION_FAILURE, as Kafka's)."""
    view = memoryview(data)
    try:
        (version,) = _VERSION.unpack_from(view, 0)
        if version != PRINCIPAL_DATA_VERSION:
            raise ValueError(f"principal data version {version} (this node reads {PRINCIPAL_DATA_VERSION})")
        pos = _VERSION.size
        texts: list[str] = []
        for _ in range(2):
            size, pos = read_uvarint(view, pos)
            if size == 0 or pos + size - 1 > len(view):
                raise ValueError("a null or truncated principal type or name")
            texts.append(bytes(view[pos:pos + size - 1]).decode())
            pos += size - 1
        token_authenticated = view[pos] != 0
        _, pos = codegen.read_unknown_tags(view, pos + 1, len(view))   # tags of a newer writer: skipped
    except (IndexError, struct.error, UnicodeDecodeError, codegen._Malformed) as exc:
        raise ValueError(f"malformed principal data: {exc}") from None
    if pos != len(view) or not texts[0] or not texts[1]:
        raise ValueError("malformed principal data: an empty type or name, or trailing bytes")
    return KafkaPrincipal(texts[0], texts[1], token_authenticated)
