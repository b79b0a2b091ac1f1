//! `SocketWriter` / `SocketQueue`: the broker's responses sent from a native thread (see
//! `klog_core::socket_writer`). Queueing copies the bytes (the GIL is held only for the copy); the
//! sends run on the writer thread without the GIL.

use std::sync::Arc;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use klog_core::socket_writer::{Chunk, Conn, SocketWriter as CoreWriter};

use crate::inputs::ByteInput;
use crate::storage::PyFileSlice;

fn os_error(errno: i32) -> PyErr {
    PyOSError::new_err((errno, std::io::Error::from_raw_os_error(errno).to_string()))
}

/// One writer thread for all connections of a broker.
#[pyclass(frozen, module = "klog._native", name = "SocketWriter")]
pub struct PySocketWriter {
    inner: CoreWriter,
}

#[pymethods]
impl PySocketWriter {
    #[new]
    fn new() -> PyResult<Self> {
        Ok(PySocketWriter { inner: CoreWriter::new()? })
    }

    /// A send queue for the socket `fd` (duplicated: the caller still owns and closes `fd`).
    fn register(&self, fd: i32) -> PyResult<PySocketQueue> {
        Ok(PySocketQueue { conn: self.inner.register(fd)? })
    }

    /// Wake the writer thread for what was queued since the last call.
    fn kick(&self) {
        self.inner.kick();
    }

    /// Let the writer thread deregister and close an aborted queue it is waiting on.
    fn reap(&self, queue: &PySocketQueue) {
        self.inner.reap(&queue.conn);
    }

    /// Readable when a queue that asked (``notify_when_empty``) emptied or failed.
    #[getter]
    fn notify_fd(&self) -> i32 {
        self.inner.notify_fd()
    }

    /// Ids of the queues that emptied or failed since the last call.
    fn take_drained(&self) -> Vec<u64> {
        self.inner.take_drained()
    }
}

/// The outgoing bytes of one connection, in order.
#[pyclass(frozen, module = "klog._native", name = "SocketQueue")]
pub struct PySocketQueue {
    pub(crate) conn: Arc<Conn>,
}

#[pymethods]
impl PySocketQueue {
    #[getter]
    fn id(&self) -> u64 {
        self.conn.id()
    }

    /// Bytes queued and not yet sent.
    #[getter]
    fn queued_bytes(&self) -> usize {
        self.conn.queued_bytes()
    }

    /// The errno of the first failed send, else None.
    #[getter]
    fn error(&self) -> Option<i32> {
        self.conn.error()
    }

    /// Queue ``chunks`` in order: bytes-like objects (consecutive ones copied into one buffer) and file
    /// regions (objects with ``fd``, ``position``, ``length``, e.g. storage FileSlice: the descriptor is
    /// duplicated and the range sent with sendfile). Returns the bytes now queued. Raises OSError if an
    /// earlier send failed or the queue was closed. Sent once the writer is kicked.
    fn send(&self, chunks: &Bound<'_, PyList>) -> PyResult<usize> {
        let mut out: Vec<Chunk> = Vec::new();
        let mut data: Vec<u8> = Vec::new();
        for item in chunks.iter() {
            if let Ok(slice) = item.cast::<PyFileSlice>() {
                // the segment file's own descriptor, kept open by the shared reference: no dup
                let range = slice.get().range();
                if range.length == 0 {
                    continue;
                }
                if !data.is_empty() {
                    out.push(Chunk::Bytes(std::mem::take(&mut data)));
                }
                out.push(Chunk::File { file: range.file.clone(), position: range.position, length: range.length });
                continue;
            }
            if item.cast::<pyo3::types::PyBytes>().is_err() && item.hasattr(pyo3::intern!(item.py(), "fd"))? {
                let fd: i32 = item.getattr(pyo3::intern!(item.py(), "fd"))?.extract()?;
                let position: u64 = item.getattr(pyo3::intern!(item.py(), "position"))?.extract()?;
                let length: u64 = item.getattr(pyo3::intern!(item.py(), "length"))?.extract()?;
                if length == 0 {
                    continue;
                }
                // SAFETY: dup of a descriptor the caller's live object owns; failure checked.
                let own = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
                if own < 0 {
                    return Err(std::io::Error::last_os_error().into());
                }
                if !data.is_empty() {
                    out.push(Chunk::Bytes(std::mem::take(&mut data)));
                }
                // SAFETY: `own` is a fresh descriptor nothing else owns.
                let file = unsafe { <std::fs::File as std::os::unix::io::FromRawFd>::from_raw_fd(own) };
                out.push(Chunk::File { file: Arc::new(file), position, length });
                continue;
            }
            let input = ByteInput::from_object(&item, "chunk")?;
            data.extend_from_slice(input.as_slice());
        }
        if !data.is_empty() {
            out.push(Chunk::Bytes(data));
        }
        self.conn.send_chunks(out).map_err(os_error)
    }

    /// Ask for this queue's id in ``take_drained`` once it is empty; False (not armed) if it already is.
    fn notify_when_empty(&self) -> bool {
        self.conn.notify_when_empty()
    }

    /// Send what is queued, then close the duplicate descriptor.
    fn close_after_flush(&self) {
        self.conn.close_after_flush();
    }

    /// Drop what is queued and close the duplicate descriptor (at once, or on the writer's next pass).
    fn abort(&self) {
        self.conn.abort();
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySocketWriter>()?;
    m.add_class::<PySocketQueue>()?;
    Ok(())
}
