//! LASP's view of the word maps while a batch of subscriptions is placed (S³-TM §4.2, Alg. 2),
//! compiled: `wordcast.routing.placement.PlanningView` with `wordcast.routing.lasp.place_among`,
//! the Python references it is held equal to (`tests/unit/test_compiled_lasp.py`).

use pyo3::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::CoreError;

/// |H(i)| for every matcher and, of each H(i), the words a batch uses; each subscription placed
/// is held at once, so the next one sees it as if it had been stored and read back.
#[pyclass(module = "wordcast._core")]
pub struct PlanningView {
    sizes: Vec<i64>,
    held: FxHashMap<usize, FxHashSet<String>>,
    slope: f64,
    intercept: f64,
}

impl PlanningView {
    fn cost(&self, unique_words: i64) -> f64 {
        self.slope * unique_words as f64 + self.intercept
    }

    fn known_on(&self, terms: &[String], matcher: usize) -> i64 {
        self.held.get(&matcher).map_or(0, |held| {
            terms.iter().filter(|t| held.contains(*t)).count() as i64
        })
    }
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
        let held = held
            .into_iter()
            .map(|(matcher, words)| (matcher, words.into_iter().collect()))
            .collect();
        Self {
            sizes,
            held,
            slope,
            intercept,
        }
    }

    /// |H(i)| of every matcher, the batch's subscriptions placed so far included.
    #[getter]
    fn sizes(&self) -> Vec<i64> {
        self.sizes.clone()
    }

    /// How many of `terms` each of `matchers`' H(i) holds.
    fn known(&self, terms: Vec<String>, matchers: Vec<usize>) -> FxHashMap<usize, i64> {
        matchers
            .into_iter()
            .map(|m| (m, self.known_on(&terms, m)))
            .collect()
    }

    /// Record a subscription of `terms` stored on `matchers`.
    fn hold(&mut self, terms: Vec<String>, matchers: Vec<usize>) -> PyResult<()> {
        for matcher in matchers {
            if matcher >= self.sizes.len() {
                return Err(CoreError::NoMatcher(matcher).into());
            }
            let held = self.held.entry(matcher).or_default();
            for term in &terms {
                if !held.contains(term) {
                    held.insert(term.clone());
                    self.sizes[matcher] += 1;
                }
            }
        }
        Ok(())
    }

    /// Alg. 2's choice for a subscription of `terms` among the `eligible` matchers: the best
    /// utility −(f(|H(i)| + new) − f(|H(i)|)) × the loads' coefficient of variation with it
    /// placed there; the first (lowest) of equals, as `place_among`.
    fn place(&self, terms: Vec<String>, eligible: Vec<usize>) -> PyResult<usize> {
        let unique: FxHashSet<&String> = terms.iter().collect();
        let words = unique.len() as i64;
        let base: Vec<f64> = self.sizes.iter().map(|&size| self.cost(size)).collect();
        // Summed in order, as Python's sum(): the same floats, the same choice.
        let total: f64 = base.iter().sum();
        let squares: f64 = base.iter().map(|x| x * x).sum();
        let n = base.len() as f64;
        let mut eligible = eligible;
        eligible.sort_unstable();
        eligible.dedup();
        let (mut best, mut best_utility) = (None, f64::NEG_INFINITY);
        for i in eligible {
            let Some(&size) = self.sizes.get(i) else {
                return Err(CoreError::NoMatcher(i).into());
            };
            let old = base[i];
            let placed = self.cost(size + words - self.known_on(&terms, i));
            let mean = (total - old + placed) / n;
            let variance = ((squares - old * old + placed * placed) / n - mean * mean).max(0.0);
            let imbalance = if mean > 0.0 {
                variance.sqrt() / mean
            } else {
                0.0
            };
            let utility = -(placed - old) * imbalance;
            if utility > best_utility {
                best = Some(i);
                best_utility = utility;
            }
        }
        best.ok_or_else(|| CoreError::NoEligibleMatcher.into())
    }
}
