//! Wildcard patterns (REtriever, Wang & Jacobsen 2004), compiled: an Aho–Corasick keyword stage
//! and REtriever's anchored recombination (`wordcast.engines.ac_retriever` is the reference).
//!
//! A pattern is its phrases and the gaps before them (`?` counts, `*`) and after the last. Each
//! distinct phrase of at least `MIN_KEYWORD` characters (and every pattern's longest) is a keyword
//! of one automaton; one pass over the normalised text finds every occurrence of every keyword.
//! A pattern is checked only when its longest phrase (its *trigger*) and its next-longest (the
//! *partner*) both occur, and every other keyword of it too; its phrases' occurrence ends must
//! then chain up with every gap satisfied. Shorter phrases are looked up in the text where the
//! gap puts them. Positions are characters of the normalised text, as in Python.
//!
//! The automaton is immutable: keywords added since it was built wait in a pending list searched
//! directly, until there are enough to rebuild (amortised: adding and deleting stay cheap), and a
//! removed keyword stays in it, with no records, until then.

use crate::error::CoreError;
use aho_corasick::{AhoCorasick, MatchKind};
use pyo3::prelude::*;
use rustc_hash::FxHashMap;

type SubId = u32;
type KwId = u32;

const MIN_KEYWORD: usize = 3;

#[derive(Clone)]
struct Record {
    word: String,
    length: usize, // characters
    questions: usize,
    star: bool,
    keyword: Option<KwId>, // None: a short word, looked up in the text when needed
}

struct Pattern {
    chain: Vec<Record>,
    trailing: usize,
    trigger: KwId,
    partner: KwId,
    whole: bool,
}

#[derive(Default)]
struct Keyword {
    records: usize,
    whole: Vec<SubId>,
    triggers: FxHashMap<KwId, Vec<(SubId, Vec<KwId>)>>, // partner -> (pattern, its other keywords)
}

/// A normalised text, with the map between its bytes and characters that positions need.
struct Text<'a> {
    text: &'a str,
    chars: usize,
    char_at_byte: Vec<u32>, // empty for ASCII: bytes are characters
    byte_at_char: Vec<u32>,
}

impl<'a> Text<'a> {
    fn new(text: &'a str) -> Text<'a> {
        if text.is_ascii() {
            return Text {
                text,
                chars: text.len(),
                char_at_byte: Vec::new(),
                byte_at_char: Vec::new(),
            };
        }
        let mut char_at_byte = vec![0u32; text.len() + 1];
        let mut byte_at_char = Vec::with_capacity(text.len() + 1);
        let mut k = 0u32;
        for (b, _) in text.char_indices() {
            char_at_byte[b] = k;
            byte_at_char.push(b as u32);
            k += 1;
        }
        char_at_byte[text.len()] = k;
        byte_at_char.push(text.len() as u32);
        Text {
            text,
            chars: k as usize,
            char_at_byte,
            byte_at_char,
        }
    }

    fn char_of(&self, byte: usize) -> usize {
        if self.char_at_byte.is_empty() {
            byte
        } else {
            self.char_at_byte[byte] as usize
        }
    }

    fn byte_of(&self, ch: usize) -> usize {
        if self.byte_at_char.is_empty() {
            ch.min(self.text.len())
        } else {
            self.byte_at_char[ch.min(self.chars)] as usize
        }
    }

    /// Ends (character index of the last character) of every occurrence of `word` starting at
    /// character `from` or later, overlapping ones included, appended to `ends`.
    fn ends_from(&self, word: &str, from: usize, length: usize, ends: &mut Vec<usize>) {
        let mut at = self.byte_of(from);
        while at <= self.text.len() {
            let Some(found) = self.text[at..].find(word) else {
                break;
            };
            let start = at + found;
            ends.push(self.char_of(start) + length - 1);
            at = start + self.text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }

    fn starts_with_at(&self, word: &str, ch: usize) -> bool {
        ch <= self.chars && self.text[self.byte_of(ch)..].starts_with(word)
    }
}

#[derive(Default)]
struct Engine {
    keywords: Vec<Option<Keyword>>,
    phrases: Vec<String>, // by keyword id (kept until a rebuild frees the id)
    by_phrase: FxHashMap<String, KwId>,
    freed: Vec<KwId>,   // reusable from the next rebuild on
    retired: Vec<KwId>, // removed since the last rebuild: the automaton may still report them
    pending: Vec<KwId>, // keywords the automaton does not have yet
    automaton: Option<(AhoCorasick, Vec<KwId>)>,
    built_size: usize,
    rebuild_after: usize,
    patterns: FxHashMap<SubId, Pattern>,
}

impl Engine {
    fn keyword(&mut self, phrase: &str) -> KwId {
        if let Some(&id) = self.by_phrase.get(phrase) {
            return id;
        }
        let id = match self.freed.pop() {
            Some(id) => {
                self.keywords[id as usize] = Some(Keyword::default());
                self.phrases[id as usize] = phrase.to_string();
                id
            }
            None => {
                self.keywords.push(Some(Keyword::default()));
                self.phrases.push(phrase.to_string());
                (self.keywords.len() - 1) as KwId
            }
        };
        self.by_phrase.insert(phrase.to_string(), id);
        self.pending.push(id);
        id
    }

    fn kw(&mut self, id: KwId) -> &mut Keyword {
        self.keywords[id as usize].get_or_insert_with(Keyword::default)
    }

    fn add(
        &mut self,
        sub: SubId,
        phrases: &[String],
        gaps: &[(usize, bool)],
    ) -> Result<(), CoreError> {
        self.check_new(sub, phrases, gaps)?;
        let chain = self.chain_of(phrases, gaps)?;
        let trailing = gaps[phrases.len()].0;
        let (trigger, partner, others) = trigger_and_partner(&chain);
        let whole = chain.len() == 1 && chain[0].questions == 0 && trailing == 0;
        if whole {
            self.kw(trigger).whole.push(sub);
        } else {
            let mut rest: Vec<KwId> = others
                .iter()
                .filter_map(|&k| chain[k].keyword)
                .filter(|&id| id != partner)
                .collect();
            rest.sort_unstable();
            rest.dedup();
            self.kw(trigger)
                .triggers
                .entry(partner)
                .or_default()
                .push((sub, rest));
        }
        self.patterns.insert(
            sub,
            Pattern {
                chain,
                trailing,
                trigger,
                partner,
                whole,
            },
        );
        Ok(())
    }

    /// A pattern not indexed yet, with phrases and one gap more than phrases.
    fn check_new(
        &self,
        sub: SubId,
        phrases: &[String],
        gaps: &[(usize, bool)],
    ) -> Result<(), CoreError> {
        if self.patterns.contains_key(&sub) {
            return Err(CoreError::Pattern(format!(
                "pattern subscription {sub} is already indexed"
            )));
        }
        if phrases.is_empty() || gaps.len() != phrases.len() + 1 {
            return Err(CoreError::Pattern(
                "a pattern needs phrases and one gap more than phrases".to_string(),
            ));
        }
        Ok(())
    }

    /// The pattern's records, each phrase long enough (or the longest) made a keyword.
    fn chain_of(
        &mut self,
        phrases: &[String],
        gaps: &[(usize, bool)],
    ) -> Result<Vec<Record>, CoreError> {
        let longest = phrases.iter().map(|p| p.chars().count()).max().unwrap_or(0);
        let mut chain = Vec::with_capacity(phrases.len());
        for (phrase, &(questions, star)) in phrases.iter().zip(gaps) {
            let length = phrase.chars().count();
            if length == 0 {
                return Err(CoreError::Pattern(
                    "a pattern's phrases cannot be empty".to_string(),
                ));
            }
            let keyword = if length < MIN_KEYWORD && length < longest {
                None
            } else {
                let id = self.keyword(phrase);
                self.kw(id).records += 1;
                Some(id)
            };
            chain.push(Record {
                word: phrase.clone(),
                length,
                questions,
                star,
                keyword,
            });
        }
        Ok(chain)
    }

    fn remove(&mut self, sub: SubId) -> bool {
        let Some(pattern) = self.patterns.remove(&sub) else {
            return false;
        };
        let trigger = self.kw(pattern.trigger);
        if pattern.whole {
            trigger.whole.retain(|&s| s != sub);
        } else if let Some(waiting) = trigger.triggers.get_mut(&pattern.partner) {
            waiting.retain(|(s, _)| *s != sub);
            if waiting.is_empty() {
                trigger.triggers.remove(&pattern.partner);
            }
        }
        for record in &pattern.chain {
            let Some(id) = record.keyword else { continue };
            let kw = self.kw(id);
            kw.records -= 1;
            if kw.records == 0 {
                self.keywords[id as usize] = None;
                let phrase = std::mem::take(&mut self.phrases[id as usize]);
                self.by_phrase.remove(&phrase);
                self.pending.retain(|&p| p != id);
                self.retired.push(id);
            }
        }
        true
    }

    fn live_keywords(&self) -> usize {
        self.by_phrase.len()
    }

    fn rebuild_if_due(&mut self) {
        let stale = self.built_size > 2 * self.live_keywords() + self.rebuild_after;
        if self.pending.len() > self.rebuild_after.max(self.live_keywords() / 100) || stale {
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let ids: Vec<KwId> = self.by_phrase.values().copied().collect();
        let phrases: Vec<&str> = ids
            .iter()
            .map(|&id| self.phrases[id as usize].as_str())
            .collect();
        self.automaton = if ids.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::Standard)
                .build(&phrases)
                .ok()
                .map(|ac| (ac, ids.clone()))
        };
        if self.automaton.is_none() && !ids.is_empty() {
            // An automaton that cannot be built (never expected): every keyword stays pending.
            self.pending = ids.clone();
        } else {
            self.pending.clear();
        }
        self.built_size = ids.len();
        self.freed.append(&mut self.retired);
    }

    /// Keyword -> increasing ends of its occurrences in `text`.
    fn occurrences(&self, text: &Text<'_>) -> FxHashMap<KwId, Vec<usize>> {
        let mut hits: FxHashMap<KwId, Vec<usize>> = FxHashMap::default();
        if let Some((ac, ids)) = &self.automaton {
            for found in ac.find_overlapping_iter(text.text) {
                let id = ids[found.pattern().as_usize()];
                if self.keywords[id as usize].is_some() {
                    hits.entry(id)
                        .or_default()
                        .push(text.char_of(found.end()) - 1);
                }
            }
        }
        for &id in &self.pending {
            let phrase = &self.phrases[id as usize];
            let mut ends = Vec::new();
            text.ends_from(phrase, 0, phrase.chars().count(), &mut ends);
            if !ends.is_empty() {
                hits.insert(id, ends);
            }
        }
        hits
    }

    fn matches(&self, text: &str) -> Vec<SubId> {
        let text = Text::new(text);
        let hits = self.occurrences(&text);
        let mut found: Vec<SubId> = Vec::new();
        let mut scratch = (Vec::new(), Vec::new());
        let mut check = |waiting: &[(SubId, Vec<KwId>)], found: &mut Vec<SubId>| {
            for (sub, others) in waiting {
                if others.iter().all(|o| hits.contains_key(o))
                    && self.positions_hold(&self.patterns[sub], &hits, &text, &mut scratch)
                {
                    found.push(*sub);
                }
            }
        };
        for &id in hits.keys() {
            let Some(kw) = &self.keywords[id as usize] else {
                continue;
            };
            found.extend_from_slice(&kw.whole);
            // A common trigger waits on many partners: walk the smaller of its partners and
            // the keywords present.
            if kw.triggers.len() <= hits.len() {
                for (partner, waiting) in &kw.triggers {
                    if hits.contains_key(partner) {
                        check(waiting, &mut found);
                    }
                }
            } else {
                for partner in hits.keys() {
                    if let Some(waiting) = kw.triggers.get(partner) {
                        check(waiting, &mut found);
                    }
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Whether the phrases' occurrences chain up with every gap satisfied (forward, over ends).
    /// `scratch` holds the valid ends of the phrase before and of this one, reused.
    fn positions_hold(
        &self,
        pattern: &Pattern,
        hits: &FxHashMap<KwId, Vec<usize>>,
        text: &Text<'_>,
        scratch: &mut (Vec<usize>, Vec<usize>),
    ) -> bool {
        let (valid, next) = scratch;
        valid.clear();
        for (k, record) in pattern.chain.iter().enumerate() {
            let (length, questions) = (record.length, record.questions);
            next.clear();
            match record.keyword {
                None => find_after(record, k == 0, valid, text, next),
                Some(id) => {
                    let ends = &hits[&id];
                    if k == 0 {
                        next.extend(ends.iter().filter(|&&end| end + 1 >= length + questions));
                    } else if record.star {
                        let earliest = valid[0] + questions + length - 1;
                        next.extend(ends.iter().filter(|&&end| end > earliest));
                    } else {
                        let offset = length + questions;
                        next.extend(ends.iter().filter(|&&end| {
                            end >= offset && valid.binary_search(&(end - offset)).is_ok()
                        }));
                    }
                }
            }
            if next.is_empty() {
                return false;
            }
            std::mem::swap(valid, next);
        }
        valid[0] + pattern.trailing < text.chars
    }
}

/// Valid ends of a phrase that was not noted, found in the text where the gap allows, appended
/// to `out`.
fn find_after(
    record: &Record,
    first: bool,
    previous: &[usize],
    text: &Text<'_>,
    out: &mut Vec<usize>,
) {
    let (word, length, questions) = (record.word.as_str(), record.length, record.questions);
    if !first && !record.star {
        out.extend(
            previous
                .iter()
                .filter(|&&end| text.starts_with_at(word, end + questions + 1))
                .map(|&end| end + questions + length),
        );
        return;
    }
    let from = if first {
        questions
    } else {
        previous[0] + questions + 1
    };
    text.ends_from(word, from, length, out);
}

/// The trigger is the (first) longest phrase; the partner the next-longest keyword. Answers
/// both and the places of the chain's other keywords.
fn trigger_and_partner(chain: &[Record]) -> (KwId, KwId, Vec<usize>) {
    let trigger_at = first_max(chain.iter().map(|r| r.length));
    let trigger = chain[trigger_at].keyword.unwrap_or(0);
    let others: Vec<usize> = (0..chain.len())
        .filter(|&k| k != trigger_at && chain[k].keyword.is_some())
        .collect();
    let partner = if others.is_empty() {
        trigger
    } else {
        let best = first_max(others.iter().map(|&k| chain[k].length));
        chain[others[best]].keyword.unwrap_or(trigger)
    };
    (trigger, partner, others)
}

fn first_max(values: impl Iterator<Item = usize>) -> usize {
    let mut best = (0, 0usize);
    for (k, v) in values.enumerate() {
        if k == 0 || v > best.1 {
            best = (k, v);
        }
    }
    best.0
}

/// The wildcard pattern index: ``add`` a parsed pattern, ``match`` a normalised text.
#[pyclass(module = "wordcast._core")]
pub struct Patterns {
    engine: Engine,
}

#[pymethods]
impl Patterns {
    /// ``rebuild_after``: how many new keywords wait (searched one by one) before the automaton
    /// is built again with them.
    #[new]
    #[pyo3(signature = (rebuild_after=256))]
    fn new(rebuild_after: usize) -> Self {
        Patterns {
            engine: Engine {
                rebuild_after,
                ..Engine::default()
            },
        }
    }

    fn __len__(&self) -> usize {
        self.engine.patterns.len()
    }

    /// Index pattern ``sub_id``: its normalised ``phrases`` and the ``gaps`` ((questions, star))
    /// before each and after the last.
    fn add(&mut self, sub_id: u32, phrases: Vec<String>, gaps: Vec<(usize, bool)>) -> PyResult<()> {
        Ok(self.engine.add(sub_id, &phrases, &gaps)?)
    }

    /// Remove a pattern; False if it is not there.
    fn remove(&mut self, sub_id: u32) -> bool {
        self.engine.remove(sub_id)
    }

    /// The patterns ``text`` (normalised) matches.
    #[pyo3(name = "match")]
    fn match_text(&mut self, text: &str) -> Vec<u32> {
        self.engine.rebuild_if_due();
        self.engine.matches(text)
    }

    /// ``match`` of each text, with the GIL released.
    fn match_many(&mut self, py: Python<'_>, texts: Vec<String>) -> Vec<Vec<u32>> {
        let engine = &mut self.engine;
        py.detach(|| {
            engine.rebuild_if_due();
            texts.iter().map(|t| engine.matches(t)).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Spec<'a> = (&'a [&'a str], &'a [(usize, bool)]);

    fn engine(patterns: &[Spec<'_>]) -> Engine {
        let mut e = Engine::default();
        for (k, (phrases, gaps)) in patterns.iter().enumerate() {
            let phrases: Vec<String> = phrases.iter().map(|p| p.to_string()).collect();
            e.add(k as u32, &phrases, gaps).unwrap();
        }
        e
    }

    #[test]
    fn stars_questions_and_plain_phrases() {
        // pie*tea, song?blue, "hello"
        let e = engine(&[
            (&["pie", "tea"], &[(0, false), (0, true), (0, false)]),
            (&["song", "blue"], &[(0, false), (1, false), (0, false)]),
            (&["hello"], &[(0, false), (0, false)]),
        ]);
        assert_eq!(e.matches("apple pie and tea"), [0]);
        assert_eq!(e.matches("the song-blue hour"), [1]);
        assert_eq!(e.matches("songblue, tea pie, hello"), [2]);
        assert_eq!(e.matches("pietea"), [0]);
    }

    #[test]
    fn positions_count_characters_not_bytes() {
        let e = engine(&[(&["straße", "ab"], &[(0, false), (2, false), (0, false)])]);
        assert_eq!(e.matches("die straße! ab"), [0]);
        assert!(e.matches("die straße!ab").is_empty());
    }

    #[test]
    fn removed_patterns_match_no_more_and_ids_return() {
        let mut e = engine(&[(&["needle"], &[(0, false), (0, false)])]);
        e.rebuild();
        assert_eq!(e.matches("a needle"), [0]);
        assert!(e.remove(0));
        assert!(e.matches("a needle").is_empty());
        e.add(1, &["haystack".to_string()], &[(0, false), (0, false)])
            .unwrap();
        e.rebuild();
        assert_eq!(e.matches("needle in a haystack"), [1]);
    }
}
