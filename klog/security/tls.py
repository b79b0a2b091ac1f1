"""TLS as Kafka configures it: ``ssl.*`` settings -> Python ``ssl.SSLContext`` for a listener (server side) or a
connection to a broker (client side), and the principal of a client certificate (``ssl.principal.mapping.rules``).

Keystores and truststores: PEM (a file holding the key and its certificate chain, or the inline
``ssl.keystore.key``/``ssl.keystore.certificate.chain``/``ssl.truststore.certificates``) and PKCS12 (read with the
``cryptography`` package). Java's JKS is refused with how to convert it.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from klog.metadata.config_keys import ConfigError
from klog.metadata.config_security import SECURITY_KEYS
from klog.security.principal import KafkaPrincipal

__all__ = ["DynamicTls", "PrincipalMapper", "TlsConfigError", "client_context", "distinguished_name",
           "native_server_config", "peercert_of", "reloaded_server_context", "server_context"]

log = logging.getLogger("klog.security.tls")

_PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
#: RFC 2253 keywords Java's X500Principal.getName() uses, by the attribute names Python's getpeercert() gives
_DN_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


class TlsConfigError(ValueError):
    """A TLS setting cannot be used: ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config {key!r}: {message}")
        self.key = key


def _opt(settings: Mapping[str, Any], key: str) -> Any:
    value = settings.get(key)
    return None if value in (None, "") else value


def _pkcs12(path: str, password: str | None, key: str) -> tuple[bytes | None, list[bytes]]:
    """(private key PEM or None, certificate PEMs: the key's own first) of a PKCS12 file."""
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
    except ImportError:
        raise TlsConfigError(key, "PKCS12 stores need the 'cryptography' package (pip install cryptography), or "
                                  "use ssl.keystore.type=PEM") from None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise TlsConfigError(key, f"cannot read {path}: {exc.strerror}") from None
    try:
        private_key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise TlsConfigError(key, f"{path} is not a PKCS12 store or its password is wrong") from None
    certs = ([cert] if cert is not None else []) + list(extra or [])
    key_pem = None if private_key is None else private_key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return key_pem, [c.public_bytes(Encoding.PEM) for c in certs]


_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
_PEM_KEY = re.compile(rb"-----BEGIN ((?:[A-Z]+ )*)PRIVATE KEY-----.+?-----END \1PRIVATE KEY-----", re.S)


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise TlsConfigError(key, f"cannot read {path}: {exc.strerror}") from None


@dataclass(frozen=True)
class _Keystore:
    """A listener's keystore as its settings give it, in PEM (Python's ssl module and the native session load it
    alike)."""
    #: the certificate chain, the listener's own certificate first
    chain: bytes
    #: its private key, encrypted with ``password`` when that is set
    key: bytes
    password: str | None
    #: the setting a key that cannot be used is reported under
    setting: str


def _keystore(settings: Mapping[str, Any], *, required: bool) -> _Keystore | None:
    """The keystore ``ssl.keystore.*`` (a PEM or PKCS12 file, or inline PEM) names; None when none is set and
    ``required`` is false."""
    store_type = str(settings.get("ssl.keystore.type") or "PEM").upper()
    location = _opt(settings, "ssl.keystore.location")
    inline_key = _opt(settings, "ssl.keystore.key")
    inline_chain = _opt(settings, "ssl.keystore.certificate.chain")
    key_password = _opt(settings, "ssl.key.password")
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            raise TlsConfigError("ssl.keystore.key", "ssl.keystore.key and ssl.keystore.certificate.chain go "
                                                     "together")
        return _Keystore(inline_chain.encode(), inline_key.encode(), key_password, "ssl.keystore.key")
    if location is None:
        if required:
            raise TlsConfigError("ssl.keystore.location", "a TLS listener needs its certificate: set "
                                 "ssl.keystore.location (PEM or PKCS12), or ssl.keystore.key and "
                                 "ssl.keystore.certificate.chain")
        return None
    if store_type == "PKCS12":
        key_pem, cert_pems = _pkcs12(location, _opt(settings, "ssl.keystore.password"), "ssl.keystore.location")
        if key_pem is None or not cert_pems:
            raise TlsConfigError("ssl.keystore.location", f"{location} holds no private key with its certificate")
        return _Keystore(b"".join(cert_pems), key_pem, None, "ssl.keystore.location")
    if store_type != "PEM":
        raise TlsConfigError("ssl.keystore.type", f"{store_type}: klog reads PEM and PKCS12 keystores (convert JKS "
                             "with keytool -importkeystore -deststoretype PKCS12)")
    data = _read(location, "ssl.keystore.location")
    key_match = _PEM_KEY.search(data)
    chain = b"\n".join(m.group(0) for m in _PEM_CERT.finditer(data))
    if key_match is None or not chain:
        raise TlsConfigError("ssl.keystore.location", f"{location} holds no PEM private key with its certificate "
                             "chain")
    return _Keystore(chain + b"\n", key_match.group(0), key_password, "ssl.keystore.location")


def _load_keystore(context: ssl.SSLContext, settings: Mapping[str, Any], *, required: bool) -> None:
    keystore = _keystore(settings, required=required)
    if keystore is not None:
        _load_pem_pair(context, keystore.chain, keystore.key, keystore.password, keystore.setting)


def _load_pem_pair(context: ssl.SSLContext, chain: bytes, key: bytes, password: str | None, setting: str) -> None:
    """load_cert_chain reads files only: write the PEMs to a private temporary file, load, remove it."""
    fd, path = tempfile.mkstemp(prefix="klog-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.rstrip() + b"\n" + chain.rstrip() + b"\n")
        context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(setting, f"cannot load the key and certificate chain: {exc}") from None
    finally:
        os.unlink(path)


def _load_truststore(context: ssl.SSLContext, settings: Mapping[str, Any]) -> bool:
    """Trust the configured CAs; False when none is configured."""
    trusted = _truststore_pem(settings)
    if trusted is None:
        return False
    try:
        context.load_verify_locations(cadata=trusted.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError) as exc:
        raise TlsConfigError(_truststore_setting(settings), f"cannot load trusted certificates: {exc}") from None
    return True


def _protocols(context: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    enabled = settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    if isinstance(enabled, str):
        enabled = [p.strip() for p in enabled.split(",") if p.strip()]
    versions = []
    for name in enabled:
        if name not in _PROTOCOL_VERSIONS:
            raise TlsConfigError("ssl.enabled.protocols", f"{name!r}: klog speaks TLSv1.2 and TLSv1.3")
        versions.append(_PROTOCOL_VERSIONS[name])
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def openssl_cipher_name(name: str) -> str | None:
    """Kafka's (IANA) cipher suite name -> OpenSSL's (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` ->
    ``ECDHE-RSA-AES128-GCM-SHA256``); None for TLS 1.3 suites (always enabled); OpenSSL names pass through."""
    if not name.startswith("TLS_"):
        return name
    if "_WITH_" not in name:
        return None   # a TLS 1.3 suite (TLS_AES_128_GCM_SHA256): OpenSSL enables them all
    kx, _, cipher = name[4:].partition("_WITH_")
    kx = {"RSA": "", "ECDHE_RSA": "ECDHE-RSA", "ECDHE_ECDSA": "ECDHE-ECDSA", "DHE_RSA": "DHE-RSA"}.get(kx, kx)
    cipher = cipher.replace("AES_128_GCM", "AES128-GCM").replace("AES_256_GCM", "AES256-GCM")
    cipher = cipher.replace("AES_128_CBC", "AES128").replace("AES_256_CBC", "AES256")
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").replace("_", "-")
    return f"{kx}-{cipher}" if kx else (cipher if not cipher.startswith("AES") else cipher)


def _ciphers(context: ssl.SSLContext, settings: Mapping[str, Any]) -> None:
    suites = settings.get("ssl.cipher.suites") or []
    if isinstance(suites, str):
        suites = [s.strip() for s in suites.split(",") if s.strip()]
    names = [n for n in (openssl_cipher_name(s) for s in suites) if n]
    if names:
        try:
            context.set_ciphers(":".join(names))
        except ssl.SSLError:
            raise TlsConfigError("ssl.cipher.suites", f"none of {', '.join(suites)} is a cipher suite OpenSSL "
                                                      "offers") from None


def server_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """The SSLContext of a TLS listener from its ``ssl.*`` settings (``listener.name.<l>.ssl.*`` resolved)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(context, settings)
    _ciphers(context, settings)
    _load_keystore(context, settings, required=True)
    client_auth = str(settings.get("ssl.client.auth") or "none").lower()
    trusted = _load_truststore(context, settings)
    if client_auth in ("required", "requested"):
        if not trusted:
            raise TlsConfigError("ssl.truststore.location", f"ssl.client.auth={client_auth} needs the CAs client "
                                 "certificates are checked against: set ssl.truststore.location or "
                                 "ssl.truststore.certificates")
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context


# ---- the native engine (klog.tls.engine=native): the same settings as PEM bytes for klog._native -------------------

#: the ECDSA curves of the keys the native session serves and verifies (its ring provider's P-256 and P-384, and
#: P-521 from RustCrypto's p521 crate: klog_core::tls_p521)
_NATIVE_CURVES = frozenset({"secp256r1", "secp384r1", "secp521r1"})


def _unencrypted_key(pem: bytes, password: str | None, key: str) -> bytes:
    """A PEM private key (encrypted with ``password`` or not) as unencrypted PKCS#8 PEM."""
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            load_pem_private_key,
        )
    except ImportError:
        raise TlsConfigError(key, "klog.tls.engine=native needs the 'cryptography' package (pip install "
                                  "cryptography)") from None
    try:
        private = load_pem_private_key(pem, password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        raise TlsConfigError(key, f"cannot load the private key: {exc}") from None
    unserved = _unserved_key(private)
    if unserved is not None:
        raise TlsConfigError(key, f"the keystore's key is {unserved}: klog's native TLS session serves RSA, ECDSA "
                                  "P-256/P-384/P-521 and Ed25519 keys (klog.tls.engine=ssl serves it)")
    return private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def _unserved_key(key: Any) -> str | None:
    """What kind of key ``key`` (a cryptography private or public key) is when the native session can neither sign
    nor verify with it (an ECDSA key on a curve other than P-256/P-384/P-521, Ed448, DSA); None for the keys it
    can."""
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448

    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)) \
            and key.curve.name not in _NATIVE_CURVES:
        return f"an ECDSA key on {key.curve.name}"
    if isinstance(key, (ed448.Ed448PrivateKey, ed448.Ed448PublicKey)):
        return "an Ed448 key"
    if isinstance(key, (dsa.DSAPrivateKey, dsa.DSAPublicKey)):
        return "a DSA key"
    return None


def _check_client_cas(trusted: bytes, setting: str) -> None:
    """A truststore the native session verifies client certificates against: none of its CAs may have a key it
    cannot verify signatures of (a client certificate such a CA signed would be refused, where the ssl module
    serves it)."""
    from cryptography import x509

    try:
        cas = x509.load_pem_x509_certificates(trusted)
    except ValueError:
        return   # what the native session makes of it says what is wrong
    for ca in cas:
        unserved = _unserved_key(ca.public_key())
        if unserved is not None:
            raise TlsConfigError(setting, f"the CA {ca.subject.rfc4514_string()} has {unserved}: klog's native "
                                          "TLS session cannot verify the client certificates it signs "
                                          "(klog.tls.engine=ssl can)")


def _keystore_pems(settings: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(certificate chain PEM, unencrypted key PEM) of a listener's keystore, for the native session."""
    keystore = _keystore(settings, required=True)
    assert keystore is not None
    return keystore.chain, _unencrypted_key(keystore.key, keystore.password, keystore.setting)


def _truststore_setting(settings: Mapping[str, Any]) -> str:
    """The setting the trusted CAs come from, to name in an error."""
    return "ssl.truststore.certificates" if _opt(settings, "ssl.truststore.certificates") else "ssl.truststore.location"


def _truststore_pem(settings: Mapping[str, Any]) -> bytes | None:
    """The trusted CAs' PEM (inline, a PEM file or a PKCS12 store); None when none is configured."""
    store_type = str(settings.get("ssl.truststore.type") or "PEM").upper()
    location = _opt(settings, "ssl.truststore.location")
    inline = _opt(settings, "ssl.truststore.certificates")
    if inline:
        return str(inline).encode()
    if location is None:
        return None
    if store_type == "PKCS12":
        _, cert_pems = _pkcs12(location, _opt(settings, "ssl.truststore.password"), "ssl.truststore.location")
        if not cert_pems:
            raise TlsConfigError("ssl.truststore.location", f"{location} holds no certificate")
        return b"".join(cert_pems)
    if store_type != "PEM":
        raise TlsConfigError("ssl.truststore.type", f"{store_type}: klog reads PEM and PKCS12 truststores")
    return _read(location, "ssl.truststore.location")


def native_server_config(settings: Mapping[str, Any]) -> Any:
    """The ``klog._native.TlsServerConfig`` of a TLS listener from its ``ssl.*`` settings (as
    :func:`server_context`; a TlsConfigError names what is wrong)."""
    from klog._native import TlsServerConfig

    chain, key_pem = _keystore_pems(settings)
    client_auth = str(settings.get("ssl.client.auth") or "none").lower()
    trusted = _truststore_pem(settings)
    if client_auth in ("required", "requested") and trusted is None:
        raise TlsConfigError("ssl.truststore.location", f"ssl.client.auth={client_auth} needs the CAs client "
                             "certificates are checked against: set ssl.truststore.location or "
                             "ssl.truststore.certificates")
    if client_auth in ("required", "requested") and trusted is not None:
        _check_client_cas(trusted, _truststore_setting(settings))
    protocols = settings.get("ssl.enabled.protocols") or ["TLSv1.2", "TLSv1.3"]
    suites = settings.get("ssl.cipher.suites") or []
    if isinstance(protocols, str):
        protocols = [p.strip() for p in protocols.split(",") if p.strip()]
    if isinstance(suites, str):
        suites = [p.strip() for p in suites.split(",") if p.strip()]
    try:
        return TlsServerConfig(chain, key_pem, client_ca_pem=trusted if client_auth != "none" else None,
                               client_auth=client_auth, protocols=list(protocols), cipher_suites=list(suites))
    except ValueError as exc:
        message = str(exc)
        setting = message.partition(":")[0]
        if setting not in ("ssl.cipher.suites", "ssl.enabled.protocols", "ssl.client.auth"):
            setting = "ssl.keystore.location"
        raise TlsConfigError(setting, message.removeprefix(f"{setting}: ")) from None


#: OpenSSL's long names (what ``getpeercert()`` gives) where the cryptography package names an attribute otherwise
_OPENSSL_ATTRIBUTE_NAMES = {"userID": "userId"}


def peercert_of(der: bytes) -> dict[str, Any]:
    """The ``subject`` of a DER certificate as ``ssl.SSLSocket.getpeercert()`` gives it (what
    :func:`distinguished_name` reads): RDNs in the certificate's order, attributes by OpenSSL's long names."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    subject = []
    for rdn in cert.subject.rdns:
        attributes = []
        for attribute in rdn:
            name = attribute.oid._name
            name = attribute.oid.dotted_string if name == "Unknown OID" else _OPENSSL_ATTRIBUTE_NAMES.get(name, name)
            value = attribute.value
            attributes.append((name, value if isinstance(value, str) else value.hex()))
        subject.append(tuple(attributes))
    return {"subject": tuple(subject)}


def _leaf_certificate(settings: Mapping[str, Any]) -> Any:
    """The first certificate of the keystore ``settings`` name (a cryptography x509.Certificate; None without a
    keystore). Called after the keystore loaded into a context, so it is readable."""
    from cryptography import x509

    chain = _opt(settings, "ssl.keystore.certificate.chain")
    location = _opt(settings, "ssl.keystore.location")
    if chain is not None:
        data = chain.encode()
    elif location is None:
        return None
    elif str(settings.get("ssl.keystore.type") or "PEM").upper() == "PKCS12":
        certs = _pkcs12(location, _opt(settings, "ssl.keystore.password"), "ssl.keystore.location")[1]
        data = certs[0] if certs else b""
    else:
        with open(location, "rb") as handle:
            data = handle.read()
    begin = data.find(b"-----BEGIN CERTIFICATE-----")
    end = data.find(b"-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        return None
    return x509.load_pem_x509_certificate(data[begin:end + len(b"-----END CERTIFICATE-----")])


def _subject_alt_names(cert: Any) -> set[str]:
    from cryptography import x509

    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {f"{type(name).__name__}:{name.value}" for name in names}


def reloaded_server_context(current: Mapping[str, Any], new: Mapping[str, Any]) -> ssl.SSLContext:
    """A TLS listener's context after a dynamic change of its ``ssl.*`` settings from ``current`` to ``new``, with
    Kafka's SslFactory checks: the new keystore and truststore load, and the new certificate keeps the subject and
    the subject alternative names of the current one (unless ``ssl.allow.dn.changes`` /
    ``ssl.allow.san.changes``). A TlsConfigError says what is wrong."""
    context = server_context(new)
    try:
        before, after = _leaf_certificate(current), _leaf_certificate(new)
    except (OSError, ValueError, TlsConfigError):
        before, after = None, None   # the current keystore is gone: nothing to compare the new one with
    if before is not None and after is not None:
        key = "ssl.keystore.location"
        if not new.get("ssl.allow.dn.changes") and before.subject != after.subject:
            raise TlsConfigError(key, f"Keystore DistinguishedName does not match: existing="
                                      f"{before.subject.rfc4514_string()}, new={after.subject.rfc4514_string()}")
        if not new.get("ssl.allow.san.changes") and _subject_alt_names(before) != _subject_alt_names(after):
            raise TlsConfigError(key, f"Keystore SubjectAltNames do not match: existing="
                                      f"{sorted(_subject_alt_names(before))}, new={sorted(_subject_alt_names(after))}")
    return context


def client_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """The SSLContext for connecting to a broker (Kafka's client ``ssl.*`` settings): the truststore (the system's
    CAs when none is set), a client certificate when a keystore is set, host name checks unless
    ``ssl.endpoint.identification.algorithm`` is empty."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(context, settings)
    _ciphers(context, settings)
    if not _load_truststore(context, settings):
        context.load_default_certs()
    _load_keystore(context, settings, required=False)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https")
    context.check_hostname = bool(algorithm) and str(algorithm).lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(peercert: Mapping[str, Any]) -> str | None:
    """A certificate's subject (``ssl.SSLSocket.getpeercert()``) as Java's ``X500Principal.getName()`` writes it
    (RFC 2253: the last RDN first, ``CN=client,OU=eng,O=Example,C=US``); None without a subject."""
    subject = peercert.get("subject") if peercert else None
    if not subject:
        return None
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_DN_KEYWORDS.get(name, name)}={_escape(value)}" for name, value in rdn))
    return ",".join(rdns)


_RULE_RE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(,|$)")


class PrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: the first RULE whose pattern matches the whole DN gives the name
    (the pattern's replacement, lower- or upper-cased with ``/L`` or ``/U``); DEFAULT gives the DN itself."""

    def __init__(self, rules: str | None) -> None:
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        text = (rules or "DEFAULT").strip()
        pos = 0
        while pos < len(text):
            match = _RULE_RE.match(text, pos)
            if match is None or match.end() == pos:
                raise TlsConfigError("ssl.principal.mapping.rules", f"invalid rule at character {pos + 1}: "
                                     "expected DEFAULT or RULE:pattern/replacement/[LU]")
            if match[1] == "DEFAULT":
                self.rules.append(None)
            else:
                try:
                    pattern = re.compile(match[2])
                except re.error as exc:
                    raise TlsConfigError("ssl.principal.mapping.rules", f"bad pattern {match[2]!r}: {exc}") from None
                replacement = re.sub(r"\$(\d)", r"\\\1", match[3])
                self.rules.append((pattern, replacement, match[4]))
            pos = match.end()

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                name = pattern.sub(replacement, dn, count=1)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        return dn

    def principal(self, peercert: Mapping[str, Any] | None) -> KafkaPrincipal | None:
        dn = distinguished_name(peercert or {})
        return None if dn is None else KafkaPrincipal("User", self.principal_name(dn))


def with_dynamic(settings: Mapping[str, Any], dynamic: Mapping[str, str]) -> dict[str, Any]:
    """A listener's ``settings`` with its dynamic ssl.* configs (ConfigRecord strings, parsed) over them."""
    out = dict(settings)
    for key, value in dynamic.items():
        out[key] = SECURITY_KEYS[key].parse(value)
    return out


class DynamicTls:
    """A listener's TLS as its dynamic ``listener.name.<l>.ssl.*`` configs change (Kafka's reconfigurable
    SslFactory), for what a node serves on it and what it presents when it connects to it: ``dynamic_of()``
    returns the listener's current dynamic ssl.* settings (this node's ConfigRecords, unparsed), read at each new
    connection; the contexts are rebuilt when they changed. Settings that no longer load (validated before they
    were written: a file changed since) are logged and the previous contexts kept; connections already open keep
    theirs."""

    def __init__(self, name: str, settings: Mapping[str, Any], dynamic_of: Callable[[], Mapping[str, str]], *,
                 server: ssl.SSLContext | None = None) -> None:
        """``settings``: the listener's static ssl.* settings; ``server``: the context it serves with (from those
        settings; None: this node does not serve it)."""
        self.name = name
        self.settings = dict(settings)
        self.dynamic_of = dynamic_of
        self.server_static = server
        self._client_static: ssl.SSLContext | None = None
        self._applied: dict[str, str] = {}
        self._server: ssl.SSLContext | None = None
        self._client: ssl.SSLContext | None = None
        #: how many times the settings were reloaded (for tests and metrics)
        self.reloads = 0

    def _refresh(self) -> None:
        try:
            dynamic = dict(self.dynamic_of())
        except Exception:   # the image is not there yet: the static settings serve
            log.exception("listener %s: cannot read its dynamic TLS settings", self.name)
            return
        if dynamic == self._applied:
            return
        try:
            if dynamic:
                new = with_dynamic(self.settings, dynamic)
                server = None if self.server_static is None else reloaded_server_context(
                    with_dynamic(self.settings, self._applied), new)
                client = client_context(new)
            else:
                server, client = None, None
        except (TlsConfigError, ConfigError) as exc:
            log.error("listener %s: keeping its TLS settings, the dynamic ones cannot be used: %s", self.name, exc)
        else:
            self._server, self._client = server, client
            self.reloads += 1
            log.info("listener %s: new connections to and from this node use the reloaded TLS settings (%s)",
                     self.name, ", ".join(sorted(dynamic)) or "the static ones")
        self._applied = dynamic

    def client(self) -> ssl.SSLContext:
        """The context of a new connection to the listener (its truststore; its keystore as the client
        certificate)."""
        self._refresh()
        if self._client is not None:
            return self._client
        if self._client_static is None:
            self._client_static = client_context(self.settings)
        return self._client_static

    def serve(self) -> None:
        """Make the server context (``server``) serve each new connection with the current settings: its
        server-name callback, called on every ClientHello (with or without SNI), swaps the reloaded context in."""
        static = self.server_static
        assert static is not None

        def choose(sslobj: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
            try:
                self._refresh()
                if self._server is not None:
                    sslobj.context = self._server
            except Exception:   # never fail a handshake for this: the previous context serves
                log.exception("listener %s: cannot apply its dynamic TLS settings", self.name)

        static.sni_callback = choose
