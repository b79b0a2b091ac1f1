//! A sans-IO TLS server session (rustls with the `ring` provider): the caller reads and writes the
//! socket, the session turns ciphertext into plaintext and back. `ServerSession::receive` decrypts
//! every complete record of one socket read in one call (librdkafka sends a TLS record per
//! ~2.3 KB of a produce request: one call per record, as Python's ssl module makes, costs more
//! than the decryption itself; docs/security.md, "Costs").
//!
//! The settings are Kafka's, already read from their stores by the caller (PEM bytes; PKCS12 and
//! encrypted keys are unwrapped in Python): `ssl.enabled.protocols`, `ssl.cipher.suites` (IANA
//! names), `ssl.client.auth` with the trusted CAs.

use std::io::{Read, Write};
use std::sync::Arc;

use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ProtocolVersion, RootCertStore, ServerConnection, SupportedProtocolVersion};

/// The configuration sessions of one listener share (`server_config`).
pub use rustls::ServerConfig;

/// Why a configuration cannot be used, or why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A setting cannot be used (the message names it).
    #[error("{0}")]
    Config(String),
    /// The peer broke the protocol (or the handshake failed): the session is over; the alert
    /// telling the peer why is in `ServerSession::take_outgoing`.
    #[error("TLS: {0}")]
    Protocol(String),
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(name: &str) -> Result<Self, TlsError> {
        match name.to_ascii_lowercase().as_str() {
            "none" => Ok(ClientAuth::None),
            "requested" => Ok(ClientAuth::Requested),
            "required" => Ok(ClientAuth::Required),
            other => Err(TlsError::Config(format!(
                "ssl.client.auth: {other:?} is not one of required, requested, none"
            ))),
        }
    }
}

/// What a TLS listener serves with.
pub struct ServerSettings<'a> {
    /// The certificate chain, the server's own certificate first (PEM).
    pub cert_chain_pem: &'a [u8],
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1, unencrypted).
    pub key_pem: &'a [u8],
    /// The CAs client certificates are checked against (PEM), for `Requested` and `Required`.
    pub client_ca_pem: Option<&'a [u8]>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols`: "TLSv1.2", "TLSv1.3".
    pub protocols: &'a [String],
    /// `ssl.cipher.suites` by IANA name (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`,
    /// `TLS_AES_256_GCM_SHA384`); empty: all of them. Naming suites of one TLS version leaves the
    /// other version's suites all enabled, as the ssl-module engine does with TLS 1.3's.
    pub cipher_suites: &'a [String],
}

/// The IANA name of a suite (rustls names TLS 1.3's `TLS13_...`).
fn iana_name(suite: &rustls::SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().map(str::to_string).unwrap_or_else(|| format!("{:?}", suite.suite()));
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

fn provider(cipher_suites: &[String]) -> Result<CryptoProvider, TlsError> {
    let mut provider = ring::default_provider();
    if cipher_suites.is_empty() {
        return Ok(provider);
    }
    let named = |s: &rustls::SupportedCipherSuite| cipher_suites.iter().any(|n| n.trim() == iana_name(s));
    let any12 = provider.cipher_suites.iter().any(|s| s.version().version == ProtocolVersion::TLSv1_2 && named(s));
    let any13 = provider.cipher_suites.iter().any(|s| s.version().version == ProtocolVersion::TLSv1_3 && named(s));
    if !any12 && !any13 {
        let offered: Vec<String> = provider.cipher_suites.iter().map(iana_name).collect();
        return Err(TlsError::Config(format!(
            "ssl.cipher.suites: none of {} is a cipher suite the native TLS engine offers ({})",
            cipher_suites.join(", "),
            offered.join(", ")
        )));
    }
    provider.cipher_suites.retain(|s| {
        let tls13 = s.version().version == ProtocolVersion::TLSv1_3;
        if tls13 { !any13 || named(s) } else { !any12 || named(s) }
    });
    Ok(provider)
}

fn versions(protocols: &[String]) -> Result<Vec<&'static SupportedProtocolVersion>, TlsError> {
    let names: Vec<&str> = if protocols.is_empty() {
        vec!["TLSv1.2", "TLSv1.3"]
    } else {
        protocols.iter().map(|p| p.trim()).collect()
    };
    names
        .into_iter()
        .map(|name| match name {
            "TLSv1.2" => Ok(&rustls::version::TLS12),
            "TLSv1.3" => Ok(&rustls::version::TLS13),
            other => Err(TlsError::Config(format!(
                "ssl.enabled.protocols: {other:?}: klog speaks TLSv1.2 and TLSv1.3"
            ))),
        })
        .collect()
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Config(format!("{what}: not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(TlsError::Config(format!("{what}: no certificate (-----BEGIN CERTIFICATE-----) found")));
    }
    Ok(certs)
}

/// The configuration sessions of one listener share (build it again when the settings change).
pub fn server_config(settings: &ServerSettings<'_>) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(provider(settings.cipher_suites)?);
    let chain = certificates(settings.cert_chain_pem, "the keystore's certificate chain")?;
    let key = PrivateKeyDer::from_pem_slice(settings.key_pem)
        .map_err(|e| TlsError::Config(format!("the keystore's private key: not an unencrypted PEM key: {e}")))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(settings.protocols)?)
        .map_err(|e| TlsError::Config(format!("ssl.enabled.protocols with ssl.cipher.suites: {e}")))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let pem = settings.client_ca_pem.ok_or_else(|| {
                TlsError::Config(
                    "ssl.client.auth needs the CAs client certificates are checked against (a truststore)".into(),
                )
            })?;
            let mut roots = RootCertStore::empty();
            for cert in certificates(pem, "the truststore")? {
                roots.add(cert).map_err(|e| TlsError::Config(format!("the truststore: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(
                verifier.build().map_err(|e| TlsError::Config(format!("the truststore: {e}")))?,
            )
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(format!("the keystore's key does not serve its certificate: {e}")))?;
    Ok(Arc::new(config))
}

/// One TLS connection's server side.
pub struct ServerSession {
    conn: ServerConnection,
    peer_closed: bool,
}

impl ServerSession {
    pub fn new(config: Arc<ServerConfig>) -> Result<Self, TlsError> {
        let mut conn = ServerConnection::new(config).map_err(|e| TlsError::Protocol(e.to_string()))?;
        // The caller takes the ciphertext out after every call: no limit to enforce here.
        conn.set_buffer_limit(None);
        Ok(ServerSession { conn, peer_closed: false })
    }

    /// Decrypts every complete record of `ciphertext` (a partial one waits for the next call),
    /// appending the application data to `plaintext`. Handshake answers go to `take_outgoing`.
    /// After an error the session is over (its alert is in `take_outgoing`).
    pub fn receive(&mut self, mut ciphertext: &[u8], plaintext: &mut Vec<u8>) -> Result<(), TlsError> {
        while !ciphertext.is_empty() {
            let n = self.conn.read_tls(&mut ciphertext).map_err(|e| TlsError::Protocol(e.to_string()))?;
            let state = self.conn.process_new_packets().map_err(|e| TlsError::Protocol(e.to_string()))?;
            let ready = state.plaintext_bytes_to_read();
            if ready > 0 {
                let start = plaintext.len();
                plaintext.resize(start + ready, 0);
                self.conn
                    .reader()
                    .read_exact(&mut plaintext[start..])
                    .map_err(|e| TlsError::Protocol(e.to_string()))?;
            }
            if state.peer_has_closed() {
                self.peer_closed = true;
                break;
            }
            if n == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Decrypts the records of `ciphertext` straight into `target` until it is full or the
    /// ciphertext is used up: (ciphertext bytes consumed, plaintext bytes written). Plaintext of a
    /// record that did not fit waits in the session for the next call (with more room); while the
    /// handshake runs its records are consumed whatever the room, so after the call that finishes it
    /// the ciphertext behind the client's Finished is left for a call with room. After an error the
    /// session is over (its alert is in `take_outgoing`).
    pub fn receive_into(&mut self, ciphertext: &[u8], target: &mut [u8]) -> Result<(usize, usize), TlsError> {
        let (mut consumed, mut written) = (0, 0);
        loop {
            while written < target.len() {
                match self.conn.reader().read(&mut target[written..]) {
                    Ok(0) => break,
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(TlsError::Protocol(e.to_string())),
                }
            }
            if written == target.len() && !self.conn.is_handshaking() || consumed == ciphertext.len()
                || self.peer_closed
            {
                return Ok((consumed, written));
            }
            let mut rest = &ciphertext[consumed..];
            let n = self.conn.read_tls(&mut rest).map_err(|e| TlsError::Protocol(e.to_string()))?;
            consumed += n;
            let state = self.conn.process_new_packets().map_err(|e| TlsError::Protocol(e.to_string()))?;
            if state.peer_has_closed() {
                self.peer_closed = true;
            }
            if n == 0 {
                return Ok((consumed, written));
            }
        }
    }

    /// Encrypts `plaintext` into records appended to `out` (with any handshake bytes still due).
    pub fn send(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), TlsError> {
        self.conn.writer().write_all(plaintext).map_err(|e| TlsError::Protocol(e.to_string()))?;
        self.take_outgoing(out);
        Ok(())
    }

    /// The ciphertext due to the peer: handshake messages, alerts, session tickets, records.
    pub fn take_outgoing(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            // Writing into a Vec cannot fail.
            if self.conn.write_tls(out).unwrap_or(0) == 0 {
                break;
            }
        }
    }

    /// Queues close_notify (take it with `take_outgoing`).
    pub fn close(&mut self) {
        self.conn.send_close_notify();
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The peer sent close_notify.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// The client's certificate chain (DER, its own first); empty without one.
    pub fn peer_certificates(&self) -> Vec<&[u8]> {
        self.conn.peer_certificates().map(|c| c.iter().map(|d| d.as_ref()).collect()).unwrap_or_default()
    }

    /// "TLSv1.2" or "TLSv1.3" once negotiated.
    pub fn protocol_version(&self) -> Option<&'static str> {
        match self.conn.protocol_version()? {
            ProtocolVersion::TLSv1_2 => Some("TLSv1.2"),
            ProtocolVersion::TLSv1_3 => Some("TLSv1.3"),
            _ => None,
        }
    }

    /// The negotiated suite's IANA name.
    pub fn cipher_suite(&self) -> Option<String> {
        self.conn.negotiated_cipher_suite().map(|s| iana_name(&s))
    }

    /// The SNI host name the client asked for.
    pub fn server_name(&self) -> Option<&str> {
        self.conn.server_name()
    }
}
