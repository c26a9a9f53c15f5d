//! `mcpfast._core`: the Python face of mcpfast-core. Each call crosses the FFI boundary once
//! and builds only the Python objects its caller reads.

// Each module uses only those below it in the order tests/layers.rs holds.
mod births;
mod cells;
mod engine;
mod errors;
mod fastjson;
mod http1;
mod lane;
mod message;
mod pyjson;
mod stdio_lane;
mod stream;
mod tool_reply;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use mcpfast_core::{reply, write};

#[pyfunction]
#[pyo3(signature = (id, method, params = None))]
fn encode_request<'py>(
    py: Python<'py>,
    id: &Bound<'py, PyAny>,
    method: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    errors::guarded(|| encode_call(py, Some(id), method, params))
}

#[pyfunction]
#[pyo3(signature = (method, params = None))]
fn encode_notification<'py>(
    py: Python<'py>,
    method: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    errors::guarded(|| encode_call(py, None, method, params))
}

/// A request (with an id) or a notification: `{"jsonrpc":"2.0"[,"id":…],"method":…[,"params":…]}`.
fn encode_call<'py>(
    py: Python<'py>,
    id: Option<&Bound<'py, PyAny>>,
    method: &str,
    params: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    pyjson::encode_with(py, |out| {
        out.extend_from_slice(write::HEAD);
        if let Some(id) = id {
            out.extend_from_slice(b",\"id\":");
            pyjson::write_py_id(out, id)?;
        }
        out.extend_from_slice(b",\"method\":");
        write::write_str(out, method);
        if let Some(p) = params.filter(|p| !p.is_none()) {
            out.extend_from_slice(b",\"params\":");
            pyjson::write_body(out, p)?;
        }
        out.push(b'}');
        Ok(())
    })
}

#[pyfunction]
fn encode_result<'py>(
    py: Python<'py>,
    id: &Bound<'py, PyAny>,
    result: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    errors::guarded(|| {
        pyjson::encode_with(py, |out| {
            out.extend_from_slice(write::HEAD);
            out.extend_from_slice(b",\"id\":");
            pyjson::write_py_id(out, id)?;
            out.extend_from_slice(b",\"result\":");
            pyjson::write_body(out, result)?;
            out.push(b'}');
            Ok(())
        })
    })
}

#[pyfunction]
#[pyo3(signature = (id, code, message, data = None))]
fn encode_error<'py>(
    py: Python<'py>,
    id: Option<&Bound<'py, PyAny>>,
    code: &Bound<'py, PyAny>,
    message: &str,
    data: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    errors::guarded(|| {
        pyjson::encode_with(py, |out| {
            out.extend_from_slice(write::HEAD);
            out.extend_from_slice(b",\"id\":");
            match id.filter(|i| !i.is_none()) {
                Some(i) => pyjson::write_py_id(out, i)?,
                None => out.extend_from_slice(b"null"),
            }
            reply::error(
                out,
                |out| {
                    if code.cast::<pyo3::types::PyInt>().is_err()
                        || code.cast::<pyo3::types::PyBool>().is_ok()
                    {
                        return Err(pyo3::exceptions::PyTypeError::new_err(
                            "the error code must be an int",
                        ));
                    }
                    pyjson::write_obj(out, code, 0)
                },
                message,
                data.filter(|d| !d.is_none())
                    .map(|d| move |out: &mut Vec<u8>| pyjson::write_obj(out, d, 0)),
            )
        })
    })
}

/// Test hook: panics inside the same guard every entry point uses, so the test suite can check
/// that a Rust panic reaches Python as an ordinary `RuntimeError`.
#[pyfunction]
fn _panic_for_tests() -> PyResult<()> {
    errors::guarded(|| -> PyResult<()> { panic!("deliberate panic from _panic_for_tests") })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "build_profile",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    )?;
    m.add("DEFAULT_MAX_DEPTH", mcpfast_core::DEFAULT_MAX_DEPTH)?;
    m.add("DEFAULT_MAX_LINE", mcpfast_core::DEFAULT_MAX_LINE)?;
    m.add("DEFAULT_MAX_EVENT", mcpfast_core::DEFAULT_MAX_EVENT)?;
    let errors = m.py().import("mcpfast._errors")?;
    m.add("JsonRpcError", errors.getattr("JsonRpcError")?)?;
    m.add("FrameTooLarge", errors.getattr("FrameTooLarge")?)?;
    m.add_class::<engine::EngineConfig>()?;
    m.add_class::<engine::MixItem>()?;
    m.add_class::<engine::NativeEngine>()?;
    m.add_class::<engine::DrainRow>()?;
    m.add_class::<lane::HttpLane>()?;
    m.add_class::<message::Message>()?;
    m.add_class::<stdio_lane::StdioLane>()?;
    m.add_class::<stream::LineFramer>()?;
    m.add_class::<stream::SseEvent>()?;
    m.add_class::<stream::SseEncoder>()?;
    m.add_class::<stream::SseDecoder>()?;
    m.add_function(wrap_pyfunction!(message::decode, m)?)?;
    m.add_function(wrap_pyfunction!(message::scan_reply, m)?)?;
    m.add_function(wrap_pyfunction!(encode_request, m)?)?;
    m.add_function(wrap_pyfunction!(encode_notification, m)?)?;
    m.add_function(wrap_pyfunction!(encode_result, m)?)?;
    m.add_function(wrap_pyfunction!(encode_error, m)?)?;
    m.add_function(wrap_pyfunction!(stream::frame_lines, m)?)?;
    m.add_function(wrap_pyfunction!(http1::parse_http, m)?)?;
    m.add_function(wrap_pyfunction!(http1::refusal, m)?)?;
    m.add_function(wrap_pyfunction!(http1::auth_param, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add(
        "__all__",
        [
            "DEFAULT_MAX_DEPTH",
            "DEFAULT_MAX_EVENT",
            "DEFAULT_MAX_LINE",
            "DrainRow",
            "EngineConfig",
            "FrameTooLarge",
            "HttpLane",
            "JsonRpcError",
            "LineFramer",
            "Message",
            "MixItem",
            "NativeEngine",
            "SseDecoder",
            "SseEncoder",
            "SseEvent",
            "StdioLane",
            "auth_param",
            "build_profile",
            "decode",
            "encode_error",
            "encode_notification",
            "encode_request",
            "encode_result",
            "frame_lines",
            "parse_http",
            "refusal",
            "scan_reply",
        ],
    )?;
    Ok(())
}
