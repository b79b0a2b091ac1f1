"""Certificates for tests and benchmarks, made with the ``cryptography`` package: a CA, and server or client
certificates it signs, written as PEM files (and PKCS12 stores) the way Kafka's ``ssl.*`` settings read them."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "Issued"]


@dataclass
class Issued:
    """A key and its certificate (signed by the CA): PEM files, and the PEM text for inline settings."""

    cert_file: str
    key_file: str
    #: the key and certificate chain in one PEM file (ssl.keystore.type=PEM, ssl.keystore.location)
    keystore_file: str
    cert_pem: str
    key_pem: str
    subject: str

    def pkcs12(self, path: str | os.PathLike[str], password: str) -> str:
        key = serialization.load_pem_private_key(self.key_pem.encode(), None)
        cert = x509.load_pem_x509_certificate(self.cert_pem.encode())
        data = pkcs12.serialize_key_and_certificates(b"klog", key, cert, None,  # type: ignore[arg-type]
                                                     serialization.BestAvailableEncryption(password.encode()))
        Path(path).write_bytes(data)
        return str(path)


def _name(cn: str, org: str | None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attributes = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] + attributes
    return x509.Name(attributes)


class CertificateAuthority:
    """A self-signed CA in ``directory`` (``ca.pem``); :meth:`issue` signs server and client certificates."""

    def __init__(self, directory: str | os.PathLike[str], name: str = "klog test CA", *,
                 curve: ec.EllipticCurve | None = None,
                 digest: hashes.SHA256 | hashes.SHA384 | hashes.SHA512 | None = None) -> None:
        """``curve``: the CA key's (P-256 unless given); ``digest``: the hash it signs with (SHA-256 unless
        given)."""
        self.digest: hashes.SHA256 | hashes.SHA384 | hashes.SHA512 = digest if digest is not None else hashes.SHA256()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(curve if curve is not None else ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        subject = _name(name, None)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                  content_commitment=False, key_encipherment=False,
                                                  data_encipherment=False, key_agreement=False,
                                                  encipher_only=False, decipher_only=False), critical=True)
                     .sign(self.key, self.digest))
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
        self.ca_file = str(self.directory / "ca.pem")
        Path(self.ca_file).write_text(self.pem)

    def issue(self, name: str, *, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), org: str | None = "klog",
              days: int = 30, expired: bool = False, curve: ec.EllipticCurve | None = None,
              ed448_key: bool = False) -> Issued:
        """A certificate for ``name`` (its CN; ``hosts`` as subject alternative names), usable by a server and a
        client. ``expired``: its validity ended yesterday; ``curve``: its key's (P-256 unless given, e.g.
        ``ec.SECP521R1()``); ``ed448_key``: an Ed448 key instead, one Python's ssl module serves and klog's native
        TLS session does not."""
        key: ec.EllipticCurvePrivateKey | ed448.Ed448PrivateKey = ed448.Ed448PrivateKey.generate() if ed448_key \
            else ec.generate_private_key(curve if curve is not None else ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        start, end = (now - datetime.timedelta(days=3), now - datetime.timedelta(days=1)) if expired else \
            (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days))
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        subject = _name(name, org)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, self.digest)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode("ascii")
        base = self.directory / name.replace(" ", "_")
        cert_file, key_file, keystore = f"{base}.crt", f"{base}.key", f"{base}-keystore.pem"
        Path(cert_file).write_text(cert_pem)
        Path(key_file).write_text(key_pem)
        Path(keystore).write_text(key_pem + cert_pem)
        os.chmod(key_file, 0o600)
        os.chmod(keystore, 0o600)
        return Issued(cert_file, key_file, keystore, cert_pem, key_pem, subject.rfc4514_string())
