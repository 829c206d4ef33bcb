//! A routed batch's matches written as finished webhook messages (payload version 2), compiled.
//!
//! The reference is `wordcast.services.matcher.messages.messages`, which the tests hold this
//! byte-for-byte equal to: the same messages, in the same order, the same bodies and webhook-ids.
//! What is compiled is the common case, a plain conjunction in the compact trie: a match of any
//! other kind (an alternative of a boolean query, a subscription whose placements restrict it)
//! is handed back to the reference, as are patterns and hot words, which the trie does not hold.
//!
//! Pure: no Python here; `bindings::messages` wraps it as `wordcast._core.Deliveries`.
//!
//! `Deliveries` knows, for each number of the compact trie, what writing one of its matches
//! needs: the subscription's id, the messages it goes in (a webhook endpoint, a tenant's match
//! stream, or both), whose publications it meets, and its terms for `matched`. A batch then costs
//! no Python object per match: the trie's flat answer goes in, message bodies come out.

use std::fmt::Write as _;

use rustc_hash::{FxHashMap, FxHashSet};
use sha2::{Digest, Sha256};

use crate::analysis::Positions;

/// A subscription's messages: up to two (a webhook endpoint's and its tenant's match stream's).
pub(crate) const NO_GROUP: u32 = u32::MAX;

/// What a match of one trie number needs to be written.
pub(crate) struct Delivery {
    pub(crate) id: Box<str>,
    pub(crate) tag: Option<Box<str>>, // the subscriber's label, echoed in each match
    pub(crate) terms: Box<[u32]>,     // numbers in `Table::terms`, in the subscription's order
    pub(crate) groups: [u32; 2],
    pub(crate) audience: u32,
    pub(crate) plain: bool, // written here; otherwise handed back to the reference
    // An alternative whose only condition is its phrases and proximity windows: a candidate
    // whose text breaks them is dropped here, the others handed back.
    pub(crate) spans: Option<Box<SpanRule>>,
}

/// A span as Python gives it: ([(term, offset)], near, as the query writes it).
pub(crate) type SpanIn = (Vec<(String, i64)>, u32, String);
/// A span rule as Python gives it: (spans, not_spans, the start of its `matched`).
pub(crate) type RuleIn = (Vec<SpanIn>, Vec<SpanIn>, Vec<u8>);

/// A phrase (`near` 0: each term at its offset from the first) or a proximity window (`near`
/// ≥ 1: every term within `near` positions), as `wordcast.query.spans.Span`.
pub(crate) struct Span {
    terms: Vec<(u32, i64)>, // numbers in `Table::terms`
    near: u32,
    name: Box<str>, // as `matched` names it: str(span)
}

/// Every span of `spans` holds and none of `not_spans` (`Clause.spans_hold`); `head` is the
/// start of a match's `matched` (`"alternative":k,"clause":"…",`).
pub(crate) struct SpanRule {
    pub(crate) spans: Vec<Span>,
    pub(crate) not_spans: Vec<Span>,
    pub(crate) head: Box<[u8]>,
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
pub(crate) fn token_spans(text: &str) -> Vec<(u32, u32)> {
    crate::analysis::ascii_runs(text.as_bytes())
        .map(|(start, end)| (start as u32, end as u32))
        .collect()
}

/// Trie number -> its delivery, and the terms they name.
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) entries: Vec<Option<Delivery>>,
    pub(crate) terms: Vec<Box<str>>,
    pub(crate) term_numbers: FxHashMap<Box<str>, u32>,
}

/// What a message looks like around its matches, and its bounds (the reference's `_Frame` and
/// `messages`'s arguments).
pub(crate) struct Shape {
    pub(crate) head: Vec<u8>,
    pub(crate) between: Vec<u8>,
    pub(crate) tail: Vec<u8>,
    pub(crate) publisher: String,
    pub(crate) stream: String,
    pub(crate) most: usize,
    pub(crate) max_bytes: i64,
    pub(crate) most_subscriptions: usize,
    pub(crate) explain: bool,
}

/// One message: the group it is for (an endpoint of a tenant), its body, its webhook-id, how
/// many matches it holds, the ids of the subscriptions it holds matches for, and how many
/// each.
pub(crate) struct Written {
    pub(crate) group: u32,
    pub(crate) body: String,
    pub(crate) webhook_id: String,
    pub(crate) matches: usize,
    pub(crate) subscription_ids: Vec<u32>,
    pub(crate) counts: Vec<u32>,
}

/// A publication's terms' parts of `matched`: term -> `"term":[[start,end],…]`.
pub(crate) type Parts = FxHashMap<String, Vec<u8>>;

/// A publication's JSON (`{"id":…,"text":…}`), its terms' parts of `matched`, and where each
/// of its tokens was read from (for an alternative's spans: `AnalysedText.offsets`).
pub(crate) struct Publication<'a> {
    pub(crate) id: &'a str,
    pub(crate) text: &'a str,
    pub(crate) parts: Option<&'a Parts>,
    pub(crate) tokens: Option<&'a [(u32, u32)]>,
}

/// A batch as the writer reads it: its publications, the positions of their terms (for
/// restricted placements), and the messages' shape.
pub(crate) struct BatchView<'a> {
    pub(crate) publications: &'a [Publication<'a>],
    pub(crate) placed: &'a [Option<Positions>],
    pub(crate) shape: &'a Shape,
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
    subscriptions: FxHashSet<u32>,
    subscription_order: Vec<u32>,
    size: i64,
}

impl Table {
    pub(crate) fn term_number(&mut self, term: &str) -> u32 {
        if let Some(&number) = self.term_numbers.get(term) {
            return number;
        }
        let number = self.terms.len() as u32;
        self.terms.push(term.into());
        self.term_numbers.insert(term.into(), number);
        number
    }

    /// A span rule as Python gives it, its terms numbered.
    pub(crate) fn span_rule(&mut self, (spans, not_spans, head): RuleIn) -> Box<SpanRule> {
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

    pub(crate) fn entry(&self, number: u32) -> Option<&Delivery> {
        self.entries.get(number as usize).and_then(Option::as_ref)
    }

    fn id_of(&self, number: u32) -> &str {
        self.entry(number).map_or("", |entry| &entry.id)
    }

    /// The messages of the plain matches among the trie's flat answer, and the (number,
    /// position) of every other match for the audience `wanted`, in the trie's order.
    pub(crate) fn write(
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
    /// matches, `most_subscriptions` subscriptions or `max_bytes` bytes.
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
                        || (!chunk.subscriptions.contains(&number)
                            && chunk.subscriptions.len() >= shape.most_subscriptions)
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
            .subscription_order
            .iter()
            .enumerate()
            .map(|(k, &number)| (number, k))
            .collect();
        let mut counts = vec![0u32; chunk.subscription_order.len()];
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
            subscription_ids: chunk.subscription_order,
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
        if self.subscriptions.insert(number) {
            self.subscription_order.push(number);
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
            most_subscriptions: 100,
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

    /// The messages of the trie's flat answer for audience 0, publications p1 and p2.
    fn write_batch(
        table: &Table,
        shape: &Shape,
        parts: &[Parts],
        numbers: &[u32],
        offsets: &[u32],
    ) -> (Vec<Written>, Vec<(u32, u32)>, usize) {
        let publications = publications(parts);
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape,
        };
        table.write(numbers, offsets, 0, &batch)
    }

    /// The trie's flat answer: sub-b (number 0) in p1 and p2, sub-a (number 1) in p1.
    const NUMBERS: [u32; 3] = [0, 1, 0];
    const OFFSETS: [u32; 3] = [0, 2, 3];

    #[test]
    fn a_group_is_one_message_its_subscriptions_by_id_with_the_references_webhook_id() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let shape = shape(100, false);
        let (written, others, plain) = write_batch(&table, &shape, &parts, &NUMBERS, &OFFSETS);
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
            (message.subscription_ids.clone(), message.counts.clone()),
            (vec![1, 0], vec![1, 2])
        );
    }

    #[test]
    fn a_full_message_starts_another_and_each_has_its_own_webhook_id() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let shape = shape(1, false);
        let (written, _, _) = write_batch(&table, &shape, &parts, &NUMBERS, &OFFSETS);
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
        let shape = shape(100, false);
        let (written, others, plain) = write_batch(&table, &shape, &parts, &NUMBERS, &OFFSETS);
        assert_eq!((written.len(), others, plain), (1, vec![], 2)); // sub-a: audience 1
        table.entries[0].as_mut().unwrap().plain = false;
        let (written, others, plain) = write_batch(&table, &shape, &parts, &NUMBERS, &OFFSETS);
        assert_eq!((written.len(), others, plain), (0, vec![(0, 0), (0, 1)], 0));
    }

    #[test]
    fn matched_names_each_term_with_its_places_or_none() {
        let table = table(&[("sub-b", 7, 0, &["hous", "lang:en"])]);
        let mut first = Parts::default();
        first.insert("hous".into(), br#""hous":[[6,11]]"#.to_vec());
        let parts = [first, Parts::default()];
        let shape = shape(100, true);
        let (written, _, _) = write_batch(&table, &shape, &parts, &[0], &[0, 1, 1]);
        assert!(written[0].body.ends_with(concat!(
            r#""m":[{"subscription_id":"sub-b","publication":0,"#,
            r#""matched":{"terms":{"hous":[[6,11]],"lang:en":[]}}}]}"#
        )));
    }
}
