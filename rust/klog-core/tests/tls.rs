//! klog_core::tls's server session against rustls's client, with certificates of a test CA.

use std::io::{Read, Write};
use std::sync::Arc;

use klog_core::tls::{server_config, ClientAuth, ServerSession, ServerSettings, TlsError};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

struct Pki {
    ca_pem: String,
    server_chain_pem: String,
    server_key_pem: String,
    client_chain_pem: String,
    client_key_pem: String,
}

fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issue = |name: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_chain_pem, server_key_pem) = issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let (client_chain_pem, client_key_pem) = issue("client", ExtendedKeyUsagePurpose::ClientAuth);
    Pki { ca_pem: ca.pem(), server_chain_pem, server_key_pem, client_chain_pem, client_key_pem }
}

fn settings<'a>(pki: &'a Pki, auth: ClientAuth, protocols: &'a [String], suites: &'a [String]) -> ServerSettings<'a> {
    ServerSettings {
        cert_chain_pem: pki.server_chain_pem.as_bytes(),
        key_pem: pki.server_key_pem.as_bytes(),
        client_ca_pem: Some(pki.ca_pem.as_bytes()),
        client_auth: auth,
        protocols,
        cipher_suites: suites,
    }
}

fn client(pki: &Pki, with_cert: bool, versions: &[&'static rustls::SupportedProtocolVersion]) -> ClientConnection {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap()).unwrap();
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let config = if with_cert {
        let chain = vec![CertificateDer::from_pem_slice(pki.client_chain_pem.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(pki.client_key_pem.as_bytes()).unwrap();
        builder.with_client_auth_cert(chain, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let mut client = ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    client.set_buffer_limit(None);
    client
}

fn client_out(client: &mut ClientConnection) -> Vec<u8> {
    let mut out = Vec::new();
    while client.wants_write() {
        client.write_tls(&mut out).unwrap();
    }
    out
}

/// Hands the server's outgoing bytes to the client (which stops at its first error, e.g. an alert).
fn to_client(server: &mut ServerSession, client: &mut ClientConnection) {
    let mut answer = Vec::new();
    server.take_outgoing(&mut answer);
    let mut slice = &answer[..];
    while !slice.is_empty() {
        client.read_tls(&mut slice).unwrap();
        if client.process_new_packets().is_err() {
            break;
        }
    }
}

/// The plaintext the client reads from the server's bytes `out`.
fn client_reads(client: &mut ClientConnection, out: &[u8]) -> Vec<u8> {
    let mut slice = out;
    let mut got = Vec::new();
    while !slice.is_empty() {
        client.read_tls(&mut slice).unwrap();
        client.process_new_packets().unwrap();
        let _ = client.reader().read_to_end(&mut got); // WouldBlock once it has read all there is
    }
    got
}

/// Runs the handshake; the server's error if it fails.
fn handshake(server: &mut ServerSession, client: &mut ClientConnection) -> Result<(), TlsError> {
    for _ in 0..10 {
        let mut plaintext = Vec::new();
        // on an error, the alert stays in the session for the test to see
        server.receive(&client_out(client), &mut plaintext)?;
        to_client(server, client);
        assert!(plaintext.is_empty());
        if !server.is_handshaking() && !client.is_handshaking() {
            // TLS 1.3 servers learn of a client certificate's verdict in the client's last flight
            let mut plaintext = Vec::new();
            server.receive(&client_out(client), &mut plaintext)?;
            return Ok(());
        }
    }
    panic!("no handshake in 10 rounds");
}

fn all() -> Vec<String> {
    vec!["TLSv1.2".into(), "TLSv1.3".into()]
}

/// A server session (no client certificate asked for, every protocol) and a TLS 1.3 client, handshaken.
fn connected_tls13() -> (ServerSession, ClientConnection) {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::None, &all(), &[])).unwrap();
    let mut server = ServerSession::new(config).unwrap();
    let mut client = client(&pki, false, &[&rustls::version::TLS13]);
    handshake(&mut server, &mut client).unwrap();
    (server, client)
}

#[test]
fn records_of_many_reads_and_many_records_per_read_come_out_whole() {
    let (mut server, mut client) = connected_tls13();
    assert_eq!(server.protocol_version(), Some("TLSv1.3"));
    assert_eq!(server.server_name().as_deref(), Some("localhost"));
    assert!(server.peer_certificates().is_empty());

    // librdkafka's way: one record per 2304 bytes of a request
    let sent: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for piece in sent.chunks(2304) {
        client.writer().write_all(piece).unwrap();
    }
    let wire = client_out(&mut client);
    let mut got = Vec::new();
    for read in wire.chunks(7777) {
        server.receive(read, &mut got).unwrap();
    }
    assert_eq!(got, sent);

    let mut answer = Vec::new();
    server.send(b"the answer", &mut answer).unwrap();
    let mut slice = &answer[..];
    client.read_tls(&mut slice).unwrap();
    client.process_new_packets().unwrap();
    let mut buf = [0u8; 32];
    let n = client.reader().read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"the answer");

    client.send_close_notify();
    server.receive(&client_out(&mut client), &mut got).unwrap();
    assert!(server.peer_closed());
    server.close();
    let mut bye = Vec::new();
    server.take_outgoing(&mut bye);
    assert!(!bye.is_empty());
}

#[test]
fn a_required_client_certificate_is_checked_and_shown() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::Required, &all(), &[])).unwrap();
    let mut server = ServerSession::new(config.clone()).unwrap();
    handshake(&mut server, &mut client(&pki, true, &[&rustls::version::TLS13])).unwrap();
    let chain = server.peer_certificates();
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0], CertificateDer::from_pem_slice(pki.client_chain_pem.as_bytes()).unwrap().as_ref());

    let mut server = ServerSession::new(config).unwrap();
    let mut client_side = client(&pki, false, &[&rustls::version::TLS13]);
    match handshake(&mut server, &mut client_side) {
        Err(TlsError::Protocol(message)) => assert!(message.contains("certificate"), "{message}"),
        other => panic!("a client without a certificate was served: {other:?}"),
    }
    let mut alert = Vec::new();
    server.take_outgoing(&mut alert);
    let mut slice = &alert[..];
    client_side.read_tls(&mut slice).unwrap();
    let told = client_side.process_new_packets().err().expect("the client is told by an alert");
    assert!(matches!(told, rustls::Error::AlertReceived(_)), "{told:?}");
}

#[test]
fn a_requested_client_certificate_may_be_missing() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::Requested, &all(), &[])).unwrap();
    let mut server = ServerSession::new(config.clone()).unwrap();
    handshake(&mut server, &mut client(&pki, false, &[&rustls::version::TLS12])).unwrap();
    assert_eq!(server.protocol_version(), Some("TLSv1.2"));
    assert!(server.peer_certificates().is_empty());
    let mut server = ServerSession::new(config).unwrap();
    handshake(&mut server, &mut client(&pki, true, &[&rustls::version::TLS12])).unwrap();
    assert_eq!(server.peer_certificates().len(), 1);
}

#[test]
fn enabled_protocols_and_cipher_suites_bound_what_is_negotiated() {
    let pki = pki();
    let only13 = vec!["TLSv1.3".to_string()];
    let config = server_config(&settings(&pki, ClientAuth::None, &only13, &[])).unwrap();
    let mut server = ServerSession::new(config).unwrap();
    assert!(matches!(
        handshake(&mut server, &mut client(&pki, false, &[&rustls::version::TLS12])),
        Err(TlsError::Protocol(_))
    ));

    let suites = vec!["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string(), "TLS_AES_128_GCM_SHA256".to_string()];
    let config = server_config(&settings(&pki, ClientAuth::None, &all(), &suites)).unwrap();
    for (version, expected) in [
        (&rustls::version::TLS12, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
        (&rustls::version::TLS13, "TLS_AES_128_GCM_SHA256"),
    ] {
        let mut server = ServerSession::new(config.clone()).unwrap();
        handshake(&mut server, &mut client(&pki, false, &[version])).unwrap();
        assert_eq!(server.cipher_suite().as_deref(), Some(expected));
    }
}

#[test]
fn settings_that_cannot_serve_name_themselves() {
    let pki = pki();
    let unknown = vec!["TLS_RSA_WITH_AES_128_CBC_SHA".to_string()];
    let err = server_config(&settings(&pki, ClientAuth::None, &all(), &unknown)).err().unwrap();
    assert!(err.to_string().starts_with("ssl.cipher.suites:"), "{err}");
    let err = server_config(&settings(&pki, ClientAuth::None, &["TLSv1.1".to_string()], &[])).err().unwrap();
    assert!(err.to_string().starts_with("ssl.enabled.protocols:"), "{err}");
    let mut no_ca = settings(&pki, ClientAuth::Required, &[], &[]);
    no_ca.client_ca_pem = None;
    assert!(server_config(&no_ca).err().unwrap().to_string().contains("truststore"));
    let mut bad_key = settings(&pki, ClientAuth::None, &[], &[]);
    bad_key.key_pem = b"not a key";
    assert!(server_config(&bad_key).err().unwrap().to_string().contains("private key"));
    let other = self::pki();
    let mut mismatched = settings(&pki, ClientAuth::None, &[], &[]);
    mismatched.key_pem = other.server_key_pem.as_bytes();
    assert!(server_config(&mismatched).err().unwrap().to_string().contains("does not serve"));
    assert!(ClientAuth::parse("sometimes").is_err());
}

#[test]
fn garbage_ends_the_session_with_an_error_not_a_panic() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::None, &all(), &[])).unwrap();
    for garbage in [&b"GET / HTTP/1.1\r\n\r\n"[..], &[0x16, 3, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0][..], &[0u8; 100][..]] {
        let mut server = ServerSession::new(config.clone()).unwrap();
        let mut plaintext = Vec::new();
        assert!(matches!(server.receive(garbage, &mut plaintext), Err(TlsError::Protocol(_))), "{garbage:?}");
        assert!(plaintext.is_empty());
        let mut alert = Vec::new();
        server.take_outgoing(&mut alert);
        assert_eq!(alert.first(), Some(&0x15), "one fatal alert record for {garbage:?}"); // 21: alert
        assert_eq!(alert.len(), 7, "one alert, not two, for {garbage:?}");
    }
    // garbage after the handshake: a record that fails its authentication
    let mut server = ServerSession::new(config).unwrap();
    let mut client = client(&pki, false, &[&rustls::version::TLS13]);
    handshake(&mut server, &mut client).unwrap();
    client.writer().write_all(b"some request").unwrap();
    let mut wire = client_out(&mut client);
    let last = wire.len() - 1;
    wire[last] ^= 1;
    let mut plaintext = Vec::new();
    assert!(matches!(server.receive(&wire, &mut plaintext), Err(TlsError::Protocol(_))));
    assert!(plaintext.is_empty());
}

#[test]
fn records_decrypt_straight_into_buffers_of_any_size() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::None, &all(), &[])).unwrap();
    let mut server = ServerSession::new(config).unwrap();
    let mut client = client(&pki, false, &[&rustls::version::TLS13]);
    let (consumed, written) = server.receive_into(&mut client_out(&mut client), &mut []).unwrap();
    assert!(consumed > 0 && written == 0);
    to_client(&mut server, &mut client);
    let sent: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
    for piece in sent.chunks(2304) {
        client.writer().write_all(piece).unwrap();
    }
    let mut wire = client_out(&mut client); // the client's Finished, then its records
    let (consumed, written) = server.receive_into(&mut wire, &mut []).unwrap();
    assert!(!server.is_handshaking() && written == 0);
    let mut rest = &mut wire[consumed..];
    let mut got = Vec::new();
    for room in [1usize, 7, 1000, 3000, 100_000] {
        let mut target = vec![0u8; room];
        let before = sent.len() - got.len();
        let (consumed, written) = server.receive_into(rest, &mut target).unwrap();
        rest = &mut rest[consumed..];
        got.extend_from_slice(&target[..written]);
        assert_eq!(written, room.min(before));
    }
    assert!(rest.is_empty());
    assert_eq!(got, sent);
}

/// Feeds `wire` in the reads `cuts` makes of it, each decrypted into targets of `room` bytes (the
/// reads are the caller's scratch, as the socket buffer is): the plaintext that came out.
fn receive_in_reads(server: &mut ServerSession, wire: &[u8], cuts: &[usize], room: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain([wire.len()].iter()) {
        let mut read = wire[from..to].to_vec();
        let mut rest = &mut read[..];
        loop {
            let mut target = vec![0u8; room];
            let (consumed, written) = server.receive_into(rest, &mut target).unwrap();
            got.extend_from_slice(&target[..written]);
            rest = &mut rest[consumed..];
            if rest.is_empty() && written < room {
                break;
            }
        }
        from = to;
    }
    got
}

/// A client of `versions` (with a certificate if `with_cert`) through its handshake, its flights
/// fed to the server a byte at a time: the session carries every partial record and handshake
/// fragment over to the next read.
fn handshake_a_byte_at_a_time(
    server: &mut ServerSession,
    client: &mut ClientConnection,
) {
    for _ in 0..10 {
        let wire = client_out(client);
        for byte in &wire {
            let (consumed, written) = server.receive_into(&mut [*byte], &mut []).unwrap();
            assert_eq!((consumed, written), (1, 0));
        }
        to_client(server, client);
        if !server.is_handshaking() && !client.is_handshaking() {
            for byte in client_out(client) {
                server.receive_into(&mut [byte], &mut []).unwrap();
            }
            return;
        }
    }
    panic!("no handshake in 10 rounds");
}

#[test]
fn handshakes_fed_a_byte_at_a_time_complete_with_what_they_negotiated() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::Required, &all(), &[])).unwrap();
    for (version, name) in [(&rustls::version::TLS12, "TLSv1.2"), (&rustls::version::TLS13, "TLSv1.3")] {
        let mut server = ServerSession::new(config.clone()).unwrap();
        let mut client = client(&pki, true, &[version]);
        handshake_a_byte_at_a_time(&mut server, &mut client);
        assert_eq!(server.protocol_version(), Some(name));
        assert_eq!(server.server_name().as_deref(), Some("localhost"));
        assert_eq!(server.peer_certificates().len(), 1);
        assert!(server.cipher_suite().is_some());
        let sent: Vec<u8> = (0..40_000u32).map(|i| (i % 241) as u8).collect();
        client.writer().write_all(&sent).unwrap();
        let wire = client_out(&mut client);
        let cuts: Vec<usize> = (1..wire.len()).step_by(997).collect();
        assert_eq!(receive_in_reads(&mut server, &wire, &cuts, 5000), sent, "{name}");
    }
}

#[test]
fn a_record_split_across_two_reads_at_every_byte_comes_out_whole() {
    let pki = pki();
    let config = server_config(&settings(&pki, ClientAuth::None, &all(), &[])).unwrap();
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let mut server = ServerSession::new(config.clone()).unwrap();
        let mut client = client(&pki, false, &[version]);
        handshake(&mut server, &mut client).unwrap();
        // one session, the same three records again and again, cut at each byte once
        let pieces: [&[u8]; 3] = [&[1u8; 100], b"x", &[2u8; 300]];
        let mut one = Vec::new();
        for piece in pieces {
            client.writer().write_all(piece).unwrap();
            one.extend_from_slice(piece);
        }
        let wire = client_out(&mut client);
        let length = wire.len();
        assert_eq!(receive_in_reads(&mut server, &wire, &[], 1 << 16), one);
        for cut in 1..length {
            for piece in pieces {
                client.writer().write_all(piece).unwrap();
            }
            let wire = client_out(&mut client);
            assert_eq!(wire.len(), length);
            // a target of 64 bytes: records also wait half delivered at the cut
            assert_eq!(receive_in_reads(&mut server, &wire, &[cut], 64), one, "cut at {cut}");
            assert_eq!(server.plaintext_waiting(), 0);
        }
    }
}

#[test]
fn records_are_decrypted_in_the_buffer_they_were_read_into() {
    let (mut server, mut client) = connected_tls13();
    let sent = b"a produce request's bytes".repeat(100);
    client.writer().write_all(&sent).unwrap();
    let mut read = client_out(&mut client);
    let mut target = vec![0u8; 10_000];
    let (consumed, written) = server.receive_into(&mut read, &mut target).unwrap();
    assert_eq!((consumed, written), (read.len(), sent.len()));
    assert_eq!(&target[..written], &sent[..]);
    // TLS 1.3: the record's header, then its plaintext where its ciphertext was
    assert_eq!(&read[5..5 + sent.len()], &sent[..]);
}

#[test]
fn plaintext_that_does_not_fit_waits_and_the_ciphertext_behind_it_is_passed_again() {
    let (mut server, mut client) = connected_tls13();
    client.writer().write_all(&[7u8; 1000]).unwrap();
    client.writer().write_all(&[8u8; 1000]).unwrap();
    let mut read = client_out(&mut client);
    let mut target = [0u8; 300];
    let (consumed, written) = server.receive_into(&mut read, &mut target).unwrap();
    assert_eq!((written, server.plaintext_waiting()), (300, 700));
    assert!(consumed < read.len()); // the second record, untouched
    // no ciphertext: the waiting plaintext alone
    let mut big = [0u8; 5000];
    assert_eq!(server.receive_into(&mut [], &mut big).unwrap(), (0, 700));
    assert_eq!(server.plaintext_waiting(), 0);
    let (rest, written) = server.receive_into(&mut read[consumed..], &mut big).unwrap();
    assert_eq!((rest, written), (read.len() - consumed, 1000));
    assert!(big[..1000].iter().all(|b| *b == 8));
}

#[test]
fn key_updates_both_ways_and_close_notify_mid_read_keep_the_stream_whole() {
    let (mut server, mut client) = connected_tls13();
    // the client's data, a key update asking for ours, more data, all in one read
    client.writer().write_all(b"before the update").unwrap();
    client.refresh_traffic_keys().unwrap();
    client.writer().write_all(b" and after it").unwrap();
    let wire = client_out(&mut client);
    assert_eq!(receive_in_reads(&mut server, &wire, &[], 1 << 16), b"before the update and after it");
    // our answer under the keys the key update made us take (the client reads it)
    let answer: Vec<u8> = (0..100_000u32).map(|i| (i % 239) as u8).collect();
    let mut out = Vec::new();
    server.send(&answer, &mut out).unwrap();
    assert_eq!(client_reads(&mut client, &out), answer);
    // data and close_notify in one read with bytes after it: the data, then the end of the stream
    client.writer().write_all(b"last words").unwrap();
    client.send_close_notify();
    let mut wire = client_out(&mut client);
    wire.extend_from_slice(b"ignored after close_notify");
    let cut = wire.len() - 40;
    assert_eq!(receive_in_reads(&mut server, &wire, &[cut], 1 << 16), b"last words");
    assert!(server.peer_closed());
    // the answer still goes out, then our close_notify
    let mut out = Vec::new();
    server.send(b"goodbye", &mut out).unwrap();
    server.close();
    server.take_outgoing(&mut out);
    assert_eq!(client_reads(&mut client, &out), b"goodbye");
    assert!(client.process_new_packets().unwrap().peer_has_closed());
}

// ---- P-521 (klog_core::tls_p521): certificates and keys made by OpenSSL (tests/data/make_p521_pki.py) ----

/// The PEM under `# label` in tests/data/p521_pki.pem.
fn p521_pem(label: &str) -> &'static str {
    let text = include_str!("data/p521_pki.pem");
    let start = text.find(&format!("# {label}\n")).unwrap_or_else(|| panic!("no {label}")) + label.len() + 3;
    let end = text[start..].find("\n# ").map(|at| start + at + 1).unwrap_or(text.len());
    &text[start..end]
}

/// A rustls client trusting the P-521 CA (and verifying with klog's P-521 algorithms), with the client
/// certificate `client` ("p521 client", "p256 client") if given.
fn p521_client(
    provider: rustls::crypto::CryptoProvider,
    client: Option<&str>,
    version: &'static rustls::SupportedProtocolVersion,
) -> ClientConnection {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(p521_pem("ca").as_bytes()).unwrap()).unwrap();
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some(name) => {
            let chain = vec![CertificateDer::from_pem_slice(p521_pem(name).as_bytes()).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(p521_pem(&format!("{name} key")).as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let mut client = ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    client.set_buffer_limit(None);
    client
}

fn p521_server(auth: ClientAuth, protocols: &[String]) -> Arc<rustls::ServerConfig> {
    server_config(&ServerSettings {
        cert_chain_pem: p521_pem("server").as_bytes(),
        key_pem: p521_pem("server key").as_bytes(),
        client_ca_pem: Some(p521_pem("ca").as_bytes()),
        client_auth: auth,
        protocols,
        cipher_suites: &[],
    })
    .unwrap()
}

#[test]
fn a_p521_server_key_and_client_certificates_of_a_p521_ca_handshake_on_both_versions() {
    let config = p521_server(ClientAuth::Required, &all());
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        // a P-521 client key signs CertificateVerify; a P-256 one (its certificate signed by the P-521 CA with SHA-512)
        for name in ["p521 client", "p256 client"] {
            let mut server = ServerSession::new(config.clone()).unwrap();
            let mut client = p521_client(klog_core::tls_p521::ring_with_p521(), Some(name), version);
            handshake(&mut server, &mut client).unwrap_or_else(|e| panic!("{name} {version:?}: {e}"));
            let chain = server.peer_certificates();
            assert_eq!(chain, vec![CertificateDer::from_pem_slice(p521_pem(name).as_bytes()).unwrap().as_ref()]);
            // the server signed with its P-521 key, the client verified it: data flows both ways
            client.writer().write_all(b"ping").unwrap();
            let mut plaintext = Vec::new();
            server.receive(&client_out(&mut client), &mut plaintext).unwrap();
            assert_eq!(plaintext, b"ping");
            let mut out = Vec::new();
            server.send(b"pong", &mut out).unwrap();
            assert_eq!(client_reads(&mut client, &out), b"pong");
        }
    }
}

#[test]
fn ring_alone_refuses_the_certificates_the_p521_algorithms_verify() {
    // rustls's client certificate verifier on the P-521 CA, with ring's provider and with klog's: only klog's
    // verifies the P-521 CA's signatures (SHA-384 on the P-521 client's certificate, SHA-512 on the P-256 one's)
    use rustls::pki_types::UnixTime;
    use rustls::server::WebPkiClientVerifier;
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(p521_pem("ca").as_bytes()).unwrap()).unwrap();
    let roots = Arc::new(roots);
    let verifier = |provider| WebPkiClientVerifier::builder_with_provider(roots.clone(), Arc::new(provider)).build().unwrap();
    let ring = verifier(rustls::crypto::ring::default_provider());
    let klog = verifier(klog_core::tls_p521::ring_with_p521());
    for name in ["p521 client", "p256 client"] {
        let cert = CertificateDer::from_pem_slice(p521_pem(name).as_bytes()).unwrap();
        let refused = ring.verify_client_cert(&cert, &[], UnixTime::now()).err().expect(name);
        assert!(format!("{refused:?}").contains("UnsupportedSignatureAlgorithm"), "{name}: {refused:?}");
        klog.verify_client_cert(&cert, &[], UnixTime::now()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert!(!ring.supported_verify_schemes().contains(&rustls::SignatureScheme::ECDSA_NISTP521_SHA512));
    assert!(klog.supported_verify_schemes().contains(&rustls::SignatureScheme::ECDSA_NISTP521_SHA512));
}

#[test]
fn a_client_certificate_the_p521_ca_did_not_sign_is_refused() {
    // a P-256 CA's client (pki()) on the P-521 CA's listener: refused, and the client told
    let config = p521_server(ClientAuth::Required, &all());
    let other = pki();
    let mut server = ServerSession::new(config).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(p521_pem("ca").as_bytes()).unwrap()).unwrap();
    let chain = vec![CertificateDer::from_pem_slice(other.client_chain_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(other.client_key_pem.as_bytes()).unwrap();
    let config = ClientConfig::builder_with_provider(Arc::new(klog_core::tls_p521::ring_with_p521()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    let mut client = ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    match handshake(&mut server, &mut client) {
        Err(TlsError::Protocol(message)) => assert!(message.contains("certificate"), "{message}"),
        other => panic!("a client of another CA was served: {other:?}"),
    }
}

#[test]
fn a_p521_key_that_does_not_serve_its_certificate_is_a_config_error() {
    let mismatched = ServerSettings {
        cert_chain_pem: p521_pem("server").as_bytes(),
        key_pem: p521_pem("p521 client key").as_bytes(),
        client_ca_pem: None,
        client_auth: ClientAuth::None,
        protocols: &[],
        cipher_suites: &[],
    };
    let err = server_config(&mismatched).err().unwrap();
    assert!(matches!(err, TlsError::Config(_)) && err.to_string().contains("does not serve"), "{err}");
}
