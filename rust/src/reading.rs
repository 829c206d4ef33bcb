//! A text read once (issue 52: each text is analysed once in each process it visits): where
//! each normalised token lies and which term each kept token is, from which a match's offsets
//! (`AnalysedText.term_offsets`), its phrases' and windows' positions (`term_positions`) and
//! the places of its spans (`AnalysedText.token_spans`) are all worked out.
//!
//! Pure: no Python here.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{ascii_runs, kept, token_offsets, Positions, Words, DROPPED, UNSEEN};

/// One text's reading: the [start, end) in code points of each normalised token, by position
/// (a stop word or a token dropped for its length keeps its place, as Lucene's position
/// increments do), and (term id, position) of each kept token, in the text's order.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Reading {
    pub(crate) tokens: Vec<(u32, u32)>,
    pub(crate) terms: Vec<(u32, u32)>,
}

impl Reading {
    /// Each term's JSON member of a `matched`'s `terms` (`"term":[[start,end],…]`), in the
    /// order terms first occur; `names[id]` is the text of term `id` (a term holds only
    /// letters, marks and digits: nothing to escape).
    pub(crate) fn parts<'a>(&self, names: &'a [Box<str>]) -> Vec<(&'a str, Vec<u8>)> {
        self.members(Some)
            .into_iter()
            .map(|(id, _, occurrences)| {
                let name: &str = &names[id as usize];
                (name, member(name, &occurrences))
            })
            .collect()
    }

    /// The JSON members of the terms `number_of` numbers, by number: only what a match may
    /// name (`number_of` is asked once a term).
    pub(crate) fn numbered_parts(
        &self,
        names: &[Box<str>],
        number_of: impl FnMut(u32) -> Option<u32>,
    ) -> FxHashMap<u32, Vec<u8>> {
        self.members(number_of)
            .into_iter()
            .map(|(id, number, occurrences)| (number, member(&names[id as usize], &occurrences)))
            .collect()
    }

    /// (term id, what `key` makes of it, its occurrences as `[[start,end],…` without the
    /// closing bracket) of each term `key` keeps (asked once a term), in the order terms
    /// first occur.
    fn members(&self, mut key: impl FnMut(u32) -> Option<u32>) -> Vec<(u32, u32, Vec<u8>)> {
        let mut places: FxHashMap<u32, Option<usize>> = FxHashMap::default();
        let mut members: Vec<(u32, u32, Vec<u8>)> = Vec::new();
        let mut digits = itoa::Buffer::new();
        for &(id, position) in &self.terms {
            let place = *places.entry(id).or_insert_with(|| {
                members.push((id, key(id)?, Vec::new()));
                Some(members.len() - 1)
            });
            let Some(place) = place else { continue };
            let (start, end) = self.tokens[position as usize];
            let occurrences = &mut members[place].2;
            occurrences.push(if occurrences.is_empty() { b'[' } else { b',' });
            occurrences.push(b'[');
            occurrences.extend_from_slice(digits.format(start).as_bytes());
            occurrences.push(b',');
            occurrences.extend_from_slice(digits.format(end).as_bytes());
            occurrences.push(b']');
        }
        members
    }

    /// Where each term occurs, the terms keyed by `number_of` (a term it has no number for is
    /// left out; asked for each occurrence: the caller keeps what it found).
    pub(crate) fn positions(&self, mut number_of: impl FnMut(u32) -> Option<u32>) -> Positions {
        let mut positions: Positions = FxHashMap::default();
        for &(id, position) in &self.terms {
            if let Some(number) = number_of(id) {
                positions.entry(number).or_default().push(position);
            }
        }
        positions
    }
}

/// A term's JSON member of a `matched`'s `terms`: `"name":` and its `occurrences` closed.
fn member(name: &str, occurrences: &[u8]) -> Vec<u8> {
    let mut json = Vec::with_capacity(name.len() + occurrences.len() + 5);
    json.push(b'"');
    json.extend_from_slice(name.as_bytes());
    json.extend_from_slice(b"\":");
    json.extend_from_slice(occurrences);
    json.push(b']');
    json
}

/// The readings of a batch of texts (None for a text holding a code point the tables cannot
/// vouch for, which the reference reads): a word not seen before gets UNSEEN + its place among
/// the unseen words, which are returned (each once), with the dropped words not seen before.
pub(crate) fn text_readings(
    texts: &[&str],
    term_of: &Words,
    stop: &FxHashMap<&'static str, ()>,
) -> (Vec<Option<Reading>>, Vec<String>, FxHashSet<String>) {
    let mut seen = Seen {
        term_of,
        stop,
        unseen: FxHashMap::default(),
        dropped: FxHashSet::default(),
    };
    let mut out = Vec::with_capacity(texts.len());
    let (mut lower, mut tokens) = (String::new(), Vec::new());
    for text in texts {
        let mut reading = Reading::default();
        if text.is_ascii() {
            lower.clear();
            lower.push_str(text);
            lower.make_ascii_lowercase();
            // ASCII: a byte offset is a code point offset.
            for (start, end) in ascii_runs(lower.as_bytes()) {
                reading.read(&lower[start..end], start, end, &mut seen);
            }
        } else if token_offsets(text, &mut tokens).is_some() {
            for (token, start, end) in &tokens {
                reading.read(token, *start, *end, &mut seen);
            }
        } else {
            out.push(None);
            continue;
        }
        out.push(Some(reading));
    }
    let mut words = vec![String::new(); seen.unseen.len()];
    for (word, at) in seen.unseen {
        words[at as usize] = word;
    }
    (out, words, seen.dropped)
}

impl Reading {
    /// Note the next token, read from `start`..`end`, and its term if it keeps one.
    fn read(&mut self, token: &str, start: usize, end: usize, seen: &mut Seen<'_>) {
        let position = self.tokens.len() as u32;
        self.tokens.push((start as u32, end as u32));
        if let Some(id) = seen.term(token) {
            self.terms.push((id, position));
        }
    }
}

/// The words a batch of texts met: each kept one's id (UNSEEN + k for the k-th first seen
/// here), and those analysis drops.
struct Seen<'a> {
    term_of: &'a Words,
    stop: &'a FxHashMap<&'static str, ()>,
    unseen: FxHashMap<String, u32>,
    dropped: FxHashSet<String>,
}

impl Seen<'_> {
    /// The id of a token's term, if it keeps one.
    fn term(&mut self, token: &str) -> Option<u32> {
        if token.len() < 2 {
            return None; // one character, dropped without a lookup
        }
        match self.term_of.get(token) {
            Some(DROPPED) => None,
            Some(id) => Some(id),
            None if kept(token, self.stop) => {
                let next = self.unseen.len() as u32;
                Some(UNSEEN + *self.unseen.entry(token.to_string()).or_insert(next))
            }
            None => {
                self.dropped.insert(token.to_string());
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stop_word_set;

    fn read(text: &str) -> (Option<Reading>, Vec<String>) {
        let (mut out, unseen, _) = text_readings(&[text], &Words::default(), &stop_word_set());
        (out.pop().flatten(), unseen)
    }

    #[test]
    fn every_token_keeps_its_place_and_each_kept_one_its_term() {
        let (reading, unseen) = read("The house, a HOUSE!");
        let reading = reading.expect("ASCII is always read");
        assert_eq!(reading.tokens, [(0, 3), (4, 9), (11, 12), (13, 18)]);
        // "the" and "a" keep their places; "house" is one unseen word, seen twice.
        assert_eq!(unseen, ["house"]);
        assert_eq!(reading.terms, [(UNSEEN, 1), (UNSEEN, 3)]);
    }

    #[test]
    fn parts_are_the_json_members_of_matched_in_first_occurrence_order() {
        let reading = Reading {
            tokens: vec![(0, 5), (6, 9), (10, 15)],
            terms: vec![(1, 0), (0, 1), (1, 2)],
        };
        let names: Vec<Box<str>> = vec!["cat".into(), "hous".into()];
        let parts = reading.parts(&names);
        assert_eq!(
            parts,
            [
                ("hous", br#""hous":[[0,5],[10,15]]"#.to_vec()),
                ("cat", br#""cat":[[6,9]]"#.to_vec()),
            ]
        );
        let positions = reading.positions(|id| (id == 1).then_some(7));
        assert_eq!(positions.get(&7), Some(&vec![0, 2]));
        assert_eq!(positions.len(), 1);
        // Only the terms a match may name, by their numbers.
        let numbered = reading.numbered_parts(&names, |id| (id == 0).then_some(3));
        assert_eq!(numbered.len(), 1);
        assert_eq!(numbered[&3], br#""cat":[[6,9]]"#.to_vec());
    }

    #[test]
    fn a_text_the_tables_cannot_vouch_for_is_not_read() {
        assert_eq!(read("a\u{558}b").0, None);
        let (reading, _) = read("na\u{ef}ve caf\u{e9}");
        assert_eq!(
            reading.expect("known code points").tokens,
            [(0, 5), (6, 10)]
        );
    }
}
