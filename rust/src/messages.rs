//! A routed batch's matches written as finished webhook messages: the one writer of every match.
//!
//! The reference is `wordcast.testing.messages.messages`, which the tests hold this byte for
//! byte equal to: the same messages, the same bodies and webhook-ids, for every kind of match
//! and both payload versions.
//!
//! Pure: no Python here; `bindings::messages` wraps it as `wordcast._core.Deliveries`.
//!
//! The [`Table`] knows, for each number of the compact trie, what writing one of its matches
//! needs: the subscription's id, the messages it goes in (a webhook endpoint, a tenant's match
//! stream, or both), whose publications it meets, and its terms for `matched`. A batch's plain
//! matches then cost no Python object each: the trie's flat answer goes in, message bodies come
//! out. What the table cannot decide (a boolean query's alternative beyond its phrases and
//! windows, a subscription its placements restrict, hot words, patterns, and every match of a
//! payload of version 1) is handed back ([`Sorted::others`]); the caller decides those and gives
//! the ones that stand as [`Chosen`] matches, with their `matched`, and the writer groups them
//! with the rest into the same messages.

use std::fmt::Write as _;

use rustc_hash::{FxHashMap, FxHashSet};
use sha2::{Digest, Sha256};

use crate::analysis::Positions;
use crate::conditions::TermRule;
use crate::spans::{spans_json, RuleIn, Span, SpanIn, SpanRule};

/// A subscription's messages: up to two (a webhook endpoint's and its tenant's match stream's).
pub(crate) const NO_GROUP: u32 = u32::MAX;

/// In a subscription's positions: a match of the table, not a chosen one.
const FROM_TABLE: u32 = u32::MAX;

/// What a match of one trie number needs to be written.
pub(crate) struct Delivery {
    pub(crate) id: Box<str>,   // the stored id, which orders a message's matches
    pub(crate) delivered: u32, // the length of the id delivered under, a prefix of `id`
    pub(crate) tag: Option<Box<str>>, // the subscriber's label, echoed in each match
    pub(crate) terms: Box<[u32]>, // numbers in `Table::terms`, in the subscription's order
    pub(crate) groups: [u32; 2],
    pub(crate) audience: u32,
    pub(crate) plain: bool, // decided here; otherwise handed back
    // An alternative whose only condition is its phrases and proximity windows: a candidate
    // whose text breaks them is dropped here, one that keeps them written here.
    pub(crate) spans: Option<Box<SpanRule>>,
    // Its record's `created`, which its counters are kept for (0: not known).
    pub(crate) incarnation: f64,
}

impl Delivery {
    /// The id its matches are delivered under (an alternative's: its query's).
    fn delivered_id(&self) -> &str {
        self.id.get(..self.delivered as usize).unwrap_or(&self.id)
    }
}

/// Trie number -> its delivery, and the terms they name.
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) entries: Vec<Option<Delivery>>,
    pub(crate) terms: Vec<Box<str>>,
    pub(crate) term_numbers: FxHashMap<Box<str>, u32>,
}

/// How a version 1 payload names what matched: the query or the pattern as written.
pub(crate) enum Written {
    Query(Box<str>),
    Pattern(Box<str>),
}

/// A match the caller decided, with what writing it needs.
pub(crate) struct Chosen {
    pub(crate) id: Box<str>,        // the stored id
    pub(crate) delivered: Box<str>, // the id delivered under
    pub(crate) tag: Option<Box<str>>,
    pub(crate) groups: [u32; 2],
    pub(crate) position: u32,
    pub(crate) matched: Box<[u8]>, // the JSON of its `matched` (used when explaining)
    pub(crate) written: Option<Written>, // for a version 1 payload
    pub(crate) incarnation: f64,   // as `Delivery::incarnation`
}

/// The messages' payload version, publisher, stream, and bounds (`messages`'s arguments in the
/// reference).
pub(crate) struct Shape {
    pub(crate) version: u8,
    pub(crate) backfill: bool,
    pub(crate) publisher: String,
    pub(crate) stream: String,
    pub(crate) most: usize,
    pub(crate) max_bytes: i64,
    pub(crate) most_subscriptions: usize,
    pub(crate) explain: bool,
}

/// The JSON of a message around its matches: before its publications (version 2) or matches,
/// between the two, and after (the reference's `_Frame`).
struct Frame {
    head: Vec<u8>,
    between: Vec<u8>,
    tail: Vec<u8>,
}

impl Shape {
    fn frame(&self) -> Frame {
        let mut head = b"{\"type\":\"matches\"".to_vec();
        if self.version >= 2 {
            let _ = write!(PushDigits(&mut head), ",\"version\":{}", self.version);
        }
        head.extend_from_slice(b",\"publisher\":");
        json_string(&mut head, &self.publisher);
        head.extend_from_slice(b",\"stream\":");
        if self.stream.is_empty() {
            head.extend_from_slice(b"null");
        } else {
            json_string(&mut head, &self.stream);
        }
        let between = if self.version >= 2 {
            head.extend_from_slice(b",\"publications\":[");
            b"],\"matches\":[".to_vec()
        } else {
            head.extend_from_slice(b",\"matches\":[");
            Vec::new()
        };
        let mut tail = b"]".to_vec();
        if self.backfill {
            tail.extend_from_slice(b",\"backfill\":true");
        }
        tail.push(b'}');
        Frame {
            head,
            between,
            tail,
        }
    }
}

impl Frame {
    fn size(&self) -> i64 {
        (self.head.len() + self.between.len() + self.tail.len()) as i64
    }
}

/// One message: the group it is for (an endpoint of a tenant), its body, its webhook-id, how
/// many matches it holds, the ids (delivered under) of the subscriptions it holds matches for,
/// how many each, and the incarnation of each (its record's `created`: what counts them).
pub(crate) struct Message {
    pub(crate) group: u32,
    pub(crate) body: Vec<u8>, // UTF-8 JSON: written from str, or the caller's checked pieces
    pub(crate) webhook_id: String,
    pub(crate) matches: usize,
    pub(crate) subscription_ids: Vec<String>,
    pub(crate) counts: Vec<u32>,
    pub(crate) incarnations: Vec<f64>,
}

/// A publication's terms' parts of `matched`: the term's number in `Table::terms` ->
/// `"term":[[start,end],…]` (a term no subscription here names has none).
pub(crate) type Parts = FxHashMap<u32, Vec<u8>>;

/// A publication's id and text, its terms' parts of `matched`, and where each of its tokens was
/// read from (for an alternative's spans: `AnalysedText.offsets`).
pub(crate) struct Publication<'a> {
    pub(crate) id: &'a str,
    pub(crate) text: &'a str,
    pub(crate) parts: Option<&'a Parts>,
    pub(crate) tokens: Option<&'a [(u32, u32)]>,
}

/// A batch as the writer reads it: its publications, the positions of their terms (for
/// the spans of alternatives), and the messages' shape.
pub(crate) struct BatchView<'a> {
    pub(crate) publications: &'a [Publication<'a>],
    pub(crate) placed: &'a [Option<Positions>],
    pub(crate) shape: &'a Shape,
    /// Each publication's terms (filter terms among them), when a rule asks of them.
    pub(crate) terms: Option<&'a [Vec<&'a str>]>,
}

impl BatchView<'_> {
    /// Whether the offsets a match's `matched` needs (its terms' parts and its tokens' places)
    /// are at hand for the publication at `position`.
    fn offsets_at_hand(&self, position: u32) -> bool {
        let publication = &self.publications[position as usize];
        publication.parts.is_some() && publication.tokens.is_some()
    }
}

/// Whose match: a row of the table (its trie number) or a chosen one (the first of its
/// subscription's chosen matches).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Who {
    Row(u32),
    Chosen(u32),
}

/// A batch's matches sorted out: each subscription's (position, chosen match or
/// `FROM_TABLE`), the subscriptions in the order they first match, and the (number, position)
/// of the trie's matches handed back to the caller.
#[derive(Default)]
pub(crate) struct Sorted {
    order: Vec<Who>,
    positions: FxHashMap<Who, Vec<(u32, u32)>>,
    pub(crate) others: Vec<(u32, u32)>,
    matches: usize,
}

impl Sorted {
    fn add(&mut self, who: Who, position: u32, chosen: u32) {
        self.matches += 1;
        let order = &mut self.order;
        self.positions
            .entry(who)
            .or_insert_with(|| {
                order.push(who);
                Vec::new()
            })
            .push((position, chosen));
    }
}

pub(crate) fn json_string(out: &mut Vec<u8>, text: &str) {
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
    pairs: Vec<(Who, u32)>, // (whose, position)
    subscriptions: FxHashSet<Who>,
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

    /// A rule as Python gives it, its spans' terms numbered.
    pub(crate) fn span_rule(
        &mut self,
        (spans, not_spans, head, terms, tail): RuleIn,
    ) -> Box<SpanRule> {
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
            terms: TermRule::new(terms),
            tail: tail.into(),
        })
    }

    pub(crate) fn entry(&self, number: u32) -> Option<&Delivery> {
        self.entries.get(number as usize).and_then(Option::as_ref)
    }

    /// The trie's flat answer sorted out for the audience `wanted`: the matches decided here,
    /// and the others handed back (in the trie's order). A version 1 payload hands back all.
    pub(crate) fn sort(
        &self,
        numbers: &[u32],
        offsets: &[u32],
        wanted: u32,
        batch: &BatchView<'_>,
    ) -> Sorted {
        let mut sorted = Sorted::default();
        let decides = batch.shape.version >= 2;
        for (position, run) in offsets.windows(2).enumerate() {
            let position = position as u32;
            for &number in &numbers[run[0] as usize..run[1] as usize] {
                let here = match self.entry(number) {
                    Some(entry) if entry.audience != wanted => continue,
                    Some(entry) if decides => self.decide(entry, position, batch),
                    _ => Some(false),
                };
                match here {
                    Some(true) => sorted.add(Who::Row(number), position, FROM_TABLE),
                    Some(false) => sorted.others.push((number, position)),
                    None => {}
                }
            }
        }
        sorted
    }

    /// Whether a candidate of `entry` at `position` is written here (true), handed back
    /// (false) or dropped (None: its text breaks its phrases or windows).
    fn decide(&self, entry: &Delivery, position: u32, batch: &BatchView<'_>) -> Option<bool> {
        if entry.plain {
            return Some(true);
        }
        let Some(rule) = &entry.spans else {
            return Some(false);
        };
        if !rule.terms.is_empty() {
            match batch.terms.and_then(|terms| terms.get(position as usize)) {
                // Without the batch's terms, the caller checks.
                None => return Some(false),
                Some(terms) if !rule.terms.holds(terms) => return None,
                Some(_) => {}
            }
        }
        if !rule.has_spans() {
            // Explained with its terms' parts alone (no span's places to give).
            let parts = batch.publications[position as usize].parts.is_some();
            return Some(!batch.shape.explain || parts);
        }
        match batch.placed.get(position as usize).and_then(Option::as_ref) {
            // A text the tables cannot vouch for is handed back whole.
            None => Some(false),
            Some(placed) if !rule.holds(placed) => None,
            // Explained here only where the offsets are at hand (the terms' parts and the
            // tokens' places): the caller explains the others.
            Some(_) => Some(!batch.shape.explain || batch.offsets_at_hand(position)),
        }
    }

    /// The messages of the matches `sorted` keeps and of those `chosen`, and how many matches
    /// they hold.
    pub(crate) fn write(
        &self,
        mut sorted: Sorted,
        chosen: &[Chosen],
        batch: &BatchView<'_>,
    ) -> (Vec<Message>, usize) {
        // A chosen match joins its subscription's others: those decided here (an alternative
        // whose spans the core checks in one text and hands back in another) and those chosen.
        let mut whose: FxHashMap<&str, Who> = FxHashMap::default();
        for &who in &sorted.order {
            if let Who::Row(number) = who {
                if let Some(entry) = self.entry(number) {
                    whose.insert(&entry.id, who);
                }
            }
        }
        for (k, one) in chosen.iter().enumerate() {
            let k = k as u32;
            let who = *whose.entry(&one.id).or_insert(Who::Chosen(k));
            sorted.add(who, one.position, k);
        }
        let writer = Writer {
            table: self,
            chosen,
            batch,
            frame: batch.shape.frame(),
        };
        let mut encoded: Vec<Option<Vec<u8>>> = vec![None; batch.publications.len()];
        let mut written = Vec::new();
        for (group, members) in writer.groups_of(&sorted.order) {
            for who in &members {
                if let Some(positions) = sorted.positions.get_mut(who) {
                    positions.sort_by_key(|&(position, _)| position);
                }
            }
            writer.write_group(
                group,
                &members,
                &sorted.positions,
                &mut encoded,
                &mut written,
            );
        }
        (written, sorted.matches)
    }

    /// What follows a plain match's publication place: its `matched` (if explained) and its
    /// end.
    fn rest_of(
        &self,
        entry: &Delivery,
        publication: &Publication<'_>,
        placed: Option<&Positions>,
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
                match publication.parts.and_then(|parts| parts.get(&term)) {
                    Some(part) => out.extend_from_slice(part),
                    None => {
                        // A term the text does not hold (a filter's): no offsets.
                        json_string(out, &self.terms[term as usize]);
                        out.extend_from_slice(b":[]");
                    }
                }
            }
            out.push(b'}');
            if let Some(rule) = &entry.spans {
                out.extend_from_slice(&rule.tail);
            }
            if let (Some(rule), Some(placed), Some(tokens)) =
                (&entry.spans, placed, publication.tokens)
            {
                if !rule.spans.is_empty() {
                    spans_json(rule, placed, tokens, out);
                }
            }
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// What writing one batch's messages reads: the table, the chosen matches, the batch, and the
/// messages' frame.
struct Writer<'a> {
    table: &'a Table,
    chosen: &'a [Chosen],
    batch: &'a BatchView<'a>,
    frame: Frame,
}

impl Writer<'_> {
    fn row(&self, number: u32) -> &Delivery {
        self.table
            .entry(number)
            .unwrap_or_else(|| unreachable!("only numbers with an entry are sorted in"))
    }

    fn stored_id(&self, who: Who) -> &str {
        match who {
            Who::Row(number) => &self.row(number).id,
            Who::Chosen(k) => &self.chosen[k as usize].id,
        }
    }

    fn delivered_id(&self, who: Who) -> &str {
        match who {
            Who::Row(number) => self.row(number).delivered_id(),
            Who::Chosen(k) => &self.chosen[k as usize].delivered,
        }
    }

    fn incarnation(&self, who: Who) -> f64 {
        match who {
            Who::Row(number) => self.row(number).incarnation,
            Who::Chosen(k) => self.chosen[k as usize].incarnation,
        }
    }

    fn groups(&self, who: Who) -> [u32; 2] {
        match who {
            Who::Row(number) => self.row(number).groups,
            Who::Chosen(k) => self.chosen[k as usize].groups,
        }
    }

    fn tag(&self, who: Who) -> Option<&str> {
        match who {
            Who::Row(number) => self.row(number).tag.as_deref(),
            Who::Chosen(k) => self.chosen[k as usize].tag.as_deref(),
        }
    }

    /// The message groups of the subscriptions in `order`, each group's subscriptions by
    /// stored id: which matches share a message (and so its webhook-id) must not follow the
    /// order the subscriptions were loaded in.
    fn groups_of(&self, order: &[Who]) -> Vec<(u32, Vec<Who>)> {
        let mut group_order: Vec<u32> = Vec::new();
        let mut groups: FxHashMap<u32, Vec<Who>> = FxHashMap::default();
        for &who in order {
            for group in self.groups(who).into_iter().filter(|&g| g != NO_GROUP) {
                groups
                    .entry(group)
                    .or_insert_with(|| {
                        group_order.push(group);
                        Vec::new()
                    })
                    .push(who);
            }
        }
        group_order
            .into_iter()
            .map(|group| {
                let mut members = groups.remove(&group).unwrap_or_default();
                members.sort_by(|&a, &b| self.stored_id(a).cmp(self.stored_id(b)).then(a.cmp(&b)));
                (group, members)
            })
            .collect()
    }

    /// The messages of one group: its subscriptions' matches, a message full at `most`
    /// matches, `most_subscriptions` subscriptions or `max_bytes` bytes.
    fn write_group(
        &self,
        group: u32,
        members: &[Who],
        positions: &FxHashMap<Who, Vec<(u32, u32)>>,
        encoded: &mut [Option<Vec<u8>>],
        written: &mut Vec<Message>,
    ) {
        let shape = self.batch.shape;
        let room = shape.max_bytes - self.frame.size();
        let (mut head, mut rest) = (Vec::new(), Vec::new());
        let mut chunk = Chunk::default();
        for &who in members {
            for &(position, chosen) in &positions[&who] {
                self.head_of(who, position, &mut head);
                self.rest_of(who, position, chosen, &mut rest);
                let publication = &self.batch.publications[position as usize];
                let publication =
                    encoded[position as usize].get_or_insert_with(|| publication_json(publication));
                let cost = if shape.version >= 2 {
                    chunk.cost(position, publication, &head, &rest)
                } else {
                    (head.len() + rest.len() + 1) as i64
                };
                if !chunk.pairs.is_empty()
                    && (chunk.pairs.len() >= shape.most
                        || (!chunk.subscriptions.contains(&who)
                            && chunk.subscriptions.len() >= shape.most_subscriptions)
                        || chunk.size + cost > room)
                {
                    written.push(self.message(std::mem::take(&mut chunk), group));
                }
                let publication = (shape.version >= 2).then_some(&publication[..]);
                chunk.add(who, position, publication, &head, &rest);
            }
        }
        if !chunk.pairs.is_empty() {
            written.push(self.message(chunk, group));
        }
    }

    /// A match's JSON before its publication's place (version 2), or all of it before its
    /// `matched` (version 1: the query as written, the publication's id and text).
    fn head_of(&self, who: Who, position: u32, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"{\"subscription_id\":");
        json_string(out, self.delivered_id(who));
        if let Some(tag) = self.tag(who) {
            out.extend_from_slice(b",\"tag\":");
            json_string(out, tag);
        }
        if self.batch.shape.version >= 2 {
            out.extend_from_slice(b",\"publication\":");
            return;
        }
        let written = match who {
            Who::Chosen(k) => self.chosen[k as usize].written.as_ref(),
            Who::Row(_) => None, // a version 1 payload's matches are all chosen
        };
        match written {
            Some(Written::Query(query)) => {
                out.extend_from_slice(b",\"query\":");
                json_string(out, query);
            }
            Some(Written::Pattern(pattern)) => {
                out.extend_from_slice(b",\"pattern\":");
                json_string(out, pattern);
            }
            None => {}
        }
        let publication = &self.batch.publications[position as usize];
        out.extend_from_slice(b",\"publication_id\":");
        json_string(out, publication.id);
        out.extend_from_slice(b",\"text\":");
        json_string(out, publication.text);
    }

    /// What follows a match's publication place: its `matched` (if explained) and its end.
    fn rest_of(&self, who: Who, position: u32, chosen: u32, out: &mut Vec<u8>) {
        let batch = self.batch;
        if chosen == FROM_TABLE {
            let Who::Row(number) = who else {
                unreachable!("a match from the table is a row's")
            };
            let publication = &batch.publications[position as usize];
            let placed = batch.placed.get(position as usize).and_then(Option::as_ref);
            self.table
                .rest_of(self.row(number), publication, placed, batch.shape, out);
            return;
        }
        out.clear();
        if batch.shape.explain {
            let matched = &self.chosen[chosen as usize].matched;
            out.extend_from_slice(b",\"matched\":");
            out.extend_from_slice(if matched.is_empty() { b"null" } else { matched });
        }
        out.push(b'}');
    }

    fn message(&self, chunk: Chunk, group: u32) -> Message {
        let frame = &self.frame;
        let mut body = Vec::with_capacity(chunk.size as usize + frame.size() as usize);
        body.extend_from_slice(&frame.head);
        body.extend_from_slice(&chunk.publications);
        body.extend_from_slice(&frame.between);
        body.extend_from_slice(&chunk.matches);
        body.extend_from_slice(&frame.tail);
        let publications = self.batch.publications;
        let mut pairs: Vec<(&str, &str)> = chunk
            .pairs
            .iter()
            .map(|&(who, position)| (self.delivered_id(who), publications[position as usize].id))
            .collect();
        let Tallied {
            ids: subscription_ids,
            counts,
            incarnations,
        } = self.tallied(&chunk.pairs);
        pairs.sort_unstable();
        Message {
            group,
            body,
            webhook_id: self.webhook_id(&pairs),
            matches: chunk.pairs.len(),
            subscription_ids,
            counts,
            incarnations,
        }
    }

    /// `wordcast.storage.outbox.webhook_id`: the (subscription, publication) pairs, sorted,
    /// with the publisher and stream, hashed.
    /// The subscriptions of a message's matches (see [`Tallied`]). The alternatives of one
    /// query share its incarnation: the first match's is the subscription's.
    fn tallied(&self, matches: &[(Who, u32)]) -> Tallied {
        let mut place: FxHashMap<&str, usize> = FxHashMap::default();
        let mut tallied = Tallied::default();
        for &(who, _) in matches {
            let id = self.delivered_id(who);
            let k = *place.entry(id).or_insert_with(|| {
                tallied.ids.push(id.to_owned());
                tallied.counts.push(0);
                tallied.incarnations.push(self.incarnation(who));
                tallied.ids.len() - 1
            });
            tallied.counts[k] += 1;
        }
        tallied
    }

    fn webhook_id(&self, pairs: &[(&str, &str)]) -> String {
        let shape = self.batch.shape;
        let hashed = serde_json::to_vec(&(&shape.publisher, &shape.stream, pairs))
            .expect("strings always encode");
        let digest = Sha256::digest(&hashed);
        let mut webhook_id = String::with_capacity(36);
        webhook_id.push_str("msg_");
        for byte in &digest[..16] {
            let _ = write!(webhook_id, "{byte:02x}");
        }
        webhook_id
    }
}

/// The subscriptions a message holds matches for (delivered under), in the order of their
/// first match, how many matches each, and the incarnation of each.
#[derive(Default)]
struct Tallied {
    ids: Vec<String>,
    counts: Vec<u32>,
    incarnations: Vec<f64>,
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
    /// The bytes a match adds to a version 2 message (with its publication, if new to it).
    fn cost(&self, position: u32, publication: &[u8], head: &[u8], rest: &[u8]) -> i64 {
        (match self.places.get(&position) {
            Some(&place) => head.len() + digits(place) + rest.len() + 1,
            None => head.len() + rest.len() + 1 + digits(self.places.len()) + publication.len() + 1,
        }) as i64
    }

    /// Add a match: in version 2 with its `publication` (named once a message, its place
    /// written between `head` and `rest`); in version 1 (None) `head` and `rest` are all of it.
    fn add(
        &mut self,
        who: Who,
        position: u32,
        publication: Option<&[u8]>,
        head: &[u8],
        rest: &[u8],
    ) {
        if !self.pairs.is_empty() {
            self.matches.push(b',');
        }
        let before = self.matches.len();
        self.matches.extend_from_slice(head);
        if let Some(publication) = publication {
            let place = self.place(position, publication);
            let _ = write!(PushDigits(&mut self.matches), "{place}");
        }
        self.matches.extend_from_slice(rest);
        self.size += (self.matches.len() - before) as i64 + 1;
        self.pairs.push((who, position));
        self.subscriptions.insert(who);
    }

    /// The publication's place in the message, named in it if new.
    fn place(&mut self, position: u32, publication: &[u8]) -> usize {
        if let Some(&place) = self.places.get(&position) {
            return place;
        }
        let place = self.places.len();
        self.places.insert(position, place);
        if place > 0 {
            self.publications.push(b',');
        }
        self.publications.extend_from_slice(publication);
        self.size += publication.len() as i64 + 1;
        place
    }
}

/// `write!` into a byte buffer.
pub(crate) struct PushDigits<'a>(pub(crate) &'a mut Vec<u8>);

impl std::fmt::Write for PushDigits<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of plain subscriptions (trie number = index): (id, group, audience, terms), the
    /// k-th of incarnation k + 1.
    fn table(subscriptions: &[(&str, u32, u32, &[&str])]) -> Table {
        let mut table = Table::default();
        for (k, &(id, group, audience, terms)) in subscriptions.iter().enumerate() {
            let terms = terms.iter().map(|t| table.term_number(t)).collect();
            table.entries.push(Some(Delivery {
                id: id.into(),
                delivered: id.len() as u32,
                tag: None,
                terms,
                groups: [group, NO_GROUP],
                audience,
                plain: true,
                spans: None,
                incarnation: (k + 1) as f64,
            }));
        }
        table
    }

    fn text(message: &Message) -> &str {
        std::str::from_utf8(&message.body).expect("a body is UTF-8")
    }

    fn shape(most: usize, explain: bool) -> Shape {
        Shape {
            version: 2,
            backfill: false,
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
    ) -> (Vec<Message>, Vec<(u32, u32)>, usize) {
        write_chosen(table, shape, parts, numbers, offsets, &[])
    }

    /// The same, with matches `chosen` beside the trie's.
    fn write_chosen(
        table: &Table,
        shape: &Shape,
        parts: &[Parts],
        numbers: &[u32],
        offsets: &[u32],
        chosen: &[Chosen],
    ) -> (Vec<Message>, Vec<(u32, u32)>, usize) {
        let publications = publications(parts);
        let batch = BatchView {
            publications: &publications,
            placed: &[],
            shape,
            terms: None,
        };
        let sorted = table.sort(numbers, offsets, 0, &batch);
        let others = sorted.others.clone();
        let (written, count) = table.write(sorted, chosen, &batch);
        (written, others, count)
    }

    const HEAD: &str =
        r#"{"type":"matches","version":2,"publisher":"acme","stream":null,"publications":["#;

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
            text(message),
            HEAD.to_owned()
                + concat!(
                    r#"{"id":"p1","text":"white house"},{"id":"p2","text":"house"}],"matches":["#,
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
            (vec!["sub-a".to_owned(), "sub-b".to_owned()], vec![1, 2])
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
        assert!(text(&written[2])
            .starts_with(&(HEAD.to_owned() + r#"{"id":"p2","text":"house"}],"matches":["#)));
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
        let mut table = table(&[("sub-b", 7, 0, &["hous", "lang:en"])]);
        let mut first = Parts::default();
        first.insert(table.term_number("hous"), br#""hous":[[6,11]]"#.to_vec());
        let parts = [first, Parts::default()];
        let shape = shape(100, true);
        let (written, _, _) = write_batch(&table, &shape, &parts, &[0], &[0, 1, 1]);
        assert!(text(&written[0]).ends_with(concat!(
            r#""matches":[{"subscription_id":"sub-b","publication":0,"#,
            r#""matched":{"terms":{"hous":[[6,11]],"lang:en":[]}}}]}"#
        )));
    }

    fn chosen(id: &str, delivered: &str, position: u32, matched: &[u8]) -> Chosen {
        Chosen {
            id: id.into(),
            delivered: delivered.into(),
            tag: None,
            groups: [7, NO_GROUP],
            position,
            matched: matched.into(),
            written: Some(Written::Query("white OR house".into())),
            incarnation: 9.5,
        }
    }

    #[test]
    fn chosen_matches_share_the_tables_messages_by_stored_id_and_tally_under_their_query() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let shape = shape(100, true);
        // Two alternatives of query "q": "q~1" at p2 and p1 (given out of order), "q~0" at p1.
        let given = [
            chosen("q~1", "q", 1, br#"{"alternative":1}"#),
            chosen("q~0", "q", 0, br#"{"alternative":0}"#),
            chosen("q~1", "q", 0, br#"{"alternative":1}"#),
        ];
        let (written, _, count) = write_chosen(&table, &shape, &parts, &NUMBERS, &OFFSETS, &given);
        assert_eq!((written.len(), count), (1, 6));
        let body = text(&written[0]);
        let order: Vec<usize> = [
            r#"{"subscription_id":"q","publication":0,"matched":{"alternative":0}}"#,
            r#"{"subscription_id":"q","publication":0,"matched":{"alternative":1}}"#,
            r#"{"subscription_id":"q","publication":1,"matched":{"alternative":1}}"#,
            r#"{"subscription_id":"sub-a","publication":0,"#,
            r#"{"subscription_id":"sub-b","publication":1,"#,
        ]
        .iter()
        .map(|m| body.find(m).unwrap_or_else(|| panic!("{m} in {body}")))
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{body}");
        assert_eq!(
            (
                written[0].subscription_ids.clone(),
                written[0].counts.clone(),
                written[0].incarnations.clone()
            ),
            (
                vec!["q".to_owned(), "sub-a".to_owned(), "sub-b".to_owned()],
                vec![3, 1, 2],
                vec![9.5, 2.0, 1.0]
            )
        );
    }

    #[test]
    fn a_version_1_payload_hands_back_every_match_and_writes_each_whole() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let mut shape = shape(100, false);
        (shape.version, shape.backfill, shape.stream) = (1, true, "news".into());
        let (written, others, count) = write_batch(&table, &shape, &parts, &NUMBERS, &OFFSETS);
        assert_eq!(
            (written.len(), others, count),
            (0, vec![(0, 0), (1, 0), (0, 1)], 0)
        );
        let given = [chosen("q~0", "q", 1, b"")];
        let (written, _, _) = write_chosen(&table, &shape, &parts, &[], &[0, 0, 0], &given);
        assert_eq!(
            text(&written[0]),
            concat!(
                r#"{"type":"matches","publisher":"acme","stream":"news","matches":["#,
                r#"{"subscription_id":"q","query":"white OR house","#,
                r#""publication_id":"p2","text":"house"}],"backfill":true}"#
            )
        );
    }

    #[test]
    fn a_chosen_match_of_a_tables_subscription_goes_among_its_others_by_position() {
        let table = table(&[("sub-b", 7, 0, &["hous"]), ("sub-a", 7, 0, &["white"])]);
        let parts = [Parts::default(), Parts::default()];
        let shape = shape(100, true);
        // The table decides sub-a in p1 and sub-b in p2; sub-b in p1 is chosen.
        let given = [chosen("sub-b", "sub-b", 0, br#"{"chosen":true}"#)];
        let (written, _, count) = write_chosen(&table, &shape, &parts, &[1, 0], &[0, 1, 2], &given);
        assert_eq!((written.len(), count), (1, 3));
        assert!(text(&written[0]).ends_with(concat!(
            r#""matches":[{"subscription_id":"sub-a","publication":0,"#,
            r#""matched":{"terms":{"white":[]}}},"#,
            r#"{"subscription_id":"sub-b","publication":0,"matched":{"chosen":true}},"#,
            r#"{"subscription_id":"sub-b","publication":1,"matched":{"terms":{"hous":[]}}}]}"#
        )));
        assert_eq!(written[0].counts, vec![1, 2]);
    }
}
