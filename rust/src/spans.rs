//! The phrases and proximity windows of a boolean query's alternative, checked and explained on
//! the compiled analyser's positions (`wordcast.query.spans.Span`, `Clause.spans_hold`).
//!
//! Pure: no Python here.

use std::fmt::Write as _;

use crate::analysis::Positions;
use crate::conditions::{TermRule, TermRuleIn};
use crate::messages::{json_string, PushDigits};

/// A span as Python gives it: ([(term, offset)], near, as the query writes it).
pub(crate) type SpanIn = (Vec<(String, i64)>, u32, String);
/// A rule as Python gives it: (spans, not_spans, the start of its `matched`, what it asks of
/// the terms, what its `matched` says after its terms).
pub(crate) type RuleIn = (Vec<SpanIn>, Vec<SpanIn>, Vec<u8>, TermRuleIn, Vec<u8>);

/// A phrase (`near` 0: each term at its offset from the first) or a proximity window (`near`
/// ≥ 1: every term within `near` positions), as `wordcast.query.spans.Span`.
pub(crate) struct Span {
    pub(crate) terms: Vec<(u32, i64)>, // numbers in `Table::terms`
    pub(crate) near: u32,
    pub(crate) name: Box<str>, // as `matched` names it: str(span)
}

/// Every span of `spans` holds and none of `not_spans` (`Clause.spans_hold`), and the terms
/// are as `terms` asks (its filters, exclusions and conditions); `head` is the start of a
/// match's `matched` (`"alternative":k,"clause":"…",`), `tail` what follows its terms
/// (`,"filters":[…]`).
pub(crate) struct SpanRule {
    pub(crate) spans: Vec<Span>,
    pub(crate) not_spans: Vec<Span>,
    pub(crate) head: Box<[u8]>,
    pub(crate) terms: TermRule,
    pub(crate) tail: Box<[u8]>,
}

impl SpanRule {
    /// Whether it has phrases or windows to check (on positions).
    pub(crate) fn has_spans(&self) -> bool {
        !self.spans.is_empty() || !self.not_spans.is_empty()
    }

    pub(crate) fn holds(&self, positions: &Positions) -> bool {
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

/// `,"spans":{name:[[start,end],…],…}`: where each span of an alternative holds in the text
/// (`explain_clause`'s `spans`).
pub(crate) fn spans_json(
    rule: &SpanRule,
    placed: &Positions,
    tokens: &[(u32, u32)],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(b",\"spans\":{");
    for (k, span) in rule.spans.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        json_string(out, &span.name);
        out.extend_from_slice(b":[");
        let mut first_place = true;
        span.places(placed, |first, last| {
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
