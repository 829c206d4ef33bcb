//! `wordcast._core.PlanningView`: `lasp::Planner` for Python.

use pyo3::prelude::*;
use rustc_hash::FxHashMap;

use crate::lasp::Planner;

/// LASP's view of the word maps while a batch is placed (S³-TM §4.2, Alg. 2).
#[pyclass(module = "wordcast._core")]
pub struct PlanningView {
    planner: Planner,
}

#[pymethods]
impl PlanningView {
    /// The view of `sizes` (|H(i)|) and `held` (matcher -> the words of H(i) the batch uses),
    /// with LASP's linear cost f(x) = `slope` · x + `intercept`.
    #[new]
    fn new(
        sizes: Vec<i64>,
        held: FxHashMap<usize, Vec<String>>,
        slope: f64,
        intercept: f64,
    ) -> Self {
        PlanningView {
            planner: Planner::new(sizes, held, slope, intercept),
        }
    }

    /// |H(i)| of every matcher, the batch's subscriptions placed so far included.
    #[getter]
    fn sizes(&self) -> Vec<i64> {
        self.planner.sizes().to_vec()
    }

    /// How many of `terms` each of `matchers`' H(i) holds.
    fn known(&self, terms: Vec<String>, matchers: Vec<usize>) -> FxHashMap<usize, i64> {
        matchers
            .into_iter()
            .map(|m| (m, self.planner.known_on(&terms, m)))
            .collect()
    }

    /// Record a subscription of `terms` stored on `matchers`.
    fn hold(&mut self, terms: Vec<String>, matchers: Vec<usize>) -> PyResult<()> {
        Ok(self.planner.hold(&terms, &matchers)?)
    }

    /// Alg. 2's choice for a subscription of `terms` among the `eligible` matchers.
    fn place(&self, terms: Vec<String>, eligible: Vec<usize>) -> PyResult<usize> {
        Ok(self.planner.place(&terms, &eligible)?)
    }
}
