//! LASP's view of the word maps while a batch of subscriptions is placed (S³-TM §4.2, Alg. 2),
//! compiled: `wordcast.routing.placement.PlanningView` with `wordcast.routing.lasp.place_among`,
//! the Python references it is held equal to (`tests/unit/test_compiled_lasp.py`).
//!
//! Pure: no Python here; `bindings::lasp` wraps it as `wordcast._core.PlanningView`.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::error::CoreError;

/// |H(i)| for every matcher and, of each H(i), the words a batch uses; each subscription placed
/// is held at once, so the next one sees it as if it had been stored and read back.
pub struct Planner {
    sizes: Vec<i64>,
    held: FxHashMap<usize, FxHashSet<String>>,
    slope: f64,
    intercept: f64,
}

impl Planner {
    /// The view of `sizes` (|H(i)|) and `held` (matcher -> the words of H(i) the batch uses),
    /// with LASP's linear cost f(x) = `slope` · x + `intercept`.
    pub fn new(
        sizes: Vec<i64>,
        held: FxHashMap<usize, Vec<String>>,
        slope: f64,
        intercept: f64,
    ) -> Self {
        let held = held
            .into_iter()
            .map(|(matcher, words)| (matcher, words.into_iter().collect()))
            .collect();
        Planner {
            sizes,
            held,
            slope,
            intercept,
        }
    }

    fn cost(&self, unique_words: i64) -> f64 {
        self.slope * unique_words as f64 + self.intercept
    }

    /// |H(i)| of every matcher, the batch's subscriptions placed so far included.
    pub fn sizes(&self) -> &[i64] {
        &self.sizes
    }

    /// How many of `terms` matcher `matcher`'s H(i) holds.
    pub fn known_on(&self, terms: &[String], matcher: usize) -> i64 {
        self.held.get(&matcher).map_or(0, |held| {
            terms.iter().filter(|t| held.contains(*t)).count() as i64
        })
    }

    /// Record a subscription of `terms` stored on `matchers`.
    pub fn hold(&mut self, terms: &[String], matchers: &[usize]) -> Result<(), CoreError> {
        for &matcher in matchers {
            if matcher >= self.sizes.len() {
                return Err(CoreError::NoMatcher(matcher));
            }
            let held = self.held.entry(matcher).or_default();
            for term in terms {
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
    pub fn place(&self, terms: &[String], eligible: &[usize]) -> Result<usize, CoreError> {
        let unique: FxHashSet<&String> = terms.iter().collect();
        let words = unique.len() as i64;
        let base: Vec<f64> = self.sizes.iter().map(|&size| self.cost(size)).collect();
        // Summed in order, as Python's sum(): the same floats, the same choice.
        let total: f64 = base.iter().sum();
        let squares: f64 = base.iter().map(|x| x * x).sum();
        let n = base.len() as f64;
        let mut eligible = eligible.to_vec();
        eligible.sort_unstable();
        eligible.dedup();
        let (mut best, mut best_utility) = (None, f64::NEG_INFINITY);
        for i in eligible {
            let Some(&size) = self.sizes.get(i) else {
                return Err(CoreError::NoMatcher(i));
            };
            let old = base[i];
            let placed = self.cost(size + words - self.known_on(terms, i));
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
        best.ok_or(CoreError::NoEligibleMatcher)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    fn planner(sizes: &[i64], held: &[(usize, &str)]) -> Planner {
        let held = held.iter().map(|&(m, w)| (m, words(w))).collect();
        Planner::new(sizes.to_vec(), held, 1.0, 0.0)
    }

    #[test]
    fn a_subscription_goes_where_its_words_are_already_held() {
        // Both matchers equally loaded: the one holding both words adds nothing to its H(i).
        let view = planner(&[10, 10], &[(1, "apple pie")]);
        assert_eq!(view.place(&words("apple pie"), &[0, 1]), Ok(1));
    }

    #[test]
    fn with_no_word_held_the_lighter_matcher_takes_it() {
        let view = planner(&[20, 5, 30], &[]);
        assert_eq!(view.place(&words("kiwi"), &[0, 1, 2]), Ok(1));
        assert_eq!(view.place(&words("kiwi"), &[2, 0]), Ok(0)); // only the eligible ones
    }

    #[test]
    fn holding_counts_each_new_word_once_and_the_next_placement_sees_it() {
        let mut view = planner(&[0, 0], &[]);
        view.hold(&words("fig fig date"), &[0]).unwrap();
        assert_eq!(view.sizes(), &[2, 0]);
        assert_eq!(view.known_on(&words("fig date plum"), 0), 2);
        view.hold(&words("fig plum"), &[0]).unwrap();
        assert_eq!(view.sizes(), &[3, 0]);
    }

    #[test]
    fn equals_go_to_the_lowest_matcher_and_refusals_are_typed() {
        let view = planner(&[4, 4], &[]);
        assert_eq!(view.place(&words("x"), &[1, 0, 1]), Ok(0));
        assert_eq!(
            view.place(&words("x"), &[]),
            Err(CoreError::NoEligibleMatcher)
        );
        assert_eq!(view.place(&words("x"), &[7]), Err(CoreError::NoMatcher(7)));
        let mut view = view;
        assert_eq!(view.hold(&words("x"), &[2]), Err(CoreError::NoMatcher(2)));
    }
}
