//! A text's entities (issue 53, X's rule operators): each hashtag, mention, cashtag and link,
//! as `wordcast.query.analysis.entity_terms` finds them, which is the reference this is held to.
//!
//! The text is read with its default-ignorable code points dropped. An entity starts at a marker
//! that follows nothing, or anything but a token character, `_` or another marker (`&`, `#`,
//! `@`, `$`), and is, as the reference's regular expression reads it from left to right:
//! - `#` and a run of token characters and `_`, not only ASCII digits and `_`: the term `#`
//!   and the run's normalised tokens joined by `_`;
//! - `@` and a run of ASCII letters, digits and `_`: `@` and the run in lower case;
//! - `$` and a run of ASCII letters that no token character or `_` follows: `$` and the run;
//! - `http://` or `https://` (any case) and a run of printable ASCII but `<>"\`, its trailing
//!   `.,;:!?)]}'` left out: `url:` and the link in lower case.
//!
//! Each kind found adds its flag (`has:hashtags`, `has:mentions`, `has:cashtags`,
//! `has:links`). Pure: no Python here.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use memchr::{memchr, memchr3, memchr3_iter, memmem};

use crate::analysis::{is_ignorable, is_token_char, normalised_tokens};

const LINK_TRAILING: &str = ".,;:!?)]}'";

/// The entity terms of `text`, each once and sorted, into `out`; None when a hashtag holds a
/// code point the tables cannot vouch for (the reference reads that text).
pub fn entity_terms(text: &str, out: &mut Vec<String>) -> Option<()> {
    out.clear();
    for_each_entity(text, &mut Scratch::default(), |term| {
        out.push(term.to_string())
    })?;
    out.sort_unstable();
    out.dedup();
    Some(())
}

/// What [`for_each_entity`] reuses from one text to the next.
#[derive(Default)]
pub struct Scratch {
    term: String,
    starts: Vec<usize>,
}

/// Call `visit` with each entity term of `text` (a term may come twice, the flags last), the
/// terms made in `scratch`: no allocation for a text without entities, nor for most with; None
/// when a hashtag holds a code point the tables cannot vouch for.
pub fn for_each_entity(
    text: &str,
    scratch: &mut Scratch,
    mut visit: impl FnMut(&str),
) -> Option<()> {
    let bytes = text.as_bytes();
    if memchr3(b'#', b'@', b'$', bytes).is_none() && memchr(b':', bytes).is_none() {
        return Some(());
    }
    if text.is_ascii() {
        ascii_entities(bytes, scratch, visit);
        return Some(());
    }
    let chars: Vec<char> = text.chars().filter(|&c| !is_ignorable(c)).collect();
    let mut found = BTreeSet::new();
    let mut at = 0;
    while at < chars.len() {
        let free = at == 0 || !joins(chars[at - 1]);
        let taken = if free {
            entity_at(&chars, at, &mut found)?
        } else {
            0
        };
        at += taken.max(1);
    }
    found.iter().for_each(|term| visit(term));
    Some(())
}

/// What a marker may not follow.
fn joins(c: char) -> bool {
    is_token_char(c) || matches!(c, '_' | '#' | '@' | '$' | '&')
}

/// How many characters the entity starting at `at` takes (0: none starts there), its terms
/// added to `found`.
fn entity_at(chars: &[char], at: usize, found: &mut BTreeSet<String>) -> Option<usize> {
    let run = |from: usize, keep: fn(char) -> bool| {
        chars[from..].iter().take_while(|&&c| keep(c)).count()
    };
    match chars[at] {
        '#' => {
            let n = run(at + 1, |c| is_token_char(c) || c == '_');
            if n > 0 {
                hashtag(&chars[at + 1..at + 1 + n], found)?;
            }
            Some(n + usize::from(n > 0))
        }
        '@' => {
            let n = run(at + 1, |c| c.is_ascii_alphanumeric() || c == '_');
            if n > 0 {
                let name: String = chars[at + 1..at + 1 + n].iter().collect();
                found.insert(format!("@{}", name.to_ascii_lowercase()));
                found.insert("has:mentions".to_string());
            }
            Some(n + usize::from(n > 0))
        }
        '$' => {
            let n = run(at + 1, |c| c.is_ascii_alphabetic());
            let next = chars.get(at + 1 + n).copied();
            if n == 0 || next.is_some_and(|c| is_token_char(c) || c == '_') {
                return Some(0);
            }
            let tag: String = chars[at + 1..at + 1 + n].iter().collect();
            found.insert(format!("${}", tag.to_ascii_lowercase()));
            found.insert("has:cashtags".to_string());
            Some(n + 1)
        }
        'h' | 'H' => Some(link(chars, at, found)),
        _ => Some(0),
    }
}

fn hashtag(body: &[char], found: &mut BTreeSet<String>) -> Option<()> {
    if body.iter().all(|&c| c.is_ascii_digit() || c == '_') {
        return Some(());
    }
    let body: String = body.iter().collect();
    let mut tokens = Vec::new();
    normalised_tokens(&body, &mut tokens)?;
    if !tokens.is_empty() {
        found.insert(format!("#{}", tokens.join("_")));
        found.insert("has:hashtags".to_string());
    }
    Some(())
}

/// A link starting at `at` (its length; 0 when none does), its terms added to `found`.
fn link(chars: &[char], at: usize, found: &mut BTreeSet<String>) -> usize {
    let lowered: String = chars[at..chars.len().min(at + 8)]
        .iter()
        .map(char::to_ascii_lowercase)
        .collect();
    let scheme = if lowered.starts_with("https://") {
        5
    } else if lowered.starts_with("http://") {
        4
    } else {
        return 0;
    };
    let start = at + scheme + 3;
    let n = chars[start..]
        .iter()
        .take_while(|&&c| c.is_ascii_graphic() && !matches!(c, '<' | '>' | '"' | '\\'))
        .count();
    if n == 0 {
        return 0;
    }
    let rest: String = chars[start..start + n].iter().collect();
    let rest = rest.trim_end_matches(|c| LINK_TRAILING.contains(c));
    if !rest.is_empty() {
        let scheme: String = lowered[..scheme].to_string();
        found.insert(format!("url:{scheme}://{}", rest.to_ascii_lowercase()));
        found.insert("has:links".to_string());
    }
    scheme + 3 + n
}

/// [`for_each_entity`] of an ASCII text (nothing to drop, fold or normalise but ASCII case),
/// read from the places of its markers and of its links' `://` alone.
fn ascii_entities(bytes: &[u8], scratch: &mut Scratch, mut visit: impl FnMut(&str)) {
    static SCHEME_END: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    let scheme_end = SCHEME_END.get_or_init(|| memmem::Finder::new(b"://"));
    let starts = &mut scratch.starts;
    starts.clear();
    starts.extend(memchr3_iter(b'#', b'@', b'$', bytes));
    let markers = starts.len();
    for at in scheme_end.find_iter(bytes) {
        let scheme = |n: usize| at >= n && bytes[at - n..at].eq_ignore_ascii_case(&b"https"[..n]);
        if scheme(5) {
            starts.push(at - 5);
        } else if scheme(4) {
            starts.push(at - 4);
        }
    }
    if starts.len() > markers {
        starts.sort_unstable(); // the markers' places come in order; the links' after them
    }
    let (mut free, mut kinds) = (0, [false; 4]); // where the last entity ended; kinds found
    for &at in starts.iter() {
        let joined = at > 0 && {
            let b = bytes[at - 1];
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'#' | b'@' | b'$' | b'&')
        };
        if at < free || joined {
            continue;
        }
        let term = &mut scratch.term;
        term.clear();
        let (taken, kind) = ascii_entity_at(bytes, at, term);
        free = at + taken;
        if let Some(kind) = kind {
            kinds[kind] = true;
            visit(term);
        }
    }
    for (found, flag) in kinds.iter().zip(FLAGS) {
        if *found {
            visit(flag);
        }
    }
}

/// Each kind's flag, in the order [`ascii_entity_at`] numbers them.
const FLAGS: [&str; 4] = ["has:hashtags", "has:mentions", "has:cashtags", "has:links"];

/// How many bytes the entity starting at `at` of an ASCII text takes, and its kind (None: no
/// term), its term written in `term`.
fn ascii_entity_at(bytes: &[u8], at: usize, term: &mut String) -> (usize, Option<usize>) {
    let run = |keep: fn(u8) -> bool| bytes[at + 1..].iter().take_while(|&&b| keep(b)).count();
    let (kind, n, taken) = match bytes[at] {
        b'#' => {
            let n = run(|b| b.is_ascii_alphanumeric() || b == b'_');
            let tag = bytes[at + 1..at + 1 + n]
                .iter()
                .any(u8::is_ascii_alphabetic);
            (tag.then_some(0), n, n + usize::from(n > 0))
        }
        b'@' => {
            let n = run(|b| b.is_ascii_alphanumeric() || b == b'_');
            ((n > 0).then_some(1), n, n + usize::from(n > 0))
        }
        b'$' => {
            let n = run(|b| b.is_ascii_alphabetic());
            let next = bytes.get(at + 1 + n).copied();
            if n == 0 || next.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return (0, None);
            }
            (Some(2), n, n + 1)
        }
        _ => return ascii_link(bytes, at, term),
    };
    if kind.is_none() {
        return (taken, None);
    }
    term.push(char::from(bytes[at]));
    for &b in &bytes[at + 1..at + 1 + n] {
        // A hashtag's tokens joined by one `_`, none at either end (`#_a__b_` is `#a_b`).
        if kind == Some(0) && b == b'_' && (term.len() == 1 || term.ends_with('_')) {
            continue;
        }
        term.push(char::from(b.to_ascii_lowercase()));
    }
    if kind == Some(0) && term.len() > 1 && term.ends_with('_') {
        term.pop();
    }
    (taken, kind)
}

/// The link of an ASCII text starting at `at` (its `http`), as [`link`] reads one.
fn ascii_link(bytes: &[u8], at: usize, term: &mut String) -> (usize, Option<usize>) {
    let scheme = if bytes[at + 4] == b':' { 4 } else { 5 };
    let start = at + scheme + 3;
    let n = bytes[start..]
        .iter()
        .take_while(|&&b| b.is_ascii_graphic() && !matches!(b, b'<' | b'>' | b'"' | b'\\'))
        .count();
    if n == 0 {
        return (0, None);
    }
    let rest = &bytes[start..start + n];
    let trailing = rest.iter().rev();
    let kept = n - trailing
        .take_while(|&&b| LINK_TRAILING.as_bytes().contains(&b))
        .count();
    if kept == 0 {
        return (scheme + 3 + n, None);
    }
    term.push_str(if scheme == 4 {
        "url:http://"
    } else {
        "url:https://"
    });
    term.extend(
        rest[..kept]
            .iter()
            .map(|b| char::from(b.to_ascii_lowercase())),
    );
    (scheme + 3 + n, Some(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        entity_terms(text, &mut out).expect("vouched for");
        out
    }

    #[test]
    fn each_kind_is_found_with_its_flag() {
        assert_eq!(
            terms("#Python by @Guido_vR, $AAPL up: https://Example.com/a?b=1)."),
            [
                "#python",
                "$aapl",
                "@guido_vr",
                "has:cashtags",
                "has:hashtags",
                "has:links",
                "has:mentions",
                "url:https://example.com/a?b=1"
            ]
        );
    }

    #[test]
    fn markers_inside_words_and_numbers_are_not_entities() {
        assert_eq!(
            terms("a@b.com &#39; #123 $100 $AAPL1 xhttp://a"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn ignorable_code_points_do_not_split_a_hashtag() {
        assert_eq!(
            terms("#ca\u{200d}fé #Straße"),
            ["#café", "#strasse", "has:hashtags"]
        );
    }
}
