//! `SocketWriter` / `SocketQueue`: the broker's responses sent from a native thread (see
//! `klog_core::socket_writer`). Queueing copies the bytes (the GIL is held only for the copy); the
//! sends run on the writer thread without the GIL.

use std::sync::Arc;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use klog_core::socket_writer::{Conn, SocketWriter as CoreWriter};

use crate::inputs::ByteInput;

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
    conn: Arc<Conn>,
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

    /// Queue the bytes-like objects of ``chunks`` (one copy); returns the bytes now queued. Raises OSError
    /// if an earlier send failed or the queue was closed. Sent once the writer is kicked.
    fn send(&self, chunks: &Bound<'_, PyList>) -> PyResult<usize> {
        let mut total = 0usize;
        let mut inputs = Vec::with_capacity(chunks.len());
        for item in chunks.iter() {
            let input = ByteInput::from_object(&item, "chunk")?;
            total += input.as_slice().len();
            inputs.push(input);
        }
        let mut data = Vec::with_capacity(total);
        for input in &inputs {
            data.extend_from_slice(input.as_slice());
        }
        self.conn.send(data).map_err(os_error)
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
