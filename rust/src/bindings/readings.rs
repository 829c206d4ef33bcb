//! The texts of a batch being written, each read once (`crate::reading`): by the compiled
//! analyser, or by the reference (a Python callback) for a text in a language with a stemmer
//! of its own or holding a code point the analyser's tables cannot vouch for. What the writer
//! needs of each (its terms' parts of `matched`, its terms' positions for phrases and windows,
//! its tokens' places) comes from that one reading, and `wordcast._core.Readings` hands the
//! compiled readings on to the matcher's own decisions (`Deliveries.write`'s `decide`), which
//! read no text the core read.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{Analyser, Positions};
use crate::error::CoreError;
use crate::messages::{Parts, Table};
use crate::reading::Reading;

/// What the reference gives for a text it reads: its terms' parts of `matched`, where each
/// term occurs, and its tokens' places (`Readings.reference` in the matcher).
type Given = (
    FxHashMap<String, Vec<u8>>,
    FxHashMap<String, Vec<u32>>,
    Vec<(u32, u32)>,
);

/// What the writer needs of each publication of a batch, by position.
#[derive(Default)]
pub(crate) struct Known {
    pub(crate) parts: Vec<Option<Parts>>,
    pub(crate) placed: Vec<Option<Positions>>,
    pub(crate) tokens: Vec<Option<Vec<(u32, u32)>>>,
    /// The compiled analyser's readings (outer None: not read; inner None: left to the
    /// reference).
    pub(crate) readings: Vec<Option<Option<Reading>>>,
}

/// Which publications the writer needs read, and for what.
pub(crate) struct Needs {
    pub(crate) parts: Vec<bool>, // a plain match (or one whose spans it checks) to explain
    pub(crate) placed: Vec<bool>, // a candidate whose phrases or windows it checks
}

impl Needs {
    fn any(&self, position: usize) -> bool {
        self.parts[position] || self.placed[position]
    }
}

/// How a batch's texts are read: the texts, the compiled analyser (None: the reference reads
/// every text), the positions left to the reference whatever their code points (a language
/// with a stemmer of its own), and the reference itself.
pub(crate) struct Readers<'a, 'py> {
    pub(crate) texts: &'a [PyBackedStr],
    pub(crate) analyser: Option<&'a Bound<'py, Analyser>>,
    pub(crate) left: &'a FxHashSet<u32>,
    pub(crate) reference: Option<&'a Bound<'py, PyAny>>,
}

impl Readers<'_, '_> {
    /// Read, once each, the texts `needs` names, and keep what the writer needs of them.
    pub(crate) fn read(&self, py: Python<'_>, needs: &Needs, table: &Table) -> PyResult<Known> {
        let n = self.texts.len();
        let mut known = Known::default();
        known.parts.resize_with(n, || None);
        known.placed.resize_with(n, || None);
        known.tokens.resize_with(n, || None);
        known.readings.resize_with(n, || None);
        let wanted: Vec<u32> = (0..n as u32).filter(|&k| needs.any(k as usize)).collect();
        let (compiled, mut referred): (Vec<u32>, Vec<u32>) = match self.analyser {
            Some(_) => wanted.into_iter().partition(|k| !self.left.contains(k)),
            None => (Vec::new(), wanted),
        };
        if let Some(analyser) = self.analyser {
            let texts: Vec<&str> = compiled.iter().map(|&k| &*self.texts[k as usize]).collect();
            let mut analyser = analyser.borrow_mut();
            let readings = analyser.readings(py, &texts, true)?;
            let mut numbers = Numbers {
                names: analyser.names(),
                table,
                known: FxHashMap::default(),
            };
            for (k, reading) in compiled.into_iter().zip(readings) {
                if let Some(reading) = &reading {
                    known.keep(k as usize, reading, needs, &mut numbers);
                } else {
                    referred.push(k);
                }
                known.readings[k as usize] = Some(reading);
            }
        }
        self.refer(&referred, needs, table, &mut known)?;
        Ok(known)
    }

    /// Ask the reference for the texts the compiled analyser does not read.
    fn refer(
        &self,
        positions: &[u32],
        needs: &Needs,
        table: &Table,
        known: &mut Known,
    ) -> PyResult<()> {
        if positions.is_empty() {
            return Ok(());
        }
        let Some(reference) = self.reference else {
            return Err(CoreError::Invalid(format!(
                "publication {} is the reference's to read: give a reference",
                positions[0]
            ))
            .into());
        };
        let mut given: FxHashMap<u32, Given> = reference.call1((positions.to_vec(),))?.extract()?;
        let numbers = &table.term_numbers;
        for &k in positions {
            let Some((parts, placed, tokens)) = given.remove(&k) else {
                return Err(CoreError::Invalid(format!("the reference did not read {k}")).into());
            };
            if parts
                .values()
                .any(|piece| std::str::from_utf8(piece).is_err())
            {
                return Err(CoreError::NotUtf8("a message's pieces must be UTF-8").into());
            }
            let at = k as usize;
            if needs.parts[at] {
                let numbered = parts
                    .into_iter()
                    .filter_map(|(term, json)| Some((*numbers.get(term.as_str())?, json)));
                known.parts[at] = Some(numbered.collect());
            }
            if needs.placed[at] {
                let numbered = placed
                    .into_iter()
                    .filter_map(|(term, found)| Some((*numbers.get(term.as_str())?, found)));
                known.placed[at] = Some(numbered.collect());
                known.tokens[at] = Some(tokens);
            }
        }
        Ok(())
    }
}

/// The number in `Table::terms` of each of the analyser's terms a batch meets, looked up once.
struct Numbers<'a> {
    names: &'a [Box<str>],
    table: &'a Table,
    known: FxHashMap<u32, Option<u32>>,
}

impl Numbers<'_> {
    fn of(&mut self, id: u32) -> Option<u32> {
        let (names, numbers) = (self.names, &self.table.term_numbers);
        *self
            .known
            .entry(id)
            .or_insert_with(|| numbers.get(&names[id as usize]).copied())
    }
}

impl Known {
    /// Keep what the writer needs of publication `k` from its compiled `reading`: the parts of
    /// the terms a subscription here names, and its terms' positions.
    fn keep(&mut self, k: usize, reading: &Reading, needs: &Needs, numbers: &mut Numbers<'_>) {
        if needs.parts[k] {
            let names = numbers.names;
            self.parts[k] = Some(reading.numbered_parts(names, |id| numbers.of(id)));
        }
        if needs.placed[k] {
            self.placed[k] = Some(reading.positions(|id| numbers.of(id)));
            self.tokens[k] = Some(reading.tokens.clone());
        }
    }
}

/// The compiled readings of a batch being written, for the matcher's own decisions
/// (``Deliveries.write``'s ``decide``): a text the writer read is not read again, and one it did
/// not need is read when first asked for.
#[pyclass(module = "wordcast._core")]
pub struct Readings {
    texts: Vec<PyBackedStr>,
    analyser: Option<Py<Analyser>>,
    left: FxHashSet<u32>,
    readings: Vec<Option<Option<Reading>>>,
}

impl Readings {
    pub(crate) fn new(
        py: Python<'_>,
        readers: &Readers<'_, '_>,
        readings: Vec<Option<Option<Reading>>>,
    ) -> Self {
        Readings {
            texts: readers
                .texts
                .iter()
                .map(|text| text.clone_ref(py))
                .collect(),
            analyser: readers.analyser.map(|a| a.clone().unbind()),
            left: readers.left.clone(),
            readings,
        }
    }
}

#[pymethods]
impl Readings {
    /// The compiled reading of publication ``position`` (a [`TextReading`]), read now if the
    /// writer did not read it; None for a text
    /// the reference reads (in a language with a stemmer of its own, holding a code point the
    /// tables cannot vouch for, or every text without the compiled analyser).
    fn reading<'py>(
        &mut self,
        py: Python<'py>,
        position: usize,
    ) -> PyResult<Option<Bound<'py, TextReading>>> {
        if position >= self.texts.len() {
            return Err(
                CoreError::Invalid(format!("no publication {position} in the batch")).into(),
            );
        }
        let Some(analyser) = &self.analyser else {
            return Ok(None);
        };
        if self.left.contains(&(position as u32)) {
            return Ok(None);
        }
        let mut analyser = analyser.bind(py).borrow_mut();
        if self.readings[position].is_none() {
            // Not starting afresh: the readings held here name terms by the analyser's ids.
            let read = analyser.readings(py, &[&self.texts[position]], false)?;
            self.readings[position] = Some(read.into_iter().next().flatten());
        }
        match &self.readings[position] {
            Some(Some(reading)) => Ok(Some(Bound::new(
                py,
                TextReading::new(reading, analyser.names()),
            )?)),
            _ => Ok(None),
        }
    }

    fn __len__(&self) -> usize {
        self.texts.len()
    }
}

/// One text's compiled reading for Python (``Analyser.readings_many``, ``Readings.reading``):
/// its terms' JSON members of a ``matched``, where they occur and its tokens' places, each made
/// when first asked (a long text's positions and places are many Python objects, which most
/// matches never need).
#[pyclass(module = "wordcast._core", frozen)]
pub struct TextReading {
    reading: Reading, // its term ids are places in `names`
    names: Vec<Box<str>>,
}

impl TextReading {
    /// A reading whose term ids are the analyser's, with the analyser's `names` of them.
    pub(crate) fn new(reading: &Reading, names: &[Box<str>]) -> Self {
        let mut local: FxHashMap<u32, u32> = FxHashMap::default();
        let mut own: Vec<Box<str>> = Vec::new();
        let terms = reading
            .terms
            .iter()
            .map(|&(id, position)| {
                let place = *local.entry(id).or_insert_with(|| {
                    own.push(names[id as usize].clone());
                    own.len() as u32 - 1
                });
                (place, position)
            })
            .collect();
        let reading = Reading {
            tokens: reading.tokens.clone(),
            terms,
        };
        TextReading {
            reading,
            names: own,
        }
    }
}

#[pymethods]
impl TextReading {
    /// Each term's JSON member of a ``matched``'s ``terms``, ``{term: b'"term":[[start,end],…]'}``
    /// (in code points, terms in the order they first occur).
    fn parts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let parts = PyDict::new(py);
        for (term, json) in self.reading.parts(&self.names) {
            parts.set_item(term, PyBytes::new(py, &json))?;
        }
        Ok(parts)
    }

    /// Where each term occurs, ``{term: [position, …]}`` (``term_positions``).
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut by_term: Vec<Vec<u32>> = vec![Vec::new(); self.names.len()];
        for &(place, position) in &self.reading.terms {
            by_term[place as usize].push(position);
        }
        let positions = PyDict::new(py);
        for (name, found) in self.names.iter().zip(by_term) {
            positions.set_item(&**name, found)?;
        }
        Ok(positions)
    }

    /// Each token's [start, end) in code points, by position (``AnalysedText.token_spans``).
    fn spans(&self) -> Vec<(u32, u32)> {
        self.reading.tokens.clone()
    }
}
