//! The PyO3 wrappers of the core's pure Rust types, apart from them (as pydantic-core and
//! tokenizers keep theirs): each converts Python's arguments, releases the GIL for the batch,
//! and maps `CoreError` to Python's exceptions.

pub mod detection;
pub mod lasp;
pub mod messages;
pub mod readings;
pub mod trie;
pub mod wildcards;
