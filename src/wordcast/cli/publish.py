"""``wordcast publish``: texts, corpus posts or JSON lines published through a router, or tried
against the tenant's subscriptions (``--dry-run``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from wordcast import limits
from wordcast.cli.common import add_router_option, against_router, counted, fail, whole


def _say_stdin_is_read(what: str) -> None:
    """At a terminal, say that standard input is read (a wait without a word looks hung)."""
    if sys.stdin.isatty():
        print(
            f"reading {what} from standard input; Ctrl-D ends it (or give TEXT or --corpus N)",
            file=sys.stderr,
        )


def cmd_publish(args: argparse.Namespace) -> int:
    from wordcast.client import RouterClient

    if args.json and (args.text or args.corpus):
        return fail("--json reads publications from standard input: give no TEXT or --corpus")
    posts: list[dict[str, Any]]
    if args.corpus:
        from wordcast.corpus.workload import sample_posts

        posts = [{"id": p.id, "text": p.text} for p in sample_posts(args.corpus, seed=args.seed)]
    elif args.text:
        posts = [{"text": text} for text in args.text]
    elif args.json:
        _say_stdin_is_read("a JSON publication a line")
        try:
            posts = _json_publications(sys.stdin)
        except ValueError as exc:
            return fail(f"standard input {exc}; nothing was published")
    else:
        _say_stdin_is_read("a publication's text a line")
        posts = [{"text": line.rstrip("\n")} for line in sys.stdin if line.strip()]
    if not posts:
        return fail("nothing to publish: give TEXT, --corpus N or lines on standard input")
    if args.attr:
        if args.json:
            return fail('with --json, give attributes in each line\'s "attributes"')
        attributes: dict[str, list[str]] = {}
        for given in args.attr:
            name, equals, value = given.partition("=")
            if not equals or not name:
                return fail(f"--attr {given!r}: give NAME=VALUE")
            attributes.setdefault(name, []).append(value)
        for post in posts:
            post["attributes"] = {k: v[0] if len(v) == 1 else v for k, v in attributes.items()}

    if args.dry_run:
        return _dry_run(args, posts)

    async def run() -> int:
        async with RouterClient(args.router) as client:
            # One request shows no progress worth a line.
            return await client.publish_many(
                posts, batch=args.batch, progress=len(posts) > args.batch, stream=args.stream
            )

    count, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert count is not None
    print(f"{counted(count, 'publication')} accepted")
    return 0


def _dry_run(args: argparse.Namespace, posts: list[dict[str, Any]]) -> int:
    """Print the matches ``posts`` would bring the tenant's subscriptions, one a line
    (publication, subscription, why), publishing nothing."""
    from wordcast.client import RouterClient

    async def run() -> tuple[int, int]:
        async with RouterClient(args.router) as client:
            found = 0
            for start in range(0, len(posts), args.batch):
                answer = await client.publish(
                    posts[start : start + args.batch], stream=args.stream, dry_run=True
                )
                for match in answer["matches"]:
                    matched = json.dumps(match["matched"], ensure_ascii=False)
                    print(f"{match['publication_id']}\t{match['subscription_id']}\t{matched}")
                found += len(answer["matches"])
            return found, len(posts)

    counts, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert counts is not None
    found, tried = counts
    print(
        f"{counted(found, 'match', 'matches')} in {counted(tried, 'publication')} "
        "(a dry run: nothing was published)",
        file=sys.stderr,
    )
    return 0


PUBLICATION_FIELDS = frozenset({"id", "text", "attributes"})


def _json_publications(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Publications from JSON lines ``{"id"?, "text", "attributes"?}``, blank lines skipped;
    ValueError names the first bad line. Checked here, before anything is sent, so a bad line
    publishes nothing (the router checks the attributes)."""
    posts: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            post = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(post, dict) or not isinstance(post.get("text"), str):
            raise ValueError(f'line {number}: not an object with a "text" string')
        unknown = set(post) - PUBLICATION_FIELDS
        if unknown:
            raise ValueError(
                f"line {number}: unknown field {sorted(unknown)[0]!r} (only "
                f"{', '.join(map(repr, sorted(PUBLICATION_FIELDS)))})"
            )
        if "id" in post and not (isinstance(post["id"], str) and post["id"]):
            raise ValueError(f'line {number}: "id" must be a non-empty string')
        posts.append(post)
    return posts


def register(sub: Any) -> None:
    """Add ``publish`` to the ``wordcast`` parser."""
    publish = sub.add_parser("publish", help="publish texts (arguments, stdin or corpus)")
    publish.add_argument(
        "text",
        nargs="*",
        help="texts to publish, one publication each (none: one per line of stdin)",
    )
    publish.add_argument("--corpus", type=whole(1), metavar="N", help="publish N corpus posts")
    publish.add_argument(
        "--attr",
        action="append",
        metavar="NAME=VALUE",
        help="an attribute of each publication, for filters such as source:rss "
        "(repeat a NAME for a list: --attr tags=a --attr tags=b)",
    )
    publish.add_argument(
        "--batch",
        type=whole(1, limits.MAX_BATCH_PUBLICATIONS),
        default=500,
        help=f"publications per request, at most {limits.MAX_BATCH_PUBLICATIONS} (default 500)",
    )
    publish.add_argument("--seed", type=int, default=0, help="with --corpus: which posts are drawn")
    publish.add_argument(
        "--json",
        action="store_true",
        help='standard input is one JSON object per line: {"id": …, "text": …, "attributes": '
        "{…}} (id and attributes optional)",
    )
    add_router_option(publish)
    publish.add_argument(
        "--stream",
        help="publish to this shared stream (your tenant needs its publish grant); without it "
        "the publications meet only your own tenant's subscriptions",
    )
    publish.add_argument(
        "--dry-run",
        action="store_true",
        help="print the matches the texts would bring your subscriptions (publication, "
        "subscription, why, tab-separated), publishing and delivering nothing",
    )
    publish.set_defaults(func=cmd_publish)
