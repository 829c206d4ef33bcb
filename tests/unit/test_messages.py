"""The messages a matcher builds from a batch's matches: grouping, bounds, and bodies byte for byte
as the JSON of the whole payload (the fragments they are put together from must not show)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import orjson
import pytest

from tests.unit.support import routed_batch, written
from wordcast.query.alternatives import HeldAlternatives
from wordcast.query.analysis import term_positions
from wordcast.query.boolean import parse_query, part_id
from wordcast.services.matcher.explanations import explained_matches
from wordcast.services.matcher.index import Batch
from wordcast.storage.outbox import MAX_SIGNERS, webhook_id
from wordcast.storage.records import STREAM_DELIVERY, Subscription, delivery_address
from wordcast.webhooks.payload import matches_of

AWKWARD = [
    'quote " and \\ slash',
    "ünïcödé ☃",
    "tab\there",
    "new\nline",
    "plain words",
    "</script>",
]


def _expected_body(batch: Batch, matches: list[tuple[Subscription, str, int]]) -> bytes:
    """The payload as one dict per match, encoded whole: what the body must equal."""
    return orjson.dumps(
        {
            "type": "matches",
            "publisher": batch.publisher,
            "stream": batch.stream or None,
            "matches": [
                {
                    "subscription_id": delivered,
                    **({"pattern": sub.pattern} if sub.is_pattern else {"query": sub.query}),
                    "publication_id": batch.ids[k],
                    "text": batch.texts[k],
                }
                for sub, delivered, k in matches
            ],
        }
    )


def _expected_v2_body(batch: Batch, body: dict[str, Any]) -> bytes:
    """The version 2 payload encoded whole, its publications in the order the body names them."""
    return orjson.dumps(
        {
            "type": "matches",
            "version": 2,
            "publisher": batch.publisher,
            "stream": batch.stream or None,
            "publications": [{"id": p["id"], "text": p["text"]} for p in body["publications"]],
            "matches": [
                {"subscription_id": m["subscription_id"], "publication": m["publication"]}
                for m in body["matches"]
            ],
        }
    )


@pytest.mark.parametrize("version", [1, 2])
def test_bodies_are_the_whole_payloads_json_and_every_match_is_in_one_message(
    version: int,
) -> None:
    rng = random.Random(7)
    alternatives = HeldAlternatives()
    subscriptions: dict[str, Subscription] = {}
    for n in range(200):
        url = f"http://127.0.0.1:9/hook-{n % 3}"
        tenant = ["", "acme"][n % 2]
        made = 1e9 + n / 8
        if n % 10 == 0:
            sub = Subscription(
                f"p{n}", "", (), url, 0, pattern=f"*{n}*", tenant=tenant, created=made
            )
        else:
            sub = Subscription(
                f"s{n}", rng.choice(AWKWARD), ("w",), url, 0, tenant=tenant, created=made
            )
        subscriptions[sub.id] = sub
    boolean = parse_query("(alpha beta) OR gamma")
    for part in range(2):
        stored = part_id("b0", part)
        subscriptions[stored] = Subscription(
            stored, "(alpha beta) OR gamma", ("g",), "u", 0, created=1e9 - 1
        )
        alternatives.add(stored, boolean)
    publications = [(f"pub-{k}", rng.choice(AWKWARD) + f" {k}", ("w",), False) for k in range(300)]
    # The second round bounds messages by bytes (a few matches each) rather than by count.
    for stream, max_bytes in (("", 1 << 20), ("news", 600)):
        batch = routed_batch(publications, "acme", stream, accepted=12.5)
        pairs = [(rng.choice(list(subscriptions)), rng.randrange(300)) for _ in range(3000)]
        pairs = list(dict.fromkeys(pairs))
        found = written(
            pairs,
            batch,
            subscriptions,
            alternatives,
            most=100,
            explain=False,
            max_bytes=max_bytes,
            subscriptions_max=MAX_SIGNERS,
            payload_version=version,
        )
        assert len(found) > 3000 * 100 // max_bytes  # the byte bound split them

        seen: list[tuple[str, str]] = []
        for message in found:
            body = orjson.loads(message.body)
            if version == 2:
                assert message.body == _expected_v2_body(batch, body)
                # Each publication named once, and each named by a match.
                named = [p["id"] for p in body["publications"]]
                assert len(set(named)) == len(named)
                assert {m["publication"] for m in body["matches"]} == set(range(len(named)))
                body["matches"] = matches_of(body)
                for m in body["matches"]:
                    sub = subscriptions[_stored_id(m, subscriptions)]
                    m.update({"pattern": sub.pattern} if sub.is_pattern else {"query": sub.query})
            matches = [
                (
                    subscriptions[stored],
                    alternatives.subscription_id(stored),
                    int(m["publication_id"].removeprefix("pub-")),
                )
                for m in body["matches"]
                for stored in [_stored_id(m, subscriptions)]
            ]
            if version == 1:
                assert message.body == _expected_body(batch, matches)
            delivered = [(m["subscription_id"], m["publication_id"]) for m in body["matches"]]
            assert message.webhook_id == webhook_id(delivered, "acme", stream)
            assert message.subscription_ids == tuple(dict.fromkeys(d for d, _ in delivered))
            each = Counter(d for d, _ in delivered)
            # Each subscription counted for the incarnation its record says (one for a query's
            # alternatives).
            incarnation = {
                alternatives.subscription_id(s.id): s.created for s in subscriptions.values()
            }
            assert list(message.per_subscription()) == [
                (d, count, incarnation[d]) for d, count in each.items()
            ]
            assert message.matches == len(delivered) <= 100
            assert len(message.body) <= max_bytes or message.matches == 1
            assert len(message.subscription_ids) <= MAX_SIGNERS
            assert message.published == 12.5
            assert {
                subscriptions[s].callback_url for s, _ in _stored(delivered, subscriptions)
            } == {message.callback_url}
            seen += delivered
        assert sorted(seen) == sorted(
            (alternatives.subscription_id(s), publications[k][0]) for s, k in pairs
        )


def _stored_id(match: dict[str, str], subscriptions: dict[str, Subscription]) -> str:
    """The stored id a delivered match came from (an alternative delivers its query's id)."""
    sub_id = match["subscription_id"]
    return sub_id if sub_id in subscriptions else part_id(sub_id, 0)


def _stored(
    delivered: list[tuple[str, str]], subscriptions: dict[str, Subscription]
) -> list[tuple[str, str]]:
    return [(_stored_id({"subscription_id": s}, subscriptions), p) for s, p in delivered]


def test_each_delivery_gets_its_own_message_and_both_get_one_each() -> None:
    hook = "http://127.0.0.1:9/hook"
    subscriptions = {
        "web": Subscription("web", "a", ("a",), delivery_address(hook, False), 0, tenant="t"),
        "sse": Subscription("sse", "a", ("a",), delivery_address("", True), 0, tenant="t"),
        "both": Subscription("both", "a", ("a",), delivery_address(hook, True), 0, tenant="t"),
    }
    assert subscriptions["both"].webhook_url == hook
    assert subscriptions["both"].to_stream
    assert (subscriptions["web"].webhook_url, subscriptions["web"].to_stream) == (hook, False)
    assert (subscriptions["sse"].webhook_url, subscriptions["sse"].to_stream) == ("", True)
    batch = routed_batch([("p1", "a text", ("text",), False)], "t", "")
    found = written(
        [(sub_id, 0) for sub_id in subscriptions], batch, subscriptions, HeldAlternatives(), 100
    )
    by_url = {message.callback_url: message.subscription_ids for message in found}
    # Within a message, by subscription id (not the order they matched in).
    assert by_url == {hook: ("both", "web"), STREAM_DELIVERY: ("both", "sse")}
    assert all(message.tenant == "t" for message in found)


def test_how_matches_are_split_into_messages_does_not_follow_the_order_they_matched_in() -> None:
    """A matcher restarted loads its subscriptions in another order: the same matches must make
    the same messages, under the same webhook-ids."""
    subscriptions = {
        f"s{k:03}": Subscription(f"s{k:03}", "w", ("w",), "http://x/hook", 0, tenant="acme")
        for k in range(600)
    }
    batch = routed_batch([("p1", "w", ("w",), False)], "acme", "")
    pairs = [(sub_id, 0) for sub_id in subscriptions]
    split = [
        sorted(m.webhook_id for m in written(order, batch, subscriptions, HeldAlternatives(), 500))
        for order in (pairs, pairs[::-1], pairs[300:] + pairs[:300])
    ]
    assert len(split[0]) == 2
    assert split[0] == split[1] == split[2]


def test_without_a_signers_bound_a_message_holds_any_number_of_subscriptions() -> None:
    """One secret signs (the endpoint's): a batch's matches for one URL are not split by how
    many subscriptions they are for."""
    subscriptions = {
        f"s{k}": Subscription(f"s{k}", "w", ("w",), "http://x/hook", 0, tenant="acme")
        for k in range(200)
    }
    pairs = [(sub_id, 0) for sub_id in subscriptions]
    batch = routed_batch([("p0", "w", ("w",), False)], "acme", "")
    found = written(pairs, batch, subscriptions, HeldAlternatives(), most=1000, explain=False)
    assert [m.matches for m in found] == [200]
    bounded = written(
        pairs,
        batch,
        subscriptions,
        HeldAlternatives(),
        most=1000,
        explain=False,
        subscriptions_max=MAX_SIGNERS,
    )
    assert [m.matches for m in bounded] == [64, 64, 64, 8]


def _tagged(sub: Subscription) -> dict[str, str]:
    """A match's tag member: after its subscription's id, when it has one."""
    return {"tag": sub.tag} if sub.tag else {}


@pytest.mark.parametrize("version", [1, 2])
def test_explained_bodies_are_the_whole_payloads_json_byte_for_byte(version: int) -> None:
    """With explanations, every match's ``matched`` is what :mod:`wordcast.query.explain` says,
    and the body is the JSON of the whole payload however it was put together."""
    from tests.unit.support import held_subscriptions
    from wordcast.query.analysis import analyse
    from wordcast.query.explain import AnalysedText, explain_clause, explain_pattern, explain_terms

    rng = random.Random(40)
    held, subscriptions = held_subscriptions('"white house" OR (senate vote -poll) OR apple')
    words = ["white", "house", "senate", "vote", "apple", "ünïcödé", 'quote"d', "tab\there"]
    for n in range(60):  # plain conjunctions, some of terms that need escaping
        terms = tuple(sorted({analyse(w).__iter__().__next__() for w in rng.sample(words, 2)}))
        subscriptions[f"s{n}"] = Subscription(f"s{n}", " ".join(terms), terms, "u", 0)
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(80)]
    texts += ["The White House: senate vote 🦆", "house Senate vote ⑴ apple"]
    publications = [(f"p{k}", t, tuple(analyse(t)), True) for k, t in enumerate(texts)]
    pairs = [
        (sub_id, k)
        for k, (_, _, terms, _) in enumerate(publications)
        for sub_id, sub in subscriptions.items()
        if (sub.pattern and k % 7 == 0) or (sub.terms and set(sub.terms) <= set(terms))
    ]
    pairs = held.delivering(
        pairs, lambda k: frozenset(publications[k][2]), lambda k: term_positions(texts[k])
    )
    batch = routed_batch(publications, "acme", "")
    found = written(
        pairs, batch, subscriptions, held, most=7, max_bytes=2_000, payload_version=version
    )

    def matched(stored: str, k: int) -> object:
        sub = subscriptions[stored]
        if sub.pattern:
            return explain_pattern(sub.pattern, texts[k])
        clause = held.clause(stored)
        analysed = AnalysedText(texts[k])
        if clause is None:
            return explain_terms(sub.terms, analysed)
        return explain_clause(clause[1], analysed, clause[0], clause[2])

    by_delivered = {(held.subscription_id(stored), k): stored for stored, k in pairs}
    seen = 0
    for message in found:
        body = orjson.loads(message.body)
        matches = matches_of(body)
        k_of = [int(m["publication_id"][1:]) for m in matches]
        stored = [
            by_delivered[(m["subscription_id"], k)] for m, k in zip(matches, k_of, strict=True)
        ]
        expected: dict[str, Any] = {"type": "matches"}
        if version == 2:
            named = list(dict.fromkeys(k_of))
            expected |= {"version": 2, "publisher": "acme", "stream": None}
            expected["publications"] = [{"id": f"p{k}", "text": texts[k]} for k in named]
            expected["matches"] = [
                {"subscription_id": m["subscription_id"]}
                | _tagged(subscriptions[s])
                | {"publication": named.index(k), "matched": matched(s, k)}
                for m, s, k in zip(matches, stored, k_of, strict=True)
            ]
        else:
            expected |= {"publisher": "acme", "stream": None}
            expected["matches"] = [
                {"subscription_id": m["subscription_id"]}
                | _tagged(subscriptions[s])
                | (
                    {"pattern": subscriptions[s].pattern}
                    if subscriptions[s].pattern
                    else {"query": subscriptions[s].query}
                )
                | {"publication_id": f"p{k}", "text": texts[k], "matched": matched(s, k)}
                for m, s, k in zip(matches, stored, k_of, strict=True)
            ]
        assert message.body == orjson.dumps(expected)
        seen += len(matches)
    assert seen == len(pairs) > 100


def test_a_dry_run_shows_the_callers_matches_once_each_under_the_delivered_id() -> None:
    alternatives = HeldAlternatives()
    query = "apple OR pear"
    words = parse_query("white house").clauses[0].words
    subscriptions = {
        "mine": Subscription("mine", "white house", words, "u", 0, tenant="a"),
        "theirs": Subscription("theirs", "white house", words, "u", 0, tenant="b"),
    }
    read = parse_query(query)
    for k, clause in enumerate(read.clauses):
        stored = part_id("q", k)
        subscriptions[stored] = Subscription(stored, query, clause.words, "u", 0, tenant="a")
        alternatives.add(stored, read)
    text = "the white house: an apple and a pear"
    batch = routed_batch([("p", text, (*words, "appl", "pear"), False)], "a", "shared")
    pairs = [("theirs", 0), ("mine", 0), (part_id("q", 0), 0), (part_id("q", 1), 0), ("mine", 0)]
    found, complete = explained_matches(pairs, batch, subscriptions, alternatives, "a")
    assert complete
    assert [(sub_id, position) for sub_id, position, _ in found] == [("mine", 0), ("q", 0)]
    assert orjson.loads(found[0][2]) == {"terms": {"white": [[4, 9]], "hous": [[10, 15]]}}
