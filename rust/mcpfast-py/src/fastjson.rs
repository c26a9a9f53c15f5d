//! Python objects to JSON through the C API (the encoder's hot path), and JSON to Python
//! objects through it (the decoder's builder).
//!
//! The safe PyO3 API wraps every object it touches (reference counting, type checks, error
//! plumbing) and made the serialiser slower than orjson. Here exact built-in types are
//! recognised by their type pointer and read in place; anything else (subclasses, `enum.Enum`,
//! `uuid.UUID`) goes to the safe path (`write_other`), which recurses through the hot path
//! again, so both live here.
#![allow(unsafe_code)]

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use mcpfast_core::json::{self, Builder, Number};
use mcpfast_core::write;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};

use crate::errors::{enter, type_error, INT_RANGE, KEY_NOT_STR, NOT_UTF8};

/// Appends the JSON of `obj`.
///
/// # Safety
/// The GIL is held (`py` proves it) and `obj` is a valid pointer to a live object for the whole
/// call (a borrowed reference owned by the caller).
// Always inlined: the containers' loops dispatch their items here without a call, and only
// recurse (through `write_dict`/`write_seq`) for nested containers.
#[inline(always)]
pub unsafe fn write(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
) -> PyResult<()> {
    // SAFETY (whole function): the caller's contract; every pointer read below is either `obj`
    // or a borrowed reference taken from a container we keep alive with a strong reference.
    unsafe {
        let t = ffi::Py_TYPE(obj);
        if t == addr_of_mut!(ffi::PyUnicode_Type) {
            write_unicode(out, obj)
        } else if t == addr_of_mut!(ffi::PyDict_Type) {
            write_dict(py, out, obj, depth)
        } else if t == addr_of_mut!(ffi::PyList_Type) {
            write_list(py, out, obj, depth)
        } else if t == addr_of_mut!(ffi::PyLong_Type) {
            write_long(py, out, obj)
        } else if obj == ffi::Py_None() {
            out.extend_from_slice(b"null");
            Ok(())
        } else if obj == ffi::Py_True() {
            out.extend_from_slice(b"true");
            Ok(())
        } else if obj == ffi::Py_False() {
            out.extend_from_slice(b"false");
            Ok(())
        } else if t == addr_of_mut!(ffi::PyFloat_Type) {
            write::write_f64(out, ffi::PyFloat_AS_DOUBLE(obj));
            Ok(())
        } else if t == addr_of_mut!(ffi::PyTuple_Type) {
            write_tuple(py, out, obj, depth)
        } else {
            write_slow(py, out, obj, depth)
        }
    }
}

/// Anything but the exact built-in types: subclasses, `enum.Enum`, `uuid.UUID`, errors.
#[inline(never)]
unsafe fn write_slow(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
) -> PyResult<()> {
    // SAFETY: the caller's contract; a strong reference for the slow path, which may run
    // Python code.
    let bound = unsafe { Bound::from_borrowed_ptr(py, obj) };
    write_other(out, &bound, depth)
}

/// The UTF-8 text of a str, borrowed from the object: read in place for a compact ASCII str
/// (most keys and many values), otherwise the UTF-8 copy CPython caches on the object. None
/// when the str cannot be encoded (a lone surrogate; the Python error is cleared).
///
/// # Safety
/// The GIL is held and `obj` is a live str, which outlives the returned slice.
#[inline(always)]
pub unsafe fn str_utf8<'a>(obj: *mut ffi::PyObject) -> Option<&'a [u8]> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
    // SAFETY: a compact ASCII str holds its `length` bytes right after its header.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT_ASCII(obj) != 0 {
            let len = usize::try_from(ffi::PyUnicode_GET_LENGTH(obj)).unwrap_or(0);
            let data = ffi::PyUnicode_DATA(obj).cast::<u8>();
            return Some(std::slice::from_raw_parts(data, len));
        }
    }
    let mut len: ffi::Py_ssize_t = 0;
    // SAFETY: `obj` is a live str; the returned buffer is owned by it and valid while it lives.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(obj, &mut len) };
    if data.is_null() {
        // SAFETY: the GIL is held; the error is the encoding failure just raised.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    let len = usize::try_from(len).unwrap_or(0);
    // SAFETY: `data` points at `len` initialised bytes owned by `obj`.
    Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

/// Appends a str (exact or subclass) as a JSON string.
///
/// # Safety
/// The GIL is held and `obj` is a live str (exact or subclass).
#[inline(always)]
pub unsafe fn write_unicode(out: &mut Vec<u8>, obj: *mut ffi::PyObject) -> PyResult<()> {
    // SAFETY: the caller's contract.
    match unsafe { str_utf8(obj) } {
        Some(bytes) => {
            put_str(out, bytes);
            Ok(())
        }
        // A lone surrogate: not encodable as UTF-8.
        None => Err(type_error(NOT_UTF8)),
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Flags (high bit) the bytes of `v` a JSON string must escape: `"`, `\` and controls.
#[inline(always)]
fn special(v: u64) -> u64 {
    let quote = v ^ (ONES * u64::from(b'"'));
    let backslash = v ^ (ONES * u64::from(b'\\'));
    (quote.wrapping_sub(ONES) | backslash.wrapping_sub(ONES) | v.wrapping_sub(ONES * 0x20))
        & !v
        & HIGHS
}

#[inline(always)]
fn word_at(text: &[u8], i: usize) -> u64 {
    text.get(i..)
        .and_then(<[u8]>::first_chunk::<8>)
        .map_or(0, |w| u64::from_le_bytes(*w))
}

#[inline(always)]
fn half_at(text: &[u8], i: usize) -> u64 {
    text.get(i..)
        .and_then(<[u8]>::first_chunk::<4>)
        .map_or(0, |w| u64::from(u32::from_le_bytes(*w)))
}

/// Whether a string of up to 16 bytes holds a byte to escape: words read in place (the last
/// one overlapping), no copy.
#[inline(always)]
fn short_needs_escape(text: &[u8]) -> bool {
    let n = text.len();
    if n >= 8 {
        special(word_at(text, 0)) | special(word_at(text, n - 8)) != 0
    } else if n >= 4 {
        // The first and the last four bytes (overlapping when shorter than eight) in one word.
        let v = half_at(text, 0) | (half_at(text, n - 4) << 32);
        special(v) != 0
    } else {
        text.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20)
    }
}

/// Appends a short string (at most 16 bytes) that needs no escape, between quotes, after a
/// comma when `comma` and followed by a colon when `colon` (an object key): one capacity
/// check and fixed-size copies instead of a `memcpy` call.
#[inline(always)]
fn put_short(out: &mut Vec<u8>, text: &[u8], comma: bool, colon: bool) {
    let n = text.len();
    out.reserve(n + 4);
    let len = out.len();
    let total = usize::from(comma) + n + 2 + usize::from(colon);
    // SAFETY: `reserve` made room for `n + 4 >= total` bytes after `len`; every byte up to the
    // new length is written before `set_len`, and reads stay within `text`.
    unsafe {
        let mut dst = out.as_mut_ptr().add(len);
        if comma {
            *dst = b',';
            dst = dst.add(1);
        }
        let src = text.as_ptr();
        *dst = b'"';
        let body = dst.add(1);
        if n >= 8 {
            body.cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned());
            body.add(n - 8)
                .cast::<u64>()
                .write_unaligned(src.add(n - 8).cast::<u64>().read_unaligned());
        } else if n >= 4 {
            body.cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned());
            body.add(n - 4)
                .cast::<u32>()
                .write_unaligned(src.add(n - 4).cast::<u32>().read_unaligned());
        } else if n > 0 {
            *body = *src;
            *body.add(n / 2) = *src.add(n / 2);
            *body.add(n - 1) = *src.add(n - 1);
        }
        *body.add(n) = b'"';
        if colon {
            *body.add(n + 1) = b':';
        }
        out.set_len(len + total);
    }
}

/// Appends UTF-8 text as a JSON string.
#[inline(always)]
fn put_str(out: &mut Vec<u8>, text: &[u8]) {
    if text.len() <= 16 && !short_needs_escape(text) {
        put_short(out, text, false, false);
    } else {
        write::write_str_bytes(out, text);
    }
}

unsafe fn write_long(py: Python<'_>, out: &mut Vec<u8>, obj: *mut ffi::PyObject) -> PyResult<()> {
    let mut overflow: c_int = 0;
    // SAFETY: `obj` is a live int.
    let v = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj, &mut overflow) };
    if overflow == 0 {
        if v == -1 && PyErr::occurred(py) {
            return Err(PyErr::fetch(py));
        }
        write::write_i64(out, v);
        return Ok(());
    }
    if overflow > 0 {
        // SAFETY: as above.
        let u = unsafe { ffi::PyLong_AsUnsignedLongLong(obj) };
        if !(u == u64::MAX && PyErr::occurred(py)) {
            write::write_u64(out, u);
            return Ok(());
        }
        drop(PyErr::take(py));
    }
    Err(type_error(INT_RANGE))
}

/// Holds a strong reference while a container is read, so Python code run by the slow path
/// for one of its items cannot free it under us.
struct Held(*mut ffi::PyObject);

impl Held {
    /// # Safety
    /// `obj` is live and the GIL is held.
    unsafe fn new(obj: *mut ffi::PyObject) -> Self {
        // SAFETY: the caller's contract.
        unsafe { ffi::Py_INCREF(obj) };
        Held(obj)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: balances the increment in `new`; the GIL is still held (same call).
        unsafe { ffi::Py_DECREF(self.0) };
    }
}

#[inline(never)]
unsafe fn write_dict(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
) -> PyResult<()> {
    let depth = enter(depth)?;
    // SAFETY: `obj` is a live dict; PyDict_Next tolerates mutation between calls.
    unsafe {
        let _held = Held::new(obj);
        out.push(b'{');
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value: *mut ffi::PyObject = std::ptr::null_mut();
        let mut first = true;
        while ffi::PyDict_Next(obj, &mut pos, &mut key, &mut value) != 0 {
            let comma = !first;
            first = false;
            // The usual key, a short plain str, goes out with its comma and colon at once.
            let short = if ffi::Py_TYPE(key) == addr_of_mut!(ffi::PyUnicode_Type) {
                str_utf8(key).filter(|k| k.len() <= 16 && !short_needs_escape(k))
            } else {
                None
            };
            if let Some(k) = short {
                put_short(out, k, comma, true);
            } else {
                if ffi::PyUnicode_Check(key) == 0 {
                    return Err(type_error(KEY_NOT_STR));
                }
                if comma {
                    out.push(b',');
                }
                write_unicode(out, key)?;
                out.push(b':');
            }
            // The value is borrowed from the dict we hold. Scalars run no Python code; a
            // nested container takes its own reference before reading anything, and the slow
            // path takes one before running any Python code.
            write(py, out, value, depth)?;
        }
        out.push(b'}');
    }
    Ok(())
}

/// A list or a tuple, read by index. The length is read again at each step: the slow path may
/// run Python code that shrinks a list.
#[inline(never)]
unsafe fn write_seq(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
    len: unsafe fn(*mut ffi::PyObject) -> ffi::Py_ssize_t,
    item: unsafe fn(*mut ffi::PyObject, ffi::Py_ssize_t) -> *mut ffi::PyObject,
) -> PyResult<()> {
    let depth = enter(depth)?;
    // SAFETY: `obj` is a live list or tuple matching `len`/`item`, which we hold.
    unsafe {
        let _held = Held::new(obj);
        out.push(b'[');
        let mut i: ffi::Py_ssize_t = 0;
        while i < len(obj) {
            if i > 0 {
                out.push(b',');
            }
            // Borrowed from the sequence we hold, as for a dict's values.
            write(py, out, item(obj, i), depth)?;
            i += 1;
        }
        out.push(b']');
    }
    Ok(())
}

unsafe fn write_list(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
) -> PyResult<()> {
    // SAFETY: the caller checked that `obj` is exactly a list.
    unsafe {
        write_seq(
            py,
            out,
            obj,
            depth,
            ffi::PyList_GET_SIZE,
            ffi::PyList_GET_ITEM,
        )
    }
}

unsafe fn write_tuple(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
) -> PyResult<()> {
    // SAFETY: the caller checked that `obj` is exactly a tuple.
    unsafe {
        write_seq(
            py,
            out,
            obj,
            depth,
            ffi::PyTuple_GET_SIZE,
            ffi::PyTuple_GET_ITEM,
        )
    }
}

// The safe path.

/// Appends `obj` as JSON, with the types and limits orjson has.
pub fn write_obj(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
    // SAFETY: `obj` is a live object borrowed for this call and the GIL is held.
    unsafe { write(obj.py(), out, obj.as_ptr(), depth) }
}

/// The UTF-8 text of a str (subclasses too), or the encoder's error.
pub fn str_of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    s.to_str().map_err(|_| type_error(NOT_UTF8))
}

fn write_int(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Ok(v) = obj.extract::<i64>() {
        write::write_i64(out, v);
    } else if let Ok(v) = obj.extract::<u64>() {
        write::write_u64(out, v);
    } else {
        return Err(type_error(INT_RANGE));
    }
    Ok(())
}

static ENUM_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static UUID_TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The slow path: subclasses of the JSON types, `enum.Enum`, `uuid.UUID`.
fn write_other(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>, depth: u32) -> PyResult<()> {
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        write::write_str(out, str_of(s)?);
    } else if let Ok(d) = obj.cast::<PyDict>() {
        write_dict_slow(out, d, depth)?;
    } else if let Ok(l) = obj.cast::<PyList>() {
        write_seq_slow(out, l.iter(), depth)?;
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        write_seq_slow(out, t.iter(), depth)?;
    } else if obj.cast::<PyInt>().is_ok() {
        write_int(out, obj)?;
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        write::write_f64(out, f.value());
    } else if obj.is_instance(ENUM_TYPE.import(py, "enum", "Enum")?)? {
        write_obj(out, &obj.getattr("value")?, depth)?;
    } else if obj.is_instance(UUID_TYPE.import(py, "uuid", "UUID")?)? {
        write::write_str(out, &obj.str()?.to_cow()?);
    } else {
        return Err(type_error(format!(
            "Type is not JSON serializable: {}",
            obj.get_type().name()?
        )));
    }
    Ok(())
}

fn write_dict_slow(out: &mut Vec<u8>, d: &Bound<'_, PyDict>, depth: u32) -> PyResult<()> {
    let depth = enter(depth)?;
    out.push(b'{');
    let mut first = true;
    for (k, v) in d.iter() {
        if !first {
            out.push(b',');
        }
        first = false;
        let key = k.cast::<PyString>().map_err(|_| type_error(KEY_NOT_STR))?;
        write::write_str(out, str_of(key)?);
        out.push(b':');
        write_obj(out, &v, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn write_seq_slow<'py>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    depth: u32,
) -> PyResult<()> {
    let depth = enter(depth)?;
    out.push(b'[');
    let mut first = true;
    for item in items {
        if !first {
            out.push(b',');
        }
        first = false;
        write_obj(out, &item, depth)?;
    }
    out.push(b']');
    Ok(())
}

/// An owned reference, released on drop.
pub struct Obj(std::ptr::NonNull<ffi::PyObject>);

impl Obj {
    /// Takes ownership of a new reference; null means the call that made it failed.
    fn own(py: Python<'_>, ptr: *mut ffi::PyObject) -> Result<Obj, BuildError> {
        std::ptr::NonNull::new(ptr)
            .map(Obj)
            .ok_or_else(|| BuildError::Py(PyErr::fetch(py)))
    }

    /// # Safety
    /// `ptr` is a live object and the GIL is held.
    unsafe fn borrowed(ptr: *mut ffi::PyObject) -> Obj {
        // SAFETY: the caller's contract; the new reference is released by Drop.
        unsafe { ffi::Py_INCREF(ptr) };
        Obj(std::ptr::NonNull::from(unsafe { &mut *ptr }))
    }

    /// Hands the reference over to PyO3.
    pub fn into_bound(self, py: Python<'_>) -> Bound<'_, PyAny> {
        let ptr = self.0.as_ptr();
        std::mem::forget(self);
        // SAFETY: we owned exactly one reference to a live object.
        unsafe { Bound::from_owned_ptr(py, ptr) }
    }
}

impl Drop for Obj {
    fn drop(&mut self) {
        // SAFETY: we own one reference, and objects are only built and dropped with the GIL.
        unsafe { ffi::Py_DECREF(self.0.as_ptr()) };
    }
}

/// Why a value could not be built: the JSON, or Python.
pub enum BuildError {
    Json(json::Error),
    Py(PyErr),
}

impl From<json::Error> for BuildError {
    fn from(e: json::Error) -> Self {
        BuildError::Json(e)
    }
}

impl From<PyErr> for BuildError {
    fn from(e: PyErr) -> Self {
        BuildError::Py(e)
    }
}

/// Builds Python values straight through the C API.
pub struct RawBuilder<'a, 'py> {
    pub py: Python<'py>,
    pub keys: Option<&'a mut KeyCache>,
}

impl Builder for RawBuilder<'_, '_> {
    type Value = Obj;
    type Error = BuildError;

    fn null(&mut self) -> Result<Obj, BuildError> {
        // SAFETY: None is immortal enough and the GIL is held.
        Ok(unsafe { Obj::borrowed(ffi::Py_None()) })
    }
    fn boolean(&mut self, v: bool) -> Result<Obj, BuildError> {
        // SAFETY: as above, for the two bools.
        Ok(unsafe { Obj::borrowed(if v { ffi::Py_True() } else { ffi::Py_False() }) })
    }
    fn number(&mut self, v: Number) -> Result<Obj, BuildError> {
        // SAFETY: plain constructors; the GIL is held.
        let ptr = unsafe {
            match v {
                Number::Int(i) => ffi::PyLong_FromLongLong(i),
                Number::UInt(u) => ffi::PyLong_FromUnsignedLongLong(u),
                Number::BigInt(f) | Number::Float(f) => ffi::PyFloat_FromDouble(f),
            }
        };
        Obj::own(self.py, ptr)
    }
    fn string(&mut self, v: &str) -> Result<Obj, BuildError> {
        let len = ffi::Py_ssize_t::try_from(v.len()).unwrap_or(ffi::Py_ssize_t::MAX);
        // SAFETY: `v` is valid UTF-8 of `len` bytes.
        Obj::own(self.py, unsafe {
            ffi::PyUnicode_FromStringAndSize(v.as_ptr().cast(), len)
        })
    }
    fn begin_array(&mut self) -> Result<Obj, BuildError> {
        // SAFETY: plain constructor.
        Obj::own(self.py, unsafe { ffi::PyList_New(0) })
    }
    fn push(&mut self, array: &mut Obj, item: Obj) -> Result<(), BuildError> {
        // SAFETY: `array` is a list we created; PyList_Append takes its own reference.
        if unsafe { ffi::PyList_Append(array.0.as_ptr(), item.0.as_ptr()) } != 0 {
            return Err(BuildError::Py(PyErr::fetch(self.py)));
        }
        Ok(())
    }
    fn begin_object(&mut self) -> Result<Obj, BuildError> {
        // SAFETY: plain constructor.
        Obj::own(self.py, unsafe { ffi::PyDict_New() })
    }
    fn insert(&mut self, object: &mut Obj, key: &str, value: Obj) -> Result<(), BuildError> {
        let key = match self.keys.as_deref_mut() {
            Some(cache) => cache.get(self.py, key)?,
            None => self.string(key)?,
        };
        // SAFETY: `object` is a dict we created; PyDict_SetItem takes its own references.
        if unsafe { ffi::PyDict_SetItem(object.0.as_ptr(), key.0.as_ptr(), value.0.as_ptr()) } != 0
        {
            return Err(BuildError::Py(PyErr::fetch(self.py)));
        }
        Ok(())
    }
}

// Object keys repeat from message to message ("name", "arguments", "type", ...). A small
// direct-mapped cache hands back the same str object, whose hash CPython has already computed.
const KEY_CACHE_SLOTS: usize = 1024;
const KEY_CACHE_MAX_LEN: usize = 64;

/// The decoder's cache of object-key str objects (one per thread).
pub struct KeyCache {
    slots: Vec<Option<(Box<str>, Py<pyo3::types::PyString>)>>,
}

thread_local! {
    static KEYS: std::cell::RefCell<KeyCache> =
        std::cell::RefCell::new(KeyCache { slots: (0..KEY_CACHE_SLOTS).map(|_| None).collect() });
}

fn key_hash(s: &str) -> usize {
    // FNV-1a: short keys, no need for a keyed hash (a collision only costs a cache miss).
    let mut h: u32 = 0x811c_9dc5;
    for &b in s.as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h as usize % KEY_CACHE_SLOTS
}

impl KeyCache {
    /// Runs `f` with this thread's cache: one thread-local access per build, not per key
    /// (`None` while a nested build holds it).
    pub fn with<R>(f: impl FnOnce(Option<&mut KeyCache>) -> R) -> R {
        KEYS.with(|cache| match cache.try_borrow_mut() {
            Ok(mut cache) => f(Some(&mut cache)),
            Err(_) => f(None),
        })
    }

    /// The cached str for an object key (a new reference), creating and caching it on a miss.
    fn get(&mut self, py: Python<'_>, key: &str) -> Result<Obj, BuildError> {
        if key.len() > KEY_CACHE_MAX_LEN {
            return RawBuilder { py, keys: None }.string(key);
        }
        let slot = key_hash(key);
        if let Some((k, v)) = &self.slots[slot] {
            if **k == *key {
                // SAFETY: the cache keeps `v` alive; the GIL is held.
                return Ok(unsafe { Obj::borrowed(v.as_ptr()) });
            }
        }
        let obj = RawBuilder { py, keys: None }.string(key)?;
        // SAFETY: `obj` is a live str we own; the cache takes a reference of its own.
        let cached: Py<pyo3::types::PyString> =
            unsafe { Bound::from_borrowed_ptr(py, obj.0.as_ptr()) }
                .cast_into::<pyo3::types::PyString>()
                .map_err(|e| BuildError::Py(e.into()))?
                .unbind();
        self.slots[slot] = Some((key.into(), cached));
        Ok(obj)
    }
}
