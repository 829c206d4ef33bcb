//! `wordcast._core`: the compiled core behind the Python API.
//!
//! A thin surface: the engines are pure Rust and their Python classes live in `bindings`
//! (the analyser, QueryNote and the patterns still beside their engines); this module only registers
//! them. Each stands in for a Python reference of the same behaviour, which stays the
//! seed-faithful reading and the oracle of the differential tests: `Analyser` for
//! `wordcast.query.analysis.Analyser`, `CompactTrie` for `wordcast.engines.compact_trie`,
//! `QueryNote` for the matching of `wordcast.engines.querynote`, `Patterns` for
//! `wordcast.engines.ac_retriever` and `PlanningView` for `wordcast.routing.placement`'s. Batch
//! calls release the GIL while they work. Errors are typed ([`error::CoreError`]) and become
//! Python exceptions in one place. A panic (none is expected) reaches Python as an exception,
//! never an abort.

#![deny(missing_docs)]

mod analysis;
mod bindings;
mod conditions;
mod convert;
pub mod detection;
mod entities;
mod error;
mod interner;
mod lasp;
mod messages;
mod patterns;
mod querynote;
mod reading;
mod spans;
mod trie;
mod unicode_tables;
mod wildcards;

use pyo3::prelude::*;

/// The engines as plain Rust, for the criterion benchmarks (`rust/benches/`); not an API.
#[doc(hidden)]
pub mod engines {
    pub use crate::analysis::{kept, normalised_tokens, stop_word_set};
    pub use crate::entities::{entity_terms, for_each_entity, Scratch as EntityScratch};
    pub use crate::trie::Trie;
}

/// The extension module `wordcast._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<analysis::Analyser>()?;
    m.add_class::<bindings::trie::CompactTrie>()?;
    m.add_class::<querynote::QueryNote>()?;
    m.add_class::<patterns::Patterns>()?;
    m.add_class::<bindings::messages::Deliveries>()?;
    m.add_class::<bindings::messages::DeliveryColumns>()?;
    m.add_class::<bindings::messages::MessageShape>()?;
    m.add_class::<bindings::messages::ChosenMatches>()?;
    m.add_class::<bindings::readings::Readings>()?;
    m.add_class::<bindings::readings::TextReading>()?;
    m.add_class::<bindings::lasp::PlanningView>()?;
    m.add_class::<bindings::detection::LanguageDetector>()?;
    m.add_class::<bindings::wildcards::WildcardTerms>()?;
    error::register(m)?;
    Ok(())
}
