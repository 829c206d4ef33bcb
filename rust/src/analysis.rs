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
fn is_ignorable(c: char) -> bool {
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
        if !raw.chars().all(is_assigned) {
            return None;
        }
        let mut folded = String::with_capacity(raw.len());
        for c in raw.nfkc() {
            casefold_into(c, &mut folded);
        }
        for part in folded.split(|c: char| !is_token_char(c)) {
            if !part.is_empty() {
                tokens.push(part.to_string());
            }
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

pub fn stop_word_set() -> FxHashMap<&'static str, ()> {
    stop_words().map(|w| (w, ())).collect()
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
