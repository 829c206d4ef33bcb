"""The commands that talk to a router: ``subscribe``, ``subscriptions``, ``unsubscribe``,
``secret``, ``watch``, ``deadletters``, ``replay`` and ``status`` (``publish``: :mod:`.publish`)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wordcast.cli.common import (
    add_router_option,
    against_router,
    counted,
    fail,
    terminate_on_sigterm,
    whole,
)
from wordcast.services.shown_text import escaped

if TYPE_CHECKING:
    from wordcast.client import RouterClient


async def _subscribe_one(client: RouterClient, args: argparse.Namespace) -> dict[str, Any]:
    """The one subscription QUERY or --pattern asks for."""
    pattern = args.pattern is not None
    return await client.subscribe(
        args.pattern if pattern else " ".join(args.query),
        args.callback,
        kind="pattern" if pattern else "query",
        stream=args.stream,
        backfill_minutes=args.backfill,
        tag=args.tag,
        strict=args.strict,
    )


def cmd_subscribe(args: argparse.Namespace) -> int:
    from wordcast.client import RouterClient

    async def run() -> list[dict[str, object]]:
        async with RouterClient(args.router) as client:
            if args.file:
                from wordcast.cli.imports import import_file

                done = await import_file(
                    client, Path(args.file), args.callback, args.stream, strict=args.strict
                )
                print(
                    f"{counted(done.sent, 'subscription')} sent from {args.file}"
                    + (f", {done.skipped:,} imported before" if done.skipped else "")
                )
                return []
            if args.from_corpus:
                from wordcast.corpus.workload import post_patterns, post_queries, sample_posts

                posts = sample_posts(20_000, seed=args.seed)
                if args.patterns:
                    patterns = post_patterns(posts, args.from_corpus, seed=args.seed)
                    return await client.subscribe_many(
                        patterns, args.callback, kind="pattern", stream=args.stream
                    )
                queries = post_queries(posts, args.from_corpus, seed=args.seed)
                return await client.subscribe_many(queries, args.callback, stream=args.stream)
            return [await _subscribe_one(client, args)]

    if sum(map(bool, (args.query, args.from_corpus, args.pattern is not None, args.file))) != 1:
        return fail("give one of QUERY, --pattern PATTERN, --from-corpus N or --file FILE")
    if args.backfill is not None and (args.file or args.from_corpus):
        return fail("--backfill is for one subscription (QUERY or --pattern)")
    if args.tag is not None and (args.file or args.from_corpus):
        return fail(
            '--tag is for one subscription (QUERY or --pattern); a file gives "tag" per line'
        )
    if args.file and not Path(args.file).is_file():
        return fail(f"no file {args.file!r}")
    if args.patterns and not args.from_corpus:
        return fail("--patterns goes with --from-corpus N")
    results, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert results is not None
    if args.file:
        return 0
    if len(results) == 1:
        warnings = results[0].get("warnings")
        for warning in warnings if isinstance(warnings, list) else []:
            print(f"warning: {warning}", file=sys.stderr)
        print(json.dumps(results[0], indent=2))
    else:
        print(f"{counted(len(results), 'subscription')} registered")
    return 0


def describe(sub: dict[str, Any]) -> str:
    """One line for a subscription: id, matcher, what it matches, its tag, where matches go."""
    what = f"pattern {sub['pattern']!r}" if sub["kind"] == "pattern" else repr(sub["query"])
    what = escaped(what)
    where = " + ".join(
        sub["callback_url"] if way == "webhook" else "the match stream"
        for way in sub.get("delivery") or ["webhook"]
    )
    tagged = f"  [{escaped(sub['tag'])}]" if sub.get("tag") else ""
    counters = sub.get("counters")
    counted = (
        f"  ({counters['matched']} matched, {counters['delivered']} delivered, "
        f"{counters['failed']} failed)"
        if counters
        else ""
    )
    return f"{sub['id']}  matcher-{sub['matcher']}  {what}{tagged}  -> {where}{counted}"


def _list(
    args: argparse.Namespace,
    items: Callable[[RouterClient], AsyncIterator[dict[str, Any]]],
    line: Callable[[dict[str, Any]], str],
    noun: str,
) -> int:
    """Print every item, a line (or with --json a JSON object) each, then how many on stderr."""
    from wordcast.client import RouterClient

    async def run() -> int:
        count = 0
        async with RouterClient(args.router) as client:
            async for item in items(client):
                print(json.dumps(item) if args.json else line(item), flush=True)
                count += 1
        return count

    count, error = against_router(args.router, run())
    if error:
        return fail(error)
    assert count is not None
    if not args.json:
        print(counted(count, noun), file=sys.stderr)
    return 0


def _by_ids(
    args: argparse.Namespace,
    work: Coroutine[Any, Any, tuple[list[str], list[str]]],
    noun: str,
    done: str,
    nothing: str,
) -> int:
    """Report ``work``'s (handled, unknown) ids: unknown ones mean that nothing was done."""
    result, error = against_router(args.router, work)
    if error:
        return fail(error)
    assert result is not None
    handled, unknown = result
    if unknown:
        return fail(f"no {noun} with id {', '.join(map(repr, unknown))}; nothing was {nothing}")
    print(f"{counted(len(handled), noun)} {done}")
    return 0


def cmd_subscriptions(args: argparse.Namespace) -> int:
    """List the tenant's subscriptions, one line (or JSON object) each, sorted by their query or
    pattern (then id); with --match, only those whose query or pattern holds the text, with
    --tag only those of that tag, with --check only those whose query X's rules, Lucene's
    syntax or a version before issue 53 read otherwise, each warning under it."""
    wanted = (args.match or "").casefold()

    async def sorted_subscriptions(client: RouterClient) -> AsyncIterator[dict[str, Any]]:
        found = [sub async for sub in client.subscriptions()]
        shown = [
            sub
            for sub in found
            if wanted in _written(sub).casefold()
            and args.tag in (None, sub.get("tag"))
            and (sub.get("warnings") or sub.get("earlier_readings") or not args.check)
        ]
        shown.sort(key=lambda sub: (_written(sub).casefold(), str(sub["id"])))
        for sub in shown:
            yield sub
        if wanted or args.tag is not None or args.check:
            asked = " and ".join(
                ([f"hold {args.match!r}"] if wanted else [])
                + ([f"are tagged {args.tag!r}"] if args.tag is not None else [])
                + (
                    ["are read otherwise than X, Lucene or an earlier version"]
                    if args.check
                    else []
                )
            )
            print(f"of {counted(len(found), 'subscription')}, these {asked}:", file=sys.stderr)

    return _list(args, sorted_subscriptions, _checked if args.check else describe, "subscription")


def _checked(sub: dict[str, Any]) -> str:
    """A subscription's line, and each of its warnings and earlier readings under it."""
    said = [*(sub.get("warnings") or ()), *(sub.get("earlier_readings") or ())]
    return "\n".join([describe(sub), *(f"    {escaped(w)}" for w in said)])


def _written(sub: dict[str, Any]) -> str:
    return str(sub.get("query") or sub.get("pattern") or "")


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    """Delete subscriptions by id, or all of the tenant's. Every id is checked first: one that
    does not exist deletes nothing."""
    from wordcast.client import ApiError, RouterClient

    if bool(args.ids) == args.all:
        return fail("give subscription ids, or --all")

    async def run() -> tuple[list[str], list[str]]:
        async with RouterClient(args.router) as client:
            if args.all:
                ids = [sub["id"] async for sub in client.subscriptions()]
            else:
                ids, unknown = list(dict.fromkeys(args.ids)), []
                for sub_id in ids:
                    try:
                        await client.subscription(sub_id)
                    except ApiError as exc:
                        if exc.status not in (404, 422):
                            raise
                        unknown.append(sub_id)
                if unknown:
                    return [], unknown
            await client.unsubscribe_many(ids, progress=len(ids) > 1)
            return ids, []

    return _by_ids(args, run(), "subscription", "deleted", "deleted")


def cmd_secret(args: argparse.Namespace) -> int:
    """Rotate a subscription's signing secret and print the new one."""
    from wordcast.client import RouterClient

    async def run() -> str:
        async with RouterClient(args.router) as client:
            return await client.rotate_secret(args.id)

    secret, error = against_router(args.router, run())
    if error:
        return fail(error)
    print(secret)
    print("the previous secret stays valid for the router's grace period", file=sys.stderr)
    return 0


def describe_dead_letter(letter: dict[str, Any]) -> str:
    """One line for a dead letter: id, when it was given up on, what it carried, why."""
    failed = datetime.datetime.fromtimestamp(letter["failed_at"], datetime.UTC)
    matches = len(letter["payload"].get("matches", []))
    return (
        f"{letter['id']}  {failed:%Y-%m-%d %H:%M:%S}Z  "
        f"{counted(matches, 'match', 'matches')} for {letter['callback_url']}: "
        f"{letter['reason']} after {counted(letter['attempts'], 'attempt')}"
    )


def cmd_deadletters(args: argparse.Namespace) -> int:
    """List the tenant's dead letters, oldest first."""
    return _list(args, lambda client: client.dead_letters(), describe_dead_letter, "dead letter")


def cmd_replay(args: argparse.Namespace) -> int:
    """Deliver dead letters again, by id or --all. Every id is checked first: one that is not
    among the tenant's dead letters sends nothing."""
    from wordcast.client import RouterClient

    if bool(args.ids) == args.all:
        return fail("give dead letter ids, or --all")

    async def run() -> tuple[list[str], list[str]]:
        async with RouterClient(args.router) as client:
            held = [letter["id"] async for letter in client.dead_letters()]
            ids = list(dict.fromkeys(args.ids)) if args.ids else held
            unknown = sorted(set(ids) - set(held))
            if unknown:
                return [], unknown
            for dead_id in ids:
                await client.replay(dead_id)
            return ids, []

    return _by_ids(args, run(), "dead letter", "sent again", "sent")


def cmd_watch(args: argparse.Namespace) -> int:
    """Subscribe, print each match from the match stream (or a webhook of its own), unsubscribe
    at the end."""
    from wordcast.local.watch import StreamWatcher, Watcher

    if not args.query and not args.pattern:
        return fail("give at least one QUERY or --pattern PATTERN to watch")
    for name in ("count", "seconds"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            return fail(f"--{name} must be positive")
    serving = [f"--{n}" for n in ("host", "port", "callback_host") if getattr(args, n) is not None]
    if serving and not args.webhook:
        return fail(f"{serving[0].replace('_', '-')} is for the webhook of --webhook")
    watcher: StreamWatcher | Watcher = StreamWatcher(args.router)
    if args.webhook:
        host = args.host or "127.0.0.1"
        try:
            watcher = Watcher(
                args.router, host=host, port=args.port or 0, callback_host=args.callback_host
            )
        except OSError as exc:
            return fail(f"cannot serve the watch's webhook on {host}:{args.port or 0}: {exc}")
    terminate_on_sigterm()
    work = watcher.run(
        args.query, args.pattern, count=args.count, seconds=args.seconds, keep=args.keep
    )
    try:
        shown, error = against_router(args.router, work)
    except KeyboardInterrupt:
        shown, error = watcher.shown, None
    if error:
        return fail(error)
    assert shown is not None
    print(f"{counted(shown, 'match', 'matches')} shown")
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``wordcast`` parser."""
    subscribe = sub.add_parser("subscribe", help="register a subscription")
    subscribe.add_argument("query", nargs="*", help="keywords that must all occur")
    subscribe.add_argument(
        "--callback",
        help="webhook URL for the matches (without it they go to your tenant's match stream: "
        "wordcast watch, GET /matches/stream)",
    )
    subscribe.add_argument(
        "--file",
        metavar="FILE",
        help="import the subscriptions of a JSON Lines file (an object per line as the batch "
        'API takes it, e.g. {"query": "white house"}), resuming after an interruption '
        "without duplicates (progress kept in FILE.wordcast-done)",
    )
    subscribe.add_argument(
        "--from-corpus",
        type=whole(1),
        metavar="N",
        help="register N queries drawn from corpus posts instead",
    )
    subscribe.add_argument(
        "--pattern", help="a wildcard pattern (? one character, * any run) instead of keywords"
    )
    subscribe.add_argument(
        "--patterns", action="store_true", help="with --from-corpus: patterns cut from posts"
    )
    subscribe.add_argument(
        "--strict",
        action="store_true",
        help="refuse a query that X's rules or Lucene's syntax read otherwise (say `or` for "
        "OR, `hous*`, `pythn~1`), instead of storing it as read with a warning on stderr",
    )
    subscribe.add_argument(
        "--seed", type=int, default=0, help="with --from-corpus: which posts are drawn"
    )
    subscribe.add_argument(
        "--backfill",
        type=whole(1, 1_440),
        metavar="MINUTES",
        help="also deliver the matches of the last MINUTES of publications (when the cluster "
        "keeps them: WORDCAST_ROUTER_BACKFILL_S), marked backfill",
    )
    subscribe.add_argument("--tag", help="your label for it, echoed in each of its matches")
    add_router_option(subscribe)
    subscribe.add_argument(
        "--stream",
        help="match the publications of this shared stream (your tenant needs its subscribe "
        "grant) instead of your own tenant's",
    )
    subscribe.set_defaults(func=cmd_subscribe)

    def command(name: str, summary: str, func: Callable[[argparse.Namespace], int]) -> Any:
        parser = sub.add_parser(name, help=summary)
        add_router_option(parser)
        parser.set_defaults(func=func)
        return parser

    subscriptions = command(
        "subscriptions", "list your subscriptions: id, matcher, query, callback", cmd_subscriptions
    )
    subscriptions.add_argument("--json", action="store_true", help="one JSON object per line")
    subscriptions.add_argument(
        "--match", metavar="TEXT", help="only those whose query or pattern holds TEXT (any case)"
    )
    subscriptions.add_argument("--tag", help="only those tagged TAG")
    subscriptions.add_argument(
        "--check",
        action="store_true",
        help="only those whose query X's rules, Lucene's syntax or an earlier version read "
        "otherwise, each warning under it",
    )
    unsubscribe = command("unsubscribe", "delete subscriptions by id, or --all", cmd_unsubscribe)
    unsubscribe.add_argument("ids", nargs="*", metavar="ID", help="the subscriptions' ids")
    unsubscribe.add_argument("--all", action="store_true", help="every subscription of yours")
    secret = command(
        "secret", "rotate a subscription's signing secret and print the new one", cmd_secret
    )
    secret.add_argument("id", help="the subscription's id")
    deadletters = command(
        "deadletters",
        "list your dead letters: deliveries given up on, oldest first",
        cmd_deadletters,
    )
    deadletters.add_argument("--json", action="store_true", help="one JSON object per line")
    replay = command("replay", "deliver dead letters again, by id or --all", cmd_replay)
    replay.add_argument("ids", nargs="*", metavar="ID", help="the dead letters' ids")
    replay.add_argument("--all", action="store_true", help="every dead letter of yours")

    watch = sub.add_parser(
        "watch",
        help="subscribe, show each match as it is delivered, unsubscribe when stopped",
        description="Registers the queries and patterns for the match stream, prints every match "
        "of theirs as the router streams it, and deletes the subscriptions when it stops: "
        "Ctrl-C, --count or --seconds. Needs only the router's address. With --webhook it "
        "serves a webhook of its own instead (checking each delivery's signature), which the "
        "matchers must reach: a local cluster allows loopback; otherwise give --host and "
        "--callback-host.",
    )
    watch.add_argument("query", nargs="*", help="keyword or boolean queries, each quoted")
    watch.add_argument(
        "--pattern", action="append", default=[], help="a wildcard pattern (repeatable)"
    )
    watch.add_argument("--count", type=int, help="stop after this many matches")
    watch.add_argument("--seconds", type=float, help="stop after this long")
    watch.add_argument("--keep", action="store_true", help="leave the subscriptions registered")
    watch.add_argument(
        "--webhook", action="store_true", help="have matches POSTed to a webhook of its own"
    )
    watch.add_argument("--host", help="where the webhook listens (default 127.0.0.1)")
    watch.add_argument("--port", type=whole(0, 65535), help="the webhook's (default: any free)")
    watch.add_argument("--callback-host", help="the host the matchers reach the webhook at")
    add_router_option(watch)
    watch.set_defaults(func=cmd_watch)
