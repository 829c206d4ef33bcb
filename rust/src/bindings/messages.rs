//! `wordcast._core.Deliveries` and its option structs: the compiled writer
//! (`messages::Table`) for Python. The texts are read here (the analyser's positions and the
//! parts of `matched`), the batch written without the GIL.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyList, PyString, PyTuple};
use rustc_hash::FxHashMap;

use crate::analysis::{Analyser, Positions};
use crate::error::CoreError;
use crate::messages::{
    token_spans, BatchView, Delivery, Parts, Publication, RuleIn, Shape, Table, Written, NO_GROUP,
};

/// A message per group, the (number, position) of the matches handed back, and how many
/// matches were written.
type Answer<'py> = (Bound<'py, PyList>, Vec<(u32, u32)>, usize);

/// What writing a batch's matches needs of each trie number, by columns (an option struct for
/// `Deliveries.set_many`, keyword-only): the subscription's id, its terms, the groups its
/// messages go in (``None`` for none), the audience it meets, whether its matches are written
/// here (``plain``) or handed back, and (``spans``, for an alternative held back) the phrases
/// and windows that must hold, and those that must not, as ``([(term, offset), …], near,
/// name)``: a candidate breaking them is dropped, not handed back; ``tags``: each
/// subscription's tag ("" for none).
#[pyclass(module = "wordcast._core")]
#[derive(Default)]
pub struct DeliveryColumns {
    numbers: Vec<u32>,
    ids: Vec<String>,
    terms: Vec<Vec<String>>,
    groups: Vec<(Option<u32>, Option<u32>)>,
    audiences: Vec<u32>,
    plain: Vec<bool>,
    spans: Option<Vec<Option<RuleIn>>>,
    tags: Option<Vec<String>>,
}

#[pymethods]
impl DeliveryColumns {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, numbers, ids, terms, groups, audiences, plain, spans=None, tags=None))]
    fn new(
        numbers: Vec<u32>,
        ids: Vec<String>,
        terms: Vec<Vec<String>>,
        groups: Vec<(Option<u32>, Option<u32>)>,
        audiences: Vec<u32>,
        plain: Vec<bool>,
        spans: Option<Vec<Option<RuleIn>>>,
        tags: Option<Vec<String>>,
    ) -> Self {
        DeliveryColumns {
            numbers,
            ids,
            terms,
            groups,
            audiences,
            plain,
            spans,
            tags,
        }
    }

    fn __len__(&self) -> usize {
        self.numbers.len()
    }
}

/// A batch's messages around their matches and their bounds (an option struct for
/// `Deliveries.write`, keyword-only): the JSON before the publications (``head``), between
/// them and the matches (``between``) and after (``tail``), the publisher and stream the
/// webhook-ids name, and a message full at ``most`` matches, ``max_bytes`` bytes or ``most_subscriptions``
/// subscriptions; ``explain``: each match with its ``matched``.
#[pyclass(module = "wordcast._core", frozen)]
pub struct MessageShape {
    shape: Shape,
}

#[pymethods]
impl MessageShape {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, head, between, tail, publisher, stream, most, max_bytes, most_subscriptions, explain))]
    fn new(
        head: Vec<u8>,
        between: Vec<u8>,
        tail: Vec<u8>,
        publisher: String,
        stream: String,
        most: usize,
        max_bytes: i64,
        most_subscriptions: usize,
        explain: bool,
    ) -> PyResult<Self> {
        if [&head, &between, &tail]
            .iter()
            .any(|piece| std::str::from_utf8(piece).is_err())
        {
            return Err(CoreError::NotUtf8("a message's frame must be UTF-8").into());
        }
        let shape = Shape {
            head,
            between,
            tail,
            publisher,
            stream,
            most: most.max(1),
            max_bytes,
            most_subscriptions: most_subscriptions.max(1),
            explain,
        };
        Ok(MessageShape { shape })
    }
}

/// The messages a matcher writes from the compact trie's matches, compiled: see the module.
#[pyclass(module = "wordcast._core")]
#[derive(Default)]
pub struct Deliveries {
    table: Table,
}

#[pymethods]
impl Deliveries {
    #[new]
    fn new() -> Self {
        Deliveries::default()
    }

    /// Say what writing a match of each trie number needs (``columns``: see
    /// [`DeliveryColumns`]); the columns are taken, and left empty.
    fn set_many(&mut self, columns: &Bound<'_, DeliveryColumns>) -> PyResult<()> {
        let DeliveryColumns {
            numbers,
            ids,
            terms,
            groups,
            audiences,
            plain,
            spans,
            tags,
        } = std::mem::take(&mut *columns.borrow_mut());
        let n = numbers.len();
        let mut spans = spans.unwrap_or_else(|| (0..n).map(|_| None).collect());
        let tags = tags.unwrap_or_else(|| vec![String::new(); n]);
        let lengths = [
            ids.len(),
            terms.len(),
            groups.len(),
            audiences.len(),
            plain.len(),
            spans.len(),
            tags.len(),
        ];
        check_entries(&numbers, &groups, &lengths)?;
        for (k, number) in numbers.into_iter().enumerate() {
            let terms: Box<[u32]> = terms[k].iter().map(|t| self.table.term_number(t)).collect();
            let (first, second) = groups[k];
            let rule = spans[k].take().map(|given| self.table.span_rule(given));
            let entry = Delivery {
                id: ids[k].as_str().into(),
                tag: (!tags[k].is_empty()).then(|| tags[k].as_str().into()),
                terms,
                groups: [first.unwrap_or(NO_GROUP), second.unwrap_or(NO_GROUP)],
                audience: audiences[k],
                plain: plain[k] && rule.is_none(),
                spans: rule,
            };
            let at = number as usize;
            if self.table.entries.len() <= at {
                self.table.entries.resize_with(at + 1, || None);
            }
            self.table.entries[at] = Some(entry);
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.table.entries.iter().filter(|e| e.is_some()).count()
    }

    /// The messages of a batch from the trie's flat answer (``match_many_flat``): a list of
    /// (group, body, webhook-id, matches, subscription ids, each one's matches), the (number,
    /// position) of the matches handed back to the reference, and how many matches the
    /// messages hold (a match delivered both to a webhook and to the match stream counted
    /// once). ``shape``: the messages' frame and bounds ([`MessageShape`]). ``analyser`` reads
    /// the offsets of the publications ``given`` does not hold the parts of (``{position:
    /// {term: b'"term":[…]'}}``, with ``given_tokens`` their tokens' places: what the reference
    /// read).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (numbers, offsets, wanted, ids, texts, analyser, shape, given=None, given_tokens=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        numbers: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
        wanted: u32,
        ids: Vec<PyBackedStr>,
        texts: Vec<PyBackedStr>,
        analyser: &Bound<'py, Analyser>,
        shape: &Bound<'py, MessageShape>,
        given: Option<FxHashMap<u32, Parts>>,
        given_tokens: Option<FxHashMap<u32, Vec<(u32, u32)>>>,
    ) -> PyResult<Answer<'py>> {
        let numbers: Vec<u32> = PyBuffer::<u32>::get(numbers)?.to_vec(py)?;
        let offsets: Vec<u32> = PyBuffer::<u32>::get(offsets)?.to_vec(py)?;
        let (given, given_tokens) = (given.unwrap_or_default(), given_tokens.unwrap_or_default());
        check_batch(&numbers, &offsets, ids.len(), texts.len(), &given)?;
        let shape = &shape.get().shape;
        let explain = shape.explain;
        let parts = if explain {
            self.read_parts(py, &numbers, &offsets, &texts, analyser, given)?
        } else {
            Vec::new()
        };
        let positions = self.read_positions(py, &numbers, &offsets, &texts, analyser)?;
        let tokens = if explain {
            tokens_of(&positions, &texts, given_tokens)
        } else {
            vec![None; positions.len()]
        };
        let publications = publications_of(&ids, &texts, &parts, &tokens);
        let table = &self.table;
        let batch = BatchView {
            publications: &publications,
            placed: &positions,
            shape,
        };
        let (written, others, plain) =
            py.detach(|| table.write(&numbers, &offsets, wanted, &batch));
        Ok((answered(py, table, written)?, others, plain))
    }
}

impl Deliveries {
    /// Where each term occurs in each publication with a candidate that has spans to check
    /// (None for the others, and for a text the compiled analyser leaves to the reference).
    fn read_positions(
        &self,
        py: Python<'_>,
        numbers: &[u32],
        offsets: &[u32],
        texts: &[PyBackedStr],
        analyser: &Bound<'_, Analyser>,
    ) -> PyResult<Vec<Option<Positions>>> {
        let mut read: Vec<usize> = Vec::new();
        for (position, run) in offsets.windows(2).enumerate() {
            let spans = numbers[run[0] as usize..run[1] as usize]
                .iter()
                .any(|&n| self.table.entry(n).is_some_and(|e| e.spans.is_some()));
            if spans {
                read.push(position);
            }
        }
        let mut positions: Vec<Option<Positions>> = Vec::new();
        positions.resize_with(texts.len(), || None);
        if read.is_empty() {
            return Ok(positions);
        }
        let chosen: Vec<&str> = read.iter().map(|&k| &*texts[k]).collect();
        let term_numbers = &self.table.term_numbers;
        let found = analyser
            .borrow_mut()
            .term_positions(py, &chosen, |term| term_numbers.get(term).copied())?;
        for (position, found) in read.into_iter().zip(found) {
            positions[position] = found;
        }
        Ok(positions)
    }

    /// Each publication's terms' parts of `matched`: those `given`, else read by the compiled
    /// analyser (every publication with a plain match must be ASCII or given).
    fn read_parts(
        &self,
        py: Python<'_>,
        numbers: &[u32],
        offsets: &[u32],
        texts: &[PyBackedStr],
        analyser: &Bound<'_, Analyser>,
        mut given: FxHashMap<u32, Parts>,
    ) -> PyResult<Vec<Option<Parts>>> {
        let mut read: Vec<u32> = Vec::new();
        for (position, run) in offsets.windows(2).enumerate() {
            let position = position as u32;
            let plain = numbers[run[0] as usize..run[1] as usize].iter().any(|&n| {
                self.table
                    .entry(n)
                    .is_some_and(|e| e.plain || e.spans.is_some())
            });
            if plain && !given.contains_key(&position) {
                read.push(position);
            }
        }
        let mut parts: Vec<Option<Parts>> = Vec::new();
        parts.resize_with(texts.len(), || None);
        for (position, held) in given.drain() {
            if let Some(slot) = parts.get_mut(position as usize) {
                *slot = Some(held);
            }
        }
        if read.is_empty() {
            return Ok(parts);
        }
        let list = PyList::new(
            py,
            read.iter().map(|&k| PyString::new(py, &texts[k as usize])),
        )?;
        let found = analyser.borrow_mut().term_parts(py, list.as_any())?;
        for (position, found) in read.into_iter().zip(found) {
            let Some(found) = found else {
                return Err(CoreError::Invalid(format!(
                    "publication {position} is not ASCII: give its parts"
                ))
                .into());
            };
            parts[position as usize] = Some(
                found
                    .into_iter()
                    .map(|(term, json)| (term, json.into_bytes()))
                    .collect(),
            );
        }
        Ok(parts)
    }
}

/// Uneven columns or out-of-range numbers given to `Deliveries.set_many`.
fn check_entries(
    numbers: &[u32],
    groups: &[(Option<u32>, Option<u32>)],
    lengths: &[usize],
) -> Result<(), CoreError> {
    if lengths.iter().any(|&len| len != numbers.len()) {
        return Err(CoreError::Uneven("as many of each, please"));
    }
    if numbers.contains(&u32::MAX)
        || groups
            .iter()
            .any(|&(a, b)| a == Some(NO_GROUP) || b == Some(NO_GROUP))
    {
        return Err(CoreError::Invalid(
            "numbers and groups go up to 2**32 - 2".into(),
        ));
    }
    Ok(())
}

/// Uneven columns, offsets that do not rise to the matches, or parts that are not UTF-8
/// given to `Deliveries.write`.
fn check_batch(
    numbers: &[u32],
    offsets: &[u32],
    ids: usize,
    texts: usize,
    given: &FxHashMap<u32, Parts>,
) -> Result<(), CoreError> {
    if ids != texts || offsets.len() != ids + 1 {
        return Err(CoreError::Uneven(
            "one id and one text a publication, and one more offset",
        ));
    }
    if offsets.windows(2).any(|w| w[0] > w[1])
        || offsets.last().copied() != Some(numbers.len() as u32)
    {
        return Err(CoreError::Invalid(
            "offsets must rise to the number of matches".into(),
        ));
    }
    let mut given_pieces = given.values().flat_map(|parts| parts.values());
    if given_pieces.any(|piece| std::str::from_utf8(piece).is_err()) {
        return Err(CoreError::NotUtf8("a message's pieces must be UTF-8"));
    }
    Ok(())
}

/// The tokens' places of each text with spans to explain: given (a text the reference reads),
/// or read here from an ASCII text.
fn tokens_of(
    positions: &[Option<Positions>],
    texts: &[PyBackedStr],
    mut given: FxHashMap<u32, Vec<(u32, u32)>>,
) -> Vec<Option<Vec<(u32, u32)>>> {
    positions
        .iter()
        .enumerate()
        .map(|(k, placed)| {
            placed.as_ref()?;
            let given = given.remove(&(k as u32));
            given.or_else(|| texts[k].is_ascii().then(|| token_spans(&texts[k])))
        })
        .collect()
}

/// The written messages as Python takes them: (group, body, webhook-id, matches, subscriptions'
/// ids, their counts).
fn answered<'py>(
    py: Python<'py>,
    table: &Table,
    written: Vec<Written>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for message in written {
        let subscription_ids: Vec<&str> = message
            .subscription_ids
            .iter()
            .map(|&n| &*table.entries[n as usize].as_ref().expect("written").id)
            .collect();
        out.append((
            message.group,
            PyString::new(py, &message.body),
            message.webhook_id,
            message.matches,
            PyTuple::new(py, subscription_ids)?,
            PyTuple::new(py, message.counts)?,
        ))?;
    }
    Ok(out)
}

/// The batch's publications, each with what is at hand to explain its matches.
fn publications_of<'a>(
    ids: &'a [PyBackedStr],
    texts: &'a [PyBackedStr],
    parts: &'a [Option<Parts>],
    tokens: &'a [Option<Vec<(u32, u32)>>],
) -> Vec<Publication<'a>> {
    ids.iter()
        .zip(texts)
        .enumerate()
        .map(|(k, (id, text))| Publication {
            id,
            text,
            parts: parts.get(k).and_then(Option::as_ref),
            tokens: tokens.get(k).and_then(Option::as_deref),
        })
        .collect()
}
