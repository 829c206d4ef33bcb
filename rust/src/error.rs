//! The compiled core's errors: one type, mapped to Python exceptions in one place
//! (`From<CoreError> for PyErr`), so no engine builds a Python exception itself.

use std::fmt;

use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

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
            CoreError::Pattern(why) | CoreError::Invalid(why) => f.write_str(why),
            CoreError::NothingToTime => f.write_str("no query of two known terms to time"),
            CoreError::NotUtf8(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for CoreError {}

impl From<CoreError> for PyErr {
    fn from(error: CoreError) -> PyErr {
        PyValueError::new_err(error.to_string())
    }
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
