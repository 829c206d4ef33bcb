//! `wordcast._core.LanguageDetector`: `detection::LanguageModel` for Python, a batch at a time.

use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyString;

use crate::detection::{LanguageModel, Scratch};

/// fastText's language identification (a `lid.176` model file), run in the core.
#[pyclass(module = "wordcast._core", frozen)]
pub struct LanguageDetector {
    model: LanguageModel,
    labels: Vec<Py<PyString>>,
}

#[pymethods]
impl LanguageDetector {
    /// Reads the model at `path`: `OSError` if it cannot be read, `ValueError` if it is not a
    /// supervised hierarchical-softmax fastText model.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let bytes = std::fs::read(&path)
            .map_err(|e| PyOSError::new_err(format!("cannot read {}: {e}", path.display())))?;
        let model = py.detach(|| LanguageModel::from_bytes(&bytes))?;
        let labels = model
            .labels()
            .iter()
            .map(|l| PyString::intern(py, l).unbind())
            .collect();
        Ok(LanguageDetector { model, labels })
    }

    /// The model's labels (language codes), in its order.
    #[getter]
    fn labels(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        self.labels.iter().map(|l| l.clone_ref(py)).collect()
    }

    /// The language of each text, as fastText's `predict(text, k=1)` names it (its words are
    /// those of Python's `str.split()`), or `default` for a text no label scores for; the GIL
    /// is released meanwhile.
    fn detect_many(
        &self,
        py: Python<'_>,
        texts: Vec<PyBackedStr>,
        default: Bound<'_, PyString>,
    ) -> Vec<Py<PyString>> {
        let found: Vec<Option<usize>> = py.detach(|| {
            let mut scratch = Scratch::default();
            texts
                .iter()
                .map(|text| self.model.predict(text, &mut scratch))
                .collect()
        });
        let default = default.unbind();
        found
            .into_iter()
            .map(|label| match label {
                Some(label) => self.labels[label].clone_ref(py),
                None => default.clone_ref(py),
            })
            .collect()
    }
}
