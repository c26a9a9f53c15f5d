//! What the lane's births (`mcpfast_core::births`: sessions the lane opens itself) ask of
//! Python: the server's session defaults, the table's count of sessions, and the versions
//! the sessions hold as Python strs.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use mcpfast_core::births::Host;

/// The server's session defaults: an object that changes identity when anything an
/// `initialize` reply holds changes, so two are equal only when they are the same object.
pub(crate) struct Defaults(pub(crate) Py<PyAny>);

impl PartialEq for Defaults {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_ptr() == other.0.as_ptr()
    }
}

/// The Python objects the births consult: `defaults()` returns the server's current session
/// defaults, `held` is the table's dict of sessions.
pub(crate) struct Consulted {
    pub(crate) defaults: Py<PyAny>,
    pub(crate) held: Py<PyDict>,
}

/// The births' [`Host`] for one request.
pub(crate) struct PyHost<'a, 'py> {
    pub(crate) py: Python<'py>,
    pub(crate) consulted: &'a Consulted,
}

impl Host<Py<PyString>, Defaults> for PyHost<'_, '_> {
    type Error = PyErr;

    fn held(&self) -> usize {
        self.consulted.held.bind(self.py).len()
    }

    fn defaults(&mut self) -> PyResult<Defaults> {
        Ok(Defaults(
            self.consulted.defaults.bind(self.py).call0()?.unbind(),
        ))
    }

    fn random(&mut self, buf: &mut [u8]) -> PyResult<()> {
        getrandom::getrandom(buf).map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!("no random bytes for a session id: {e}"))
        })
    }

    fn version(&self, version: &Py<PyString>) -> Py<PyString> {
        version.clone_ref(self.py)
    }
}
