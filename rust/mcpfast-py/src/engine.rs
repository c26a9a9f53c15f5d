//! `mcpfast._core.NativeEngine`: the Python face of `mcpfast-engine` (the contract is in
//! rust/mcpfast-engine/README.md). Construction validates the config and starts nothing;
//! every method but `stop` returns in microseconds; `stop` releases the GIL while it joins.
//! A drain crosses the FFI boundary once, as a list of tuples.

use std::time::Duration;

use mcpfast_engine::Engine;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

#[pyclass(module = "mcpfast._core", frozen)]
pub struct NativeEngine {
    inner: Engine,
}

#[pymethods]
impl NativeEngine {
    #[new]
    fn new(config: &[u8]) -> PyResult<Self> {
        Engine::new(config)
            .map(|inner| NativeEngine { inner })
            .map_err(PyValueError::new_err)
    }

    /// Spawn the engine threads (after any fork); returns at once.
    fn start(&self) -> PyResult<()> {
        self.inner.start().map_err(PyRuntimeError::new_err)
    }

    fn set_users(&self, n: usize) {
        self.inner.set_users(n);
    }

    #[pyo3(signature = (rate = None))]
    fn set_rate(&self, rate: Option<f64>) -> PyResult<()> {
        if let Some(r) = rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "rate must be a finite number > 0 (or None for the closed model), not {r}"
                )));
            }
        }
        self.inner.set_rate(rate);
        Ok(())
    }

    /// Replace the bearer tokens while running (users take them in the same turns as before).
    fn set_bearer_tokens(&self, tokens: Vec<String>) -> PyResult<()> {
        self.inner
            .set_bearer_tokens(tokens)
            .map_err(PyValueError::new_err)
    }

    /// The windows since the last drain, one tuple per (request_type, name).
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.inner.drain();
        let rtype = self.inner.request_type();
        let out = PyList::empty(py);
        for r in rows {
            let buckets = PyList::new(py, r.buckets)?;
            let per_second = PyList::new(py, r.per_second)?;
            let errors = PyList::new(py, r.errors)?;
            let failed_buckets = PyList::new(py, r.failed_buckets)?;
            let service_buckets = PyList::new(py, r.service_buckets)?;
            let lag_buckets = PyList::new(py, r.lag_buckets)?;
            let items: [Bound<'py, PyAny>; 16] = [
                rtype.into_pyobject(py)?.into_any(),
                self.inner.name(r.name).into_pyobject(py)?.into_any(),
                r.num.into_pyobject(py)?.into_any(),
                0u64.into_pyobject(py)?.into_any(),
                r.failures.into_pyobject(py)?.into_any(),
                r.total_ms.into_pyobject(py)?.into_any(),
                r.min_ms.into_pyobject(py)?.into_any(),
                r.max_ms.into_pyobject(py)?.into_any(),
                r.content_length.into_pyobject(py)?.into_any(),
                buckets.into_any(),
                per_second.into_any(),
                r.last_ts.into_pyobject(py)?.into_any(),
                errors.into_any(),
                failed_buckets.into_any(),
                service_buckets.into_any(),
                lag_buckets.into_any(),
            ];
            out.append(PyTuple::new(py, items)?)?;
        }
        Ok(out)
    }

    /// Cumulative µs histograms since start or reset(): (request_type, name, [(µs, count)]),
    /// successes under the name, failures under `name + " (failed)"`.
    fn histograms<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rtype = self.inner.request_type();
        let out = PyList::empty(py);
        for (name, failed, buckets) in self.inner.histograms() {
            let name = if failed {
                format!("{name} (failed)")
            } else {
                name
            };
            out.append((rtype, name, PyList::new(py, buckets)?))?;
        }
        Ok(out)
    }

    fn reset(&self) {
        self.inner.reset();
    }

    /// Stop sending, drain in-flight up to `grace_s`, close, join (GIL released). Idempotent.
    #[pyo3(signature = (grace_s = 2.0))]
    fn stop(&self, py: Python<'_>, grace_s: f64) {
        let grace = Duration::from_secs_f64(if grace_s.is_finite() {
            grace_s.clamp(0.0, 3600.0)
        } else {
            0.0
        });
        py.detach(|| self.inner.stop(grace));
    }

    fn events(&self) -> Vec<(String, String)> {
        self.inner.events()
    }

    fn fileno(&self) -> i32 {
        self.inner.fileno()
    }

    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.status();
        let d = PyDict::new(py);
        d.set_item("users", s.users)?;
        d.set_item("sessions_open", s.sessions_open)?;
        d.set_item("inflight", s.inflight)?;
        d.set_item("threads", s.threads)?;
        d.set_item("cpu_s", s.cpu_s)?;
        d.set_item("sent", s.sent)?;
        d.set_item("completed", s.completed)?;
        d.set_item("late", s.late)?;
        d.set_item("dropped", s.dropped)?;
        d.set_item("established", s.established)?;
        d.set_item("reinitialized", s.reinitialized)?;
        d.set_item("iterations", s.iterations)?;
        d.set_item("held", s.held)?;
        d.set_item("connects", s.connects)?;
        Ok(d)
    }
}
