//! `mcpfast._core.NativeEngine`: the Python face of `mcpfast-engine` (the contract is in
//! rust/mcpfast-engine/README.md). Construction validates the config and starts nothing;
//! every method but `stop` returns in microseconds; `stop` releases the GIL while it joins.
//! A drain crosses the FFI boundary once, as a list of `DrainRow`s (named fields, read by
//! CPython as member descriptors).

use std::time::Duration;

use mcpfast_engine::Engine;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// One drained window of one (request_type, name): what Locust's `StatsEntry` needs, and the
/// µs histograms of the same requests.
#[pyclass(module = "mcpfast._core", frozen, freelist = 64)]
pub struct DrainRow {
    #[pyo3(get)]
    request_type: Py<PyString>,
    #[pyo3(get)]
    name: Py<PyString>,
    #[pyo3(get)]
    num_requests: u64,
    #[pyo3(get)]
    num_failures: u64,
    #[pyo3(get)]
    total_ms: f64,
    #[pyo3(get)]
    min_ms: Option<f64>,
    #[pyo3(get)]
    max_ms: f64,
    #[pyo3(get)]
    content_length: u64,
    /// (latency µs, count): the window's HDR buckets, every request.
    #[pyo3(get)]
    buckets: Py<PyList>,
    /// (epoch second of completion, requests, failures).
    #[pyo3(get)]
    per_second: Py<PyList>,
    /// Wall-clock epoch seconds of the window's last completion.
    #[pyo3(get)]
    last_ts: f64,
    /// (failure reason, count).
    #[pyo3(get)]
    errors: Py<PyList>,
    /// The buckets of the failed requests only (a subset of `buckets`).
    #[pyo3(get)]
    failed_buckets: Py<PyList>,
    /// Open model: µs from the actual send to the end, and of send lag (else empty).
    #[pyo3(get)]
    service_buckets: Py<PyList>,
    #[pyo3(get)]
    lag_buckets: Py<PyList>,
}

#[pymethods]
impl DrainRow {
    /// A window built by hand (the engine's drain makes them; tests and replays too).
    #[new]
    #[pyo3(signature = (request_type, name, num_requests, num_failures, total_ms, min_ms, max_ms, content_length, buckets, per_second, last_ts, errors, failed_buckets = None, service_buckets = None, lag_buckets = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        request_type: Py<PyString>,
        name: Py<PyString>,
        num_requests: u64,
        num_failures: u64,
        total_ms: f64,
        min_ms: Option<f64>,
        max_ms: f64,
        content_length: u64,
        buckets: Vec<(u64, u64)>,
        per_second: Vec<(i64, u64, u64)>,
        last_ts: f64,
        errors: Vec<(String, u64)>,
        failed_buckets: Option<Vec<(u64, u64)>>,
        service_buckets: Option<Vec<(u64, u64)>>,
        lag_buckets: Option<Vec<(u64, u64)>>,
    ) -> PyResult<Self> {
        if num_failures > num_requests {
            return Err(PyValueError::new_err("num_failures > num_requests"));
        }
        Ok(DrainRow {
            request_type,
            name,
            num_requests,
            num_failures,
            total_ms,
            min_ms,
            max_ms,
            content_length,
            buckets: PyList::new(py, buckets)?.unbind(),
            per_second: PyList::new(py, per_second)?.unbind(),
            last_ts,
            errors: PyList::new(py, errors)?.unbind(),
            failed_buckets: PyList::new(py, failed_buckets.unwrap_or_default())?.unbind(),
            service_buckets: PyList::new(py, service_buckets.unwrap_or_default())?.unbind(),
            lag_buckets: PyList::new(py, lag_buckets.unwrap_or_default())?.unbind(),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "DrainRow({} {}: {} requests, {} failed)",
            self.request_type.bind(py),
            self.name.bind(py),
            self.num_requests,
            self.num_failures
        )
    }
}

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

    /// The windows since the last drain, one `DrainRow` per (request_type, name).
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = self.inner.drain();
        let rtype = PyString::new(py, self.inner.request_type()).unbind();
        let out = PyList::empty(py);
        for r in rows {
            let row = DrainRow {
                request_type: rtype.clone_ref(py),
                name: PyString::new(py, self.inner.name(r.name)).unbind(),
                num_requests: r.num,
                num_failures: r.failures,
                total_ms: r.total_ms,
                min_ms: r.min_ms,
                max_ms: r.max_ms,
                content_length: r.content_length,
                buckets: PyList::new(py, r.buckets)?.unbind(),
                per_second: PyList::new(py, r.per_second)?.unbind(),
                last_ts: r.last_ts,
                errors: PyList::new(py, r.errors)?.unbind(),
                failed_buckets: PyList::new(py, r.failed_buckets)?.unbind(),
                service_buckets: PyList::new(py, r.service_buckets)?.unbind(),
                lag_buckets: PyList::new(py, r.lag_buckets)?.unbind(),
            };
            out.append(Bound::new(py, row)?)?;
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
