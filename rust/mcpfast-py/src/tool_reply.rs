//! The JSON-RPC reply to a plain `tools/call`, written from what the application's `run_tool`
//! answered, as both lanes write it (`HttpLane`, `StdioLane`): the bytes the session machine
//! sends for the same outcome.
//!
//! The lanes write the usual replies themselves; the two that need a rule of the session
//! machine's (`mcpfast.sansio`) are made by its own functions, never by a second copy of them:
//! `unencodable_result(id, exc, what)` for a result JSON cannot hold (-32603, logged), and
//! `error_reply(id, code, message, data, what)` for an error the lane cannot write (its `data`
//! JSON cannot hold is dropped and logged; a code that is an `int` subclass is written as an
//! int). `what` names the request in their log lines as the session machine names it.
//! Either way the tool ran once: its outcome is answered here, never handed to the full path.

use mcpfast_core::admit::TOOLS_CALL_NAME;
use mcpfast_core::envelope::Id;
use mcpfast_core::reply;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString, PyTuple};

use crate::pyjson;

/// The session machine's functions for the replies a lane does not write itself (see the
/// module doc).
pub(crate) struct Encoders {
    unencodable_result: Py<PyAny>,
    error_reply: Py<PyAny>,
}

impl Encoders {
    pub(crate) fn new(unencodable_result: Py<PyAny>, error_reply: Py<PyAny>) -> Self {
        Encoders {
            unencodable_result,
            error_reply,
        }
    }

    pub(crate) fn clone_ref(&self, py: Python<'_>) -> Self {
        Encoders {
            unencodable_result: self.unencodable_result.clone_ref(py),
            error_reply: self.error_reply.clone_ref(py),
        }
    }
}

/// Write into `reply` (emptied first) the reply to the `tools/call` of tool `name` with id
/// `id` whose `outcome` `run_tool` returned: a result dict, a str (the text of a result of one
/// text content), or `(code, message, data)` for a JSON-RPC error.
pub(crate) fn write<'py>(
    reply: &mut Vec<u8>,
    id: &Id<'_>,
    name: &Bound<'py, PyString>,
    outcome: &Bound<'py, PyAny>,
    encoders: &Encoders,
) -> PyResult<()> {
    let py = outcome.py();
    reply::begin(reply, id);
    if let Ok(error) = outcome.cast::<PyTuple>() {
        if write_error(reply, error) {
            return Ok(());
        }
        let (code, message, data) =
            error.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
        let made = encoders.error_reply.bind(py).call1((
            pyjson::id_to_py(py, id)?,
            code,
            message,
            data,
            what(name)?,
        ))?;
        return replace(reply, &made);
    }
    reply.extend_from_slice(reply::RESULT);
    // A str is the text of a result of one text content: no dict built to be read here.
    let text = outcome.is_exact_instance_of::<PyString>();
    let written = if text {
        reply.extend_from_slice(reply::TEXT_RESULT.0);
        pyjson::write_obj(reply, outcome, 3).map(|()| reply.extend_from_slice(reply::TEXT_RESULT.1))
    } else {
        pyjson::write_body(reply, outcome)
    };
    match written {
        Ok(()) => {
            reply.push(b'}');
            Ok(())
        }
        Err(exc) => {
            let made = encoders.unencodable_result.bind(py).call1((
                pyjson::id_to_py(py, id)?,
                exc.value(py),
                what(name)?,
            ))?;
            replace(reply, &made)
        }
    }
}

/// `reply` made of the bytes a Python function returned.
fn replace(reply: &mut Vec<u8>, made: &Bound<'_, PyAny>) -> PyResult<()> {
    reply.clear();
    reply.extend_from_slice(made.cast::<PyBytes>()?.as_bytes());
    Ok(())
}

/// `tools/call 'name'`: the request as the session machine's log lines name it.
fn what(name: &Bound<'_, PyString>) -> PyResult<String> {
    Ok(format!("{TOOLS_CALL_NAME} {}", name.repr()?.to_str()?))
}

/// `,"error":{...}}` as `encode_error` writes it; false (and `out` to be made again) when
/// `(code, message, data)` is not an int code, a str message and data JSON can hold.
fn write_error(out: &mut Vec<u8>, error: &Bound<'_, PyTuple>) -> bool {
    let Ok((code, message, data)) =
        error.extract::<(Bound<'_, PyAny>, Bound<'_, PyString>, Bound<'_, PyAny>)>()
    else {
        return false;
    };
    if !code.is_exact_instance_of::<PyInt>() {
        return false;
    }
    let Ok(message) = message.to_str() else {
        return false;
    };
    reply::error(
        out,
        |out| pyjson::write_obj(out, &code, 0),
        message,
        (!data.is_none()).then_some(|out: &mut Vec<u8>| pyjson::write_obj(out, &data, 0)),
    )
    .is_ok()
}
