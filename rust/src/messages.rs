//! A routed batch's matches written as finished webhook messages (payload version 2), compiled.
//!
//! The reference is `wordcast.services.matcher.messages.messages`, which the tests hold this
//! byte-for-byte equal to: the same messages, in the same order, the same bodies and webhook-ids.
//! What is compiled is the common case, a plain conjunction in the compact trie: a match of any
//! other kind (an alternative of a boolean query, a subscription whose placements restrict it)
//! is handed back to the reference, as are patterns and hot words, which the trie does not hold.
//!
//! [`Deliveries`] knows, for each number of the compact trie, what writing one of its matches
//! needs: the subscription's id, the messages it goes in (a webhook endpoint, a tenant's match
//! stream, or both), whose publications it meets, and its terms for `matched`. A batch then costs
//! no Python object per match: the trie's flat answer goes in, message bodies come out.

use std::fmt::Write as _;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyList, PyString, PyTuple};
use rustc_hash::{FxHashMap, FxHashSet};
use sha2::{Digest, Sha256};

use crate::analysis::{Analyser, Positions};
use crate::error::CoreError;

/// A subscription's messages: up to two (a webhook endpoint's and its tenant's match stream's).
const NO_GROUP: u32 = u32::MAX;

/// What a match of one trie number needs to be written.
struct Delivery {
    id: Box<str>,
    tag: Option<Box<str>>, // the subscriber's label, echoed in each match
    terms: Box<[u32]>,     // numbers in `Table::terms`, in the subscription's order
    groups: [u32; 2],
    audience: u32,
    plain: bool, // written here; otherwise handed back to the reference
    // An alternative whose only condition is its phrases and proximity windows: a candidate
    // whose text breaks them is dropped here, the others handed back.
    spans: Option<Box<SpanRule>>,
}

/// A span as Python gives it: ([(term, offset)], near, as the query writes it).
type SpanIn = (Vec<(String, i64)>, u32, String);
/// A span rule as Python gives it: (spans, not_spans, the start of its `matched`).
type RuleIn = (Vec<SpanIn>, Vec<SpanIn>, Vec<u8>);

/// A phrase (`near` 0: each term at its offset from the first) or a proximity window (`near`
/// ≥ 1: every term within `near` positions), as `wordcast.query.spans.Span`.
struct Span {
    terms: Vec<(u32, i64)>, // numbers in `Table::terms`
    near: u32,
    name: Box<str>, // as `matched` names it: str(span)
}

/// Every span of `spans` holds and none of `not_spans` (`Clause.spans_hold`); `head` is the
/// start of a match's `matched` (`"alternative":k,"clause":"…",`).
struct SpanRule {
    spans: Vec<Span>,
    not_spans: Vec<Span>,
    head: Box<[u8]>,
}

impl SpanRule {
    fn holds(&self, positions: &Positions) -> bool {
        self.spans.iter().all(|span| span.holds(positions))
            && !self.not_spans.iter().any(|span| span.holds(positions))
    }
}

impl Span {
    fn holds(&self, positions: &Positions) -> bool {
        if self.near > 0 {
            if let [(a, _), (b, _)] = self.terms[..] {
                if a != b {
                    // Two terms: some pair of their occurrences near enough, found by walking
                    // both (sorted) lists once, with no window built.
                    let (Some(a), Some(b)) = (positions.get(&a), positions.get(&b)) else {
                        return false;
                    };
                    let (mut i, mut j) = (0, 0);
                    while i < a.len() && j < b.len() {
                        if a[i].abs_diff(b[j]) <= self.near {
                            return true;
                        }
                        if a[i] < b[j] {
                            i += 1;
                        } else {
                            j += 1;
                        }
                    }
                    return false;
                }
            }
        }
        let mut held = false;
        self.places(positions, |_, _| {
            held = true;
            true
        });
        held
    }

    /// Call `found(first, last)` with each place the span holds (each phrase occurrence, or
    /// each smallest window holding every term: `Span._places`) until it returns true.
    fn places(&self, positions: &Positions, mut found: impl FnMut(u32, u32) -> bool) {
        let Some((first, start)) = self.terms.first() else {
            return;
        };
        if self.near == 0 {
            let Some(firsts) = positions.get(first) else {
                return;
            };
            let mut others = Vec::with_capacity(self.terms.len() - 1);
            for (term, offset) in &self.terms[1..] {
                match positions.get(term) {
                    Some(places) => others.push((places, offset - start)),
                    None => return,
                }
            }
            let length = self.terms.iter().map(|(_, o)| o - start).max().unwrap_or(0);
            for &at in firsts {
                let all = others.iter().all(|(places, shift)| {
                    u32::try_from(i64::from(at) + shift)
                        .is_ok_and(|want| places.binary_search(&want).is_ok())
                });
                if all && found(at, (i64::from(at) + length) as u32) {
                    return;
                }
            }
            return;
        }
        let mut distinct: Vec<u32> = self.terms.iter().map(|&(term, _)| term).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let mut occurrences: Vec<(u32, usize)> = Vec::new();
        for (k, term) in distinct.iter().enumerate() {
            match positions.get(term) {
                Some(places) => occurrences.extend(places.iter().map(|&at| (at, k))),
                None => return,
            }
        }
        // By position (two terms never share one).
        occurrences.sort_unstable();
        let mut held = vec![0u32; distinct.len()];
        let (mut holding, mut left) = (0, 0);
        for &(at, k) in &occurrences {
            held[k] += 1;
            if held[k] == 1 {
                holding += 1;
            }
            while holding == distinct.len() {
                let (first_at, first_k) = occurrences[left];
                if at - first_at <= self.near && found(first_at, at) {
                    return;
                }
                held[first_k] -= 1;
                if held[first_k] == 0 {
                    holding -= 1;
                }
                left += 1;
            }
        }
    }
}

/// The [start, end) of each normalised token of an ASCII text, in order: where each position
/// of [`Positions`] was read from (`AnalysedText.offsets`).
fn token_spans(text: &str) -> Vec<(u32, u32)> {
    crate::analysis::ascii_runs(text.as_bytes())
        .map(|(start, end)| (start as u32, end as u32))
        .collect()
}

/// Trie number -> its delivery, and the terms they name.
#[derive(Default)]
struct Table {
    entries: Vec<Option<Delivery>>,
    terms: Vec<Box<str>>,
    term_numbers: FxHashMap<Box<str>, u32>,
}

/// What a message looks like around its matches, and its bounds (the reference's `_Frame` and
/// `messages`'s arguments).
struct Shape {
    head: Vec<u8>,
    between: Vec<u8>,
    tail: Vec<u8>,
    publisher: String,
    stream: String,
    most: usize,
    max_bytes: i64,
    signers: usize,
    explain: bool,
}

/// One message: the group it is for (an endpoint of a tenant), its body, its webhook-id, how
/// many matches it holds, the ids of the subscriptions it holds matches for, and how many
/// each.
struct Written {
    group: u32,
    body: String,
    webhook_id: String,
    matches: usize,
    signers: Vec<u32>,
    counts: Vec<u32>,
}

/// A publication's terms' parts of `matched`: term -> `"term":[[start,end],…]`.
type Parts = FxHashMap<String, Vec<u8>>;

/// A message per group, the (number, position) of the matches handed back, and how many
/// matches were written.
type Answer<'py> = (Bound<'py, PyList>, Vec<(u32, u32)>, usize);

/// A publication's JSON (`{"id":…,"text":…}`), its terms' parts of `matched`, and where each
/// of its tokens was read from (for an alternative's spans: `AnalysedText.offsets`).
struct Publication<'a> {
    id: &'a str,
    text: &'a str,
    parts: Option<&'a Parts>,
    tokens: Option<&'a [(u32, u32)]>,
}

/// A batch as the writer reads it: its publications, the positions of their terms (for
/// restricted placements), and the messages' shape.
struct BatchView<'a> {
    publications: &'a [Publication<'a>],
    placed: &'a [Option<Positions>],
    shape: &'a Shape,
}

impl BatchView<'_> {
    /// Whether the offsets a match's `matched` needs (its terms' parts and its tokens' places)
    /// are at hand for the publication at `position`.
    fn offsets_at_hand(&self, position: u32) -> bool {
        let publication = &self.publications[position as usize];
        publication.parts.is_some() && publication.tokens.is_some()
    }
}

/// A batch's matches sorted out: the positions of each subscription written here (in the
/// order they first match), those handed back, and how many are written here.
#[derive(Default)]
struct SortedMatches {
    order: Vec<u32>,
    positions: FxHashMap<u32, Vec<u32>>,
    others: Vec<(u32, u32)>,
    plain: usize,
}

impl SortedMatches {
    fn write_here(&mut self, number: u32, position: u32) {
        self.plain += 1;
        let order = &mut self.order;
        self.positions
            .entry(number)
            .or_insert_with(|| {
                order.push(number);
                Vec::new()
            })
            .push(position);
    }
}

/// A match's JSON before its publication's place: its subscription's id and tag.
fn match_head(entry: &Delivery, head: &mut Vec<u8>) {
    head.clear();
    head.extend_from_slice(b"{\"subscription_id\":");
    json_string(head, &entry.id);
    if let Some(tag) = &entry.tag {
        head.extend_from_slice(b",\"tag\":");
        json_string(head, tag);
    }
    head.extend_from_slice(b",\"publication\":");
}

fn json_string(out: &mut Vec<u8>, text: &str) {
    // orjson's escaping, which serde_json shares: \" \\ \b \t \n \f \r, other controls as
    // lowercase \u00XX, everything else as it is.
    serde_json::to_writer(&mut *out, text).expect("writing a str to a Vec cannot fail");
}

fn digits(value: usize) -> usize {
    value.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The matches of one message as they are gathered (the reference's `_Chunk`).
#[derive(Default)]
struct Chunk {
    publications: Vec<u8>,
    matches: Vec<u8>,
    places: FxHashMap<u32, usize>,
    pairs: Vec<(u32, u32)>, // (trie number, position)
    signers: FxHashSet<u32>,
    signer_order: Vec<u32>,
    size: i64,
}

impl Table {
    fn term_number(&mut self, term: &str) -> u32 {
        if let Some(&number) = self.term_numbers.get(term) {
            return number;
        }
        let number = self.terms.len() as u32;
        self.terms.push(term.into());
        self.term_numbers.insert(term.into(), number);
        number
    }

    /// A span rule as Python gives it, its terms numbered.
    fn span_rule(&mut self, (spans, not_spans, head): RuleIn) -> Box<SpanRule> {
        let mut read = |given: Vec<SpanIn>| -> Vec<Span> {
            given
                .into_iter()
                .map(|(terms, near, name)| Span {
                    terms: terms
                        .into_iter()
                        .map(|(t, o)| (self.term_number(&t), o))
                        .collect(),
                    near,
                    name: name.into(),
                })
                .collect()
        };
        Box::new(SpanRule {
            spans: read(spans),
            not_spans: read(not_spans),
            head: head.into(),
        })
    }

    fn entry(&self, number: u32) -> Option<&Delivery> {
        self.entries.get(number as usize).and_then(Option::as_ref)
    }

    fn id_of(&self, number: u32) -> &str {
        self.entry(number).map_or("", |entry| &entry.id)
    }

    /// The messages of the plain matches among the trie's flat answer, and the (number,
    /// position) of every other match for the audience `wanted`, in the trie's order.
    fn write(
        &self,
        numbers: &[u32],
        offsets: &[u32],
        wanted: u32,
        batch: &BatchView<'_>,
    ) -> (Vec<Written>, Vec<(u32, u32)>, usize) {
        let sorted = self.sort_matches(numbers, offsets, wanted, batch);
        let mut encoded: Vec<Option<Vec<u8>>> = vec![None; batch.publications.len()];
        let mut written = Vec::new();
        for (group, members) in self.groups_of(&sorted.order) {
            self.write_group(
                group,
                &members,
                &sorted.positions,
                batch,
                &mut encoded,
                &mut written,
            );
        }
        (written, sorted.others, sorted.plain)
    }

    /// Each match for the audience `wanted`: written here (its subscription's positions, the
    /// subscriptions in the order they first match) or handed back to the reference.
    fn sort_matches(
        &self,
        numbers: &[u32],
        offsets: &[u32],
        wanted: u32,
        batch: &BatchView<'_>,
    ) -> SortedMatches {
        let mut sorted = SortedMatches::default();
        for (position, run) in offsets.windows(2).enumerate() {
            let position = position as u32;
            for &number in &numbers[run[0] as usize..run[1] as usize] {
                match self.entry(number) {
                    Some(entry) if entry.audience != wanted => {}
                    Some(entry) if entry.plain => sorted.write_here(number, position),
                    Some(Delivery {
                        spans: Some(rule), ..
                    }) => match batch.placed.get(position as usize).and_then(Option::as_ref) {
                        // A text the tables cannot vouch for goes to the reference whole.
                        None => sorted.others.push((number, position)),
                        Some(held) if !rule.holds(held) => {}
                        // Explained here only where the offsets are at hand (the terms' parts
                        // and the tokens' places): the reference explains the others.
                        Some(_) if batch.shape.explain && !batch.offsets_at_hand(position) => {
                            sorted.others.push((number, position))
                        }
                        Some(_) => sorted.write_here(number, position),
                    },
                    _ => sorted.others.push((number, position)),
                }
            }
        }
        sorted
    }

    /// The message groups of the subscriptions in `order`, each group's subscriptions by id:
    /// which matches share a message (and so its webhook-id) must not follow the order the
    /// subscriptions were loaded in.
    fn groups_of(&self, order: &[u32]) -> Vec<(u32, Vec<u32>)> {
        let mut group_order: Vec<u32> = Vec::new();
        let mut groups: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for &number in order {
            let entry = self.entries[number as usize]
                .as_ref()
                .unwrap_or_else(|| unreachable!("only numbers with an entry are in the order"));
            for &group in entry.groups.iter().filter(|&&group| group != NO_GROUP) {
                groups
                    .entry(group)
                    .or_insert_with(|| {
                        group_order.push(group);
                        Vec::new()
                    })
                    .push(number);
            }
        }
        group_order
            .into_iter()
            .map(|group| {
                let mut members = groups.remove(&group).unwrap_or_default();
                members.sort_by(|a, b| self.id_of(*a).cmp(self.id_of(*b)).then(a.cmp(b)));
                (group, members)
            })
            .collect()
    }

    /// The messages of one group: its subscriptions' matches, a message full at `most`
    /// matches, `signers` subscriptions or `max_bytes` bytes.
    fn write_group(
        &self,
        group: u32,
        members: &[u32],
        positions: &FxHashMap<u32, Vec<u32>>,
        batch: &BatchView<'_>,
        encoded: &mut [Option<Vec<u8>>],
        written: &mut Vec<Written>,
    ) {
        let shape = batch.shape;
        let frame_size = (shape.head.len() + shape.between.len() + shape.tail.len()) as i64;
        let room = shape.max_bytes - frame_size;
        let (mut head, mut rest) = (Vec::new(), Vec::new());
        let mut chunk = Chunk::default();
        for &number in members {
            let entry = self.entries[number as usize]
                .as_ref()
                .expect("in the order");
            match_head(entry, &mut head);
            for &position in &positions[&number] {
                let publication = &batch.publications[position as usize];
                let held = batch.placed.get(position as usize).and_then(Option::as_ref);
                self.rest_of(entry, publication, held, shape, &mut rest);
                let publication =
                    encoded[position as usize].get_or_insert_with(|| publication_json(publication));
                let cost = chunk.cost(position, publication, &head, &rest);
                if !chunk.pairs.is_empty()
                    && (chunk.pairs.len() >= shape.most
                        || (!chunk.signers.contains(&number)
                            && chunk.signers.len() >= shape.signers)
                        || chunk.size + cost > room)
                {
                    let full = std::mem::take(&mut chunk);
                    written.push(self.message(full, group, batch.publications, shape));
                }
                chunk.add(number, position, publication, &head, &rest);
            }
        }
        if !chunk.pairs.is_empty() {
            written.push(self.message(chunk, group, batch.publications, shape));
        }
    }

    /// What follows a match's publication place: its `matched` (if explained) and its end.
    fn rest_of(
        &self,
        entry: &Delivery,
        publication: &Publication<'_>,
        held: Option<&Positions>,
        shape: &Shape,
        out: &mut Vec<u8>,
    ) {
        out.clear();
        if shape.explain {
            out.extend_from_slice(b",\"matched\":{");
            if let Some(rule) = &entry.spans {
                out.extend_from_slice(&rule.head);
            }
            out.extend_from_slice(b"\"terms\":{");
            for (k, &term) in entry.terms.iter().enumerate() {
                if k > 0 {
                    out.push(b',');
                }
                let term = &self.terms[term as usize];
                match publication.parts.and_then(|parts| parts.get(&**term)) {
                    Some(part) => out.extend_from_slice(part),
                    None => {
                        // A term the text does not hold (a filter's): no offsets.
                        json_string(out, term);
                        out.extend_from_slice(b":[]");
                    }
                }
            }
            out.push(b'}');
            if let (Some(rule), Some(held), Some(tokens)) = (&entry.spans, held, publication.tokens)
            {
                if !rule.spans.is_empty() {
                    spans_json(rule, held, tokens, out);
                }
            }
            out.push(b'}');
        }
        out.push(b'}');
    }

    fn message(
        &self,
        chunk: Chunk,
        group: u32,
        publications: &[Publication<'_>],
        shape: &Shape,
    ) -> Written {
        let mut body = Vec::with_capacity(
            chunk.size as usize + shape.head.len() + shape.between.len() + shape.tail.len(),
        );
        body.extend_from_slice(&shape.head);
        body.extend_from_slice(&chunk.publications);
        body.extend_from_slice(&shape.between);
        body.extend_from_slice(&chunk.matches);
        body.extend_from_slice(&shape.tail);
        let place: FxHashMap<u32, usize> = chunk
            .signer_order
            .iter()
            .enumerate()
            .map(|(k, &number)| (number, k))
            .collect();
        let mut counts = vec![0u32; chunk.signer_order.len()];
        for (number, _) in &chunk.pairs {
            counts[place[number]] += 1;
        }
        let mut pairs: Vec<(&str, &str)> = chunk
            .pairs
            .iter()
            .map(|&(number, position)| {
                let id = &self.entries[number as usize].as_ref().expect("written").id;
                (&**id, publications[position as usize].id)
            })
            .collect();
        pairs.sort_unstable();
        let hashed = serde_json::to_vec(&(&shape.publisher, &shape.stream, &pairs))
            .expect("strings always encode");
        let digest = Sha256::digest(&hashed);
        let mut webhook_id = String::with_capacity(36);
        webhook_id.push_str("msg_");
        for byte in &digest[..16] {
            let _ = write!(webhook_id, "{byte:02x}");
        }
        Written {
            group,
            // Every piece is UTF-8: JSON written from str, or the caller's pieces, checked when
            // they were taken; the lossy branch is never taken.
            body: String::from_utf8(body)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            webhook_id,
            matches: chunk.pairs.len(),
            signers: chunk.signer_order,
            counts,
        }
    }
}

/// `,"spans":{name:[[start,end],…],…}`: where each span of an alternative holds in the text
/// (`explain_clause`'s `spans`).
fn spans_json(rule: &SpanRule, held: &Positions, tokens: &[(u32, u32)], out: &mut Vec<u8>) {
    out.extend_from_slice(b",\"spans\":{");
    for (k, span) in rule.spans.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        json_string(out, &span.name);
        out.extend_from_slice(b":[");
        let mut first_place = true;
        span.places(held, |first, last| {
            let start = tokens.get(first as usize).map_or(0, |t| t.0);
            let end = tokens.get(last as usize).map_or(0, |t| t.1);
            if !first_place {
                out.push(b',');
            }
            first_place = false;
            let _ = write!(PushDigits(out), "[{start},{end}]");
            false
        });
        out.push(b']');
    }
    out.push(b'}');
}

fn publication_json(publication: &Publication<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(publication.text.len() + publication.id.len() + 20);
    out.extend_from_slice(b"{\"id\":");
    json_string(&mut out, publication.id);
    out.extend_from_slice(b",\"text\":");
    json_string(&mut out, publication.text);
    out.push(b'}');
    out
}

impl Chunk {
    /// The bytes a match adds to the message (with its publication, if new to it).
    fn cost(&self, position: u32, publication: &[u8], head: &[u8], rest: &[u8]) -> i64 {
        (match self.places.get(&position) {
            Some(&place) => head.len() + digits(place) + rest.len() + 1,
            None => head.len() + rest.len() + 1 + digits(self.places.len()) + publication.len() + 1,
        }) as i64
    }

    fn add(&mut self, number: u32, position: u32, publication: &[u8], head: &[u8], rest: &[u8]) {
        let place = match self.places.get(&position) {
            Some(&place) => place,
            None => {
                let place = self.places.len();
                self.places.insert(position, place);
                if place > 0 {
                    self.publications.push(b',');
                }
                self.publications.extend_from_slice(publication);
                self.size += publication.len() as i64 + 1;
                place
            }
        };
        if !self.pairs.is_empty() {
            self.matches.push(b',');
        }
        let before = self.matches.len();
        self.matches.extend_from_slice(head);
        let _ = write!(PushDigits(&mut self.matches), "{place}");
        self.matches.extend_from_slice(rest);
        self.size += (self.matches.len() - before) as i64 + 1;
        self.pairs.push((number, position));
        if self.signers.insert(number) {
            self.signer_order.push(number);
        }
    }
}

/// `write!` into a byte buffer.
struct PushDigits<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for PushDigits<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

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
/// webhook-ids name, and a message full at ``most`` matches, ``max_bytes`` bytes or ``signers``
/// subscriptions; ``explain``: each match with its ``matched``.
#[pyclass(module = "wordcast._core", frozen)]
pub struct MessageShape {
    shape: Shape,
}

#[pymethods]
impl MessageShape {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, head, between, tail, publisher, stream, most, max_bytes, signers, explain))]
    fn new(
        head: Vec<u8>,
        between: Vec<u8>,
        tail: Vec<u8>,
        publisher: String,
        stream: String,
        most: usize,
        max_bytes: i64,
        signers: usize,
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
            signers: signers.max(1),
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

/// The written messages as Python takes them: (group, body, webhook-id, matches, signers'
/// ids, their counts).
fn answered<'py>(
    py: Python<'py>,
    table: &Table,
    written: Vec<Written>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for message in written {
        let signers: Vec<&str> = message
            .signers
            .iter()
            .map(|&n| &*table.entries[n as usize].as_ref().expect("written").id)
            .collect();
        out.append((
            message.group,
            PyString::new(py, &message.body),
            message.webhook_id,
            message.matches,
            PyTuple::new(py, signers)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of plain subscriptions (trie number = index): (id, group, audience, terms).
    fn table(subscriptions: &[(&str, u32, u32, &[&str])]) -> Table {
        let mut table = Table::default();
        for &(id, group, audience, terms) in subscriptions {
            let terms = terms.iter().map(|t| table.term_number(t)).collect();
            table.entries.push(Some(Delivery {
                id: id.into(),
                tag: None,
                terms,
                groups: [group, NO_GROUP],
                audience,
                plain: true,
                spans: None,
            }));
        }
        table
    }

    fn shape(most: usize, explain: bool) -> Shape {
        Shape {
            head: b"{\"p\":[".to_vec(),
            between: b"],\"m\":[".to_vec(),
            tail: b"]}".to_vec(),
            publisher: "acme".into(),
            stream: String::new(),
            most,
            max_bytes: 1 << 20,
            signers: 100,
            explain,
        }
    }

    fn publications<'a>(parts: &'a [Parts]) -> Vec<Publication<'a>> {
        ["p1", "p2"]
            .iter()
            .zip(["white house", "house"])
            .zip(parts)
            .map(|((id, text), parts)| Publication {
                id,
                text,
                parts: Some(parts),
                tokens: None,
            })
            .collect()
    }

    /// The trie's flat answer: sub-b (number 0) in p1 and p2, sub-a (number 1) in p1.
    const NUMBERS: [u32; 3] = [0, 1, 0];
    const OFFSETS: [u32; 3] = [0, 2, 3];

    #[test]
    fn a_group_is_one_message_its_subscriptions_by_id_with_the_references_webhook_id() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let (shape, publications) = (shape(100, false), publications(&parts));
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape: &shape,
        };
        let (written, others, plain) = table.write(&NUMBERS, &OFFSETS, 0, &batch);
        assert_eq!((written.len(), others.len(), plain), (1, 0, 3));
        let message = &written[0];
        assert_eq!(
            message.body,
            concat!(
                r#"{"p":[{"id":"p1","text":"white house"},{"id":"p2","text":"house"}],"m":["#,
                r#"{"subscription_id":"sub-a","publication":0},"#,
                r#"{"subscription_id":"sub-b","publication":0},"#,
                r#"{"subscription_id":"sub-b","publication":1}]}"#
            )
        );
        // wordcast.storage.outbox.webhook_id([("sub-a","p1"),("sub-b","p1"),("sub-b","p2")], "acme")
        assert_eq!(message.webhook_id, "msg_fe2537dfc2549e96c9ec72941d8277d8");
        assert_eq!((message.group, message.matches), (7, 3));
        assert_eq!(
            (message.signers.clone(), message.counts.clone()),
            (vec![1, 0], vec![1, 2])
        );
    }

    #[test]
    fn a_full_message_starts_another_and_each_has_its_own_webhook_id() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let (shape, publications) = (shape(1, false), publications(&parts));
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape: &shape,
        };
        let (written, _, _) = table.write(&NUMBERS, &OFFSETS, 0, &batch);
        let ids: Vec<&str> = written.iter().map(|m| m.webhook_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "msg_78d5b6d970f8637ede096dd69a4d9a5a", // sub-a in p1
                "msg_6ef7b9b2df02adf92ede088913ab2a81", // sub-b in p1
                "msg_1c0bc1ca3da52ea0d514de3fb33eb8f7", // sub-b in p2
            ]
        );
        assert!(written[2]
            .body
            .starts_with(r#"{"p":[{"id":"p2","text":"house"}],"m":["#));
    }

    #[test]
    fn other_audiences_are_left_out_and_matches_not_plain_handed_back() {
        let mut table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 8, 1, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let (shape, publications) = (shape(100, false), publications(&parts));
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape: &shape,
        };
        let (written, others, plain) = table.write(&NUMBERS, &OFFSETS, 0, &batch);
        assert_eq!((written.len(), others, plain), (1, vec![], 2)); // sub-a: audience 1
        table.entries[0].as_mut().unwrap().plain = false;
        let (written, others, plain) = table.write(&NUMBERS, &OFFSETS, 0, &batch);
        assert_eq!((written.len(), others, plain), (0, vec![(0, 0), (0, 1)], 0));
    }

    #[test]
    fn matched_names_each_term_with_its_places_or_none() {
        let table = table(&[("sub-b", 7, 0, &["hous", "lang:en"])]);
        let mut first = Parts::default();
        first.insert("hous".into(), br#""hous":[[6,11]]"#.to_vec());
        let parts = [first, Parts::default()];
        let (shape, publications) = (shape(100, true), publications(&parts));
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape: &shape,
        };
        let (written, _, _) = table.write(&[0], &[0, 1, 1], 0, &batch);
        assert!(written[0].body.ends_with(concat!(
            r#""m":[{"subscription_id":"sub-b","publication":0,"#,
            r#""matched":{"terms":{"hous":[[6,11]],"lang:en":[]}}}]}"#
        )));
    }
}
