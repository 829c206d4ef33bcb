"""Queries written as X's rules or Lucene's syntax: each piece read otherwise is named, with
how it is read (issue 53's table), and a query that reads as it is meant has no warning."""

from __future__ import annotations

import pytest

from wordcast.query.boolean import parse_query
from wordcast.query.misreadings import misreadings


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("obama or biden", ["`or` is a word, and a stop word"]),
        ("white hous*", ["`hous*`: wildcards are not read", "`hou`"]),
        ("pythn~1", ["`pythn~1`: fuzzy matching is not supported", "`pythn`"]),
        ("score:>3", ["`score:>3` is read as the attribute `score` equal to the text `>3`"]),
        ("price:[10 TO 20] shoes", []),  # a range spans pieces: its start still says so
        ("#python @guido", ["`#python` is read as the word `python`", "`@guido`"]),
        ("python has:links", ["`has:links` is read as: the publication has an attribute"]),
        ("news is:retweet", ["`is:retweet` is read as the attribute `is`"]),
        ('"white house"~3', ["`NEAR/3(white house)`"]),
        ("a || b", ["`||` is not an operator"]),
        ("apple && pear", ["`&&` is not an operator"]),
        ("apple not pear", ["`not` is a word"]),
        ("+apple pear", ["`+apple`: `+` is not read"]),
        ("python^2 snakes", ["`python^2`: boosts are not read", "`python`"]),
        ("$AAPL earnings", ["`$AAPL` is read as the word `AAPL`: a cashtag"]),
        ("!spam ham", ["`!spam`: `!` is not read: write `-spam`"]),
    ],
)
def test_each_piece_read_otherwise_is_named_with_how_it_is_read(
    query: str, named: list[str]
) -> None:
    found = " | ".join(misreadings(query))
    for part in named:
        assert part in found, (query, found)
    if query.startswith("price:"):
        assert "`price:[10` is read as the attribute `price`" in found


@pytest.mark.parametrize(
    "query",
    [
        "white house",
        "obama OR biden",
        "(white OR black) house",
        "senate -house",
        "NOT (red blue) apple",
        '"white house"',
        "NEAR/3(senate vote)",
        "python source:rss",
        "bibliothek lang:de",
        "covid-19 vaccine",
        "http://example.com/path news",
        "C++ compiler",
        "has:url python",
        "python AND snakes",
    ],
)
def test_a_query_that_reads_as_meant_has_no_warning(query: str) -> None:
    parse_query(query)  # every one is a query wordcast reads
    assert misreadings(query) == []


def test_a_piece_written_twice_is_named_once() -> None:
    assert len(misreadings("a or b or c")) == 1
