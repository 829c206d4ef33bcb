//! The compiled core's errors: one type, mapped to Python exceptions in one place
//! (`From<CoreError> for PyErr`), so no engine builds a Python exception itself. Each kind is a
//! class of its own in `wordcast._core`, all under `CoreError`, itself a `ValueError` (so that
//! callers catching `ValueError` keep working), as pydantic-core's `ValidationError` is.

use std::fmt;

use pyo3::prelude::*;

use exceptions::{BatchShapeError, ModelError, PatternError, PlacementError, SubscriptionError};

/// What the core refuses; every variant is bad input, a `ValueError` in Python.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A subscription id past the largest the trie can hold.
    IdTooLarge {
        /// The id given.
        id: u32,
        /// The largest allowed.
        max: u32,
    },
    /// A subscription without a term (`Some(id)`: in a batch, that one).
    NoTerm(Option<u32>),
    /// Lists that go together (ids and their terms, say) of different lengths.
    Uneven(&'static str),
    /// A matcher no list knows.
    NoMatcher(usize),
    /// No matcher to place a subscription on.
    NoEligibleMatcher,
    /// A wildcard pattern's pieces that do not fit together.
    Pattern(String),
    /// A batch too small to time the cost model's operations on.
    NothingToTime,
    /// Bytes that had to be UTF-8 and were not.
    NotUtf8(&'static str),
    /// A language model file that cannot be read as one.
    Model(String),
    /// Anything else refused, with what was wrong.
    Invalid(String),
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::IdTooLarge { id, max } => {
                write!(f, "subscription ids go up to {max}, not {id}")
            }
            CoreError::NoTerm(None) => f.write_str("a subscription needs at least one term"),
            CoreError::NoTerm(Some(id)) => write!(f, "subscription {id} has no term"),
            CoreError::Uneven(what) => f.write_str(what),
            CoreError::NoMatcher(m) => write!(f, "no matcher {m}"),
            CoreError::NoEligibleMatcher => f.write_str("no eligible matcher"),
            CoreError::Pattern(why) | CoreError::Invalid(why) | CoreError::Model(why) => {
                f.write_str(why)
            }
            CoreError::NothingToTime => f.write_str("no query of two known terms to time"),
            CoreError::NotUtf8(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for CoreError {}

/// The Python classes, named as Python sees them.
pub mod exceptions {
    use pyo3::create_exception;
    use pyo3::exceptions::PyValueError;

    create_exception!(
        wordcast._core,
        CoreError,
        PyValueError,
        "What the compiled core refuses: bad input (a ValueError)."
    );
    create_exception!(
        wordcast._core,
        SubscriptionError,
        CoreError,
        "A subscription the core cannot hold: an id too large, no term."
    );
    create_exception!(
        wordcast._core,
        BatchShapeError,
        CoreError,
        "Lists that go together of different lengths, or bytes that are not UTF-8."
    );
    create_exception!(
        wordcast._core,
        PlacementError,
        CoreError,
        "No matcher to place on, or one no list knows."
    );
    create_exception!(
        wordcast._core,
        PatternError,
        CoreError,
        "A wildcard pattern whose pieces do not fit together."
    );
    create_exception!(
        wordcast._core,
        ModelError,
        CoreError,
        "A language model file that is not one the core reads."
    );
}

impl From<CoreError> for PyErr {
    fn from(error: CoreError) -> PyErr {
        let message = error.to_string();
        match error {
            CoreError::IdTooLarge { .. } | CoreError::NoTerm(_) => {
                SubscriptionError::new_err(message)
            }
            CoreError::Uneven(_) | CoreError::NotUtf8(_) => BatchShapeError::new_err(message),
            CoreError::NoMatcher(_) | CoreError::NoEligibleMatcher | CoreError::NothingToTime => {
                PlacementError::new_err(message)
            }
            CoreError::Pattern(_) => PatternError::new_err(message),
            CoreError::Model(_) => ModelError::new_err(message),
            CoreError::Invalid(_) => exceptions::CoreError::new_err(message),
        }
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CoreError", py.get_type::<exceptions::CoreError>())?;
    m.add("SubscriptionError", py.get_type::<SubscriptionError>())?;
    m.add("BatchShapeError", py.get_type::<BatchShapeError>())?;
    m.add("PlacementError", py.get_type::<PlacementError>())?;
    m.add("PatternError", py.get_type::<PatternError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_was_refused() {
        let too_large = CoreError::IdTooLarge { id: 5, max: 4 };
        assert_eq!(too_large.to_string(), "subscription ids go up to 4, not 5");
        assert_eq!(
            CoreError::NoTerm(Some(7)).to_string(),
            "subscription 7 has no term"
        );
        assert_eq!(CoreError::NoMatcher(3).to_string(), "no matcher 3");
    }
}
