"""Why a publication matched (wordcast.query.explain, and the messages that carry it): every
offset given points at text that analyses to what it claims, none is left out, and the
alternative named is the one that delivers."""

from __future__ import annotations

import random
import re

import orjson

from tests.unit.support import held_subscriptions, routed_batch, written
from wordcast.errors import InvalidInput
from wordcast.query.analysis import analyse, normalised_tokens, term_positions, token_offsets
from wordcast.query.boolean import parse_query
from wordcast.query.explain import (
    AnalysedText,
    _normalised_with_origin,
    explain_clause,
    explain_pattern,
)
from wordcast.query.patterns import normalise, parse
from wordcast.webhooks.payload import matches_of

VOCABULARY = ["White", "house", "of", "cards", "Senate", "vote", "the", "big", "apple", "a", "x"]
SEPARATORS = [" ", "  ", ", ", "\n", " — ", "\u200d ", "\t"]
AWKWARD = ["Straße", "ﬁle", "𝐋odash", "hou\u200dse", "⑴", "İstanbul", "naïve", "日本語", "ΣΊΣΥΦΟΣ"]


def _text(rng: random.Random, words: list[str], most: int = 9) -> str:
    parts = []
    for _ in range(rng.randint(1, most)):
        parts += [rng.choice(words), rng.choice(SEPARATORS)]
    return "".join(parts[:-1])


def test_token_offsets_read_the_same_tokens_and_point_at_them() -> None:
    rng = random.Random(3)
    for _ in range(2_000):
        text = _text(rng, VOCABULARY + AWKWARD)
        tokens = token_offsets(text)
        assert [token for token, _, _ in tokens] == normalised_tokens(text), text
        for token, start, end in tokens:
            assert token in normalised_tokens(text[start:end]), (text, token, start, end)


def test_explanations_point_at_every_term_and_span_of_the_alternative_that_delivers() -> None:
    rng = random.Random(5)
    shapes = ['"{a} {b}"', '"{a} of {b}"', "NEAR/{n}({a} {b})", '"{a} {b}" OR {c}', "{a} {b}",
              '{c} NOT "{a} {b}"', "NEAR/{n}({a} {b}) -{c}", '("{a} {b}" OR {c}) {d}',
              "{a} OR {b} OR ({c} {d})"]  # fmt: skip
    explained = 0
    for _ in range(4_000):
        a, b, c, d = (rng.choice(VOCABULARY) for _ in range(4))
        query = rng.choice(shapes).format(a=a, b=b, c=c, d=d, n=rng.randint(1, 3))
        text = _text(rng, VOCABULARY)
        try:
            read = parse_query(query)
        except InvalidInput:
            continue
        terms, positions = analyse(text), term_positions(text)
        first = next((k for k, c in enumerate(read.clauses) if c.holds(terms, positions)), None)
        if first is None:
            continue
        clause = read.clauses[first]
        matched = explain_clause(clause, AnalysedText(text), first)
        assert matched["alternative"] == first
        assert matched["clause"] == str(clause)
        assert set(matched["terms"]) == set(clause.words)
        for term, offsets in matched["terms"].items():
            assert len(offsets) == len(positions[term]), (text, term)  # every occurrence
            for start, end in offsets:
                assert term in analyse(text[start:end]), (text, term, start, end)
        assert set(matched.get("spans", {})) == {str(span) for span in clause.spans}
        for span in clause.spans:
            offsets = matched["spans"][str(span)]
            assert offsets, (query, text)
            for start, end in offsets:
                assert span.holds(term_positions(text[start:end])), (query, text, start, end)
        explained += 1
    assert explained > 500


def test_each_delivered_match_names_the_alternative_that_delivers_it() -> None:
    held, subscriptions = held_subscriptions('"white house" OR (senate vote) OR apple')
    texts = ["The White House: senate vote", "apple senate, no vote", "house Senate vote"]
    publications = [(f"p{k}", text, tuple(analyse(text)), True) for k, text in enumerate(texts)]
    candidates = [
        (stored, k)
        for k, text in enumerate(texts)
        for stored in subscriptions
        if stored != "wild" and set(subscriptions[stored].terms) <= analyse(text)
    ] + [("wild", 0), ("wild", 2)]
    pairs = held.delivering(
        candidates, lambda k: analyse(texts[k]), lambda k: term_positions(texts[k])
    )
    found = written(pairs, routed_batch(publications, "", ""), subscriptions, held, most=100)
    delivered = {
        (m["subscription_id"], m["publication_id"]): m["matched"]
        for message in found
        for m in matches_of(orjson.loads(message.body))
    }
    assert delivered[("q", "p0")]["alternative"] == 1  # the phrase, before senate vote
    assert delivered[("q", "p0")]["spans"] == {'"white hous"': [[4, 15]]}
    assert delivered[("q", "p1")]["alternative"] == 0  # apple
    assert delivered[("q", "p2")]["alternative"] == 2
    assert delivered[("q", "p2")]["terms"] == {"senat": [[6, 12]], "vote": [[13, 17]]}
    assert delivered[("plain", "p1")] == {"terms": {"senat": [[6, 12]]}}  # its only alternative
    assert delivered[("wild", "p0")] == {"pattern": "h?use* s*e", "offsets": [[10, 28]]}
    assert delivered[("wild", "p2")] == {"pattern": "h?use* s*e", "offsets": [[0, 17]]}
    assert len(delivered) == 8  # plain matches all three


def test_a_patterns_offsets_hold_an_instantiation_of_it() -> None:
    rng = random.Random(9)
    words = ["Straße", "STRASSE", "white", "House", "İs", "ΣΊΣ", "ﬁ", "a"]
    patterns = ["stra*e", "h?use", "wh*e h", "ss", "*s?s*", "ﬁ", "i̇s", "σ?σ"]
    found = 0
    for _ in range(3_000):
        text = _text(rng, words, 6)
        normalised, origin = _normalised_with_origin(text)
        assert normalised == normalise(text)
        assert len(origin) == len(normalised) + 1
        pattern = rng.choice(patterns)
        regex = re.compile(parse(pattern, min_anchor=1).regex(), re.DOTALL)
        if not regex.search(normalise(text)):
            continue
        ((start, end),) = explain_pattern(pattern, text)["offsets"]
        assert regex.search(normalise(text[start:end])), (pattern, text, start, end)
        found += 1
    assert found > 500
