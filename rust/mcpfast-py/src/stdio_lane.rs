//! `StdioLane`: the stdio transport's short way for the request it serves most, a plain sync
//! tool called on its session.
//!
//! The transport hands each read to `feed` instead of `LineFramer.feed`. The lines are framed
//! by the same framer; one that is a `tools/call` whose params are the tool's name and
//! arguments alone (`mcpfast_core::admit::tools_call`: no `_meta`, no `task`), with an id not
//! in flight, is answered here once the transport said the session serves `tools/call`
//! directly (`serve`): the tool runs through the application's `run_tool` (the line's only
//! crossing into Python) and the reply is encoded here, so the line makes no message object,
//! no session-machine step and no result dict. Only the lines before the first one left to the
//! session machine are answered, so the replies keep the order of the lines; that line and
//! those after it come back as `LineFramer.feed` gives them, for the full path, which holds
//! every rule.
//!
//! `run_tool(name, arguments, version)` returns `None` (not a plain sync call: nothing ran),
//! a result dict, a str (the text of a result of one text content) or `(code, message, data)`
//! for a JSON-RPC error, whose reply `crate::tool_reply` writes.

use std::ops::Range;

use mcpfast_core::admit::{self, Call};
use mcpfast_core::framer::{self, Frame};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::errors;
use crate::pyjson;
use crate::tool_reply::{self, Encoders};

/// A framed item kept past the framer's borrow of its buffer: a line is its place in the
/// chunk's copy of its lines (one buffer for them all, not one per line).
enum Item {
    Line(Range<usize>),
    TooLarge { size: usize, limit: usize },
}

/// The session the lane answers for: its version and its table of requests in flight.
struct Serving {
    version: Py<PyString>,
    in_flight: Py<PyDict>,
}

#[pyclass(module = "mcpfast._core")]
pub struct StdioLane {
    framer: framer::LineFramer,
    run_tool: Py<PyAny>,
    encoders: Encoders,
    serving: Option<Serving>,
    answered: u64,
}

impl StdioLane {
    /// The items of `data` (`None`: the end of the stream), their lines copied into `lines`.
    fn frame(&mut self, data: Option<&[u8]>, lines: &mut Vec<u8>) -> Vec<Item> {
        let mut items = Vec::new();
        let mut keep = |f: Frame<'_>| {
            items.push(match f {
                Frame::Line(line) => {
                    let start = lines.len();
                    lines.extend_from_slice(line);
                    Item::Line(start..lines.len())
                }
                Frame::TooLarge { size, limit, .. } => Item::TooLarge { size, limit },
            });
        };
        match data {
            Some(data) => self.framer.feed(data, &mut keep),
            None => self.framer.close(&mut keep),
        }
        items
    }

    /// Frame `data` (`None`: the end of the stream) and answer what the lane may of it (no
    /// borrow of the lane is held while a tool runs): the replies alone when it answered every
    /// line, else `(replies, rest)`.
    fn feed_items<'py>(slf: &Bound<'py, Self>, data: Option<&[u8]>) -> PyResult<Bound<'py, PyAny>> {
        let mut lines = Vec::with_capacity(data.map_or(0, <[u8]>::len));
        let items = slf.borrow_mut().frame(data, &mut lines);
        let py = slf.py();
        let (serving, run_tool, encoders) = {
            let this = slf.borrow();
            let serving = this
                .serving
                .as_ref()
                .map(|s| (s.version.clone_ref(py), s.in_flight.clone_ref(py)));
            (
                serving,
                this.run_tool.clone_ref(py),
                this.encoders.clone_ref(py),
            )
        };
        // The replies are about as long as the requests.
        let mut out: Vec<u8> = Vec::with_capacity(lines.len() + items.len());
        let mut reply: Vec<u8> = Vec::with_capacity(256);
        let mut names = Names::default();
        let mut rest: Option<Bound<'py, PyList>> = None;
        let mut answered = 0u64;
        for item in items {
            if rest.is_none() {
                if let (Some((version, in_flight)), Item::Line(line)) = (&serving, &item) {
                    let session = (version.bind(py), in_flight.bind(py));
                    let tool = (&run_tool, &encoders, &mut names);
                    if answer(py, &lines[line.clone()], session, tool, &mut reply)? {
                        out.extend_from_slice(&reply);
                        out.push(b'\n');
                        answered += 1;
                        continue;
                    }
                }
            }
            let left = match item {
                Item::Line(line) => PyBytes::new(py, &lines[line]).into_any(),
                Item::TooLarge { size, limit } => errors::frame_too_large(py, size, limit)?,
            };
            rest.get_or_insert_with(|| PyList::empty(py)).append(left)?;
        }
        slf.borrow_mut().answered += answered;
        let replies = PyBytes::new(py, &out);
        match rest {
            None => Ok(replies.into_any()),
            Some(rest) => Ok((replies, rest).into_pyobject(py)?.into_any()),
        }
    }
}

/// The tool names of one read as Python strings, made once each (a read calls a few tools).
#[derive(Default)]
struct Names<'py>(Vec<(String, Bound<'py, PyString>)>);

impl<'py> Names<'py> {
    fn get(&mut self, py: Python<'py>, name: &str) -> Bound<'py, PyString> {
        if let Some((_, known)) = self.0.iter().find(|(n, _)| n == name) {
            return known.clone();
        }
        let made = PyString::new(py, name);
        if self.0.len() < 8 {
            self.0.push((name.to_owned(), made.clone()));
        }
        made
    }
}

/// The application's side of a call: `run_tool`, the session machine's encoders, and the names
/// made so far.
type Tool<'a, 'py> = (&'a Py<PyAny>, &'a Encoders, &'a mut Names<'py>);

/// Answer `line` into `reply` if it is a plain `tools/call` the application runs here, for a
/// session of `version` whose requests in flight are `in_flight`; false: the full path serves
/// it (nothing ran).
fn answer<'py>(
    py: Python<'py>,
    line: &[u8],
    (version, in_flight): (&Bound<'py, PyString>, &Bound<'py, PyDict>),
    tool: Tool<'_, 'py>,
    reply: &mut Vec<u8>,
) -> PyResult<bool> {
    let Some(env) = admit::single(line) else {
        return Ok(false);
    };
    let Some(call) = admit::tools_call(&env, line) else {
        return Ok(false);
    };
    let id = pyjson::id_to_py(py, &call.id)?;
    if in_flight.contains(&id)? {
        return Ok(false); // the session machine answers a reused id
    }
    run(py, &call, version, tool, reply)
}

/// Run the tools/call `call` and write its JSON-RPC reply into `reply`; false when it is not
/// one `run_tool` serves (nothing ran).
fn run<'py>(
    py: Python<'py>,
    call: &Call<'_>,
    version: &Bound<'py, PyString>,
    (run_tool, encoders, names): Tool<'_, 'py>,
    reply: &mut Vec<u8>,
) -> PyResult<bool> {
    let arguments = match call.arguments {
        Some(text) => pyjson::build_value(py, text)?,
        None => py.None().into_bound(py),
    };
    let name = names.get(py, &call.name);
    let outcome = run_tool.bind(py).call1((&name, arguments, version))?;
    if outcome.is_none() {
        return Ok(false);
    }
    tool_reply::write(reply, &call.id, &name, &outcome, encoders)?;
    Ok(true)
}

#[pymethods]
impl StdioLane {
    /// `StdioLane(max_line, run_tool, unencodable_result, error_reply)`: lines longer than
    /// `max_line` bytes are reported as `LineFramer` reports them; the two functions are the
    /// session machine's (see `crate::tool_reply`).
    #[new]
    fn new(
        max_line: i64,
        run_tool: Py<PyAny>,
        unencodable_result: Py<PyAny>,
        error_reply: Py<PyAny>,
    ) -> PyResult<Self> {
        if max_line < 1 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "max_line must be at least 1",
            ));
        }
        Ok(StdioLane {
            framer: framer::LineFramer::new(usize::try_from(max_line).unwrap_or(usize::MAX)),
            run_tool,
            encoders: Encoders::new(unencodable_result, error_reply),
            serving: None,
            answered: 0,
        })
    }

    /// Answer plain `tools/call` lines from now on, for a session of `version` (one that
    /// serves `tools/call` directly) whose requests in flight are the dict `in_flight`.
    fn serve(&mut self, version: Py<PyString>, in_flight: Py<PyDict>) {
        self.serving = Some(Serving { version, in_flight });
    }

    /// `LineFramer.feed` that answers what it can: the replies' bytes (each line ended by a
    /// newline) when it answered every line of `data` (the usual case), else `(replies,
    /// rest)`, `rest` the items it left from the first one on, as `LineFramer.feed` gives them.
    fn feed<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyBytes>,
    ) -> PyResult<Bound<'py, PyAny>> {
        errors::guarded(|| StdioLane::feed_items(slf, Some(data.as_bytes())))
    }

    /// `feed` at the end of the stream (`LineFramer.close`): the unterminated last line.
    fn close<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        errors::guarded(|| StdioLane::feed_items(slf, None))
    }

    /// Lines answered by the lane since it was made.
    #[getter]
    fn answered(&self) -> u64 {
        self.answered
    }
}
