//! Python objects to JSON through the C API: the encoder's hot path.
//!
//! The safe PyO3 API wraps every object it touches (reference counting, type checks, error
//! plumbing) and made the serialiser slower than orjson. Here exact built-in types are
//! recognised by their type pointer and read in place; anything else (subclasses, `enum.Enum`,
//! `uuid.UUID`) goes to the safe path in `pyjson`.
#![allow(unsafe_code)]

use std::os::raw::c_int;
use std::ptr::addr_of_mut;

use mcpfast_core::write;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;

/// orjson's recursion limit when serialising.
pub const MAX_ENCODE_DEPTH: u32 = 254;

fn type_error(msg: &str) -> PyErr {
    PyTypeError::new_err(msg.to_owned())
}

/// Appends the JSON of `obj`.
///
/// # Safety
/// The GIL is held (`py` proves it) and `obj` is a valid pointer to a live object for the whole
/// call (a borrowed reference owned by the caller).
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
            write_unicode(py, out, obj)
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
            // A strong reference for the slow path, which may run Python code.
            let bound = Bound::from_borrowed_ptr(py, obj);
            crate::pyjson::write_other(out, &bound, depth)
        }
    }
}

/// Appends a str (exact or subclass) as a JSON string.
///
/// # Safety
/// As for [`write`]; `obj` is a str.
pub unsafe fn write_unicode(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
) -> PyResult<()> {
    let mut len: ffi::Py_ssize_t = 0;
    // SAFETY: `obj` is a live str; the returned buffer is owned by it and valid while it lives.
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(obj, &mut len) };
    if data.is_null() {
        // A lone surrogate: not encodable as UTF-8.
        drop(PyErr::take(py));
        return Err(type_error("str is not valid UTF-8: surrogates not allowed"));
    }
    let len = usize::try_from(len).unwrap_or(0);
    // SAFETY: `data` points at `len` initialised bytes owned by `obj`.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    write::write_str_bytes(out, bytes);
    Ok(())
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
    Err(type_error("Integer exceeds 64-bit range"))
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

fn enter(depth: u32) -> PyResult<u32> {
    if depth >= MAX_ENCODE_DEPTH {
        return Err(type_error("Recursion limit reached"));
    }
    Ok(depth + 1)
}

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
            if !first {
                out.push(b',');
            }
            first = false;
            if ffi::PyUnicode_Check(key) == 0 {
                return Err(type_error("Dict key must be str"));
            }
            write_unicode(py, out, key)?;
            out.push(b':');
            // The value is borrowed from the dict we hold; `write` takes its own reference
            // before running any Python code.
            write(py, out, value, depth)?;
        }
        out.push(b'}');
    }
    Ok(())
}

/// A list or a tuple, read by index. The length is read again at each step: the slow path may
/// run Python code that shrinks a list.
unsafe fn write_seq(
    py: Python<'_>,
    out: &mut Vec<u8>,
    obj: *mut ffi::PyObject,
    depth: u32,
    len: unsafe fn(*mut ffi::PyObject) -> ffi::Py_ssize_t,
    item: unsafe fn(*mut ffi::PyObject, ffi::Py_ssize_t) -> *mut ffi::PyObject,
) -> PyResult<()> {
    let depth = enter(depth)?;
    // SAFETY: `obj` is a live list or tuple matching `len`/`item`; we hold it, and each item
    // while it is written.
    unsafe {
        let _held = Held::new(obj);
        out.push(b'[');
        let mut i: ffi::Py_ssize_t = 0;
        while i < len(obj) {
            if i > 0 {
                out.push(b',');
            }
            let it = item(obj, i);
            let _item = Held::new(it);
            write(py, out, it, depth)?;
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

use crate::pyjson::{BuildError, KeyCache};
use mcpfast_core::json::{Builder, Number};

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

impl KeyCache {
    /// The cached str for an object key (a new reference), creating and caching it on a miss.
    fn get(&mut self, py: Python<'_>, key: &str) -> Result<Obj, BuildError> {
        if key.len() > crate::pyjson::KEY_CACHE_MAX_LEN {
            return RawBuilder { py, keys: None }.string(key);
        }
        let slot = crate::pyjson::key_hash(key);
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
