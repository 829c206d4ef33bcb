//! `wordcast._core.Deliveries` and its option structs: the message writer (`messages::Table`)
//! for Python. The texts are read here (the analyser's positions and the parts of `matched`),
//! the trie's matches sorted and the batch written without the GIL; between the two, the
//! caller decides the matches the table hands back.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyList, PyTuple};
use rustc_hash::FxHashSet;

use crate::analysis::Analyser;
use crate::bindings::readings::{Known, Needs, Readers, Readings};
use crate::error::CoreError;
use crate::messages::{
    BatchView, Chosen, Delivery, Message, Parts, Publication, Shape, Table, Written, NO_GROUP,
};
use crate::spans::{RuleIn, SpanRule};

/// The messages, and how many matches they hold.
type Answer<'py> = (Bound<'py, PyList>, usize);

/// What writing a batch's matches needs of each trie number, by columns (an option struct for
/// `Deliveries.set_many`, keyword-only): the subscription's id, its terms, the groups its
/// messages go in (``None`` for none), the audience it meets, whether its matches are decided
/// here (``plain``) or handed back, and (``spans``, for an alternative held back) the phrases
/// and windows that must hold, and those that must not, as ``([(term, offset), …], near,
/// name)``: a candidate breaking them is dropped, one keeping them written here; ``tags``: each
/// subscription's tag ("" for none); ``delivered_ids``: the id each is delivered under, a
/// prefix of its stored id (an alternative's query's; "" for the stored id itself);
/// ``incarnations``: each one's record's ``created``, which its counters are kept for (0: not
/// known), handed back with each message's subscriptions.
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
    delivered_ids: Option<Vec<String>>,
    incarnations: Option<Vec<f64>>,
}

#[pymethods]
impl DeliveryColumns {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, numbers, ids, terms, groups, audiences, plain, spans=None, tags=None, delivered_ids=None, incarnations=None))]
    fn new(
        numbers: Vec<u32>,
        ids: Vec<String>,
        terms: Vec<Vec<String>>,
        groups: Vec<(Option<u32>, Option<u32>)>,
        audiences: Vec<u32>,
        plain: Vec<bool>,
        spans: Option<Vec<Option<RuleIn>>>,
        tags: Option<Vec<String>>,
        delivered_ids: Option<Vec<String>>,
        incarnations: Option<Vec<f64>>,
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
            delivered_ids,
            incarnations,
        }
    }

    fn __len__(&self) -> usize {
        self.numbers.len()
    }
}

/// A batch's messages: their payload version (1 or 2) and whether they hold a backfill's
/// matches, the publisher and stream they name (and their webhook-ids hash), their bounds (full
/// at ``most`` matches, ``max_bytes`` bytes or ``most_subscriptions`` subscriptions), and
/// ``explain``: each match with its ``matched`` (an option struct for `Deliveries.write`,
/// keyword-only).
#[pyclass(module = "wordcast._core", frozen)]
pub struct MessageShape {
    shape: Shape,
}

#[pymethods]
impl MessageShape {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, version, publisher, stream, most, max_bytes, most_subscriptions, explain, backfill=false))]
    fn new(
        version: u8,
        publisher: String,
        stream: String,
        most: usize,
        max_bytes: i64,
        most_subscriptions: usize,
        explain: bool,
        backfill: bool,
    ) -> PyResult<Self> {
        if !(1..=2).contains(&version) {
            return Err(CoreError::Invalid(format!("payload version {version}: 1 or 2")).into());
        }
        let shape = Shape {
            version,
            backfill,
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

/// The matches the caller decided, by columns (an option struct, keyword-only, that
/// `Deliveries.write`'s ``decide`` returns): each one's stored id and the id it is delivered
/// under, its tag ("" for none), its groups (as ``DeliveryColumns``), the position of its
/// publication in the batch, the JSON of its ``matched`` (used when explaining), and, for a
/// payload of version 1, how it was written: ``("query", text)`` or ``("pattern", text)``;
/// ``incarnations``: as ``DeliveryColumns``'.
#[pyclass(module = "wordcast._core")]
#[derive(Default)]
pub struct ChosenMatches {
    ids: Vec<String>,
    delivered_ids: Vec<String>,
    tags: Vec<String>,
    groups: Vec<(Option<u32>, Option<u32>)>,
    positions: Vec<u32>,
    matched: Vec<Vec<u8>>,
    written: Option<Vec<(String, String)>>,
    incarnations: Option<Vec<f64>>,
}

#[pymethods]
impl ChosenMatches {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, ids, delivered_ids, tags, groups, positions, matched, written=None, incarnations=None))]
    fn new(
        ids: Vec<String>,
        delivered_ids: Vec<String>,
        tags: Vec<String>,
        groups: Vec<(Option<u32>, Option<u32>)>,
        positions: Vec<u32>,
        matched: Vec<Vec<u8>>,
        written: Option<Vec<(String, String)>>,
        incarnations: Option<Vec<f64>>,
    ) -> Self {
        ChosenMatches {
            ids,
            delivered_ids,
            tags,
            groups,
            positions,
            matched,
            written,
            incarnations,
        }
    }

    fn __len__(&self) -> usize {
        self.ids.len()
    }
}

impl ChosenMatches {
    /// Uneven columns, positions past a batch of `publications`, or `matched` not UTF-8.
    fn check(&self, publications: usize) -> Result<(), CoreError> {
        let n = self.ids.len();
        let lengths = [
            self.delivered_ids.len(),
            self.tags.len(),
            self.groups.len(),
            self.positions.len(),
            self.matched.len(),
            self.written.as_ref().map_or(n, Vec::len),
            self.incarnations.as_ref().map_or(n, Vec::len),
        ];
        if lengths.iter().any(|&len| len != n) {
            return Err(CoreError::Uneven(
                "as many of each chosen match's columns, please",
            ));
        }
        if self.positions.iter().any(|&p| p as usize >= publications) {
            return Err(CoreError::Invalid(
                "a chosen match's position is past the batch".into(),
            ));
        }
        if self
            .matched
            .iter()
            .any(|json| std::str::from_utf8(json).is_err())
        {
            return Err(CoreError::NotUtf8("a match's matched must be UTF-8"));
        }
        Ok(())
    }

    /// The matches as the writer takes them, checked against a batch of `publications`; the
    /// columns are left empty.
    fn take(&mut self, publications: usize) -> Result<Vec<Chosen>, CoreError> {
        self.check(publications)?;
        let ChosenMatches {
            ids,
            delivered_ids,
            tags,
            groups,
            positions,
            matched,
            written,
            incarnations,
        } = std::mem::take(self);
        let mut written = written.map(|w| w.into_iter().map(Some).collect::<Vec<_>>());
        let columns = ids.into_iter().zip(delivered_ids).zip(tags).zip(matched);
        let mut chosen = Vec::with_capacity(positions.len());
        for (k, (((id, delivered), tag), matched)) in columns.enumerate() {
            let (first, second) = groups[k];
            let how = written.as_mut().and_then(|w| w[k].take()).map(written_as);
            chosen.push(Chosen {
                id: id.into(),
                delivered: delivered.into(),
                tag: (!tag.is_empty()).then(|| tag.into()),
                groups: [first.unwrap_or(NO_GROUP), second.unwrap_or(NO_GROUP)],
                position: positions[k],
                matched: matched.into(),
                written: how.transpose()?,
                incarnation: incarnations.as_ref().map_or(0.0, |given| given[k]),
            });
        }
        Ok(chosen)
    }
}

/// ``("query", text)`` or ``("pattern", text)`` as the writer takes it.
fn written_as((kind, text): (String, String)) -> Result<Written, CoreError> {
    match kind.as_str() {
        "query" => Ok(Written::Query(text.into())),
        "pattern" => Ok(Written::Pattern(text.into())),
        _ => Err(CoreError::Invalid(format!(
            "{kind:?}: a match is a query's or a pattern's"
        ))),
    }
}

/// The one writer of a matcher's messages: see the module.
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
            delivered_ids,
            incarnations,
        } = std::mem::take(&mut *columns.borrow_mut());
        let n = numbers.len();
        let incarnations = incarnations.unwrap_or_else(|| vec![0.0; n]);
        let mut spans = spans.unwrap_or_else(|| (0..n).map(|_| None).collect());
        let tags = tags.unwrap_or_else(|| vec![String::new(); n]);
        let delivered_ids = delivered_ids.unwrap_or_else(|| vec![String::new(); n]);
        let lengths = [
            ids.len(),
            terms.len(),
            groups.len(),
            audiences.len(),
            plain.len(),
            spans.len(),
            tags.len(),
            delivered_ids.len(),
            incarnations.len(),
        ];
        check_entries(&numbers, &groups, &lengths)?;
        let delivered = delivered_lengths(&ids, &delivered_ids)?;
        for (k, number) in numbers.into_iter().enumerate() {
            let terms: Box<[u32]> = terms[k].iter().map(|t| self.table.term_number(t)).collect();
            let (first, second) = groups[k];
            let rule = spans[k].take().map(|given| self.table.span_rule(given));
            let entry = Delivery {
                id: ids[k].as_str().into(),
                delivered: delivered[k],
                tag: (!tags[k].is_empty()).then(|| tags[k].as_str().into()),
                terms,
                groups: [first.unwrap_or(NO_GROUP), second.unwrap_or(NO_GROUP)],
                audience: audiences[k],
                plain: plain[k] && rule.is_none(),
                spans: rule,
                incarnation: incarnations[k],
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

    /// The messages of a batch: of the trie's flat answer (``match_many_flat``: ``numbers``
    /// and ``offsets``, empty when the trie is not the index) for the audience ``wanted``, and
    /// of the matches ``decide`` chooses, given the (number, position) of the trie's matches
    /// the table hands back and the batch's [`Readings`] ([`ChosenMatches`], or None for
    /// none). Returns a list of (group, body, webhook-id, matches, subscription ids, each one's
    /// matches, each one's incarnation), and how many matches the messages hold (a match
    /// delivered both to a webhook and to the match stream counted once). ``shape``: the
    /// payload's version and the messages' bounds ([`MessageShape`]). Each text is read once:
    /// by ``analyser``, or by ``reference`` (called with a list of positions, it returns
    /// ``{position: ({term: b'"term":[…]'}, {term: [position, …]}, [(start, end), …])}``) for
    /// those ``left`` to it (a language with a stemmer of its own), those holding a code point
    /// the analyser's tables cannot vouch for, and every text without ``analyser``.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (numbers, offsets, wanted, ids, texts, shape, *, analyser=None, left=None, reference=None, decide=None, terms=None))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        numbers: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
        wanted: u32,
        ids: Vec<PyBackedStr>,
        texts: Vec<PyBackedStr>,
        shape: &Bound<'py, MessageShape>,
        analyser: Option<&Bound<'py, Analyser>>,
        left: Option<Vec<u32>>,
        reference: Option<&Bound<'py, PyAny>>,
        decide: Option<&Bound<'py, PyAny>>,
        terms: Option<Vec<Vec<PyBackedStr>>>,
    ) -> PyResult<Answer<'py>> {
        let numbers: Vec<u32> = PyBuffer::<u32>::get(numbers)?.to_vec(py)?;
        let offsets: Vec<u32> = PyBuffer::<u32>::get(offsets)?.to_vec(py)?;
        check_batch(&numbers, &offsets, ids.len(), texts.len())?;
        let shape = &shape.get().shape;
        let left: FxHashSet<u32> = left.unwrap_or_default().into_iter().collect();
        let readers = Readers {
            texts: &texts,
            analyser,
            left: &left,
            reference,
        };
        let needs = self.needs(&numbers, &offsets, shape.explain);
        let Known {
            parts,
            placed,
            tokens,
            readings,
        } = readers.read(py, &needs, &self.table)?;
        let tokens = if shape.explain { tokens } else { Vec::new() };
        let publications = publications_of(&ids, &texts, &parts, &tokens);
        let table = &self.table;
        let terms: Option<Vec<Vec<&str>>> = terms.as_ref().map(|all| {
            all.iter()
                .map(|one| one.iter().map(|t| &**t).collect())
                .collect()
        });
        let batch = BatchView {
            publications: &publications,
            placed: &placed,
            shape,
            terms: terms.as_deref(),
        };
        let sorted = py.detach(|| table.sort(&numbers, &offsets, wanted, &batch));
        let chosen = match decide {
            Some(decide) => {
                let readings = Bound::new(py, Readings::new(py, &readers, readings))?;
                chosen_by(decide, &sorted.others, &readings, texts.len())?
            }
            None => Vec::new(),
        };
        let (written, count) = py.detach(|| table.write(sorted, &chosen, &batch));
        Ok((answered(py, written)?, count))
    }
}

/// What `decide` chooses among the trie's matches handed back (and beside them).
fn chosen_by(
    decide: &Bound<'_, PyAny>,
    others: &[(u32, u32)],
    readings: &Bound<'_, Readings>,
    publications: usize,
) -> PyResult<Vec<Chosen>> {
    let answer = decide.call1((others.to_vec(), readings))?;
    if answer.is_none() {
        return Ok(Vec::new());
    }
    let chosen = answer.cast::<ChosenMatches>().map_err(PyErr::from)?;
    Ok(chosen.borrow_mut().take(publications)?)
}

/// Each id's delivered length: the length of its delivered id, a prefix of it ("": all of it).
fn delivered_lengths(ids: &[String], delivered: &[String]) -> Result<Vec<u32>, CoreError> {
    ids.iter()
        .zip(delivered)
        .map(|(id, delivered)| {
            if delivered.is_empty() {
                Ok(id.len() as u32)
            } else if id.starts_with(delivered.as_str()) {
                Ok(delivered.len() as u32)
            } else {
                Err(CoreError::Invalid(format!(
                    "{delivered:?} does not begin {id:?}"
                )))
            }
        })
        .collect()
}

impl Deliveries {
    /// Which publications the writer must read, and for what: to explain a plain match (or
    /// one whose spans it checks), and to check a candidate's phrases and windows.
    fn needs(&self, numbers: &[u32], offsets: &[u32], explain: bool) -> Needs {
        let n = offsets.len().saturating_sub(1);
        let mut needs = Needs {
            parts: vec![false; n],
            placed: vec![false; n],
        };
        for (position, run) in offsets.windows(2).enumerate() {
            for &number in &numbers[run[0] as usize..run[1] as usize] {
                if let Some(entry) = self.table.entry(number) {
                    let rule = entry.spans.as_deref();
                    needs.parts[position] |= explain && (entry.plain || rule.is_some());
                    needs.placed[position] |= rule.is_some_and(SpanRule::has_spans);
                }
            }
        }
        needs
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

/// Uneven columns, or offsets that do not rise to the matches, given to `Deliveries.write`.
fn check_batch(
    numbers: &[u32],
    offsets: &[u32],
    ids: usize,
    texts: usize,
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
    Ok(())
}

/// The written messages as Python takes them: (group, body, webhook-id, matches, subscriptions'
/// ids, their counts, their incarnations).
fn answered(py: Python<'_>, written: Vec<Message>) -> PyResult<Bound<'_, PyList>> {
    let out = PyList::empty(py);
    for message in written {
        out.append((
            message.group,
            PyBytes::new(py, &message.body),
            message.webhook_id,
            message.matches,
            PyTuple::new(py, message.subscription_ids)?,
            PyTuple::new(py, message.counts)?,
            PyTuple::new(py, message.incarnations)?,
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
