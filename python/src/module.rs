//! HLO modules from any stack: read (text or proto), written back, and
//! optimized by named passes.

use crate::args;
use crate::errors::{guarded, pass_error, target_named, to_py, Unknown};
use hlatc::passes::{default_pipeline, pipeline_from_names, registry, PassContext};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A verified HLO module.
#[pyclass(module = "hlatc._hlatc")]
pub struct Module {
    pub(crate) inner: hlatc::Module,
}

#[pymethods]
impl Module {
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    #[getter]
    fn instruction_count(&self) -> usize {
        self.inner.instruction_count()
    }

    /// Canonical HLO text.
    fn to_text(&self) -> String {
        hlatc::text::print_module(&self.inner)
    }

    /// A serialized `HloModuleProto`.
    fn to_proto<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &hlatc::proto::encode_module(&self.inner))
    }

    fn __repr__(&self) -> String {
        format!(
            "<hlatc.Module '{}': {} instructions in {} computations>",
            self.inner.name,
            self.inner.instruction_count(),
            self.inner.computations.len()
        )
    }
}

/// Reads a module from a path (text or proto, by content) or from bytes.
#[pyfunction]
pub fn load_module(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<Module> {
    if let Ok(bytes) = source.downcast::<PyBytes>() {
        let bytes = bytes.as_bytes().to_vec();
        return py.allow_threads(|| {
            guarded(|| {
                hlatc::module_from_bytes(&bytes, "<bytes>".as_ref())
                    .map(|inner| Module { inner })
                    .map_err(to_py)
            })
        });
    }
    let path: std::path::PathBuf = source.extract().map_err(|_| {
        args::refuse(
            args::Refused::Type,
            "source",
            source,
            "a path (str or os.PathLike) or the module's bytes",
        )
    })?;
    py.allow_threads(|| {
        guarded(|| {
            hlatc::load_module(&path)
                .map(|inner| Module { inner })
                .map_err(to_py)
        })
    })
}

/// `module` through the target's default pipeline, or through `passes` by
/// name, verified after the pipeline; a new module (the given one is left
/// as it was).
#[pyfunction]
#[pyo3(signature = (module, passes=None, target="neuron"))]
pub fn optimize(
    py: Python<'_>,
    #[pyo3(from_py_with = args::module)] module: Bound<'_, Module>,
    #[pyo3(from_py_with = args::passes)] passes: Option<Vec<String>>,
    #[pyo3(from_py_with = args::target)] target: &str,
) -> PyResult<Module> {
    let t = target_named(Unknown::Argument, target)?;
    let mut m = module.borrow().inner.clone();
    py.allow_threads(|| {
        guarded(|| {
            let pipeline = match &passes {
                None => default_pipeline::<&str>(t, &[]),
                Some(names) => pipeline_from_names("optimize", names),
            }
            .map_err(pass_error)?;
            pipeline
                .run_module(&mut m, &mut PassContext::new(t))
                .map_err(pass_error)?;
            Ok(Module { inner: m })
        })
    })
}

/// Every pass, as `(name, description)`.
#[pyfunction]
pub fn passes() -> Vec<(&'static str, &'static str)> {
    registry().iter().map(|p| (p.name, p.description)).collect()
}
