//! privface's native core: the Python extension module `privface_native`, built by maturin (native/pyproject.toml)
//! and used through `privface.crypto.native`.
//!
//! Only hot loops live here; the protocols stay in Python, which passes integers, arrays and bytes.
//! One module per area, each with a `register` function that adds its Python functions to the
//! extension module below (add a line to `privface_native` for a new area). Every exported function releases
//! the GIL (`Python::detach`) around its work.

use pyo3::prelude::*;

pub mod bfv;
pub mod cot;
pub mod ferret;
pub mod garble;
pub mod jl;
pub mod millionaire;
pub mod modexp;
pub mod ot;
pub mod otext;
pub mod prp;
pub mod softspoken;

/// SHA-256 of the crate's sources at build time (see build.rs); the Python wrapper compares it.
pub const SOURCE_HASH: &str = env!("PRIVFACE_NATIVE_SOURCE_HASH");

#[pymodule]
fn privface_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SOURCE_HASH", SOURCE_HASH)?;
    jl::register(m)?;
    garble::register(m)?;
    bfv::register(m)?;
    ot::register(m)?;
    otext::register(m)?;
    ferret::register(m)?;
    cot::register(m)?;
    millionaire::register(m)?;
    modexp::register(m)?;
    Ok(())
}
