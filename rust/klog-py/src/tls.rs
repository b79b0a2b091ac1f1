//! `TlsServerConfig` and `TlsServerSession`: klog_core::tls's sans-IO TLS server session for Python.
//! The caller reads and writes the socket; `receive_into` decrypts every record of one read in one call,
//! in place in the buffer the socket was read into.

use std::sync::{Arc, Mutex};

use klog_core::tls::{server_config, ClientAuth, ServerConfig, ServerSession, ServerSettings, TlsError as CoreError};
use pyo3::create_exception;
use pyo3::exceptions::{PyConnectionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::{ByteInput, ExportedBuffer};

create_exception!(
    _core,
    TlsError,
    PyConnectionError,
    "The TLS peer broke the protocol or the handshake failed: the session is over, and `outgoing()` holds the alert \
     that tells the peer why."
);

fn to_py(e: CoreError) -> PyErr {
    match e {
        CoreError::Config(message) => PyValueError::new_err(message),
        CoreError::Protocol(_) => TlsError::new_err(e.to_string()),
    }
}

/// What a TLS listener serves with: Kafka's ssl.* settings with their stores read (PEM bytes).
#[pyclass(frozen, module = "klog._native", name = "TlsServerConfig")]
pub struct PyTlsServerConfig {
    config: Arc<ServerConfig>,
}

#[pymethods]
impl PyTlsServerConfig {
    #[new]
    #[pyo3(signature = (cert_chain_pem, key_pem, *, client_ca_pem=None, client_auth="none",
                        protocols=Vec::new(), cipher_suites=Vec::new()))]
    fn new(
        cert_chain_pem: ByteInput<'_>,
        key_pem: ByteInput<'_>,
        client_ca_pem: Option<ByteInput<'_>>,
        client_auth: &str,
        protocols: Vec<String>,
        cipher_suites: Vec<String>,
    ) -> PyResult<Self> {
        let settings = ServerSettings {
            cert_chain_pem: cert_chain_pem.as_slice(),
            key_pem: key_pem.as_slice(),
            client_ca_pem: client_ca_pem.as_ref().map(|c| c.as_slice()),
            client_auth: ClientAuth::parse(client_auth).map_err(to_py)?,
            protocols: &protocols,
            cipher_suites: &cipher_suites,
        };
        Ok(PyTlsServerConfig { config: server_config(&settings).map_err(to_py)? })
    }
}

/// One TLS connection's server side.
#[pyclass(frozen, module = "klog._native", name = "TlsServerSession")]
pub struct PyTlsServerSession {
    session: Mutex<ServerSession>,
}

impl PyTlsServerSession {
    fn session(&self) -> std::sync::MutexGuard<'_, ServerSession> {
        self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl PyTlsServerSession {
    #[new]
    fn new(config: &PyTlsServerConfig) -> PyResult<Self> {
        Ok(PyTlsServerSession { session: Mutex::new(ServerSession::new(config.config.clone()).map_err(to_py)?) })
    }

    /// The application data of every complete record in ``data`` (ciphertext read from the socket;
    /// a partial record waits for the next call). Raises TlsError when the session failed.
    fn receive<'py>(&self, py: Python<'py>, data: ByteInput<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let ciphertext = data.as_slice();
        let mut plaintext = Vec::new();
        // locked inside: the guard goes before the GIL is taken back
        run_detached_if(py, ciphertext.len() >= DETACH_THRESHOLD, || {
            self.session().receive(ciphertext, &mut plaintext)
        })
        .map_err(to_py)?;
        Ok(PyBytes::new(py, &plaintext))
    }

    /// Decrypts the records of ``data`` straight into ``target`` (a writable buffer) until it is full or
    /// ``data`` is used up: (bytes of ``data`` consumed, bytes written). A writable ``data`` (the buffer the
    /// socket was read into) is decrypted in place, so what it held is gone; a read-only one is copied first.
    /// Plaintext that did not fit waits for the next call (``plaintext_waiting``), and the ciphertext behind it
    /// is not consumed: pass it again. The handshake's records are consumed whatever the room, and what follows
    /// the client's Finished is left for a call with room. Raises TlsError when the session failed.
    fn receive_into(&self, py: Python<'_>, data: &Bound<'_, PyAny>, target: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
        let mut out = ExportedBuffer::writable(target, "target")?;
        let mut exported;
        let mut copied;
        let ciphertext: &mut [u8] = match ExportedBuffer::writable(data, "data") {
            Ok(buffer) => {
                exported = buffer;
                exported.bytes_mut()
            }
            Err(_) => {
                copied = ByteInput::from_object(data, "data")?.as_slice().to_vec();
                &mut copied
            }
        };
        let room = out.bytes_mut();
        let (a, b) = (ciphertext.as_ptr_range(), room.as_ptr_range());
        if !ciphertext.is_empty() && !room.is_empty() && a.start < b.end && b.start < a.end {
            return Err(PyValueError::new_err("data and target must not overlap"));
        }
        // the work is bounded by the room as much as by the input (a frame header's few bytes of a large read)
        let work = ciphertext.len().min(room.len().max(1 << 14));
        run_detached_if(py, work >= DETACH_THRESHOLD, || self.session().receive_into(ciphertext, room)).map_err(to_py)
    }

    /// Bytes of plaintext decrypted but not yet delivered (they did not fit the last target): the next
    /// ``receive_into`` delivers them, even with no data.
    #[getter]
    fn plaintext_waiting(&self) -> usize {
        self.session().plaintext_waiting()
    }

    /// ``data`` encrypted (with any handshake bytes still due), for the socket.
    fn send<'py>(&self, py: Python<'py>, data: ByteInput<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let plaintext = data.as_slice();
        let mut out = Vec::new();
        run_detached_if(py, plaintext.len() >= DETACH_THRESHOLD, || self.session().send(plaintext, &mut out))
            .map_err(to_py)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The ciphertext due to the peer: handshake messages, alerts, session tickets.
    fn outgoing<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut out = Vec::new();
        self.session().take_outgoing(&mut out);
        PyBytes::new(py, &out)
    }

    /// close_notify (with anything else still due), for the socket.
    fn close<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let mut session = self.session();
        session.close();
        let mut out = Vec::new();
        session.take_outgoing(&mut out);
        PyBytes::new(py, &out)
    }

    #[getter]
    fn handshaking(&self) -> bool {
        self.session().is_handshaking()
    }

    /// The peer sent close_notify.
    #[getter]
    fn peer_closed(&self) -> bool {
        self.session().peer_closed()
    }

    /// "TLSv1.2" or "TLSv1.3" once negotiated.
    #[getter]
    fn protocol_version(&self) -> Option<&'static str> {
        self.session().protocol_version()
    }

    /// The negotiated cipher suite's IANA name.
    #[getter]
    fn cipher_suite(&self) -> Option<String> {
        self.session().cipher_suite()
    }

    /// The SNI host name the client asked for.
    #[getter]
    fn server_name(&self) -> Option<String> {
        self.session().server_name()
    }

    /// The client's certificate chain (DER, its own first); empty without one.
    fn peer_certificates<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.session().peer_certificates().into_iter().map(|der| PyBytes::new(py, der)).collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TlsError", m.py().get_type::<TlsError>())?;
    m.add_class::<PyTlsServerConfig>()?;
    m.add_class::<PyTlsServerSession>()?;
    Ok(())
}
