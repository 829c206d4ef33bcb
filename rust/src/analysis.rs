//! The analyser of `wordcast.query.analysis`, compiled: the same terms for every text.
//!
//! Steps, as the Python reference takes them: drop default-ignorable code points, tokenise into
//! maximal runs of letters, marks and digits, NFKC-normalise and case-fold each token (splitting
//! again where normalisation made punctuation), drop stop words and tokens of one character or
//! more than 64, stem with Porter. The character classes and case foldings come from tables
//! generated from the Python this project runs on (`rust/gen_unicode.py`); NFKC comes from the
//! `unicode-normalization` crate, which agrees with CPython on every code point CPython knows
//! (Unicode's normalisation stability policy). A token holding a code point CPython does not know
//! goes back to the Python analyser, as does nothing else. Stemming is PyStemmer's own `porter`,
//! called once per new word and remembered: the same stems by construction.

use rustc_hash::FxHashMap;
use unicode_normalization::UnicodeNormalization;

use crate::unicode_tables::{ASSIGNED, CASEFOLD, IGNORABLE, TOKEN};

pub const MAX_TOKEN_CHARS: usize = 64;

/// Snowball's English stop words and the contraction fragments tokenising leaves behind, from
/// the one list the Python analyser reads too (`src/wordcast/query/stop_words.txt`).
pub const STOP_WORDS_TEXT: &str = include_str!("../../src/wordcast/query/stop_words.txt");

/// The words of [`STOP_WORDS_TEXT`]: each line that is not blank or a `#` comment.
pub fn stop_words() -> impl Iterator<Item = &'static str> {
    STOP_WORDS_TEXT
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

fn in_ranges(ranges: &[(u32, u32)], cp: u32) -> bool {
    // The last range starting at or before cp.
    let idx = ranges.partition_point(|&(start, _)| start <= cp);
    idx > 0 && cp <= ranges[idx - 1].1
}

#[inline]
pub fn is_token_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    in_ranges(TOKEN, c as u32)
}

#[inline]
pub(crate) fn is_ignorable(c: char) -> bool {
    !c.is_ascii() && in_ranges(IGNORABLE, c as u32)
}

#[inline]
fn is_assigned(c: char) -> bool {
    c.is_ascii() || in_ranges(ASSIGNED, c as u32)
}

fn casefold_into(c: char, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    let cp = c as u32;
    match CASEFOLD.binary_search_by_key(&cp, |&(from, _)| from) {
        Ok(at) => out.push_str(CASEFOLD[at].1),
        Err(_) => out.push(c),
    }
}

/// The normalised tokens of `text` (steps 1-3), or None when a token holds a code point the
/// tables cannot vouch for: the Python analyser must read that text.
pub fn normalised_tokens(text: &str, tokens: &mut Vec<String>) -> Option<()> {
    tokens.clear();
    if text.is_ascii() {
        for run in text.split(|c: char| !c.is_ascii_alphanumeric()) {
            if !run.is_empty() {
                tokens.push(run.to_ascii_lowercase());
            }
        }
        return Some(());
    }
    let mut raw = String::new();
    let mut chars = text.chars().filter(|&c| !is_ignorable(c)).peekable();
    while chars.peek().is_some() {
        raw.clear();
        for c in chars.by_ref() {
            if is_token_char(c) {
                raw.push(c);
            } else if !raw.is_empty() {
                break;
            }
        }
        if raw.is_empty() {
            break;
        }
        if raw.is_ascii() {
            tokens.push(raw.to_ascii_lowercase());
            continue;
        }
        fold_run(&raw, |part| tokens.push(part.to_string()))?;
    }
    Some(())
}

/// Call `token` with each token a run of token characters that is not ASCII (its ignorable
/// code points dropped) normalises to: NFKC, case-folded, cut where normalisation made a
/// separator; None, before any call, when it holds a code point the tables cannot vouch for.
fn fold_run(raw: &str, mut token: impl FnMut(&str)) -> Option<()> {
    if !raw.chars().all(is_assigned) {
        return None;
    }
    let mut folded = String::with_capacity(raw.len());
    for c in raw.nfkc() {
        casefold_into(c, &mut folded);
    }
    for part in folded.split(|c: char| !is_token_char(c)) {
        if !part.is_empty() {
            token(part);
        }
    }
    Some(())
}

/// The [start, end) of each run of ASCII letters and digits in `bytes`: an ASCII text's tokens.
pub fn ascii_runs(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() && !bytes[at].is_ascii_alphanumeric() {
            at += 1;
        }
        if at == bytes.len() {
            return None;
        }
        let start = at;
        while at < bytes.len() && bytes[at].is_ascii_alphanumeric() {
            at += 1;
        }
        Some((start, at))
    })
}

/// Each normalised token of a text that is not ASCII with the [start, end) in code points of
/// the run it was read from (`wordcast.query.analysis.token_offsets`: a run of letters, marks,
/// digits and ignorable code points; a run that normalisation splits gives each of its tokens
/// the whole run's offsets); None when a run holds a code point the tables cannot vouch for.
pub fn token_offsets(text: &str, out: &mut Vec<(String, usize, usize)>) -> Option<()> {
    out.clear();
    let (mut raw, mut start, mut in_run) = (String::new(), 0, false);
    let mut at = 0;
    for c in text.chars() {
        if is_token_char(c) || is_ignorable(c) {
            if !in_run {
                (in_run, start) = (true, at);
                raw.clear();
            }
            if !is_ignorable(c) {
                raw.push(c);
            }
        } else if in_run {
            in_run = false;
            run_tokens(&raw, start, at, out)?;
        }
        at += 1;
    }
    if in_run {
        run_tokens(&raw, start, at, out)?;
    }
    Some(())
}

/// The tokens of one run (its ignorable code points dropped) at `start`..`end`.
fn run_tokens(
    raw: &str,
    start: usize,
    end: usize,
    out: &mut Vec<(String, usize, usize)>,
) -> Option<()> {
    if raw.is_empty() {
        return Some(());
    }
    if raw.is_ascii() {
        out.push((raw.to_ascii_lowercase(), start, end));
        return Some(());
    }
    fold_run(raw, |part| out.push((part.to_string(), start, end)))
}

/// Call `visit` with each normalised token of `text` (steps 1-3), borrowing from `buffer` where
/// it can (a plain ASCII text is lowered once and cut, no token allocated); None, before any call,
/// when a token holds a code point the tables cannot vouch for.
pub fn for_each_token(
    text: &str,
    buffer: &mut String,
    tokens: &mut Vec<String>,
    mut visit: impl FnMut(&str),
) -> Option<()> {
    if text.is_ascii() {
        buffer.clear();
        buffer.push_str(text);
        buffer.make_ascii_lowercase();
        for run in buffer.split(|c: char| !c.is_ascii_alphanumeric()) {
            if !run.is_empty() {
                visit(run);
            }
        }
        return Some(());
    }
    normalised_tokens(text, tokens)?;
    for token in tokens.iter() {
        visit(token);
    }
    Some(())
}

/// Normalised word -> a value, with the words of up to eight bytes (most of them) keyed by the
/// word's bytes packed in an integer: no string hashed, no string compared on the hot path.
#[derive(Default)]
pub struct Words {
    short: FxHashMap<u64, u32>,
    long: FxHashMap<String, u32>,
}

fn packed(word: &str) -> Option<u64> {
    let bytes = word.as_bytes();
    if bytes.len() > 8 {
        return None;
    }
    let mut key = [0u8; 8];
    key[..bytes.len()].copy_from_slice(bytes); // tokens never hold NUL: the padding is unambiguous
    Some(u64::from_le_bytes(key))
}

impl Words {
    pub fn get(&self, word: &str) -> Option<u32> {
        match packed(word) {
            Some(key) => self.short.get(&key).copied(),
            None => self.long.get(word).copied(),
        }
    }

    pub fn insert(&mut self, word: String, value: u32) {
        match packed(&word) {
            Some(key) => {
                self.short.insert(key, value);
            }
            None => {
                self.long.insert(word, value);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
    }
}

/// Whether a normalised token survives the filters of step 4 (before stemming).
pub fn kept(token: &str, stop_words: &FxHashMap<&'static str, ()>) -> bool {
    let chars = if token.is_ascii() {
        token.len()
    } else {
        token.chars().count()
    };
    chars > 1 && chars <= MAX_TOKEN_CHARS && !stop_words.contains_key(token)
}

/// The stop words as a set, for [`kept`].
pub fn stop_word_set() -> FxHashMap<&'static str, ()> {
    stop_words().map(|w| (w, ())).collect()
}

// -- the Python class --------------------------------------------------------------------------

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyFrozenSet, PyList, PyString, PyTuple};
use rustc_hash::FxHashSet;

use crate::bindings::readings::TextReading;
use crate::entities::{for_each_entity, Scratch};
use crate::reading::{text_readings, Reading};

/// Most distinct words an analyser remembers; past it, it starts afresh (as the Python one).
const REMEMBERED_WORDS: usize = 100_000;

/// An id above every term's: a word first seen in this call, numbered among the unseen.
pub(crate) const UNSEEN: u32 = 1 << 31;
/// Above those: an entity first seen in this call, numbered among the unseen entities.
const UNSEEN_ENTITY: u32 = UNSEEN | (1 << 30);
/// What a remembered word that analysis drops (a stop word, one too long) stands for.
pub(crate) const DROPPED: u32 = u32::MAX;

/// The analyser, compiled: ``terms(text)`` equals the Python reference's for every text.
#[pyclass(module = "wordcast._core")]
pub(crate) struct Analyser {
    stem_words: Py<PyAny>,
    fallback: Py<PyAny>,
    stop: FxHashMap<&'static str, ()>,
    term_of: Words, // normalised word -> its term, or DROPPED
    terms: Vec<Py<PyString>>,
    names: Vec<Box<str>>, // each term's text, as `terms` (read without the GIL)
    term_ids: FxHashMap<String, u32>,
    texts_read: u64, // by `readings`: what a test counts to hold each text read once
}

enum Read {
    /// The term ids of its words and entities (`crate::entities`).
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
            stop: stop_word_set(),
            term_of: Words::default(),
            terms: Vec::new(),
            names: Vec::new(),
            term_ids: FxHashMap::default(),
            texts_read: 0,
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
        let (objects, reads, _) = self.read(py, texts, &[])?;
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
        let (objects, reads, _) = self.read(py, texts, &[])?;
        self.tuples(py, &objects, reads)
    }

    /// ``term_tuples``, and the normalised tokens of each text ``keep`` flags, read in the same
    /// pass (None for the others, and for a text the reference reads): what a text in a
    /// language with a stemmer of its own is analysed in that language from, not read again.
    fn term_tuples_and_tokens<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        keep: Vec<bool>,
    ) -> PyResult<(Vec<Bound<'py, PyTuple>>, KeptTokens)> {
        let (objects, reads, tokens) = self.read(py, texts, &keep)?;
        Ok((self.tuples(py, &objects, reads)?, tokens))
    }

    /// Each text read once (``wordcast.query.explain.compiled_readings``), as a
    /// [`TextReading`]; None for a text the tables cannot vouch for, which the reference reads.
    fn readings_many<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, TextReading>>>> {
        // A str holding lone surrogates has no UTF-8 form: the reference reads it.
        let mut backed: Vec<Option<PyBackedStr>> = Vec::new();
        for text in texts.try_iter()? {
            backed.push(text?.cast_into::<PyString>()?.extract::<PyBackedStr>().ok());
        }
        let readable: Vec<&str> = backed.iter().flatten().map(|text| &**text).collect();
        let mut readings = self.readings(py, &readable, true)?.into_iter();
        let mut out = Vec::with_capacity(backed.len());
        for text in &backed {
            let reading = if text.is_some() {
                readings.next().flatten()
            } else {
                None
            };
            let reading = reading.map(|r| TextReading::new(&r, &self.names));
            out.push(reading.map(|r| Bound::new(py, r)).transpose()?);
        }
        Ok(out)
    }

    /// How many texts this analyser has read for their offsets and positions (``readings``):
    /// each text of a batch once at most, whatever its matches need.
    #[getter]
    fn texts_read(&self) -> u64 {
        self.texts_read
    }

    /// Words remembered (bounded: the memory of a long-running router stays flat).
    fn __len__(&self) -> usize {
        self.term_of.len()
    }
}

impl Analyser {
    /// Each text read (None for one the tables cannot vouch for, which the reference reads),
    /// tokenised with the GIL released, the words not seen before stemmed at once afterwards.
    /// ``forget``: whether the analyser may start afresh first, which it must not do while
    /// readings it gave out are still read (their term ids would name other terms).
    pub(crate) fn readings(
        &mut self,
        py: Python<'_>,
        texts: &[&str],
        forget: bool,
    ) -> PyResult<Vec<Option<Reading>>> {
        if forget {
            self.forget_if_full();
        }
        self.texts_read += texts.len() as u64;
        let (mut readings, unseen, dropped) = {
            let term_of = &self.term_of;
            let stop = &self.stop;
            py.detach(|| text_readings(texts, term_of, stop))
        };
        let learned = self.remember(py, unseen, dropped)?;
        if !learned.is_empty() {
            for reading in readings.iter_mut().flatten() {
                for (id, _) in reading.terms.iter_mut() {
                    if *id >= UNSEEN {
                        *id = learned[(*id - UNSEEN) as usize];
                    }
                }
            }
        }
        Ok(readings)
    }

    /// The text of each term, by id (as a reading names them).
    pub(crate) fn names(&self) -> &[Box<str>] {
        &self.names
    }

    /// Each text's terms as a tuple, read (or the reference's).
    fn tuples<'py>(
        &self,
        py: Python<'py>,
        objects: &[Bound<'py, PyString>],
        reads: Vec<Read>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
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

    /// Each text's term ids (or Python for the reference to read), and the normalised tokens
    /// of those ``keep`` flags, the GIL released while the texts are tokenised; words not seen
    /// before are stemmed afterwards, all at once.
    fn read<'py>(
        &mut self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        keep: &[bool],
    ) -> PyResult<(Vec<Bound<'py, PyString>>, Vec<Read>, KeptTokens)> {
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
        let (mut reads, unseen, dropped, tokens, unseen_entities) = {
            let known = Known {
                term_of: &self.term_of,
                stop: &self.stop,
                term_ids: &self.term_ids,
            };
            py.detach(|| read_texts(&backed, &known, keep))
        };
        let learned = self.remember(py, unseen, dropped)?;
        let entities: Vec<u32> = unseen_entities
            .into_iter()
            .map(|term| self.entity_id(py, term))
            .collect();
        for read in reads.iter_mut() {
            if let Read::Terms(ids) = read {
                if ids.iter().any(|&id| id >= UNSEEN) {
                    for id in ids.iter_mut() {
                        if *id >= UNSEEN_ENTITY {
                            *id = entities[(*id - UNSEEN_ENTITY) as usize];
                        } else if *id >= UNSEEN {
                            *id = learned[(*id - UNSEEN) as usize];
                        }
                    }
                    ids.sort_unstable();
                    ids.dedup();
                }
            }
        }
        Ok((objects, reads, tokens))
    }

    /// The id of an entity's term (`crate::entities`), numbered among the terms: a hashtag met
    /// again is the same Python string, not a new one.
    fn entity_id(&mut self, py: Python<'_>, term: String) -> u32 {
        if let Some(&id) = self.term_ids.get(&term) {
            return id;
        }
        let id = self.terms.len() as u32;
        self.terms.push(PyString::new(py, &term).unbind());
        self.names.push(term.as_str().into());
        self.term_ids.insert(term, id);
        id
    }

    /// Start afresh once the words (or the terms: links are many) remembered pass the bound
    /// (the memory of a long-running router stays flat).
    fn forget_if_full(&mut self) {
        if self.term_of.len() > REMEMBERED_WORDS || self.terms.len() > REMEMBERED_WORDS {
            self.term_of.clear();
            self.terms.clear();
            self.names.clear();
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
                    self.names.push(stem.as_str().into());
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

/// A text's terms (by a number its caller gives them) and the positions they occur at.
pub(crate) type Positions = FxHashMap<u32, Vec<u32>>;

/// The normalised tokens of each text asked for (None for the others).
type KeptTokens = Vec<Option<Vec<String>>>;

/// What [`read_texts`] found: each text's term ids, the words not seen before, the dropped
/// words not seen before, the tokens kept of the texts asked for, and the entities' terms not
/// seen before.
type TextsRead = (
    Vec<Read>,
    Vec<String>,
    FxHashSet<String>,
    KeptTokens,
    Vec<String>,
);

/// What an analyser knows before reading a batch: each word's term, the stop words, and each
/// term's id (an entity's term is its own).
struct Known<'a> {
    term_of: &'a Words,
    stop: &'a FxHashMap<&'static str, ()>,
    term_ids: &'a FxHashMap<String, u32>,
}

/// The term ids of every text (or Python for those the tables cannot vouch for); a kept word not
/// seen before gets UNSEEN + its place among the unseen words, which are returned (each once),
/// with the dropped words not seen before (to be remembered as such), and the normalised tokens
/// of each text ``keep`` flags.
fn read_texts(texts: &[Option<PyBackedStr>], known: &Known<'_>, keep: &[bool]) -> TextsRead {
    let (term_of, stop) = (known.term_of, known.stop);
    let mut unseen_entities: FxHashMap<String, u32> = FxHashMap::default();
    let mut scratch = Scratch::default();
    let mut unseen: FxHashMap<String, u32> = FxHashMap::default();
    let mut dropped: FxHashSet<String> = FxHashSet::default();
    let mut reads = Vec::with_capacity(texts.len());
    let mut kept_tokens = Vec::with_capacity(texts.len());
    let (mut buffer, mut tokens) = (String::new(), Vec::new());
    for (k, text) in texts.iter().enumerate() {
        let Some(text) = text else {
            reads.push(Read::Python);
            kept_tokens.push(None);
            continue;
        };
        let keeping = keep.get(k).copied().unwrap_or(false);
        let mut ids: Vec<u32> = Vec::new();
        let mut all: Vec<String> = Vec::new();
        let read = for_each_token(text, &mut buffer, &mut tokens, |token| {
            if keeping {
                all.push(token.to_string());
            }
            if token.len() < 2 {
                return; // one character, dropped without a lookup
            }
            match term_of.get(token) {
                Some(DROPPED) => {}
                Some(id) => ids.push(id),
                None if kept(token, stop) => {
                    let next = unseen.len() as u32;
                    ids.push(UNSEEN + *unseen.entry(token.to_string()).or_insert(next));
                }
                None => {
                    dropped.insert(token.to_string());
                }
            }
        });
        let read = read.and_then(|()| {
            read_entities(text, known, &mut scratch, &mut unseen_entities, &mut ids)
        });
        kept_tokens.push((keeping && read.is_some()).then_some(all));
        reads.push(match read {
            Some(()) => {
                ids.sort_unstable();
                ids.dedup();
                Read::Terms(ids)
            }
            None => Read::Python,
        });
    }
    (
        reads,
        in_order(unseen),
        dropped,
        kept_tokens,
        in_order(unseen_entities),
    )
}

/// The ids of a text's entities' terms pushed to `ids` (UNSEEN_ENTITY + its place among
/// `unseen` for one not seen before); None as [`for_each_entity`].
fn read_entities(
    text: &str,
    known: &Known<'_>,
    scratch: &mut Scratch,
    unseen: &mut FxHashMap<String, u32>,
    ids: &mut Vec<u32>,
) -> Option<()> {
    for_each_entity(text, scratch, |term| match known.term_ids.get(term) {
        Some(&id) => ids.push(id),
        None => {
            let next = unseen.len() as u32;
            ids.push(UNSEEN_ENTITY + *unseen.entry(term.to_string()).or_insert(next));
        }
    })
}

/// The keys of `numbered`, by their numbers.
fn in_order(numbered: FxHashMap<String, u32>) -> Vec<String> {
    let mut ordered = vec![String::new(); numbered.len()];
    for (key, at) in numbered {
        ordered[at as usize] = key;
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        normalised_tokens(text, &mut out).map(|_| out)
    }

    #[test]
    fn ascii_tokens_are_lowercased_runs_of_letters_and_digits() {
        assert_eq!(
            tokens("Hello, World-42!").unwrap(),
            ["hello", "world", "42"]
        );
    }

    #[test]
    fn symbols_do_not_glue_letters_and_ignorables_do_not_split() {
        assert_eq!(tokens("Just Works\u{2122}").unwrap(), ["just", "works"]);
        assert_eq!(tokens("hou\u{200d}se").unwrap(), ["house"]);
        assert_eq!(tokens("\u{1d40b}odash").unwrap(), ["lodash"]);
        assert_eq!(tokens("Stra\u{df}e").unwrap(), ["strasse"]);
        assert_eq!(tokens("\u{fb01}nance").unwrap(), ["finance"]);
    }

    #[test]
    fn unknown_code_points_go_back_to_python() {
        // U+0558 is a letter to the regex module, and unknown to CPython's unicodedata 14: the
        // tables cannot say what NFKC and case folding make of it there.
        assert!(tokens("a\u{558}b").is_none());
        // An unassigned code point that is no letter only separates tokens, as in Python.
        assert_eq!(tokens("a\u{378}bc").unwrap(), ["a", "bc"]);
    }

    #[test]
    fn the_filters_drop_stop_words_and_short_or_long_tokens() {
        let stop = stop_word_set();
        assert!(!kept("the", &stop));
        assert!(!kept("x", &stop));
        assert!(!kept(&"y".repeat(65), &stop));
        assert!(kept("python", &stop));
    }
}
