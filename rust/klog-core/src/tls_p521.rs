//! ECDSA on P-521 (secp521r1) for the native TLS session's rustls provider, which is `ring`'s: ring verifies and
//! signs ECDSA on P-256 and P-384 only, where Apache Kafka (Java's JSSE) takes P-521 too. The curve arithmetic and
//! ECDSA are RustCrypto's `p521` crate; this module only plugs them into rustls:
//!
//! - [`ECDSA_P521_SHA256`], [`ECDSA_P521_SHA384`], [`ECDSA_P521_SHA512`]: webpki signature verification algorithms
//!   (a certificate a P-521 CA signed, with the hash it chose; a client's CertificateVerify on a P-521 key);
//! - [`ring_with_p521`]: ring's provider with them added to its verification algorithms (and the TLS signature
//!   schemes that name them, so a CertificateRequest offers `ecdsa_secp521r1_sha512`), and a key provider that loads
//!   a P-521 private key (PKCS#8 or SEC1) ring refuses, signing with `ecdsa_secp521r1_sha512`.
//!
//! - [`ECDSA_P256_SHA512`], [`ECDSA_P384_SHA512`]: ecdsa-with-SHA512 on P-256 and P-384 keys (a CA may sign with
//!   it; ring verifies those curves with SHA-256 and SHA-384 only), RustCrypto's `p256` and `p384`.
//!
//! Ed448 and DSA keys stay unserved (klog/security/tls.py sends listeners with them to Python's ssl module).

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use p521::ecdsa::signature::hazmat::{PrehashVerifier, RandomizedPrehashSigner};
use p521::ecdsa::{Signature, SigningKey as EcdsaKey, VerifyingKey};
use p521::elliptic_curve::rand_core::OsRng;
use p521::pkcs8::{DecodePrivateKey, EncodePublicKey};
use p521::SecretKey;
use rustls::crypto::{ring, CryptoProvider, KeyProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{
    alg_id, AlgorithmIdentifier, InvalidSignature, PrivateKeyDer, SignatureVerificationAlgorithm,
    SubjectPublicKeyInfoDer,
};
use rustls::sign::{Signer, SigningKey};
use rustls::{Error, SignatureAlgorithm, SignatureScheme};
use sha2::{Digest, Sha256, Sha384, Sha512};

/// The bytes of a P-521 field element (and of the integer ECDSA signs).
const FIELD_BYTES: usize = 66;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

/// The digest of `message` as the integer ECDSA signs, big-endian in 66 bytes. FIPS 186-5 (6.4.1) takes the
/// leftmost min(521, digest length) bits of the digest: all of a SHA-2 digest, so it is left-padded with zeros.
/// The `ecdsa` crate pads a digest itself, but refuses one shorter than half the field (SHA-256's, 32 of 66
/// bytes), which P-521 CAs made by OpenSSL sign with by default.
fn prehash(hash: Hash, message: &[u8]) -> [u8; FIELD_BYTES] {
    let mut out = [0u8; FIELD_BYTES];
    let mut put = |digest: &[u8]| out[FIELD_BYTES - digest.len()..].copy_from_slice(digest);
    match hash {
        Hash::Sha256 => put(&Sha256::digest(message)),
        Hash::Sha384 => put(&Sha384::digest(message)),
        Hash::Sha512 => put(&Sha512::digest(message)),
    }
    out
}

/// ECDSA on P-521 with one SHA-2 hash, as webpki verifies signatures with it.
pub struct EcdsaP521 {
    hash: Hash,
}

impl fmt::Debug for EcdsaP521 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ECDSA_P521_{:?}", self.hash)
    }
}

impl SignatureVerificationAlgorithm for EcdsaP521 {
    fn verify_signature(&self, public_key: &[u8], message: &[u8], signature: &[u8]) -> Result<(), InvalidSignature> {
        // The public key is the certificate's (untrusted) SEC1 point, checked to be on the curve; the signature
        // ASN.1 DER (both in X.509 and in TLS), r and s in [1, n).
        let key = VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
        let signature = Signature::from_der(signature).map_err(|_| InvalidSignature)?;
        key.verify_prehash(&prehash(self.hash, message), &signature).map_err(|_| InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_P521
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        match self.hash {
            Hash::Sha256 => alg_id::ECDSA_SHA256,
            Hash::Sha384 => alg_id::ECDSA_SHA384,
            Hash::Sha512 => alg_id::ECDSA_SHA512,
        }
    }
}

/// ECDSA on a P-521 key with SHA-256 (ecdsa-with-SHA256: what OpenSSL and the `cryptography` package sign
/// certificates with unless told otherwise).
pub static ECDSA_P521_SHA256: &dyn SignatureVerificationAlgorithm = &EcdsaP521 { hash: Hash::Sha256 };
/// ECDSA on a P-521 key with SHA-384.
pub static ECDSA_P521_SHA384: &dyn SignatureVerificationAlgorithm = &EcdsaP521 { hash: Hash::Sha384 };
/// ECDSA on a P-521 key with SHA-512 (TLS 1.3's `ecdsa_secp521r1_sha512`).
pub static ECDSA_P521_SHA512: &dyn SignatureVerificationAlgorithm = &EcdsaP521 { hash: Hash::Sha512 };

/// The curve of an ECDSA key that ring verifies, but not with SHA-512.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmallCurve {
    P256,
    P384,
}

/// ECDSA with SHA-512 on a P-256 or P-384 key (a CA's ecdsa-with-SHA512, which Java's JSSE verifies and ring does
/// not). The digest is longer than the curve's order: ECDSA takes its leftmost bits, as the `ecdsa` crate does.
pub struct EcdsaSha512 {
    curve: SmallCurve,
}

impl fmt::Debug for EcdsaSha512 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ECDSA_{:?}_SHA512", self.curve)
    }
}

impl SignatureVerificationAlgorithm for EcdsaSha512 {
    fn verify_signature(&self, public_key: &[u8], message: &[u8], signature: &[u8]) -> Result<(), InvalidSignature> {
        let digest = Sha512::digest(message);
        let ok = match self.curve {
            SmallCurve::P256 => {
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
                let signature = p256::ecdsa::Signature::from_der(signature).map_err(|_| InvalidSignature)?;
                key.verify_prehash(&digest, &signature).is_ok()
            }
            SmallCurve::P384 => {
                let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(public_key).map_err(|_| InvalidSignature)?;
                let signature = p384::ecdsa::Signature::from_der(signature).map_err(|_| InvalidSignature)?;
                key.verify_prehash(&digest, &signature).is_ok()
            }
        };
        ok.then_some(()).ok_or(InvalidSignature)
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        match self.curve {
            SmallCurve::P256 => alg_id::ECDSA_P256,
            SmallCurve::P384 => alg_id::ECDSA_P384,
        }
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        alg_id::ECDSA_SHA512
    }
}

/// ECDSA on a P-256 key with SHA-512.
pub static ECDSA_P256_SHA512: &dyn SignatureVerificationAlgorithm = &EcdsaSha512 { curve: SmallCurve::P256 };
/// ECDSA on a P-384 key with SHA-512.
pub static ECDSA_P384_SHA512: &dyn SignatureVerificationAlgorithm = &EcdsaSha512 { curve: SmallCurve::P384 };

/// ring's verification algorithms with P-521's added: to `all` (certificate chains) and to the signature schemes'
/// mapping. `ecdsa_secp521r1_sha512` is offered after ring's ECDSA schemes, mapped to P-521 with SHA-512 first (the
/// one TLS 1.3 uses); in TLS 1.2 an ECDSA scheme names the hash only, so P-521 keys also verify under
/// `ecdsa_secp256r1_sha256` and `ecdsa_secp384r1_sha384`, after ring's curves, as ring maps P-256 and P-384 alike.
/// What `ecdsa_secp521r1_sha512` verifies with: P-521 first (TLS 1.3 binds the scheme to it); in TLS 1.2 the scheme
/// names the hash only, so a P-256 or P-384 key signing with SHA-512 verifies under it too.
fn sha512_schemes() -> &'static [&'static dyn SignatureVerificationAlgorithm] {
    Vec::leak(vec![ECDSA_P521_SHA512, ECDSA_P256_SHA512, ECDSA_P384_SHA512])
}

fn algorithms() -> WebPkiSupportedAlgorithms {
    static ALGORITHMS: OnceLock<WebPkiSupportedAlgorithms> = OnceLock::new();
    *ALGORITHMS.get_or_init(|| {
        let ring = ring::default_provider().signature_verification_algorithms;
        let leak = |algs: Vec<&'static dyn SignatureVerificationAlgorithm>| -> &'static [_] { Vec::leak(algs) };
        let mut all = ring.all.to_vec();
        all.extend([ECDSA_P521_SHA256, ECDSA_P521_SHA384, ECDSA_P521_SHA512, ECDSA_P256_SHA512, ECDSA_P384_SHA512]);
        let mut mapping = Vec::with_capacity(ring.mapping.len() + 1);
        for &(scheme, algs) in ring.mapping {
            let extra = match scheme {
                SignatureScheme::ECDSA_NISTP256_SHA256 => Some(ECDSA_P521_SHA256),
                SignatureScheme::ECDSA_NISTP384_SHA384 => Some(ECDSA_P521_SHA384),
                _ => None,
            };
            match extra {
                Some(extra) => mapping.push((scheme, leak(algs.iter().copied().chain([extra]).collect()))),
                None => mapping.push((scheme, algs)),
            }
            if scheme == SignatureScheme::ECDSA_NISTP256_SHA256 {
                mapping.push((SignatureScheme::ECDSA_NISTP521_SHA512, sha512_schemes()));
            }
        }
        if !mapping.iter().any(|(scheme, _)| *scheme == SignatureScheme::ECDSA_NISTP521_SHA512) {
            mapping.push((SignatureScheme::ECDSA_NISTP521_SHA512, sha512_schemes()));
        }
        WebPkiSupportedAlgorithms { all: leak(all), mapping: Vec::leak(mapping) }
    })
}

/// ring's provider (its suites, key exchanges and random numbers) verifying and signing ECDSA on P-521 too.
pub fn ring_with_p521() -> CryptoProvider {
    CryptoProvider {
        signature_verification_algorithms: algorithms(),
        key_provider: &KEYS,
        ..ring::default_provider()
    }
}

/// ring's keys, and P-521 keys ring refuses.
#[derive(Debug)]
struct RingOrP521;

static KEYS: RingOrP521 = RingOrP521;

impl KeyProvider for RingOrP521 {
    fn load_private_key(&self, key_der: PrivateKeyDer<'static>) -> Result<Arc<dyn SigningKey>, Error> {
        match ring::sign::any_supported_type(&key_der) {
            Ok(key) => Ok(key),
            Err(refused) => match P521SigningKey::new(&key_der) {
                Some(key) => Ok(Arc::new(key)),
                None => Err(refused),
            },
        }
    }
}

/// A P-521 private key, signing TLS handshakes with `ecdsa_secp521r1_sha512`.
pub struct P521SigningKey {
    key: Arc<EcdsaKey>,
    /// its public key's SubjectPublicKeyInfo (rustls checks it is the certificate's)
    spki: Vec<u8>,
}

impl P521SigningKey {
    /// The key of a PKCS#8 or SEC1 (`EC PRIVATE KEY`) P-521 private key; None for any other.
    pub fn new(der: &PrivateKeyDer<'_>) -> Option<Self> {
        let secret = match der {
            PrivateKeyDer::Pkcs8(der) => SecretKey::from_pkcs8_der(der.secret_pkcs8_der()).ok()?,
            PrivateKeyDer::Sec1(der) => SecretKey::from_sec1_der(der.secret_sec1_der()).ok()?,
            _ => return None,
        };
        let spki = secret.public_key().to_public_key_der().ok()?.as_bytes().to_vec();
        let key = EcdsaKey::from_bytes(&secret.to_bytes()).ok()?;
        Some(P521SigningKey { key: Arc::new(key), spki })
    }
}

impl fmt::Debug for P521SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("P521SigningKey")
    }
}

impl SigningKey for P521SigningKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        offered
            .contains(&SignatureScheme::ECDSA_NISTP521_SHA512)
            .then(|| Box::new(P521Signer { key: self.key.clone() }) as Box<dyn Signer>)
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        Some(SubjectPublicKeyInfoDer::from(self.spki.as_slice()))
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::ECDSA
    }
}

struct P521Signer {
    key: Arc<EcdsaKey>,
}

impl fmt::Debug for P521Signer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("P521Signer")
    }
}

impl Signer for P521Signer {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let digest = prehash(Hash::Sha512, message);
        // The nonce comes from the OS (p521 0.13 has no RFC 6979 nonces); OsRng panics if the OS cannot give random
        // bytes: that fails this handshake instead of unwinding into rustls and the caller.
        let signed = catch_unwind(AssertUnwindSafe(|| {
            RandomizedPrehashSigner::<Signature>::sign_prehash_with_rng(&*self.key, &mut OsRng, &digest)
        }));
        match signed {
            Ok(Ok(signature)) => Ok(signature.to_der().as_bytes().to_vec()),
            Ok(Err(e)) => Err(Error::General(format!("ECDSA P-521 signing failed: {e}"))),
            Err(_) => Err(Error::General("ECDSA P-521 signing failed: no random numbers from the OS".into())),
        }
    }

    fn scheme(&self) -> SignatureScheme {
        SignatureScheme::ECDSA_NISTP521_SHA512
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p521::pkcs8::EncodePrivateKey;
    use rustls::pki_types::{PrivatePkcs8KeyDer, PrivateSec1KeyDer};

    fn key() -> (SecretKey, Vec<u8>) {
        let secret = SecretKey::random(&mut OsRng);
        let point = secret.public_key().to_sec1_bytes().to_vec();
        (secret, point)
    }

    fn sign(secret: &SecretKey, hash: Hash, message: &[u8]) -> Vec<u8> {
        let key = EcdsaKey::from_bytes(&secret.to_bytes()).unwrap();
        let signature: Signature = key.sign_prehash_with_rng(&mut OsRng, &prehash(hash, message)).unwrap();
        signature.to_der().as_bytes().to_vec()
    }

    #[test]
    fn each_hash_verifies_its_own_signatures_only() {
        let (secret, point) = key();
        let algs =
            [(Hash::Sha256, ECDSA_P521_SHA256), (Hash::Sha384, ECDSA_P521_SHA384), (Hash::Sha512, ECDSA_P521_SHA512)];
        for (hash, alg) in algs {
            let signature = sign(&secret, hash, b"the message");
            assert!(alg.verify_signature(&point, b"the message", &signature).is_ok(), "{alg:?}");
            assert!(alg.verify_signature(&point, b"the messagf", &signature).is_err(), "{alg:?}");
            for (other, other_alg) in algs {
                if other != hash {
                    assert!(other_alg.verify_signature(&point, b"the message", &signature).is_err(), "{other_alg:?}");
                }
            }
            let (_, stranger) = key();
            assert!(alg.verify_signature(&stranger, b"the message", &signature).is_err());
            assert_eq!(alg.public_key_alg_id(), alg_id::ECDSA_P521);
        }
        assert_eq!(ECDSA_P521_SHA256.signature_alg_id(), alg_id::ECDSA_SHA256);
        assert_eq!(ECDSA_P521_SHA384.signature_alg_id(), alg_id::ECDSA_SHA384);
        assert_eq!(ECDSA_P521_SHA512.signature_alg_id(), alg_id::ECDSA_SHA512);
    }

    #[test]
    fn sha512_signatures_are_the_p521_crates_own() {
        // SHA-512's 64 bytes padded by this module or by the ecdsa crate are the same integer
        use p521::ecdsa::signature::{RandomizedSigner, Verifier};
        let (secret, point) = key();
        let key = EcdsaKey::from_bytes(&secret.to_bytes()).unwrap();
        let theirs: Signature = key.sign_with_rng(&mut OsRng, b"message");
        assert!(ECDSA_P521_SHA512.verify_signature(&point, b"message", theirs.to_der().as_bytes()).is_ok());
        let ours = Signature::from_der(&sign(&secret, Hash::Sha512, b"message")).unwrap();
        assert!(VerifyingKey::from_sec1_bytes(&point).unwrap().verify(b"message", &ours).is_ok());
    }

    #[test]
    fn sha512_on_p256_and_p384_verifies_those_curves_signatures_only() {
        let message = b"a certificate's tbs";
        let p256_key = p256::ecdsa::SigningKey::random(&mut OsRng);
        let p256_point = p256_key.verifying_key().to_encoded_point(false).as_bytes().to_vec();
        let p256_sig: p256::ecdsa::Signature =
            p256_key.sign_prehash_with_rng(&mut OsRng, &Sha512::digest(message)).unwrap();
        let p384_key = p384::ecdsa::SigningKey::random(&mut OsRng);
        let p384_point = p384_key.verifying_key().to_encoded_point(false).as_bytes().to_vec();
        let p384_sig: p384::ecdsa::Signature =
            p384_key.sign_prehash_with_rng(&mut OsRng, &Sha512::digest(message)).unwrap();
        let (p256_der, p384_der) = (p256_sig.to_der().as_bytes().to_vec(), p384_sig.to_der().as_bytes().to_vec());

        assert!(ECDSA_P256_SHA512.verify_signature(&p256_point, message, &p256_der).is_ok());
        assert!(ECDSA_P384_SHA512.verify_signature(&p384_point, message, &p384_der).is_ok());
        assert!(ECDSA_P256_SHA512.verify_signature(&p256_point, b"another tbs", &p256_der).is_err());
        assert!(ECDSA_P384_SHA512.verify_signature(&p384_point, b"another tbs", &p384_der).is_err());
        // a key of the other curve, a signature of the other curve, garbage: invalid, no panic
        assert!(ECDSA_P256_SHA512.verify_signature(&p384_point, message, &p384_der).is_err());
        assert!(ECDSA_P384_SHA512.verify_signature(&p256_point, message, &p256_der).is_err());
        for bad in [&[][..], &[0x30, 0x00][..], &[0xff; 200][..]] {
            assert!(ECDSA_P256_SHA512.verify_signature(&p256_point, message, bad).is_err());
            assert!(ECDSA_P384_SHA512.verify_signature(bad, message, &p384_der).is_err());
        }
        // ring's own SHA-256 algorithm does not take the SHA-512 signature
        let ring_p256 = ring::default_provider().signature_verification_algorithms.all.iter()
            .find(|a| a.public_key_alg_id() == alg_id::ECDSA_P256 && a.signature_alg_id() == alg_id::ECDSA_SHA256)
            .copied()
            .unwrap();
        assert!(ring_p256.verify_signature(&p256_point, message, &p256_der).is_err());
        assert_eq!(ECDSA_P256_SHA512.public_key_alg_id(), alg_id::ECDSA_P256);
        assert_eq!(ECDSA_P384_SHA512.public_key_alg_id(), alg_id::ECDSA_P384);
        assert_eq!(ECDSA_P384_SHA512.signature_alg_id(), alg_id::ECDSA_SHA512);
    }

    #[test]
    fn malformed_keys_and_signatures_are_invalid_not_panics() {
        let (secret, point) = key();
        let signature = sign(&secret, Hash::Sha512, b"m");
        for bad_key in [&[][..], &[4u8][..], &point[..point.len() - 1], &[0u8; 133][..], &[4u8; 133][..]] {
            assert!(ECDSA_P521_SHA512.verify_signature(bad_key, b"m", &signature).is_err());
        }
        let mut flipped = signature.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        let zero = [0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00];
        let short = &signature[..signature.len() - 1];
        for bad in [&[][..], &[0x30, 0x00][..], short, &flipped[..], &zero[..], &[0xff; 200][..]] {
            assert!(ECDSA_P521_SHA512.verify_signature(&point, b"m", bad).is_err());
        }
    }

    #[test]
    fn the_key_provider_loads_p521_keys_and_signs_with_sha512() {
        let (secret, point) = key();
        let pkcs8 = secret.to_pkcs8_der().unwrap();
        let sec1 = secret.to_sec1_der().unwrap();
        let provider = ring_with_p521();
        for der in [
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pkcs8.as_bytes().to_vec())),
            PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(sec1.to_vec())),
        ] {
            let key = provider.key_provider.load_private_key(der).unwrap();
            assert_eq!(key.algorithm(), SignatureAlgorithm::ECDSA);
            let spki = secret.public_key().to_public_key_der().unwrap();
            assert_eq!(key.public_key().unwrap().as_ref(), spki.as_bytes());
            assert!(key.choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256]).is_none());
            let signer = key
                .choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256, SignatureScheme::ECDSA_NISTP521_SHA512])
                .unwrap();
            assert_eq!(signer.scheme(), SignatureScheme::ECDSA_NISTP521_SHA512);
            let signature = signer.sign(b"handshake").unwrap();
            assert!(ECDSA_P521_SHA512.verify_signature(&point, b"handshake", &signature).is_ok());
        }
        // what neither ring nor p521 reads is ring's error, not a panic
        let junk = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]));
        assert!(provider.key_provider.load_private_key(junk).is_err());
    }

    #[test]
    fn the_provider_offers_p521_after_rings_ecdsa_schemes() {
        let algs = ring_with_p521().signature_verification_algorithms;
        let schemes = algs.supported_schemes();
        let ring = ring::default_provider().signature_verification_algorithms.supported_schemes();
        let at = schemes.iter().position(|s| *s == SignatureScheme::ECDSA_NISTP521_SHA512).unwrap();
        assert_eq!(schemes[at - 1], SignatureScheme::ECDSA_NISTP256_SHA256);
        let mut without: Vec<_> = schemes.clone();
        without.remove(at);
        assert_eq!(without, ring);
        let first = |scheme| algs.mapping.iter().find(|(s, _)| *s == scheme).unwrap().1;
        assert_eq!(first(SignatureScheme::ECDSA_NISTP521_SHA512)[0].signature_alg_id(), alg_id::ECDSA_SHA512);
        // TLS 1.3 uses the first algorithm of a scheme: still ring's curve
        assert_eq!(first(SignatureScheme::ECDSA_NISTP256_SHA256)[0].public_key_alg_id(), alg_id::ECDSA_P256);
        assert_eq!(first(SignatureScheme::ECDSA_NISTP384_SHA384)[0].public_key_alg_id(), alg_id::ECDSA_P384);
        assert_eq!(algs.all.len(), ring::default_provider().signature_verification_algorithms.all.len() + 5);
    }
}
