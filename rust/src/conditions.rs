//! What an alternative requires of a publication's terms beside its words, checked in the core
//! (issue 53): filter terms it must hold, terms it must not, and conditions on attributes and
//! links, as `wordcast.query.conditions.Condition` reads them (the reference this is held to,
//! byte for byte through the messages written, by `tests/unit/test_message_writer.py`).
//!
//! A condition holds where some term `name:value` of the publication satisfies it: a range or
//! comparison of numbers compares the values that are numbers, as numbers; of ISO dates, the
//! values that are ISO dates, as text; of anything else, every value, as text; `url:` holds
//! where a value contains its part. Pure: no Python here.

/// A condition as Python gives it: (name, kind — "number", "date", "text" or "contains" —, low,
/// high, low included, high included, the part contained); an end "" is open.
pub(crate) type ConditionIn = (String, String, String, String, bool, bool, String);
/// The term checks of a rule as Python gives them: (filter terms required, terms excluded,
/// conditions required, conditions excluded).
pub(crate) type TermRuleIn = (Vec<String>, Vec<String>, Vec<ConditionIn>, Vec<ConditionIn>);

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Number(Option<f64>, Option<f64>),
    Date,
    Text,
    Contains(Box<str>),
}

/// One condition, its ends read once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    prefix: Box<str>, // "name:"
    kind: Kind,
    low: Box<str>,
    high: Box<str>,
    low_inclusive: bool,
    high_inclusive: bool,
}

impl Condition {
    pub(crate) fn new((name, kind, low, high, low_in, high_in, part): ConditionIn) -> Self {
        let number = |end: &str| (!end.is_empty()).then(|| end.parse::<f64>().unwrap_or(0.0));
        let kind = match kind.as_str() {
            "number" => Kind::Number(number(&low), number(&high)),
            "date" => Kind::Date,
            "contains" => Kind::Contains(part.into()),
            _ => Kind::Text,
        };
        Condition {
            prefix: format!("{name}:").into(),
            kind,
            low: low.into(),
            high: high.into(),
            low_inclusive: low_in,
            high_inclusive: high_in,
        }
    }

    /// Whether some term of `terms` satisfies it.
    pub(crate) fn holds<'a>(&self, terms: impl IntoIterator<Item = &'a str>) -> bool {
        terms
            .into_iter()
            .filter_map(|term| term.strip_prefix(&*self.prefix))
            .any(|value| self.admits(value))
    }

    fn admits(&self, value: &str) -> bool {
        match &self.kind {
            Kind::Contains(part) => value.contains(&**part),
            Kind::Number(low, high) => {
                is_number(value)
                    && within(
                        value.parse::<f64>().unwrap_or(f64::NAN),
                        low.as_ref(),
                        high.as_ref(),
                        (self.low_inclusive, self.high_inclusive),
                    )
            }
            Kind::Date if !is_date(value) => false,
            Kind::Date | Kind::Text => {
                let end = |e: &'_ str| (!e.is_empty()).then_some(e.to_string());
                within(
                    value.to_string(),
                    end(&self.low).as_ref(),
                    end(&self.high).as_ref(),
                    (self.low_inclusive, self.high_inclusive),
                )
            }
        }
    }
}

/// Whether `value` lies between the ends given (None: open), each included or not.
fn within<T: PartialOrd>(
    value: T,
    low: Option<&T>,
    high: Option<&T>,
    (low_in, high_in): (bool, bool),
) -> bool {
    if let Some(low) = low {
        if value < *low || (value == *low && !low_in) {
            return false;
        }
    }
    match high {
        Some(high) => !(value > *high || (value == *high && !high_in)),
        None => true,
    }
}

/// `[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?`, the reference's `_NUMBER`, whole.
fn is_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut at = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let whole = digits(at);
    at += whole;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let fraction = digits(at);
        if whole == 0 && fraction == 0 {
            return false;
        }
        at += fraction;
    } else if whole == 0 {
        return false;
    }
    if b.get(at) == Some(&b'e') {
        at += 1 + usize::from(matches!(b.get(at + 1), Some(b'-' | b'+')));
        let exponent = digits(at);
        if exponent == 0 {
            return false;
        }
        at += exponent;
    }
    at == b.len()
}

/// `\d{4}-\d{2}-\d{2}(t[\d:.]+(z|[-+]\d{2}:?\d{2})?)?`, the reference's `_DATE`, whole.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digit_at = |k: usize| b.get(k).is_some_and(u8::is_ascii_digit);
    let day = b.len() >= 10
        && (0..10).all(|k| {
            if k == 4 || k == 7 {
                b[k] == b'-'
            } else {
                digit_at(k)
            }
        });
    if !day {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    if b[10] != b't' {
        return false;
    }
    let time = b[11..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || matches!(c, b':' | b'.'))
        .count();
    let zone = &b[11 + time..];
    if time == 0 {
        return false;
    }
    let digits = |x: &[u8]| x.iter().all(u8::is_ascii_digit);
    match zone {
        [] | [b'z'] => true,
        [b'-' | b'+', rest @ ..] => match rest.len() {
            4 => digits(rest),
            5 => rest[2] == b':' && digits(&rest[..2]) && digits(&rest[3..]),
            _ => false,
        },
        _ => false,
    }
}

/// What an alternative requires of a publication's terms beside its words and positions.
#[derive(Debug, Default)]
pub(crate) struct TermRule {
    required: Vec<Box<str>>,
    excluded: Vec<Box<str>>,
    conditions: Vec<Condition>,
    not_conditions: Vec<Condition>,
}

impl TermRule {
    pub(crate) fn new((required, excluded, conditions, not_conditions): TermRuleIn) -> Self {
        TermRule {
            required: required.into_iter().map(Into::into).collect(),
            excluded: excluded.into_iter().map(Into::into).collect(),
            conditions: conditions.into_iter().map(Condition::new).collect(),
            not_conditions: not_conditions.into_iter().map(Condition::new).collect(),
        }
    }

    /// Whether it asks anything of the terms.
    pub(crate) fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.excluded.is_empty()
            && self.conditions.is_empty()
            && self.not_conditions.is_empty()
    }

    /// Whether a publication whose terms are `terms` satisfies it.
    pub(crate) fn holds<T: AsRef<str>>(&self, terms: &[T]) -> bool {
        let has = |wanted: &str| terms.iter().any(|t| t.as_ref() == wanted);
        let all = || terms.iter().map(AsRef::as_ref);
        self.required.iter().all(|t| has(t))
            && !self.excluded.iter().any(|t| has(t))
            && self.conditions.iter().all(|c| c.holds(all()))
            && !self.not_conditions.iter().any(|c| c.holds(all()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, low: &str, high: &str) -> Condition {
        let name = "score".to_string();
        Condition::new((
            name,
            kind.into(),
            low.into(),
            high.into(),
            true,
            false,
            String::new(),
        ))
    }

    #[test]
    fn numbers_compare_as_numbers_and_other_values_are_passed_over() {
        let above_nine = condition("number", "9", "");
        assert!(above_nine.holds(["score:10", "title:x"]));
        assert!(!above_nine.holds(["score:high", "score:8.5"]));
        let below_five = condition("number", "", "5");
        assert!(!below_five.holds(["score:5"])); // the high end left out
        assert!(below_five.holds(["score:-1e2"]));
    }

    #[test]
    fn dates_compare_as_text_among_dates() {
        let january = condition("date", "2026-01-01", "2026-02-01");
        assert!(january.holds(["score:2026-01-31t10:00:00z"]));
        assert!(!january.holds(["score:2026-02-01", "score:soon"]));
    }

    #[test]
    fn the_grammars_are_the_references() {
        for yes in ["1", "-1", "+.5", "5.", "1e5", "2.5e-3"] {
            assert!(is_number(yes), "{yes}");
        }
        for no in ["", ".", "e5", "1e", "1.2.3", "--1", "1 "] {
            assert!(!is_number(no), "{no}");
        }
        for yes in [
            "2026-01-31",
            "2026-01-31t10:00",
            "2026-01-31t10:00z",
            "2026-01-31t1+0100",
        ] {
            assert!(is_date(yes), "{yes}");
        }
        for no in ["2026-1-31", "2026-01-31t", "2026-01-31x", "2026-01-31tz"] {
            assert!(!is_date(no), "{no}");
        }
    }

    #[test]
    fn a_part_of_a_link_is_found_in_it() {
        let github = Condition::new((
            "url".into(),
            "contains".into(),
            String::new(),
            String::new(),
            true,
            true,
            "github.com".into(),
        ));
        assert!(github.holds(["url:https://github.com/psf"]));
        assert!(!github.holds(["url:https://gitlab.com", "github.com"]));
    }
}
