"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: sans-IO state machines for the
server (:class:`ScramServer`) and the client (:class:`ScramClient`), and the salted credentials Kafka stores as
``UserScramCredentialRecord`` (:func:`make_credential`).

Each side is fed the other's messages (bytes) and answers bytes; nothing here does IO, so both are tested
without sockets. Kafka's extensions: the client-first message may carry ``tokenauth=true`` (a delegation token
login: the user name is the token id, the credential the token's, :mod:`klog.security.tokens`) and other
``key=value`` extensions, which are ignored.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from typing import Callable

__all__ = ["MECHANISMS", "MAX_ITERATIONS", "MIN_ITERATIONS", "AuthorizationIdDiffers", "ScramClient", "ScramCredential",
           "ScramError", "ScramServer", "make_credential", "mechanism_name", "mechanism_type", "salted_password"]

#: Kafka's ScramMechanism type codes (UserScramCredentialRecord.mechanism, the admin APIs) -> (name, hash)
MECHANISMS: dict[int, tuple[str, str]] = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
#: Kafka's bounds on a credential's iterations (ScramMechanism.minIterations, AlterUserScramCredentials' maximum)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
#: the length of a nonce this side makes (random bytes, base64) and of a new credential's salt
NONCE_BYTES = 24
SALT_BYTES = 32
#: the longest SCRAM message accepted (a user name and a nonce fit many times over)
MAX_MESSAGE_BYTES = 4096
# Kafka's ScramMessages.ClientFirstMessage pattern: gs2 flag "n" only, an optional authorization id, a reserved
# "m=" ignored, the user (ASCII, "=2C"/"=3D" escapes), the nonce, then extensions (tokenauth=true among them)
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                           rf"r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?P<extensions>(?:,[A-Za-z]+={_VALUE})*)")


class ScramError(Exception):
    """The exchange failed: ``message`` is safe to send to the peer (it names no secret)."""


class AuthorizationIdDiffers(ScramError):
    """The client-first message asked for an authorization id other than its user: the one refusal Kafka's
    ScramSaslServer words for the client (every other one is "invalid credentials")."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a password (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def mechanism_type(name: str) -> int:
    """``"SCRAM-SHA-512"`` -> 2; a ValueError for anything else."""
    for code, (mech, _) in MECHANISMS.items():
        if mech == name.upper():
            return code
    raise ValueError(f"{name!r} is not a SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)")


def mechanism_name(code: int) -> str:
    return MECHANISMS[code][0]


def _hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism_type(mechanism)][1]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(password, salt, i): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential from a salted password (what AlterUserScramCredentials sends)."""
    digest = _hash_name(mechanism)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (a random salt unless given)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations} is outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt,
                                  iterations)


def _nonce() -> str:
    return base64.b64encode(os.urandom(NONCE_BYTES)).decode("ascii")


def _fields(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"} (values may hold "=")."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"invalid SCRAM message: attribute {part[:20]!r} is not key=value")
        out.setdefault(key, value)
    return out


def _decode(message: bytes) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError(f"SCRAM message of {len(message)} bytes is above {MAX_MESSAGE_BYTES}")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("invalid SCRAM message: not UTF-8") from None


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str:
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("invalid SCRAM message: bad escape in the user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _b64(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise ScramError(f"invalid SCRAM message: {what} is not base64") from None


class ScramServer:
    """The server's side of one SCRAM exchange: :meth:`first` answers the client-first message, :meth:`final`
    checks the client's proof and answers the server-final message. ``lookup(user)`` gives the user's
    credential for this mechanism, or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *,
                 nonce: str | None = None, token_lookup: Callable[[str], ScramCredential | None] | None = None
                 ) -> None:
        """``token_lookup(token_id)``: a delegation token's credential (None: tokens are not served, every
        ``tokenauth=true`` login fails as an unknown user's)."""
        self.mechanism = mechanism.upper()
        self._own_nonce = nonce
        self._digest = _hash_name(self.mechanism)
        self._lookup = lookup
        self._token_lookup = token_lookup
        #: the client asked for a delegation token login (``tokenauth=true``)
        self.token_auth = False
        self.username: str | None = None
        self.complete = False
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""

    def first(self, message: bytes) -> bytes:
        """client-first -> server-first. As Kafka's ScramSaslServer, a user (or delegation token) without a
        credential is refused here ("invalid credentials"), then an authorization id other than the user
        (:class:`AuthorizationIdDiffers`)."""
        text = _decode(message)
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise ScramError("invalid SCRAM message: not a client-first message")
        authzid = match["authzid"] or ""
        self._gs2_header = f"n,{'a=' + authzid if authzid else ''},"
        bare = text[len(self._gs2_header):]
        extensions = dict(part.split("=", 1) for part in match["extensions"].split(",")[1:])
        self.token_auth = extensions.get("tokenauth", "false").lower() == "true"
        username = unescape_username(match["saslname"])
        self.username = username
        self._client_first_bare = bare
        if self.token_auth:
            credential = self._token_lookup(username) if self._token_lookup is not None else None
        else:
            credential = self._lookup(username)
        if credential is None:
            raise ScramError("invalid credentials")
        if authzid and authzid != username:   # Kafka compares the id as sent with the unescaped user
            raise AuthorizationIdDiffers("authorization id differs from the user name")
        self._credential = credential
        self._nonce = match["nonce"] + (self._own_nonce or _nonce())
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode('ascii')},"
                              f"i={credential.iterations}")
        return self._server_first.encode("ascii")

    def final(self, message: bytes) -> bytes:
        """client-final -> server-final; raises ScramError("invalid credentials") on a wrong proof."""
        text = _decode(message)
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("invalid SCRAM message: the client-final message has no proof")
        attributes = _fields(without_proof)
        if not attributes.get("r", "").endswith(self._nonce):
            # endsWith, as Kafka's ScramSaslServer: librdkafka before 1.x sends the client nonce twice
            raise ScramError("invalid SCRAM message: nonce mismatch")
        if _b64(attributes.get("c", ""), "channel binding") != self._gs2_header.encode("utf-8"):
            raise ScramError("invalid SCRAM message: channel binding mismatch")
        proof = _b64(proof_part, "proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        credential = self._credential
        if credential is None:
            raise ScramError("invalid credentials")
        signature = hmac.new(credential.stored_key, auth_message, self._digest).digest()
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise ScramError("invalid credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self._digest).digest()
        self.complete = True
        return f"v={base64.b64encode(server_signature).decode('ascii')}".encode("ascii")


class ScramClient:
    """The client's side: :meth:`first` makes the client-first message, :meth:`final` answers the server-first
    one, :meth:`verify` checks the server's signature (the server knew the credential)."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None,
                 extensions: dict[str, str] | None = None) -> None:
        self.mechanism = mechanism.upper()
        self._digest = _hash_name(self.mechanism)
        self.username = username
        self._password = password
        self._nonce = nonce or _nonce()
        extra = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}{extra}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = _decode(server_first)
        attributes = _fields(text)
        if "e" in attributes:
            raise ScramError(f"the server refused the login: {attributes['e']}")
        nonce = attributes.get("r", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("invalid server-first message: nonce mismatch")
        salt = _b64(attributes.get("s", ""), "salt")
        try:
            iterations = int(attributes.get("i", ""))
        except ValueError:
            raise ScramError("invalid server-first message: bad iteration count") from None
        if not MIN_ITERATIONS <= iterations <= 10 * MAX_ITERATIONS:
            raise ScramError(f"server asked for {iterations} iterations")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._digest).digest()
        stored_key = hashlib.new(self._digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode("utf-8")
        signature = hmac.new(stored_key, auth_message, self._digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self._digest).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        attributes = _fields(_decode(server_final))
        if "e" in attributes:
            raise ScramError(f"the server refused the login: {attributes['e']}")
        if not hmac.compare_digest(_b64(attributes.get("v", ""), "signature"), self._server_signature):
            raise ScramError("the server's signature is wrong (it does not know this user's credential)")
