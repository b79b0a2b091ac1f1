//! A sans-IO TLS server session (rustls with the `ring` provider): the caller reads and writes the
//! socket, the session turns ciphertext into plaintext and back. `ServerSession::receive_into`
//! decrypts every complete record of one socket read in one call (librdkafka sends a TLS record per
//! ~2.3 KB of a produce request: one call per record, as Python's ssl module makes, costs more
//! than the decryption itself; docs/security.md, "Costs").
//!
//! The session drives rustls's unbuffered connection: records are decrypted in place, in the very
//! buffer the caller read the socket into, and their plaintext is copied once more (rustls 0.23
//! hands each record's plaintext out in a buffer of its own) into the caller's target. Only the
//! ciphertext rustls cannot use yet (the partial record at the end of a read, a handshake message's
//! first fragments) is copied, into the session's `carry`, completed there with the next read's
//! first bytes, and the rest of that read is again decrypted where it lies.
//!
//! Its crypto is rustls's `ring` provider with ECDSA on P-521 added (`tls_p521`): keys and CAs on P-521 are served
//! and verified as Apache Kafka does.
//!
//! The settings are Kafka's, already read from their stores by the caller (PEM bytes; PKCS12 and
//! encrypted keys are unwrapped in Python): `ssl.enabled.protocols`, `ssl.cipher.suites` (IANA
//! names), `ssl.client.auth` with the trusted CAs.

use std::sync::{Arc, Mutex};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, UnbufferedServerConnection, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::unbuffered::{ConnectionState, EncodeError, EncodeTlsData, EncryptError, UnbufferedStatus};
use rustls::{ProtocolVersion, RootCertStore, SupportedProtocolVersion};

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
    let mut provider = crate::tls_p521::ring_with_p521();
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
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        TlsError::Config(match e {
            rustls::Error::InconsistentKeys(_) => format!("the keystore's key does not serve its certificate: {e}"),
            // what the key provider (ring's, and P-521's) cannot load
            rustls::Error::General(_) => format!(
                "the keystore's private key is not one the native TLS session serves (RSA, ECDSA P-256, P-384, \
                 P-521, Ed25519), or is malformed: {e}"
            ),
            e => format!("the keystore's certificate: {e}"),
        })
    })?;
    Ok(Arc::new(config))
}

/// Records ciphertext may hold at most (rustls refuses a longer one on its header).
const MAX_RECORD: usize = 5 + 16_384 + 2048;

/// How many more bytes `buf` (ciphertext starting at a record's header) needs to end at a record
/// boundary: 0 when it does (or when a header announces a record rustls refuses anyway).
fn missing(buf: &[u8]) -> usize {
    let mut at = 0;
    while at < buf.len() {
        let rest = buf.len() - at;
        if rest < 5 {
            return 5 - rest;
        }
        let len = 5 + u16::from_be_bytes([buf[at + 3], buf[at + 4]]) as usize;
        if len >= MAX_RECORD {
            return 0;
        }
        if len > rest {
            return len - rest;
        }
        at += len;
    }
    0
}

/// Empties `buf`, giving its memory back when it is more than an idle connection should hold.
fn release(buf: &mut Vec<u8>) {
    if buf.capacity() > IDLE_CAPACITY {
        *buf = Vec::new();
    } else {
        buf.clear();
    }
}

/// What the buffers of an idle session may keep.
const IDLE_CAPACITY: usize = 4096;

/// The listener's certificate resolver, noting the SNI host name the client asked for (the
/// unbuffered connection of rustls 0.23 has no `server_name()`); rustls resolves the certificate
/// at every ClientHello, resumed sessions' too, with the name it checked and lowercased.
#[derive(Debug)]
struct NotingServerName {
    inner: Arc<dyn ResolvesServerCert>,
    name: Arc<Mutex<Option<String>>>,
}

impl ResolvesServerCert for NotingServerName {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        *self.name.lock().unwrap_or_else(|p| p.into_inner()) = client_hello.server_name().map(str::to_string);
        self.inner.resolve(client_hello)
    }

    fn only_raw_public_keys(&self) -> bool {
        self.inner.only_raw_public_keys()
    }
}

/// What a pass over ciphertext is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass<'a> {
    /// Decrypt into the target until it is full (the handshake's records whatever the room).
    Receive,
    /// Only what is due to the peer (handshake messages, tickets, key updates, alerts).
    Flush,
    /// Encrypt this application data once the connection may.
    Write(&'a [u8]),
    /// Queue close_notify once the connection may.
    CloseNotify,
}

/// Appends to `out` the TLS bytes rustls queued (a handshake message, an alert, a ticket), in the room it says they
/// need; on an error nothing is appended.
fn append_queued<Data>(out: &mut Vec<u8>, encoder: &mut EncodeTlsData<'_, Data>) -> Result<(), EncodeError> {
    let need = match encoder.encode(&mut []) {
        Ok(_) | Err(EncodeError::AlreadyEncoded) => return Ok(()),
        Err(EncodeError::InsufficientSize(e)) => e.required_size,
    };
    let start = out.len();
    out.resize(start + need, 0);
    match encoder.encode(&mut out[start..]) {
        Ok(n) => {
            out.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Appends to `out` what `encrypt` writes into the room it is given, starting with `room` bytes and growing it
/// to what rustls says it needs; on an error nothing is appended.
fn append_encrypted(
    out: &mut Vec<u8>,
    mut room: usize,
    mut encrypt: impl FnMut(&mut [u8]) -> Result<usize, EncryptError>,
) -> Result<(), EncryptError> {
    let start = out.len();
    loop {
        out.resize(start + room, 0);
        match encrypt(&mut out[start..]) {
            Ok(n) => {
                out.truncate(start + n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(e)) if e.required_size > room => room = e.required_size,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        }
    }
}

/// One TLS connection's server side.
pub struct ServerSession {
    conn: UnbufferedServerConnection,
    server_name: Arc<Mutex<Option<String>>>,
    /// Ciphertext rustls has not discarded yet (a partial record, a handshake message's first
    /// fragments, records left when the target filled), from the front: it comes before the next
    /// call's ciphertext.
    carry: Vec<u8>,
    /// rustls made all the progress it could with `carry`: it needs more bytes first.
    carry_stalled: bool,
    /// Plaintext decrypted but not yet delivered (the part of a record that did not fit the
    /// target), from `spill_at`.
    spill: Vec<u8>,
    spill_at: usize,
    /// Ciphertext due to the peer.
    outgoing: Vec<u8>,
    peer_closed: bool,
    /// The error that ended the session.
    failed: Option<String>,
}

impl ServerSession {
    pub fn new(config: Arc<ServerConfig>) -> Result<Self, TlsError> {
        let server_name = Arc::new(Mutex::new(None));
        let mut own = (*config).clone();
        own.cert_resolver = Arc::new(NotingServerName { inner: config.cert_resolver.clone(), name: server_name.clone() });
        let conn = UnbufferedServerConnection::new(Arc::new(own)).map_err(|e| TlsError::Protocol(e.to_string()))?;
        Ok(ServerSession {
            conn,
            server_name,
            carry: Vec::new(),
            carry_stalled: false,
            spill: Vec::new(),
            spill_at: 0,
            outgoing: Vec::new(),
            peer_closed: false,
            failed: None,
        })
    }

    /// Decrypts every complete record of `ciphertext` (a partial one waits for the next call),
    /// appending the application data to `plaintext`. Handshake answers go to `take_outgoing`.
    /// After an error the session is over (its alert is in `take_outgoing`).
    pub fn receive(&mut self, ciphertext: &[u8], plaintext: &mut Vec<u8>) -> Result<(), TlsError> {
        let mut data = ciphertext.to_vec();
        let mut at = 0;
        loop {
            let start = plaintext.len();
            plaintext.resize(start + (data.len() - at).max(1 << 14), 0);
            let result = self.receive_into(&mut data[at..], &mut plaintext[start..]);
            let (consumed, written) = match result {
                Ok(done) => done,
                Err(e) => {
                    plaintext.truncate(start);
                    return Err(e);
                }
            };
            plaintext.truncate(start + written);
            at += consumed;
            if at == data.len() && self.spill_at == self.spill.len() || consumed == 0 && written == 0 {
                return Ok(());
            }
        }
    }

    /// Decrypts the records of `ciphertext` straight into `target` until it is full or the
    /// ciphertext is used up: (ciphertext bytes consumed, plaintext bytes written). The records are
    /// decrypted in place: `ciphertext` is the caller's scratch (what it held is gone); a partial
    /// record at its end is copied into the session. The rest of a record that did not fit waits in
    /// the session for the next call (with more room), and the ciphertext behind it is not consumed:
    /// pass it again. While the handshake runs its records are consumed whatever the room, so after
    /// the call that finishes it the ciphertext behind the client's Finished is left for a call with
    /// room. After an error the session is over (its alert is in `take_outgoing`).
    pub fn receive_into(&mut self, ciphertext: &mut [u8], target: &mut [u8]) -> Result<(usize, usize), TlsError> {
        if let Some(e) = &self.failed {
            return Err(TlsError::Protocol(e.clone()));
        }
        let mut written = self.deliver_spill(target);
        if self.spill_at < self.spill.len() {
            return Ok((0, written));
        }
        if self.peer_closed {
            // rustls reads nothing after close_notify: what follows it is dropped
            release(&mut self.carry);
            return Ok((ciphertext.len(), written));
        }
        let mut at = 0;
        // first the ciphertext left from earlier calls, completed a record at a time from this one
        while !self.carry.is_empty() {
            let missing = missing(&self.carry);
            if missing == 0 && !self.carry_stalled {
                let mut carry = std::mem::take(&mut self.carry);
                let result = self.pass(&mut carry, Pass::Receive, target, &mut written);
                self.carry = carry;
                let (discard, full) = result?;
                self.drain_carry(discard);
                // when the target filled first, the records left in `carry` are still to read
                self.carry_stalled = !full && !self.carry.is_empty();
                if full || self.peer_closed {
                    return Ok((if self.peer_closed { ciphertext.len() } else { at }, written));
                }
                continue;
            }
            if at == ciphertext.len() {
                return Ok((at, written));
            }
            let take = (if missing == 0 { 5 } else { missing }).min(ciphertext.len() - at);
            self.carry.extend_from_slice(&ciphertext[at..at + take]);
            self.carry_stalled = false;
            at += take;
        }
        // then this call's ciphertext where it lies
        let (discard, full) = self.pass(&mut ciphertext[at..], Pass::Receive, target, &mut written)?;
        at += discard;
        if self.peer_closed {
            return Ok((ciphertext.len(), written));
        }
        if full {
            return Ok((at, written));
        }
        self.carry.extend_from_slice(&ciphertext[at..]);
        self.carry_stalled = true;
        Ok((ciphertext.len(), written))
    }

    fn deliver_spill(&mut self, target: &mut [u8]) -> usize {
        let n = (self.spill.len() - self.spill_at).min(target.len());
        target[..n].copy_from_slice(&self.spill[self.spill_at..self.spill_at + n]);
        self.spill_at += n;
        if self.spill_at == self.spill.len() {
            self.spill_at = 0;
            release(&mut self.spill);
        }
        n
    }

    /// Runs rustls over `incoming` (ciphertext from rustls's first undiscarded byte) for `what`:
    /// (bytes of `incoming` rustls is done with, whether the target filled first). Application data
    /// goes to `target` from `written` and, what does not fit, to `spill`.
    fn pass(
        &mut self,
        incoming: &mut [u8],
        what: Pass<'_>,
        target: &mut [u8],
        written: &mut usize,
    ) -> Result<(usize, bool), TlsError> {
        let mut done = 0;
        loop {
            if what == Pass::Receive && *written == target.len() && !self.conn.is_handshaking() {
                return Ok((done, true));
            }
            let UnbufferedStatus { discard, state } = self.conn.process_tls_records(&mut incoming[done..]);
            let state = match state {
                Ok(state) => state,
                Err(e) => {
                    done += discard;
                    return Err(self.fail(&mut incoming[done..], e.to_string()));
                }
            };
            match state {
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        let record = match record {
                            Ok(record) => record,
                            Err(e) => {
                                let message = e.to_string();
                                drop(records);
                                done += discard;
                                return Err(self.fail(&mut incoming[done..], message));
                            }
                        };
                        let payload = record.payload;
                        let n = payload.len().min(target.len() - *written);
                        target[*written..*written + n].copy_from_slice(&payload[..n]);
                        *written += n;
                        self.spill.extend_from_slice(&payload[n..]);
                    }
                }
                ConnectionState::EncodeTlsData(mut encoder) => {
                    append_queued(&mut self.outgoing, &mut encoder).map_err(|e| TlsError::Protocol(e.to_string()))?
                }
                ConnectionState::TransmitTlsData(transmit) => transmit.done(),
                ConnectionState::ReadEarlyData(mut records) => {
                    // never accepted (max_early_data_size is 0): nothing to read
                    while records.next_record().is_some() {}
                }
                ConnectionState::PeerClosed => self.peer_closed = true,
                ConnectionState::WriteTraffic(mut writer) => {
                    match what {
                        Pass::Write(plaintext) => {
                            // the records' headers and tags: 22 bytes a record of at most 16 KiB, and some room
                            let room = plaintext.len() + (plaintext.len() / 16_384 + 1) * 64 + 256;
                            append_encrypted(&mut self.outgoing, room, |out| writer.encrypt(plaintext, out))
                                .map_err(|e| TlsError::Protocol(e.to_string()))?;
                        }
                        Pass::CloseNotify => {
                            // a session that cannot say close_notify any more just closes
                            let _ = append_encrypted(&mut self.outgoing, 256, |out| writer.queue_close_notify(out));
                        }
                        Pass::Receive | Pass::Flush => {}
                    }
                    return Ok((done + discard, false));
                }
                // BlockedHandshake, Closed: nothing more to do until the peer sends more
                _ => return Ok((done + discard, false)),
            }
            done += discard;
        }
    }

    /// The session is over: notes why and takes the alert rustls queued for the peer.
    fn fail(&mut self, incoming: &mut [u8], message: String) -> TlsError {
        self.failed = Some(message.clone());
        // One pass: it hands out the fatal alert rustls queued with the error. A second would deframe the bytes
        // that failed again and raise a second fatal alert (a debug assertion in rustls); the session is over.
        if let Ok(ConnectionState::EncodeTlsData(mut encoder)) = self.conn.process_tls_records(incoming).state {
            let _ = append_queued(&mut self.outgoing, &mut encoder); // no alert to send: the session just ends
        }
        self.carry.clear();
        TlsError::Protocol(message)
    }

    /// Runs rustls over the carried ciphertext for `what` (plaintext it decrypts waits in `spill`).
    fn pass_on_carry(&mut self, what: Pass<'_>) -> Result<(), TlsError> {
        if let Some(e) = &self.failed {
            return Err(TlsError::Protocol(e.clone()));
        }
        let mut carry = std::mem::take(&mut self.carry);
        let mut written = 0;
        let result = self.pass(&mut carry, what, &mut [], &mut written);
        if self.failed.is_none() {
            self.carry = carry;
        }
        let (discard, _) = result?;
        self.drain_carry(discard);
        self.carry_stalled = true;
        Ok(())
    }

    fn drain_carry(&mut self, discard: usize) {
        if discard == self.carry.len() {
            release(&mut self.carry);
        } else {
            self.carry.drain(..discard);
        }
    }

    /// Encrypts `plaintext` into records appended to `out` (with any handshake bytes still due).
    pub fn send(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), TlsError> {
        if !plaintext.is_empty() {
            if self.conn.is_handshaking() {
                return Err(TlsError::Protocol("application data to send before the handshake finished".into()));
            }
            self.pass_on_carry(Pass::Write(plaintext))?;
        }
        self.take_outgoing(out);
        Ok(())
    }

    /// The ciphertext due to the peer: handshake messages, alerts, session tickets, records.
    pub fn take_outgoing(&mut self, out: &mut Vec<u8>) {
        // an error was noted in the session and returned by the call that hit it
        let _ = self.pass_on_carry(Pass::Flush);
        if out.is_empty() {
            *out = std::mem::take(&mut self.outgoing);
        } else {
            out.append(&mut self.outgoing);
        }
    }

    /// Queues close_notify (take it with `take_outgoing`).
    pub fn close(&mut self) {
        if !self.conn.is_handshaking() {
            let _ = self.pass_on_carry(Pass::CloseNotify);
        }
    }

    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The peer sent close_notify.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Plaintext decrypted but not delivered yet (it did not fit the target): the next
    /// `receive_into` delivers it, even with no ciphertext.
    pub fn plaintext_waiting(&self) -> usize {
        self.spill.len() - self.spill_at
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
    pub fn server_name(&self) -> Option<String> {
        self.server_name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
