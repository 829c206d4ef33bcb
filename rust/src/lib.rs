//! `wordcast._core`: the compiled core behind the Python API.
//!
//! Each class here stands in for a Python reference of the same behaviour, which stays the
//! seed-faithful reading and the oracle of the differential tests: `Analyser` for
//! `wordcast.query.analysis.Analyser`, `CompactTrie` for `wordcast.engines.compact_trie`,
//! `QueryNote` for the matching of `wordcast.engines.querynote`, `Patterns` for
//! `wordcast.engines.ac_retriever` and `PlanningView` for `wordcast.routing.placement`'s. Batch
//! calls release the GIL while they work. A panic (none is expected) reaches Python as an
//! exception, never an abort.

mod analysis;
mod interner;
mod lasp;
mod messages;
mod patterns;
mod querynote;
mod trie;
mod unicode_tables;

use std::collections::HashMap;
use std::fmt::Write;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict, PyFrozenSet, PyList, PyMemoryView, PyString, PyTuple};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::interner::{Interner, TermId};

/// Most distinct words an analyser remembers; past it, it starts afresh (as the Python one).
const REMEMBERED_WORDS: usize = 100_000;
/// Largest subscription id (the top bit marks shared subscription lists inside the trie).
const MAX_SUB_ID: u32 = (1 << 31) - 1;

fn check_id(sub_id: u32) -> PyResult<u32> {
    if sub_id > MAX_SUB_ID {
        return Err(PyValueError::new_err(format!(
            "subscription ids go up to {MAX_SUB_ID}, not {sub_id}"
        )));
    }
    Ok(sub_id)
}

/// The strings of any iterable of str (a list, a tuple, a frozenset).
fn strings(terms: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let mut out = Vec::new();
    for item in terms.try_iter()? {
        out.push(item?.cast::<PyString>()?.to_str()?.to_owned());
    }
    Ok(out)
}

/// The sorted, distinct ids of the terms of `terms` this interner knows, without copying them.
fn known_ids(interner: &Interner, terms: &Bound<'_, PyAny>) -> PyResult<Vec<TermId>> {
    let mut ids = Vec::new();
    let mut take = |item: &Bound<'_, PyAny>| -> PyResult<()> {
        if let Some(id) = interner.get(item.cast::<PyString>()?.to_str()?) {
            ids.push(id);
        }
        Ok(())
    };
    // A list or a tuple is read by index: no iterator object, no reference counted per step.
    if let Ok(list) = terms.cast::<PyList>() {
        for item in list.iter() {
            take(&item)?;
        }
    } else if let Ok(tuple) = terms.cast::<PyTuple>() {
        for item in tuple.iter() {
            take(&item)?;
        }
    } else {
        for item in terms.try_iter()? {
            take(&item?)?;
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// A ``memoryview`` of unsigned 32-bit integers (format ``"I"``) holding `values`.
fn u32_buffer<'py>(py: Python<'py>, values: &[u32]) -> PyResult<Bound<'py, PyAny>> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let view = PyMemoryView::from(&PyBytes::new(py, &bytes))?;
    view.call_method1("cast", ("I",))
}

/// Move the distinct values of a sorted slice to its front; how many there are.
fn dedup_sorted(values: &mut [TermId]) -> usize {
    let mut kept = 0;
    for i in 0..values.len() {
        if kept == 0 || values[i] != values[kept - 1] {
            values[kept] = values[i];
            kept += 1;
        }
    }
    kept
}

// -- analysis ---------------------------------------------------------------------------------

/// (term, its JSON member of `matched`) of a text, in the order terms first occur.
pub(crate) type TermParts = Vec<(String, String)>;

/// An id above every term's: a word first seen in this call, numbered among the unseen.
const UNSEEN: u32 = 1 << 31;
/// What a remembered word that analysis drops (a stop word, one too long) stands for.
const DROPPED: u32 = u32::MAX;

/// The analyser, compiled: ``terms(text)`` equals the Python reference's for every text.
#[pyclass(module = "wordcast._core")]
pub(crate) struct Analyser {
    stem_words: Py<PyAny>,
    fallback: Py<PyAny>,
    stop: FxHashMap<&'static str, ()>,
    term_of: analysis::Words, // normalised word -> its term, or DROPPED
    terms: Vec<Py<PyString>>,
    term_ids: FxHashMap<String, u32>,
}

enum Read {
    Terms(Vec<u32>),
    Python, // a code point the tables cannot vouch for: the reference reads this text
}

#[pymethods]
impl Analyser {
    /// ``stem_words``: PyStemmer's ``porter`` ``stemWords``; ``fallback``: the reference
    /// analyser's ``terms``, for the rare text the tables cannot vouch for.
    #[new]
    fn new(stem_words: Py<PyAny>, fallback: Py<PyAny>) -> Self {
        Analyser {
            stem_words,
            fallback,
            stop: analysis::stop_word_set(),
            term_of: analysis::Words::default(),
            terms: Vec::new(),
            term_ids: FxHashMap::default(),
        }
    }

    /// The set of analysed terms of ``text``.
    fn terms<'py>(
        &mut self,
        py: Python<'py>,
        text: Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyFrozenSet>> {
        let texts = PyList::new(py, [text])?;
        match self.terms_many(py, texts.as_any())?.pop() {
            Some(terms) => Ok(terms),
            None => PyFrozenSet::empty(py),
        }
    }

    /// ``terms`` of each text, with the GIL released while the texts are read.
    fn terms_many<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyFrozenSet>>> {
        let (objects, reads) = self.read(py, texts)?;
        let mut out = Vec::with_capacity(objects.len());
        for (text, read) in objects.iter().zip(reads) {
            out.push(match read {
                Read::Python => self
                    .fallback
                    .call1(py, (text,))?
                    .into_bound(py)
                    .cast_into()?,
                Read::Terms(ids) => {
                    PyFrozenSet::new(py, ids.iter().map(|&id| self.terms[id as usize].bind(py)))?
                }
            });
        }
        Ok(out)
    }

    /// The terms of each text as a tuple (each once, in no particular order): what the routers'
    /// hot path wants, cheaper to make than frozensets.
    fn term_tuples<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let (objects, reads) = self.read(py, texts)?;
        let mut out = Vec::with_capacity(objects.len());
        for (text, read) in objects.iter().zip(reads) {
            out.push(match read {
                Read::Python => {
                    let found = self.fallback.call1(py, (text,))?.into_bound(py);
                    PyTuple::new(py, found.try_iter()?.collect::<PyResult<Vec<_>>>()?)?
                }
                Read::Terms(ids) => {
                    PyTuple::new(py, ids.iter().map(|&id| self.terms[id as usize].bind(py)))?
                }
            });
        }
        Ok(out)
    }

    /// Where each term of each text occurs, in code points of the text (a token's run, as
    /// ``wordcast.query.analysis.token_offsets`` gives it), written as the JSON member a
    /// match's ``matched`` names them by: ``{term: b'"term":[[start,end],…]'}``, terms in the
    /// order they first occur (a term of an ASCII text is plain ASCII: nothing to escape); None
    /// for a text that is not ASCII, which the reference reads (``AnalysedText``). What the
    /// matcher puts explanations together from, with no Python object per occurrence.
    fn term_parts_many<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyDict>>>> {
        let mut out = Vec::new();
        for parts in self.term_parts(py, texts)? {
            let Some(parts) = parts else {
                out.push(None);
                continue;
            };
            let dict = PyDict::new(py);
            for (term, json) in parts {
                dict.set_item(term, PyBytes::new(py, json.as_bytes()))?;
            }
            out.push(Some(dict));
        }
        Ok(out)
    }

    /// Words remembered (bounded: the memory of a long-running router stays flat).
    fn __len__(&self) -> usize {
        self.term_of.len()
    }
}

impl Analyser {
    /// ``term_parts_many``'s answer in Rust: for each ASCII text, (term, ``"term":[[s,e],…]``)
    /// in the order terms first occur; None for a text that is not ASCII.
    pub(crate) fn term_parts(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Option<TermParts>>> {
        let (occurrences, learned) = self.occurrences(py, texts)?;
        let mut out = Vec::with_capacity(occurrences.len());
        for found in occurrences {
            let Some(found) = found else {
                out.push(None);
                continue;
            };
            // Each term's member, in the order terms first occur.
            let mut order: Vec<u32> = Vec::new();
            let mut members: FxHashMap<u32, String> = FxHashMap::default();
            for (id, start, end) in found {
                let id = if id >= UNSEEN {
                    learned[(id - UNSEEN) as usize]
                } else {
                    id
                };
                let member = members.entry(id).or_insert_with(|| {
                    order.push(id);
                    String::new()
                });
                if !member.is_empty() {
                    member.push(',');
                }
                let _ = write!(member, "[{start},{end}]");
            }
            let mut parts = Vec::with_capacity(order.len());
            for id in order {
                let term = self.terms[id as usize].bind(py).to_str()?.to_owned();
                let json = format!("\"{term}\":[{}]", members[&id]);
                parts.push((term, json));
            }
            out.push(Some(parts));
        }
        Ok(out)
    }

    /// Where each term of each text occurs, counting every normalised token (a stop word or a
    /// token dropped for its length keeps its place), as ``term_positions`` gives it, the terms
    /// keyed by ``number_of`` (a term it has no number for is left out); None for a text the
    /// tables cannot vouch for, which the reference reads.
    pub(crate) fn term_positions(
        &mut self,
        py: Python<'_>,
        texts: &[&str],
        mut number_of: impl FnMut(&str) -> Option<u32>,
    ) -> PyResult<Vec<Option<Positions>>> {
        self.forget_if_full();
        let (placed, unseen, dropped) = {
            let term_of = &self.term_of;
            let stop = &self.stop;
            py.detach(|| placed_texts(texts, term_of, stop))
        };
        let learned = self.remember(py, unseen, dropped)?;
        // Each term's number, looked up once a call whatever the texts holding it.
        let mut numbers: FxHashMap<u32, Option<u32>> = FxHashMap::default();
        let mut out = Vec::with_capacity(placed.len());
        for found in placed {
            let Some(found) = found else {
                out.push(None);
                continue;
            };
            let mut positions: Positions = FxHashMap::default();
            for (id, at) in found {
                let id = if id >= UNSEEN {
                    learned[(id - UNSEEN) as usize]
                } else {
                    id
                };
                let number = match numbers.get(&id) {
                    Some(&number) => number,
                    None => {
                        let term = self.terms[id as usize].bind(py).to_str()?;
                        *numbers.entry(id).or_insert(number_of(term))
                    }
                };
                if let Some(number) = number {
                    positions.entry(number).or_default().push(at);
                }
            }
            out.push(Some(positions));
        }
        Ok(out)
    }

    /// The kept tokens of each ASCII text as (term id, start, end), with the ids of the words
    /// first seen here (those at UNSEEN + k), the texts tokenised with the GIL released.
    fn occurrences(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
    ) -> PyResult<(Occurrences, Vec<u32>)> {
        self.forget_if_full();
        let mut backed: Vec<Option<PyBackedStr>> = Vec::new();
        for text in texts.try_iter()? {
            let text = text?.cast_into::<PyString>()?;
            backed.push(text.extract::<PyBackedStr>().ok().filter(|t| t.is_ascii()));
        }
        let (occurrences, unseen, dropped) = {
            let term_of = &self.term_of;
            let stop = &self.stop;
            py.detach(|| ascii_occurrences(&backed, term_of, stop))
        };
        let learned = self.remember(py, unseen, dropped)?;
        Ok((occurrences, learned))
    }

    /// Each text's term ids (or Python for the reference to read), the GIL released while the
    /// texts are tokenised; words not seen before are stemmed afterwards, all at once.
    fn read<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<(Vec<Bound<'py, PyString>>, Vec<Read>)> {
        self.forget_if_full();
        // A str holding lone surrogates has no UTF-8 form: the reference reads it.
        let mut objects = Vec::new();
        let mut backed: Vec<Option<PyBackedStr>> = Vec::new();
        for text in texts.try_iter()? {
            let text = text?.cast_into::<PyString>()?;
            // The str's own UTF-8 buffer, kept alive (and read without the GIL): no copy.
            backed.push(text.extract::<PyBackedStr>().ok());
            objects.push(text);
        }
        let (mut reads, unseen, dropped) = {
            let term_of = &self.term_of;
            let stop = &self.stop;
            py.detach(|| read_texts(&backed, term_of, stop))
        };
        let learned = self.remember(py, unseen, dropped)?;
        if !learned.is_empty() {
            for read in reads.iter_mut() {
                if let Read::Terms(ids) = read {
                    if ids.iter().any(|&id| id >= UNSEEN) {
                        for id in ids.iter_mut() {
                            if *id >= UNSEEN {
                                *id = learned[(*id - UNSEEN) as usize];
                            }
                        }
                        ids.sort_unstable();
                        ids.dedup();
                    }
                }
            }
        }
        Ok((objects, reads))
    }

    /// Start afresh once the words remembered pass the bound (the memory of a long-running
    /// router stays flat).
    fn forget_if_full(&mut self) {
        if self.term_of.len() > REMEMBERED_WORDS {
            self.term_of.clear();
            self.terms.clear();
            self.term_ids.clear();
        }
    }

    /// Remember the words a read dropped, and learn the terms of those it had not seen; returns
    /// the term of each unseen word, in order.
    fn remember(
        &mut self,
        py: Python<'_>,
        unseen: Vec<String>,
        dropped: FxHashSet<String>,
    ) -> PyResult<Vec<u32>> {
        for word in dropped {
            self.term_of.insert(word, DROPPED);
        }
        if unseen.is_empty() {
            return Ok(Vec::new());
        }
        self.learn(py, unseen)
    }

    /// Stem words not seen before (PyStemmer, once for all of them) and remember their terms;
    /// returns the term of each, in order.
    fn learn(&mut self, py: Python<'_>, unseen: Vec<String>) -> PyResult<Vec<u32>> {
        let stems = self.stem_words.call1(py, (PyList::new(py, &unseen)?,))?;
        let stems: Vec<String> = stems.extract(py)?;
        let mut learned = Vec::with_capacity(unseen.len());
        for (token, stem) in unseen.into_iter().zip(stems) {
            let id = match self.term_ids.get(&stem) {
                Some(&id) => id,
                None => {
                    let id = self.terms.len() as u32;
                    self.terms.push(PyString::new(py, &stem).unbind());
                    self.term_ids.insert(stem, id);
                    id
                }
            };
            self.term_of.insert(token, id);
            learned.push(id);
        }
        Ok(learned)
    }
}

/// (term id, start, end) of each kept token of each ASCII text, in order (None for the others);
/// a word not seen before gets UNSEEN + its place among the unseen words, returned (each once)
/// with the dropped words not seen before, as [`read_texts`] does.
type Occurrences = Vec<Option<Vec<(u32, usize, usize)>>>;

fn ascii_occurrences(
    texts: &[Option<PyBackedStr>],
    term_of: &analysis::Words,
    stop: &FxHashMap<&'static str, ()>,
) -> (Occurrences, Vec<String>, FxHashSet<String>) {
    let mut unseen: FxHashMap<String, u32> = FxHashMap::default();
    let mut dropped: FxHashSet<String> = FxHashSet::default();
    let mut out = Vec::with_capacity(texts.len());
    let mut lower = String::new();
    for text in texts {
        let Some(text) = text else {
            out.push(None);
            continue;
        };
        lower.clear();
        lower.push_str(text);
        lower.make_ascii_lowercase();
        let mut found = Vec::new();
        for (start, at) in analysis::ascii_runs(lower.as_bytes()) {
            let token = &lower[start..at];
            if token.len() < 2 {
                continue; // one character, dropped without a lookup
            }
            // ASCII: a byte offset is a code point offset.
            match term_of.get(token) {
                Some(DROPPED) => {}
                Some(id) => found.push((id, start, at)),
                None if analysis::kept(token, stop) => {
                    let next = unseen.len() as u32;
                    let place = *unseen.entry(token.to_string()).or_insert(next);
                    found.push((UNSEEN + place, start, at));
                }
                None => {
                    dropped.insert(token.to_string());
                }
            }
        }
        out.push(Some(found));
    }
    let mut words = vec![String::new(); unseen.len()];
    for (word, at) in unseen {
        words[at as usize] = word;
    }
    (out, words, dropped)
}

/// A text's terms (by a number its caller gives them) and the positions they occur at.
pub(crate) type Positions = FxHashMap<u32, Vec<u32>>;

/// (term id, position) of each kept token of each text, positions counting every normalised
/// token (None for a text the tables cannot vouch for); unseen and dropped words as in
/// [`read_texts`].
type Placed = Vec<Option<Vec<(u32, u32)>>>;

fn placed_texts(
    texts: &[&str],
    term_of: &analysis::Words,
    stop: &FxHashMap<&'static str, ()>,
) -> (Placed, Vec<String>, FxHashSet<String>) {
    let mut unseen: FxHashMap<String, u32> = FxHashMap::default();
    let mut dropped: FxHashSet<String> = FxHashSet::default();
    let mut out = Vec::with_capacity(texts.len());
    let (mut buffer, mut tokens) = (String::new(), Vec::new());
    for text in texts {
        let mut found: Vec<(u32, u32)> = Vec::new();
        let mut at = 0u32;
        let read = analysis::for_each_token(text, &mut buffer, &mut tokens, |token| {
            let here = at;
            at += 1;
            if token.len() < 2 {
                return; // one character: dropped, its place kept
            }
            match term_of.get(token) {
                Some(DROPPED) => {}
                Some(id) => found.push((id, here)),
                None if analysis::kept(token, stop) => {
                    let next = unseen.len() as u32;
                    found.push((
                        UNSEEN + *unseen.entry(token.to_string()).or_insert(next),
                        here,
                    ));
                }
                None => {
                    dropped.insert(token.to_string());
                }
            }
        });
        out.push(read.map(|()| found));
    }
    let mut words = vec![String::new(); unseen.len()];
    for (word, at) in unseen {
        words[at as usize] = word;
    }
    (out, words, dropped)
}

/// The term ids of every text (or Python for those the tables cannot vouch for); a kept word not
/// seen before gets UNSEEN + its place among the unseen words, which are returned (each once),
/// with the dropped words not seen before (to be remembered as such).
fn read_texts(
    texts: &[Option<PyBackedStr>],
    term_of: &analysis::Words,
    stop: &FxHashMap<&'static str, ()>,
) -> (Vec<Read>, Vec<String>, FxHashSet<String>) {
    let mut unseen: FxHashMap<String, u32> = FxHashMap::default();
    let mut dropped: FxHashSet<String> = FxHashSet::default();
    let mut reads = Vec::with_capacity(texts.len());
    let (mut buffer, mut tokens) = (String::new(), Vec::new());
    for text in texts {
        let Some(text) = text else {
            reads.push(Read::Python);
            continue;
        };
        let mut ids: Vec<u32> = Vec::new();
        let read = analysis::for_each_token(text, &mut buffer, &mut tokens, |token| {
            if token.len() < 2 {
                return; // one character, dropped without a lookup
            }
            match term_of.get(token) {
                Some(DROPPED) => {}
                Some(id) => ids.push(id),
                None if analysis::kept(token, stop) => {
                    let next = unseen.len() as u32;
                    ids.push(UNSEEN + *unseen.entry(token.to_string()).or_insert(next));
                }
                None => {
                    dropped.insert(token.to_string());
                }
            }
        });
        reads.push(match read {
            Some(()) => {
                ids.sort_unstable();
                ids.dedup();
                Read::Terms(ids)
            }
            None => Read::Python,
        });
    }
    let mut words = vec![String::new(); unseen.len()];
    for (word, at) in unseen {
        words[at as usize] = word;
    }
    (reads, words, dropped)
}

// -- the compact trie -------------------------------------------------------------------------

/// The compact trie (web-syndication thesis §3.2.2) over interned terms.
#[pyclass(module = "wordcast._core")]
struct CompactTrie {
    trie: trie::Trie,
    interner: Interner,
}

#[pymethods]
impl CompactTrie {
    /// ``order``: term -> rank, the order paths are sorted in (rarest first, say); terms it does
    /// not name come after, in the order they are first seen.
    #[new]
    #[pyo3(signature = (order=None))]
    fn new(order: Option<HashMap<String, u32>>) -> Self {
        CompactTrie {
            trie: trie::Trie::new(),
            interner: Interner::with_order(order.unwrap_or_default()),
        }
    }

    fn __len__(&self) -> usize {
        self.trie.len()
    }

    /// Index subscription ``sub_id`` (0 … 2**31 - 1) by its analysed terms.
    fn add(&mut self, sub_id: u32, terms: &Bound<'_, PyAny>) -> PyResult<()> {
        let path = interner::path(&mut self.interner, &strings(terms)?);
        if path.is_empty() {
            return Err(PyValueError::new_err(
                "a subscription needs at least one term",
            ));
        }
        self.trie.add(check_id(sub_id)?, &path);
        Ok(())
    }

    /// ``add`` for many subscriptions: their terms are interned first, then indexed with the
    /// GIL released. Nothing is added unless every subscription is valid.
    fn add_many(
        &mut self,
        py: Python<'_>,
        sub_ids: Vec<u32>,
        terms: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        // One flat run of ids with offsets, not a list of lists of strings: a million
        // subscriptions then cost a few bytes each in transit.
        let mut ids: Vec<TermId> = Vec::new();
        let mut ends: Vec<usize> = Vec::with_capacity(sub_ids.len());
        for (at, subscription) in terms.try_iter()?.enumerate() {
            let Some(&id) = sub_ids.get(at) else {
                return Err(PyValueError::new_err(
                    "as many subscription ids as term lists, please",
                ));
            };
            check_id(id)?;
            let start = ids.len();
            for term in subscription?.try_iter()? {
                ids.push(self.interner.intern(term?.cast::<PyString>()?.to_str()?));
            }
            if ids.len() == start {
                return Err(PyValueError::new_err(format!(
                    "subscription {id} has no term"
                )));
            }
            ends.push(ids.len());
        }
        if ends.len() != sub_ids.len() {
            return Err(PyValueError::new_err(
                "as many subscription ids as term lists, please",
            ));
        }
        let trie = &mut self.trie;
        py.detach(|| {
            let mut start = 0;
            for (&id, &end) in sub_ids.iter().zip(&ends) {
                let path = &mut ids[start..end];
                path.sort_unstable();
                let distinct = dedup_sorted(path);
                trie.add(id, &path[..distinct]);
                start = end;
            }
            // A load of this size has grown the arenas by doubling; trimming them costs a pass
            // over the trie, paid for by the load itself.
            if 4 * sub_ids.len() >= trie.len() {
                trie.shrink();
            }
        });
        Ok(())
    }

    /// Remove a subscription added with these terms; False if it is not there.
    fn remove(&mut self, sub_id: u32, terms: &Bound<'_, PyAny>) -> PyResult<bool> {
        let names = strings(terms)?;
        let path = interner::known(&self.interner, &names);
        if path.len() != {
            let mut distinct = names.clone();
            distinct.sort_unstable();
            distinct.dedup();
            distinct.len()
        } {
            return Ok(false); // a term never indexed: no subscription has it
        }
        Ok(sub_id <= MAX_SUB_ID && self.trie.remove(sub_id, &path))
    }

    /// The subscriptions whose every term is among ``terms``.
    #[pyo3(name = "match")]
    fn match_terms(&self, terms: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let item = known_ids(&self.interner, terms)?;
        let (mut found, mut stack) = (Vec::new(), Vec::new());
        self.trie.matches(&item, &mut found, &mut stack);
        Ok(found)
    }

    /// ``match`` of each publication of a batch, with the GIL released while matching.
    fn match_many(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u32>>> {
        let mut items = Vec::new();
        for terms in batch.try_iter()? {
            items.push(known_ids(&self.interner, &terms?)?);
        }
        let trie = &self.trie;
        Ok(py.detach(|| {
            let (mut found, mut stack) = (Vec::new(), Vec::new());
            items
                .iter()
                .map(|item| {
                    found.clear();
                    trie.matches(item, &mut found, &mut stack);
                    found.clone()
                })
                .collect()
        }))
    }

    /// ``match_many`` as two flat buffers of unsigned 32-bit integers (``memoryview``s cast to
    /// ``"I"``): the ids matched, publication after publication, and where each publication's
    /// run starts (``offsets[k]:offsets[k + 1]`` is publication k's; one more offset than
    /// publications). No Python object per match; the GIL released while matching.
    fn match_many_flat<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let mut items = Vec::new();
        for terms in batch.try_iter()? {
            items.push(known_ids(&self.interner, &terms?)?);
        }
        let trie = &self.trie;
        let (ids, offsets) = py.detach(|| {
            let (mut ids, mut stack) = (Vec::new(), Vec::new());
            let mut offsets = Vec::with_capacity(items.len() + 1);
            offsets.push(0u32);
            for item in &items {
                trie.matches(item, &mut ids, &mut stack);
                offsets.push(ids.len() as u32);
            }
            (ids, offsets)
        });
        Ok((u32_buffer(py, &ids)?, u32_buffer(py, &offsets)?))
    }

    /// Nodes, root included.
    #[getter]
    fn node_count(&self) -> usize {
        self.trie.node_count()
    }

    /// Bytes the trie and its term table take.
    #[getter]
    fn heap_bytes(&self) -> usize {
        self.trie.heap_bytes() + self.interner.heap_bytes()
    }

    /// True when no node but the root is a bare chain link (path compression holds).
    fn is_compressed(&self) -> bool {
        self.trie.is_compressed()
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Analyser>()?;
    m.add_class::<CompactTrie>()?;
    m.add_class::<querynote::QueryNote>()?;
    m.add_class::<patterns::Patterns>()?;
    m.add_class::<messages::Deliveries>()?;
    m.add_class::<lasp::PlanningView>()?;
    Ok(())
}
