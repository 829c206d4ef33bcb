//! `wordcast._core.WildcardTerms`: [`WildcardIndex`] for Python, finding the held wildcard words
//! in a batch of texts (tokenised as the analyser does) with the GIL released.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;

use crate::analysis::for_each_token;
use crate::wildcards::WildcardIndex;

/// The wildcard words a router or a matcher holds (``wordcast.query.wildcards``).
#[pyclass(module = "wordcast._core")]
#[derive(Default)]
pub struct WildcardTerms {
    index: WildcardIndex,
}

#[pymethods]
impl WildcardTerms {
    #[new]
    #[pyo3(signature = (terms=Vec::new()))]
    fn new(terms: Vec<PyBackedStr>) -> Self {
        let mut held = WildcardTerms::default();
        for term in &terms {
            held.index.add(term);
        }
        held
    }

    /// Hold ``term`` (once more: each holder counted).
    fn add(&mut self, term: &str) {
        self.index.add(term);
    }

    /// Let one holder of ``term`` go.
    fn discard(&mut self, term: &str) {
        self.index.discard(term);
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    fn __contains__(&self, term: &str) -> bool {
        self.index.contains(term)
    }

    /// The terms held that some token instantiates, each once, sorted.
    fn found(&self, py: Python<'_>, tokens: Vec<PyBackedStr>) -> Vec<String> {
        let index = &self.index;
        py.detach(|| index.found(tokens.iter().map(|t| &**t)))
    }

    /// ``found`` of each text's normalised tokens; None for a text holding a code point the
    /// analyser's tables cannot vouch for (the caller tokenises it with the reference).
    fn found_in_texts(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> Vec<Option<Vec<String>>> {
        let index = &self.index;
        py.detach(|| {
            let (mut buffer, mut tokens, mut seen) = (String::new(), Vec::new(), Vec::new());
            texts
                .iter()
                .map(|text| {
                    seen.clear();
                    for_each_token(text, &mut buffer, &mut tokens, |t| seen.push(t.to_string()))?;
                    Some(index.found(seen.iter().map(String::as_str)))
                })
                .collect()
        })
    }
}
