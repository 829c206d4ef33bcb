//! The wildcard words a router or a matcher holds, found in a text's tokens (issue 53), as
//! `wordcast.testing.queries.ReferenceWildcardTerms` finds them (the reference this is held to):
//! `*` stands for any run of characters, `?` for exactly one; each word is filed under its
//! prefix (the characters before its first wildcard) when that has two or more, else under its
//! suffix, so a token looks up only its own prefixes and suffixes, and checks the few words
//! filed there. Pure: no Python here; `bindings::wildcards` wraps it.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

const MIN_LITERAL: usize = 2;

/// One held word: its characters, and how many hold it.
struct Held {
    chars: Vec<char>,
    holders: u32,
}

/// The words filed under one prefix or suffix, by text.
type Filed = FxHashMap<Box<str>, Vec<Box<str>>>;

#[derive(Default)]
pub(crate) struct WildcardIndex {
    held: FxHashMap<Box<str>, Held>,
    by_prefix: Filed,
    by_suffix: Filed,
    prefix_sizes: BTreeSet<usize>,
    suffix_sizes: BTreeSet<usize>,
}

impl WildcardIndex {
    pub(crate) fn len(&self) -> usize {
        self.held.len()
    }

    pub(crate) fn contains(&self, word: &str) -> bool {
        self.held.contains_key(word)
    }

    /// Hold `word` (once more: each holder counted).
    pub(crate) fn add(&mut self, word: &str) {
        if let Some(held) = self.held.get_mut(word) {
            held.holders += 1;
            return;
        }
        let chars: Vec<char> = word.chars().collect();
        let (key, prefix) = filing(&chars);
        let size = key.chars().count();
        let (filed, sizes) = if prefix {
            (&mut self.by_prefix, &mut self.prefix_sizes)
        } else {
            (&mut self.by_suffix, &mut self.suffix_sizes)
        };
        filed.entry(key.into()).or_default().push(word.into());
        sizes.insert(size);
        self.held.insert(word.into(), Held { chars, holders: 1 });
    }

    /// Let one holder of `word` go.
    pub(crate) fn discard(&mut self, word: &str) {
        let Some(held) = self.held.get_mut(word) else {
            return;
        };
        held.holders -= 1;
        if held.holders > 0 {
            return;
        }
        let Some(held) = self.held.remove(word) else {
            return;
        };
        let (key, prefix) = filing(&held.chars);
        let filed = if prefix {
            &mut self.by_prefix
        } else {
            &mut self.by_suffix
        };
        if let Some(words) = filed.get_mut(key.as_str()) {
            words.retain(|w| &**w != word);
            if words.is_empty() {
                filed.remove(key.as_str());
            }
        }
        // The sizes looked up stay (a few small numbers): a size with no key finds nothing.
    }

    /// The words held that some token instantiates, each once, sorted.
    pub(crate) fn found<'a>(&self, tokens: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut found = BTreeSet::new();
        let mut chars: Vec<char> = Vec::new();
        let mut key = String::new();
        for token in tokens {
            chars.clear();
            chars.extend(token.chars());
            for (sizes, filed, from_start) in [
                (&self.prefix_sizes, &self.by_prefix, true),
                (&self.suffix_sizes, &self.by_suffix, false),
            ] {
                for &size in sizes.iter().take_while(|&&size| size <= chars.len()) {
                    key.clear();
                    let part = if from_start {
                        &chars[..size]
                    } else {
                        &chars[chars.len() - size..]
                    };
                    key.extend(part);
                    for word in filed.get(key.as_str()).into_iter().flatten() {
                        if !found.contains(&**word) && self.instantiates(word, &chars) {
                            found.insert(word.to_string());
                        }
                    }
                }
            }
        }
        found.into_iter().collect()
    }

    fn instantiates(&self, word: &str, token: &[char]) -> bool {
        self.held
            .get(word)
            .is_some_and(|held| glob(&held.chars, token))
    }
}

/// (the prefix or suffix a word is filed under, whether it is its prefix).
fn filing(chars: &[char]) -> (String, bool) {
    let prefix: String = chars.iter().take_while(|c| !is_wild(**c)).collect();
    if prefix.chars().count() >= MIN_LITERAL {
        return (prefix, true);
    }
    let mut suffix: Vec<char> = chars
        .iter()
        .rev()
        .take_while(|c| !is_wild(**c))
        .copied()
        .collect();
    suffix.reverse();
    (suffix.into_iter().collect(), false)
}

fn is_wild(c: char) -> bool {
    c == '*' || c == '?'
}

/// Whether `token` is an instantiation of `pattern` (`*` any run, `?` one character), whole:
/// the classic walk that remembers the last star and backtracks to it.
fn glob(pattern: &[char], token: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None; // (pattern after the star, token then)
    while t < token.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p + 1, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == token[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((after, from)) => {
                    p = after;
                    t = from + 1;
                    star = Some((after, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, token: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = token.chars().collect();
        glob(&p, &t)
    }

    #[test]
    fn stars_take_any_run_and_questions_one_character() {
        assert!(matches("hous*", "house"));
        assert!(matches("hous*", "hous"));
        assert!(matches("te?t", "test"));
        assert!(!matches("te?t", "tet"));
        assert!(matches("*ing", "amazing"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(matches("é?*", "éa"));
    }

    #[test]
    fn a_word_is_found_under_its_prefix_or_suffix_until_its_last_holder_goes() {
        let mut index = WildcardIndex::default();
        for word in ["hous*", "hous*", "*ing", "te?t"] {
            index.add(word);
        }
        let tokens = ["household", "testing", "test", "x"];
        assert_eq!(index.found(tokens), ["*ing", "hous*", "te?t"]);
        index.discard("hous*");
        assert_eq!(index.found(tokens), ["*ing", "hous*", "te?t"]);
        index.discard("hous*");
        index.discard("*ing");
        assert_eq!(index.found(tokens), ["te?t"]);
        assert_eq!(index.len(), 1);
    }
}
