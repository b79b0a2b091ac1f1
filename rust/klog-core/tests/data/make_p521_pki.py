"""Writes p521_pki.pem, the certificates and keys of klog-core's P-521 TLS tests (tests/tls.rs), made by OpenSSL
through the `cryptography` package so the Rust side is checked against another implementation: a P-521 CA
(self-signed with SHA-512), a server certificate for localhost on a P-521 key (SEC1 "EC PRIVATE KEY") the CA signed
with SHA-256, a client certificate on a P-521 key (PKCS#8) signed with SHA-384, and one on a P-256 key signed with
SHA-512. Valid from 2000 to 9999. Run: python make_p521_pki.py > p521_pki.pem"""

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

START = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc)
END = datetime.datetime(9999, 12, 31, tzinfo=datetime.timezone.utc)


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "klog"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def cert(subject, key, issuer, issuer_key, hash_, *, ca=False, usage=None, san=None):
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(START).not_valid_after(END)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(san)]), critical=False)
    return builder.sign(issuer_key, hash_).public_bytes(serialization.Encoding.PEM).decode()


def key_pem(key, fmt):
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


ca_key = ec.generate_private_key(ec.SECP521R1())
ca = cert(name("P-521 CA"), ca_key, name("P-521 CA"), ca_key, hashes.SHA512(), ca=True)
server_key = ec.generate_private_key(ec.SECP521R1())
server = cert(name("localhost"), server_key, name("P-521 CA"), ca_key, hashes.SHA256(),
              usage=ExtendedKeyUsageOID.SERVER_AUTH, san="localhost")
client_key = ec.generate_private_key(ec.SECP521R1())
client = cert(name("p521 client"), client_key, name("P-521 CA"), ca_key, hashes.SHA384(),
              usage=ExtendedKeyUsageOID.CLIENT_AUTH)
p256_key = ec.generate_private_key(ec.SECP256R1())
p256 = cert(name("p256 client"), p256_key, name("P-521 CA"), ca_key, hashes.SHA512(),
            usage=ExtendedKeyUsageOID.CLIENT_AUTH)
for label, text in (("ca", ca), ("server", server), ("server key", key_pem(server_key, serialization.PrivateFormat.TraditionalOpenSSL)),
                    ("p521 client", client), ("p521 client key", key_pem(client_key, serialization.PrivateFormat.PKCS8)),
                    ("p256 client", p256), ("p256 client key", key_pem(p256_key, serialization.PrivateFormat.PKCS8))):
    print(f"# {label}\n{text}", end="")
