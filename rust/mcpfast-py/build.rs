//! Exposes pyo3's interpreter cfgs (`Py_3_14`, `PyPy`, ...) to this crate, so that the encoder's
//! in-place str read is only compiled for the CPython versions whose layout it knows.

fn main() {
    pyo3_build_config::use_pyo3_cfgs();
}
