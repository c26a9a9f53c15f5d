//! `mcpfast._core.NativeEngine`: the Python face of `mcpfast-engine` (the contract is in
//! rust/mcpfast-engine/README.md). Its config crosses as typed values: an `EngineConfig` made
//! with keyword arguments becomes the engine's `Settings` and is validated there, once, when it
//! is made (a `ValueError` naming the field); `MixItem`s are the entries of its `mix`.
//! Constructing the engine starts nothing; every method but `stop` returns in microseconds;
//! `stop` releases the GIL while it joins. A drain crosses the FFI boundary once, as a list of
//! `DrainRow`s (named fields, read by CPython as member descriptors).

use std::str::FromStr;
use std::time::Duration;

use mcpfast_engine::config::{self, Config, Extract, JsonObject, MixCall, Settings, Use};
use mcpfast_engine::serde_json::{self, Value};
use mcpfast_engine::stats::ReasonBuckets;
use mcpfast_engine::Engine;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::pyjson;

/// The `ValueError` of a bad value, worded as the engine words its own (the field first).
fn field_error(field: &str, what: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(config::field_error(field, what))
}

/// A dict of JSON values as a JSON object; the error names the field.
fn json_object(field: &str, dict: &Bound<'_, PyDict>) -> PyResult<JsonObject> {
    let mut text = Vec::new();
    pyjson::write_obj(&mut text, dict.as_any(), 0)
        .map_err(|e| PyTypeError::new_err(config::field_error(field, e.value(dict.py()))))?;
    serde_json::from_slice(&text).map_err(|e| field_error(field, e))
}

/// A JSON object as a new dict.
fn dict_of<'py>(py: Python<'py>, object: &JsonObject) -> PyResult<Bound<'py, PyDict>> {
    let text = Value::Object(object.clone()).to_string();
    Ok(pyjson::build_value(py, &text)?.cast_into::<PyDict>()?)
}

/// An optional JSON object argument.
fn object_arg(field: &str, dict: Option<&Bound<'_, PyDict>>) -> PyResult<Option<JsonObject>> {
    dict.map(|d| json_object(field, d)).transpose()
}

/// An optional count argument: Python ints are signed, the engine's counts are not.
fn count_arg<T: TryFrom<i64>>(field: &str, value: Option<i64>) -> PyResult<Option<T>> {
    value
        .map(|v| T::try_from(v).map_err(|_| field_error(field, "must be a non-negative integer")))
        .transpose()
}

/// An optional choice argument, by name (the error names the field and the choices).
fn choice_arg<T: FromStr<Err = String>>(name: Option<&str>) -> PyResult<Option<T>> {
    name.map(|n| n.parse().map_err(PyValueError::new_err))
        .transpose()
}

/// One entry of an `EngineConfig`'s `mix`: a tool with its arguments, or any other method
/// with its params; its weight among the entries; streamed or not.
#[pyclass(module = "mcpfast._core", frozen)]
pub struct MixItem {
    #[pyo3(get)]
    tool: Option<String>,
    #[pyo3(get)]
    arguments: Option<Py<PyDict>>,
    #[pyo3(get)]
    method: Option<String>,
    #[pyo3(get)]
    params: Option<Py<PyDict>>,
    #[pyo3(get)]
    weight: u32,
    #[pyo3(get)]
    stream: bool,
    #[pyo3(get)]
    label: Option<String>,
    #[pyo3(get)]
    uses: Vec<(String, usize, String, String)>,
    item: config::MixItem,
}

/// A use as Python gives it: (at, step, "pointer" or "regex", the pointer or the expression).
fn use_of(u: &(String, usize, String, String)) -> PyResult<Use> {
    let extract = match u.2.as_str() {
        "pointer" => Extract::Pointer(u.3.clone()),
        "regex" => Extract::Regex(u.3.clone()),
        other => {
            return Err(field_error(
                "mix item",
                format!("a use reads by \"pointer\" or \"regex\", not {other:?}"),
            ))
        }
    };
    Ok(Use {
        at: u.0.clone(),
        step: u.1,
        extract,
    })
}

#[pymethods]
impl MixItem {
    #[new]
    #[pyo3(signature = (*, tool = None, arguments = None, method = None, params = None, weight = 1, stream = false, label = None, uses = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        tool: Option<String>,
        arguments: Option<&Bound<'_, PyDict>>,
        method: Option<String>,
        params: Option<&Bound<'_, PyDict>>,
        weight: i64,
        stream: bool,
        label: Option<String>,
        uses: Option<Vec<(String, usize, String, String)>>,
    ) -> PyResult<Self> {
        let weight = u32::try_from(weight)
            .map_err(|_| field_error("mix item", format!("weight must be in 0..={}", u32::MAX)))?;
        let call = match (&tool, &method) {
            (Some(name), None) => {
                if params.is_some() {
                    return Err(field_error(
                        "mix item",
                        "params go with method (a tool takes arguments)",
                    ));
                }
                MixCall::Tool {
                    name: name.clone(),
                    arguments: object_arg("mix item", arguments)?.unwrap_or_default(),
                }
            }
            (None, Some(method)) => {
                if arguments.is_some() {
                    return Err(field_error(
                        "mix item",
                        "arguments go with tool (a method takes params)",
                    ));
                }
                MixCall::Method {
                    method: method.clone(),
                    params: object_arg("mix item", params)?,
                }
            }
            (Some(_), Some(_)) => {
                return Err(field_error("mix item", "tool and method both given"))
            }
            (None, None) => return Err(field_error("mix item", "needs tool or method")),
        };
        let uses = uses.unwrap_or_default();
        Ok(MixItem {
            item: config::MixItem {
                call,
                weight,
                stream,
                label: label.clone(),
                uses: uses.iter().map(use_of).collect::<PyResult<_>>()?,
            },
            tool,
            arguments: arguments.map(|d| d.copy()).transpose()?.map(Bound::unbind),
            method,
            params: params.map(|d| d.copy()).transpose()?.map(Bound::unbind),
            weight,
            stream,
            label,
            uses,
        })
    }

    fn __repr__(&self) -> String {
        let what = match &self.item.call {
            MixCall::Tool { name, .. } => format!("tool={name:?}"),
            MixCall::Method { method, .. } => format!("method={method:?}"),
        };
        let stream = if self.stream { ", stream=True" } else { "" };
        format!("MixItem({what}, weight={}{stream})", self.weight)
    }
}

/// The native engine's config, validated when it is made: the engine's `Settings` from the
/// keyword arguments (each left out, or None, keeps the engine's default), read back through
/// the properties with the defaults filled in.
#[pyclass(module = "mcpfast._core", frozen)]
pub struct EngineConfig {
    #[pyo3(get)]
    transport: &'static str,
    #[pyo3(get)]
    url: Option<String>,
    #[pyo3(get)]
    headers: Py<PyDict>,
    #[pyo3(get)]
    bearer_tokens: Vec<String>,
    #[pyo3(get)]
    ca_files: Vec<String>,
    #[pyo3(get)]
    client_cert: Option<String>,
    #[pyo3(get)]
    client_key: Option<String>,
    #[pyo3(get)]
    insecure: bool,
    #[pyo3(get)]
    connect_to: Vec<String>,
    #[pyo3(get)]
    new_connection: &'static str,
    #[pyo3(get)]
    cookies: bool,
    #[pyo3(get)]
    retry_after: bool,
    #[pyo3(get)]
    command: Vec<String>,
    #[pyo3(get)]
    inflight_per_process: usize,
    #[pyo3(get)]
    family: &'static str,
    #[pyo3(get)]
    protocol_version: String,
    #[pyo3(get)]
    client_capabilities: Py<PyDict>,
    #[pyo3(get)]
    tool: String,
    #[pyo3(get)]
    arguments: Py<PyDict>,
    #[pyo3(get)]
    mix: Py<PyTuple>,
    #[pyo3(get)]
    stream_tool: String,
    #[pyo3(get)]
    stream_arguments: Py<PyDict>,
    #[pyo3(get)]
    churn_delete_share: f64,
    #[pyo3(get)]
    threads: usize,
    #[pyo3(get)]
    rate: Option<f64>,
    #[pyo3(get)]
    arrivals: &'static str,
    #[pyo3(get)]
    worker_index: usize,
    #[pyo3(get)]
    worker_count: usize,
    #[pyo3(get)]
    max_inflight: usize,
    #[pyo3(get)]
    timeout_s: f64,
    #[pyo3(get)]
    max_reply_bytes: usize,
    #[pyo3(get)]
    max_sessions: usize,
    #[pyo3(get)]
    request_type: String,
    #[pyo3(get)]
    seed: u64,
    #[pyo3(get)]
    handshake_call: bool,
    #[pyo3(get)]
    cycle_latency: bool,
    #[pyo3(get)]
    iterations: Option<u64>,
    #[pyo3(get)]
    progress_every: Option<u64>,
    #[pyo3(get)]
    hold_delete: bool,
    #[pyo3(get)]
    late_after_s: f64,
    #[pyo3(get)]
    hold_stream: bool,
    #[pyo3(get)]
    hold_streams: usize,
    #[pyo3(get)]
    hold_trigger: Option<String>,
    #[pyo3(get)]
    hold_trigger_every_s: f64,
    #[pyo3(get)]
    hold_clock: Option<String>,
    #[pyo3(get)]
    tasks_cancel_share: f64,
    #[pyo3(get)]
    source_addresses: Vec<String>,
    #[pyo3(get)]
    agent_order: &'static str,
    #[pyo3(get)]
    agent_steps: (u32, u32),
    #[pyo3(get)]
    think: String,
    #[pyo3(get)]
    idle: Option<String>,
    #[pyo3(get)]
    agent_list_tools: bool,
    #[pyo3(get)]
    agent_hold_stream: f64,
    #[pyo3(get)]
    agent_abandon: f64,
    config: Config,
}

#[pymethods]
impl EngineConfig {
    #[new]
    #[pyo3(signature = (
        *,
        transport = None,
        url = None,
        headers = None,
        bearer_tokens = None,
        ca_files = None,
        client_cert = None,
        client_key = None,
        insecure = None,
        connect_to = None,
        new_connection = None,
        cookies = None,
        retry_after = None,
        command = None,
        inflight_per_process = None,
        family = None,
        protocol_version = None,
        client_capabilities = None,
        tool = None,
        arguments = None,
        mix = None,
        stream_tool = None,
        stream_arguments = None,
        churn_delete_share = None,
        threads = None,
        rate = None,
        arrivals = None,
        worker_index = None,
        worker_count = None,
        max_inflight = None,
        timeout_s = None,
        max_reply_bytes = None,
        max_sessions = None,
        request_type = None,
        seed = None,
        handshake_call = None,
        cycle_latency = None,
        iterations = None,
        progress_every = None,
        hold_delete = None,
        late_after_s = None,
        hold_stream = None,
        hold_streams = None,
        hold_trigger = None,
        hold_trigger_every_s = None,
        hold_clock = None,
        tasks_cancel_share = None,
        source_addresses = None,
        agent_order = None,
        agent_steps = None,
        think = None,
        idle = None,
        agent_list_tools = None,
        agent_hold_stream = None,
        agent_abandon = None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        transport: Option<&str>,
        url: Option<String>,
        headers: Option<&Bound<'_, PyDict>>,
        bearer_tokens: Option<Vec<String>>,
        ca_files: Option<Vec<String>>,
        client_cert: Option<String>,
        client_key: Option<String>,
        insecure: Option<bool>,
        connect_to: Option<Vec<String>>,
        new_connection: Option<&str>,
        cookies: Option<bool>,
        retry_after: Option<bool>,
        command: Option<Vec<String>>,
        inflight_per_process: Option<i64>,
        family: Option<&str>,
        protocol_version: Option<String>,
        client_capabilities: Option<&Bound<'_, PyDict>>,
        tool: Option<String>,
        arguments: Option<&Bound<'_, PyDict>>,
        mix: Option<Vec<Py<MixItem>>>,
        stream_tool: Option<String>,
        stream_arguments: Option<&Bound<'_, PyDict>>,
        churn_delete_share: Option<f64>,
        threads: Option<i64>,
        rate: Option<f64>,
        arrivals: Option<&str>,
        worker_index: Option<i64>,
        worker_count: Option<i64>,
        max_inflight: Option<i64>,
        timeout_s: Option<f64>,
        max_reply_bytes: Option<i64>,
        max_sessions: Option<i64>,
        request_type: Option<String>,
        seed: Option<i64>,
        handshake_call: Option<bool>,
        cycle_latency: Option<bool>,
        iterations: Option<i64>,
        progress_every: Option<i64>,
        hold_delete: Option<bool>,
        late_after_s: Option<f64>,
        hold_stream: Option<bool>,
        hold_streams: Option<i64>,
        hold_trigger: Option<String>,
        hold_trigger_every_s: Option<f64>,
        hold_clock: Option<String>,
        tasks_cancel_share: Option<f64>,
        source_addresses: Option<Vec<String>>,
        agent_order: Option<&str>,
        agent_steps: Option<(i64, i64)>,
        think: Option<String>,
        idle: Option<String>,
        agent_list_tools: Option<bool>,
        agent_hold_stream: Option<f64>,
        agent_abandon: Option<f64>,
    ) -> PyResult<Self> {
        let d = Settings::default();
        let mix = mix.unwrap_or_default();
        let settings = Settings {
            transport: choice_arg(transport)?.unwrap_or(d.transport),
            url,
            headers: match headers {
                Some(h) => header_pairs(h)?,
                None => d.headers,
            },
            bearer_tokens: bearer_tokens.unwrap_or(d.bearer_tokens),
            ca_files: ca_files.unwrap_or(d.ca_files),
            client_cert,
            client_key,
            insecure: insecure.unwrap_or(d.insecure),
            connect_to: connect_to.unwrap_or(d.connect_to),
            new_connection: choice_arg(new_connection)?.unwrap_or(d.new_connection),
            cookies: cookies.unwrap_or(d.cookies),
            retry_after: retry_after.unwrap_or(d.retry_after),
            command: command.unwrap_or(d.command),
            inflight_per_process: count_arg("inflight_per_process", inflight_per_process)?
                .unwrap_or(d.inflight_per_process),
            family: choice_arg(family)?.unwrap_or(d.family),
            protocol_version: protocol_version.unwrap_or(d.protocol_version),
            client_capabilities: object_arg("client_capabilities", client_capabilities)?
                .unwrap_or(d.client_capabilities),
            tool: tool.unwrap_or(d.tool),
            arguments: object_arg("arguments", arguments)?.unwrap_or(d.arguments),
            mix: mix.iter().map(|m| m.get().item.clone()).collect(),
            stream_tool: stream_tool.unwrap_or(d.stream_tool),
            stream_arguments: object_arg("stream_arguments", stream_arguments)?
                .unwrap_or(d.stream_arguments),
            churn_delete_share: churn_delete_share.unwrap_or(d.churn_delete_share),
            threads: count_arg("threads", threads)?.unwrap_or(d.threads),
            rate,
            arrivals: choice_arg(arrivals)?.unwrap_or(d.arrivals),
            worker_index: count_arg("worker_index", worker_index)?.unwrap_or(d.worker_index),
            worker_count: count_arg("worker_count", worker_count)?.unwrap_or(d.worker_count),
            max_inflight: count_arg("max_inflight", max_inflight)?.unwrap_or(d.max_inflight),
            timeout_s: timeout_s.unwrap_or(d.timeout_s),
            max_reply_bytes: count_arg("max_reply_bytes", max_reply_bytes)?
                .unwrap_or(d.max_reply_bytes),
            max_sessions: count_arg("max_sessions", max_sessions)?.unwrap_or(d.max_sessions),
            request_type,
            seed: count_arg("seed", seed)?.unwrap_or(d.seed),
            handshake_call: handshake_call.unwrap_or(d.handshake_call),
            cycle_latency: cycle_latency.unwrap_or(d.cycle_latency),
            iterations: count_arg("iterations", iterations)?,
            progress_every: count_arg("progress_every", progress_every)?,
            hold_delete: hold_delete.unwrap_or(d.hold_delete),
            late_after_s: late_after_s.unwrap_or(d.late_after_s),
            hold_stream: hold_stream.unwrap_or(d.hold_stream),
            hold_streams: count_arg("hold_streams", hold_streams)?.unwrap_or(d.hold_streams),
            hold_trigger,
            hold_trigger_every_s: hold_trigger_every_s.unwrap_or(d.hold_trigger_every_s),
            hold_clock,
            tasks_cancel_share: tasks_cancel_share.unwrap_or(d.tasks_cancel_share),
            source_addresses: source_addresses.unwrap_or(d.source_addresses),
            agent_order: choice_arg(agent_order)?.unwrap_or(d.agent_order),
            agent_steps: match agent_steps {
                Some((lo, hi)) => (
                    count_arg("agent_steps", Some(lo))?.unwrap_or(0),
                    count_arg("agent_steps", Some(hi))?.unwrap_or(0),
                ),
                None => d.agent_steps,
            },
            think: think.unwrap_or(d.think),
            idle: idle.or(d.idle),
            agent_list_tools: agent_list_tools.unwrap_or(d.agent_list_tools),
            agent_hold_stream: agent_hold_stream.unwrap_or(d.agent_hold_stream),
            agent_abandon: agent_abandon.unwrap_or(d.agent_abandon),
        };
        let config = settings.build().map_err(PyValueError::new_err)?;
        let headers = PyDict::new(py);
        for (k, v) in &settings.headers {
            headers.set_item(k, v)?;
        }
        Ok(EngineConfig {
            transport: settings.transport.name(),
            headers: headers.unbind(),
            new_connection: settings.new_connection.name(),
            family: settings.family.name(),
            client_capabilities: dict_of(py, &settings.client_capabilities)?.unbind(),
            arguments: dict_of(py, &settings.arguments)?.unbind(),
            mix: PyTuple::new(py, mix)?.unbind(),
            stream_arguments: dict_of(py, &settings.stream_arguments)?.unbind(),
            arrivals: settings.arrivals.name(),
            request_type: config.request_type.clone(),
            url: settings.url,
            bearer_tokens: settings.bearer_tokens,
            ca_files: settings.ca_files,
            client_cert: settings.client_cert,
            client_key: settings.client_key,
            insecure: settings.insecure,
            connect_to: settings.connect_to,
            cookies: settings.cookies,
            retry_after: settings.retry_after,
            command: settings.command,
            inflight_per_process: settings.inflight_per_process,
            protocol_version: settings.protocol_version,
            tool: settings.tool,
            stream_tool: settings.stream_tool,
            churn_delete_share: settings.churn_delete_share,
            threads: settings.threads,
            rate: settings.rate,
            worker_index: settings.worker_index,
            worker_count: settings.worker_count,
            max_inflight: settings.max_inflight,
            timeout_s: settings.timeout_s,
            max_reply_bytes: settings.max_reply_bytes,
            max_sessions: settings.max_sessions,
            seed: settings.seed,
            handshake_call: settings.handshake_call,
            cycle_latency: settings.cycle_latency,
            iterations: settings.iterations,
            progress_every: settings.progress_every,
            hold_delete: settings.hold_delete,
            late_after_s: settings.late_after_s,
            hold_stream: settings.hold_stream,
            hold_streams: settings.hold_streams,
            hold_trigger: settings.hold_trigger,
            hold_trigger_every_s: settings.hold_trigger_every_s,
            hold_clock: settings.hold_clock,
            tasks_cancel_share: settings.tasks_cancel_share,
            agent_order: settings.agent_order.name(),
            agent_steps: settings.agent_steps,
            think: settings.think,
            idle: settings.idle,
            agent_list_tools: settings.agent_list_tools,
            agent_hold_stream: settings.agent_hold_stream,
            agent_abandon: settings.agent_abandon,
            source_addresses: settings.source_addresses,
            config,
        })
    }

    fn __repr__(&self) -> String {
        let target = match &self.url {
            Some(url) => format!("url={url:?}"),
            None => format!("command={:?}", self.command),
        };
        format!(
            "EngineConfig(transport={:?}, family={:?}, {target}, threads={})",
            self.transport, self.family, self.threads
        )
    }
}

/// The `headers` dict as (name, value) pairs, in its order.
fn header_pairs(headers: &Bound<'_, PyDict>) -> PyResult<Vec<(String, String)>> {
    headers
        .iter()
        .map(|(k, v)| {
            let name: String = k
                .extract()
                .map_err(|_| field_error("headers", "names must be strings"))?;
            let value: String = v
                .extract()
                .map_err(|_| field_error("headers", format!("{name}: value must be a string")))?;
            Ok((name, value))
        })
        .collect()
}

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
    /// (failure reason, its failed requests' buckets): `failed_buckets` split by reason.
    #[pyo3(get)]
    failed_by_reason: Py<PyList>,
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
    #[pyo3(signature = (request_type, name, num_requests, num_failures, total_ms, min_ms, max_ms, content_length, buckets, per_second, last_ts, errors, failed_buckets = None, service_buckets = None, lag_buckets = None, failed_by_reason = None))]
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
        failed_by_reason: Option<ReasonBuckets>,
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
            failed_by_reason: PyList::new(py, failed_by_reason.unwrap_or_default())?.unbind(),
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
    /// An engine for `config` (its TLS files read, its host resolved); starts nothing.
    #[new]
    fn new(config: &EngineConfig) -> PyResult<Self> {
        Engine::new(config.config.clone())
            .map(|inner| NativeEngine { inner })
            .map_err(PyValueError::new_err)
    }

    /// Lift this process's open-file limit for `needed` descriptors (the soft limit to the
    /// hard one, the hard one where the OS allows); the limit in force, or an `OSError` naming
    /// the limit and the number needed.
    #[staticmethod]
    fn raise_open_files_limit(needed: u64) -> PyResult<u64> {
        mcpfast_engine::raise_open_files_limit(needed).map_err(pyo3::exceptions::PyOSError::new_err)
    }

    /// Connections that can be open at once before the ephemeral ports run out (each source
    /// address to each server address); None when the port range cannot be read.
    fn port_capacity(&self) -> Option<u64> {
        self.inner.port_capacity()
    }

    /// The local addresses new connections bind to, in turn (0: the kernel picks one).
    fn source_count(&self) -> usize {
        self.inner.source_count()
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
                failed_by_reason: PyList::new(py, r.failed_by_reason)?.unbind(),
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

    /// `hold` with streams: the fan-out rounds this engine's trigger began (`triggers`) and
    /// `rounds`, (round, µs from the trigger's send to the last held stream's arrival) of every
    /// round that reached all of this engine's held streams.
    fn fanout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (triggers, rounds) = self.inner.fanout();
        let d = PyDict::new(py);
        d.set_item("triggers", triggers)?;
        d.set_item("rounds", PyList::new(py, rounds)?)?;
        Ok(d)
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
        d.set_item("behind", s.behind)?;
        d.set_item("established", s.established)?;
        d.set_item("reinitialized", s.reinitialized)?;
        d.set_item("iterations", s.iterations)?;
        d.set_item("held", s.held)?;
        d.set_item("agents", s.agents)?;
        d.set_item("queued", s.queued)?;
        d.set_item("connects", s.connects)?;
        Ok(d)
    }
}
