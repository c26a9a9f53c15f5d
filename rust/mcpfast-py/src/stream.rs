//! Stream framing for Python: stdio lines and server-sent events.

use mcpfast_core::framer::{self, Frame};
use mcpfast_core::sse::{self, SseItem};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::errors;
use crate::message::as_bytes;

fn check_limit(v: i64, what: &str) -> PyResult<usize> {
    if v < 1 {
        return Err(PyValueError::new_err(format!("{what} must be at least 1")));
    }
    Ok(usize::try_from(v).unwrap_or(usize::MAX))
}

/// Splits a byte stream into newline-delimited messages.
#[pyclass(module = "mcpfast._core", name = "LineFramer")]
pub struct LineFramer {
    inner: framer::LineFramer,
}

fn push_frames<'py>(
    list: &Bound<'py, PyList>,
    frames: Vec<Result<Bound<'py, PyAny>, PyErr>>,
) -> PyResult<()> {
    for f in frames {
        list.append(f?)?;
    }
    Ok(())
}

fn frame_to_py<'py>(py: Python<'py>, f: Frame<'_>) -> PyResult<Bound<'py, PyAny>> {
    match f {
        Frame::Line(l) => Ok(PyBytes::new(py, l).into_any()),
        Frame::TooLarge { size, limit, .. } => errors::frame_too_large(py, size, limit),
    }
}

#[pymethods]
impl LineFramer {
    #[new]
    #[pyo3(signature = (max_size = mcpfast_core::DEFAULT_MAX_LINE as i64))]
    fn new(max_size: i64) -> PyResult<Self> {
        Ok(LineFramer {
            inner: framer::LineFramer::new(check_limit(max_size, "max_size")?),
        })
    }

    #[getter]
    fn max_size(&self) -> usize {
        self.inner.max_size()
    }

    #[getter]
    fn buffered(&self) -> usize {
        self.inner.buffered()
    }

    fn feed<'py>(&mut self, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        errors::guarded(|| self.feed_inner(data))
    }

    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        errors::guarded(|| self.close_inner(py))
    }

    fn __repr__(&self) -> String {
        format!(
            "LineFramer(max_size={}, buffered={})",
            self.inner.max_size(),
            self.inner.buffered()
        )
    }
}

impl LineFramer {
    fn feed_inner<'py>(&mut self, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = data.py();
        let list = PyList::empty(py);
        let mut items = Vec::new();
        if let Ok(b) = data.cast::<PyBytes>() {
            self.inner
                .feed(b.as_bytes(), |f| items.push(frame_to_py(py, f)));
        } else {
            let b = as_bytes(data)?;
            self.inner
                .feed(b.as_bytes(), |f| items.push(frame_to_py(py, f)));
        }
        push_frames(&list, items)?;
        Ok(list)
    }

    fn close_inner<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut items = Vec::new();
        self.inner.close(|f| items.push(frame_to_py(py, f)));
        push_frames(&list, items)?;
        Ok(list)
    }
}

/// Joins messages into one newline-terminated write.
#[pyfunction]
pub fn frame_lines<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    for m in messages.try_iter()? {
        let m = m?;
        let b = m
            .cast::<PyBytes>()
            .map_err(|_| PyTypeError::new_err("frame_lines expects a sequence of bytes"))?;
        out.extend_from_slice(b.as_bytes());
        out.push(b'\n');
    }
    Ok(PyBytes::new(py, &out))
}

/// One dispatched server-sent event.
#[pyclass(frozen, freelist = 256, module = "mcpfast._core", name = "SseEvent")]
pub struct SseEvent {
    #[pyo3(get)]
    event: Py<PyString>,
    #[pyo3(get)]
    data: Py<PyString>,
    #[pyo3(get)]
    id: Py<PyString>,
    #[pyo3(get)]
    retry: Option<u64>,
}

#[pymethods]
impl SseEvent {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "SseEvent(event={}, data={}, id={}, retry={:?})",
            self.event.bind(py).repr()?,
            self.data.bind(py).repr()?,
            self.id.bind(py).repr()?,
            self.retry
        ))
    }
}

fn text_bytes<'a>(v: &'a Bound<'_, PyAny>) -> PyResult<std::borrow::Cow<'a, [u8]>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(std::borrow::Cow::Borrowed(s.to_str()?.as_bytes()));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(std::borrow::Cow::Borrowed(b.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "expected str or bytes, not {}",
        v.get_type().name()?
    )))
}

fn check_field<'a>(v: Option<&'a str>, allow_nul: bool, what: &str) -> PyResult<Option<&'a str>> {
    match v {
        Some(s) if !sse::field_ok(s, allow_nul) => Err(PyValueError::new_err(format!(
            "an SSE {what} must not contain CR or LF{}",
            if allow_nul { "" } else { " or NUL" }
        ))),
        _ => Ok(v),
    }
}

fn check_retry(retry: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(r) = retry else { return Ok(None) };
    if r.is_none() {
        return Ok(None);
    }
    let v: i128 = r
        .extract()
        .map_err(|_| PyTypeError::new_err("retry must be an int"))?;
    u64::try_from(v)
        .map(Some)
        .map_err(|_| PyValueError::new_err("retry must be a non-negative number of milliseconds"))
}

/// Encodes server-sent events.
#[pyclass(frozen, module = "mcpfast._core", name = "SseEncoder")]
pub struct SseEncoder;

#[pymethods]
impl SseEncoder {
    #[new]
    fn new() -> Self {
        SseEncoder
    }

    #[pyo3(signature = (data, id = None, event = None, retry = None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        id: Option<&str>,
        event: Option<&str>,
        retry: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let id = check_field(id, false, "id")?;
        let event = check_field(event, true, "event name")?;
        let retry = check_retry(retry)?;
        let data = text_bytes(data)?;
        let mut out = Vec::with_capacity(data.len() + 32);
        sse::encode_event(&mut out, &data, id, event, retry);
        Ok(PyBytes::new(py, &out))
    }

    fn encode_many<'py>(
        &self,
        py: Python<'py>,
        events: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        for ev in events.try_iter()? {
            let ev = ev?;
            let (data, id): (Bound<'py, PyAny>, Option<String>) = ev.extract()?;
            let id = check_field(id.as_deref(), false, "id")?;
            sse::encode_event(&mut out, &text_bytes(&data)?, id, None, None);
        }
        Ok(PyBytes::new(py, &out))
    }

    #[pyo3(signature = (text = ""))]
    fn comment<'py>(&self, py: Python<'py>, text: &str) -> Bound<'py, PyBytes> {
        let mut out = Vec::with_capacity(text.len() + 4);
        sse::encode_comment(&mut out, text.as_bytes());
        PyBytes::new(py, &out)
    }

    fn retry<'py>(&self, py: Python<'py>, ms: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ms = check_retry(Some(ms))?.unwrap_or(0);
        Ok(PyBytes::new(py, format!("retry: {ms}\n\n").as_bytes()))
    }
}

/// Incremental `text/event-stream` parser (WHATWG rules).
#[pyclass(module = "mcpfast._core", name = "SseDecoder")]
pub struct SseDecoder {
    inner: sse::SseDecoder,
    /// The last id's Python string, reused while the id does not change.
    id_cache: Option<(String, Py<PyString>)>,
}

impl SseDecoder {
    fn run<'py>(&mut self, py: Python<'py>, data: Option<&[u8]>) -> PyResult<Bound<'py, PyList>> {
        errors::guarded(|| self.run_inner(py, data))
    }

    fn run_inner<'py>(
        &mut self,
        py: Python<'py>,
        data: Option<&[u8]>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let mut failure: Option<PyErr> = None;
        let cache = &mut self.id_cache;
        let message = pyo3::intern!(py, "message");
        let mut on_item = |it: SseItem<'_>| {
            if failure.is_some() {
                return;
            }
            let item = match it {
                SseItem::Event {
                    event,
                    data,
                    id,
                    retry,
                } => {
                    // Ids change with every event on a resumable stream, but not on all streams.
                    let id_py = match cache {
                        Some((s, p)) if s == id => p.clone_ref(py),
                        Some((s, p)) => {
                            s.clear();
                            s.push_str(id);
                            *p = PyString::new(py, id).unbind();
                            p.clone_ref(py)
                        }
                        None => {
                            let p = PyString::new(py, id).unbind();
                            *cache = Some((id.to_owned(), p.clone_ref(py)));
                            p
                        }
                    };
                    let event = if event == "message" {
                        message.clone().unbind()
                    } else {
                        PyString::new(py, event).unbind()
                    };
                    let ev = SseEvent {
                        event,
                        data: PyString::new(py, data).unbind(),
                        id: id_py,
                        retry,
                    };
                    Bound::new(py, ev).map(Bound::into_any)
                }
                SseItem::TooLarge { size, limit } => errors::frame_too_large(py, size, limit),
            };
            if let Err(e) = item.and_then(|it| list.append(it)) {
                failure = Some(e);
            }
        };
        match data {
            Some(d) => self.inner.feed(d, &mut on_item),
            None => self.inner.close(&mut on_item),
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(list),
        }
    }
}

#[pymethods]
impl SseDecoder {
    #[new]
    #[pyo3(signature = (max_event_size = mcpfast_core::DEFAULT_MAX_EVENT as i64))]
    fn new(max_event_size: i64) -> PyResult<Self> {
        Ok(SseDecoder {
            inner: sse::SseDecoder::new(check_limit(max_event_size, "max_event_size")?),
            id_cache: None,
        })
    }

    #[getter]
    fn last_event_id(&self) -> &str {
        self.inner.last_event_id()
    }

    #[getter]
    fn retry(&self) -> Option<u64> {
        self.inner.retry()
    }

    fn feed<'py>(&mut self, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let py = data.py();
        if let Ok(b) = data.cast::<PyBytes>() {
            return self.run(py, Some(b.as_bytes()));
        }
        let b = as_bytes(data)?;
        self.run(py, Some(b.as_bytes()))
    }

    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.run(py, None)
    }
}
