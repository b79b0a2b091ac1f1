"""Who sent a request: Kafka's ``KafkaPrincipal`` (``User:alice``).

A PLAINTEXT or SSL-without-client-auth connection is ``User:ANONYMOUS``, as in Kafka; SASL sets the authenticated
user name, mTLS the certificate's distinguished name after ``ssl.principal.mapping.rules``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


#: the principal of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
