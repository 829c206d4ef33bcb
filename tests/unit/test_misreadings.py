"""Queries written as X's rules or Lucene's syntax: each piece read otherwise is named, with
how it is read (issue 53's table), and a query that reads as it is meant has no warning."""

from __future__ import annotations

import pytest

from wordcast.query.boolean import parse_query
from wordcast.query.misreadings import earlier_readings, misreadings


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("obama or biden", ["`or` is a word, and a stop word"]),
        ("pythn~1", ["`pythn~1`: fuzzy matching is not supported", "`pythn`"]),
        ("apple not pear", ["`not` is a word"]),
        ("+apple pear", ["`+apple` with `pear`: every word is required here"]),
        ("python^2 snakes", ["`python^2`: boosts are not read", "`python`"]),
        ('"white house"^2', ["boosts are not read"]),
        ("/ab+c/ python", ["regular expressions are not read"]),
        ("tags:py* python", ["wildcards are not read in an attribute's value"]),
    ],
)
def test_each_piece_read_otherwise_is_named_with_how_it_is_read(
    query: str, named: list[str]
) -> None:
    found = " | ".join(misreadings(query))
    for part in named:
        assert part in found, (query, found)


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
        # X's operators and Lucene's syntax, read as their writers mean them (issue 53).
        "white hous*",
        "te?t python",
        "#python @guido $AAPL",
        "python has:links",
        "news is:retweet",
        "score:>3 news",
        "price:[10 TO 20] shoes",
        '"white house"~3',
        "apple || pear",
        "apple && pear",
        "!spam ham",
        "+apple +pear",
        'python url:"github.com"',
        "news source:(rss OR atom)",
    ],
)
def test_a_query_that_reads_as_meant_has_no_warning(query: str) -> None:
    parse_query(query)  # every one is a query wordcast reads
    assert misreadings(query) == []


def test_a_piece_written_twice_is_named_once() -> None:
    assert len(misreadings("a or b or c")) == 1


@pytest.mark.parametrize(
    ("query", "stored", "says"),
    [
        ("white hous*", ("hou", "white"), "stored by an earlier version as the words `hou white`"),
        ("#python", ("python",), "read now as `#python`"),
        ("!spam ham", ("ham", "spam"), "subscribe it again"),
        ("news score:>3", ("new",), "`score:>3`: read as a condition since issue 53"),
        ("news price:[10 TO 20]", ("new",), "`price:[10`: read as a condition"),
        ('news url:"x.org"', ("new",), "read as a condition"),
        ("news has:links", ("new",), "read from the text too"),
        ('"senate vote"~3', ("senat", "vote"), "read as a proximity window"),
    ],
)
def test_a_query_read_otherwise_by_earlier_versions_says_how(
    query: str, stored: tuple[str, ...], says: str
) -> None:
    assert any(says in line for line in earlier_readings(query, stored)), earlier_readings(
        query, stored
    )


def test_a_query_read_as_it_always_was_has_no_earlier_reading() -> None:
    for query in ("white house", "obama OR biden", "python source:rss", "senate -house"):
        assert earlier_readings(query, parse_query(query).clauses[0].words) == []
