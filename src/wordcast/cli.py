"""The ``wordcast`` command line.

wordcast up [--matchers N] [--port P] [--no-demo]   start a local cluster in the foreground
wordcast subscribe QUERY --callback URL             register a keyword subscription
                                                    (QUERY may use OR, NOT, -word, parentheses:
                                                    quote it, 'senate -house')
wordcast subscribe --pattern 'pie*tea' --callback URL  register a wildcard pattern
wordcast publish TEXT... | --corpus N               publish texts or corpus posts
wordcast watch QUERY... [--pattern P]               subscribe, show matches as they are
                                                    delivered, unsubscribe on Ctrl-C
wordcast status                                     mapping version, spread, imbalance, loads
wordcast bench NAME [ARGS]                          run a benchmark of the source checkout
wordcast learn                                      learn a routing mapping with Spark
wordcast scale N                                    change the number of matchers, live
wordcast drain                                      a matcher pod's preStop hook: wait until
                                                    scaling down has emptied it
wordcast router | matcher | receiver                run one service (settings from the env)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from .partitioning import VARIANTS

T = TypeVar("T")

DEFAULT_ROUTER = os.environ.get("WORDCAST_URL", "http://127.0.0.1:8000")


def _fail(message: str) -> int:
    print(f"wordcast: error: {message}", file=sys.stderr)
    return 2


def _serve(app: object, host: str, port: int, log_level: str) -> int:
    import uvicorn

    # Keep idle connections open well past httpx's 5 s pool expiry: with equal timeouts a client can
    # send on a connection the server is closing, and gets a reset instead of an answer.
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_keep_alive=30,
        # A request still open on shutdown must not keep a matcher being removed alive for ever.
        timeout_graceful_shutdown=5,
    )
    return 0


def cmd_router(_: argparse.Namespace) -> int:
    from .services.router.main import create_app
    from .services.router.settings import RouterSettings

    settings = RouterSettings()
    return _serve(create_app(settings), settings.host, settings.port, settings.log_level)


def cmd_matcher(_: argparse.Namespace) -> int:
    from .services.matcher.main import create_app
    from .services.matcher.settings import MatcherSettings

    settings = MatcherSettings()
    return _serve(create_app(settings), settings.host, settings.port, settings.log_level)


def cmd_receiver(args: argparse.Namespace) -> int:
    from .services.receiver.main import ReceiverSettings, create_app

    settings = ReceiverSettings()
    if args.port is not None:
        settings.port = args.port
    if args.quiet:
        settings.quiet = True
    return _serve(create_app(settings), settings.host, settings.port, "warning")


def _terminate_on_sigterm() -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def cmd_up(args: argparse.Namespace) -> int:
    from .cluster import Cluster, describe

    if args.matchers < 1:
        return _fail("--matchers must be at least 1")
    _terminate_on_sigterm()
    cluster = Cluster(
        matchers=args.matchers,
        port=args.port,
        redis_url=os.environ.get("REDIS_URL") or None,
        namespace=os.environ.get("WORDCAST_NAMESPACE", "wordcast"),
        receiver=not args.no_demo,
        data_dir=Path(args.data_dir) if args.data_dir else None,
    )
    try:
        cluster.start()
        for line in describe(cluster):
            print(line, flush=True)
        print(f"wordcast is up: router at {cluster.router_url}", flush=True)
        if args.no_demo:
            while True:
                time.sleep(3600)
        else:
            asyncio.run(_demo(cluster, args.demo_subscriptions, args.demo_rate))
    except KeyboardInterrupt:
        print("\nstopping wordcast…", flush=True)
    except (RuntimeError, TimeoutError) as exc:
        cluster.stop()
        return _fail(str(exc))
    cluster.stop()
    print("stopped", flush=True)
    return 0


async def _demo(cluster: object, subscriptions: int, rate: float) -> None:
    """Register corpus-drawn subscriptions, then publish corpus posts at a readable pace forever."""
    from .client import RouterClient
    from .cluster import Cluster
    from .workload import post_boolean_queries, post_patterns, post_queries, sample_posts

    assert isinstance(cluster, Cluster)
    print("demo: loading posts from the pypi corpus…", flush=True)
    posts = sample_posts(20_000, seed=int(time.time()))
    queries = post_queries(posts, subscriptions, sizes=(2, 2, 3))
    boolean = post_boolean_queries(posts, max(1, subscriptions // 5))
    patterns = post_patterns(posts, max(1, subscriptions // 3), min_length=6, max_length=12)
    async with RouterClient(cluster.router_url) as client:
        await client.subscribe_many(queries + boolean, cluster.callback_url)
        await client.subscribe_many(patterns, cluster.callback_url, kind="pattern")
        print(
            f"demo: {len(queries)} keyword subscriptions registered, e.g. {queries[:3]}, "
            f"{len(boolean)} boolean queries, e.g. {boolean[:2]}, and "
            f"{len(patterns)} wildcard patterns, e.g. {patterns[:3]}; "
            f"publishing {rate:g} posts/s (Ctrl-C stops)",
            flush=True,
        )
        batch = max(1, int(rate / 2))
        for start in itertools.count(0, batch):
            chunk = [posts[(start + k) % len(posts)] for k in range(batch)]
            await client.publish([{"id": p.id, "text": p.text} for p in chunk])
            await asyncio.sleep(batch / rate)


def _against_router(router: str, work: Coroutine[Any, Any, T]) -> tuple[T | None, str | None]:
    """Run a client coroutine; API and connection failures become one clear message."""
    import httpx

    from .client import ApiError

    try:
        return asyncio.run(work), None
    except ApiError as exc:
        return None, str(exc)
    except (OSError, httpx.HTTPError) as exc:
        return None, f"cannot reach the router at {router}: {exc}"


def cmd_subscribe(args: argparse.Namespace) -> int:
    from .client import RouterClient

    async def run() -> list[dict[str, object]]:
        async with RouterClient(args.router) as client:
            if args.from_corpus:
                from .workload import post_patterns, post_queries, sample_posts

                posts = sample_posts(20_000, seed=args.seed)
                if args.patterns:
                    patterns = post_patterns(posts, args.from_corpus, seed=args.seed)
                    return await client.subscribe_many(patterns, args.callback, kind="pattern")
                queries = post_queries(posts, args.from_corpus, seed=args.seed)
                return await client.subscribe_many(queries, args.callback)
            if args.pattern is not None:
                return [await client.subscribe(args.pattern, args.callback, kind="pattern")]
            return [await client.subscribe(" ".join(args.query), args.callback)]

    if sum(map(bool, (args.query, args.from_corpus, args.pattern is not None))) != 1:
        return _fail("give one of QUERY, --pattern PATTERN or --from-corpus N")
    if args.patterns and not args.from_corpus:
        return _fail("--patterns goes with --from-corpus N")
    results, error = _against_router(args.router, run())
    if error:
        return _fail(error)
    assert results is not None
    if len(results) == 1:
        print(json.dumps(results[0], indent=2))
    else:
        print(f"{len(results)} subscriptions registered")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from .client import RouterClient

    if args.corpus:
        from .workload import sample_posts

        posts = [{"id": p.id, "text": p.text} for p in sample_posts(args.corpus, seed=args.seed)]
    elif args.text:
        posts = [{"text": text} for text in args.text]
    else:
        posts = [{"text": line.rstrip("\n")} for line in sys.stdin if line.strip()]
    if not posts:
        return _fail("nothing to publish: give TEXT, --corpus N or lines on standard input")

    async def run() -> int:
        async with RouterClient(args.router) as client:
            return await client.publish_many(posts, batch=args.batch)

    count, error = _against_router(args.router, run())
    if error:
        return _fail(error)
    print(f"{count} publications accepted")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Subscribe with a webhook of its own, print each match delivered, unsubscribe at the end."""
    from .watch import Watcher

    if not args.query and not args.pattern:
        return _fail("give at least one QUERY or --pattern PATTERN to watch")
    for name in ("count", "seconds"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            return _fail(f"--{name} must be positive")
    try:
        watcher = Watcher(
            args.router, host=args.host, port=args.port, callback_host=args.callback_host
        )
    except OSError as exc:
        return _fail(f"cannot serve the watch's webhook on {args.host}:{args.port}: {exc}")
    _terminate_on_sigterm()
    work = watcher.run(
        args.query, args.pattern, count=args.count, seconds=args.seconds, keep=args.keep
    )
    try:
        shown, error = _against_router(args.router, work)
    except KeyboardInterrupt:
        shown, error = watcher.shown, None
    if error:
        return _fail(error)
    print(f"{shown} matches shown")
    return 0


# The benchmarks `make bench` runs (bench/*.py of a source checkout; BENCHMARKS.md has figures).
BENCHMARKS = (
    "e2e", "matcher", "patterns", "boolean", "routing", "migration", "shedding", "subscribe", "scale",
)  # fmt: skip


def _source_checkout() -> Path | None:
    """The wordcast source tree the benchmarks live in: around the working directory, or the one
    an editable install runs from. A wheel does not ship them."""
    here = Path.cwd().resolve()
    package = Path(__file__).resolve().parents[2]
    for root in (here, *here.parents, package):
        if (root / "bench" / "__init__.py").is_file() and (root / "pyproject.toml").is_file():
            return root
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    """Run one benchmark as `make bench-NAME` does; its results go to bench/results/."""
    import subprocess

    root = _source_checkout()
    if root is None:
        return _fail(
            "the benchmarks run from a source checkout of wordcast (its bench/ directory): "
            "clone the repository and run this there, or make bench"
        )
    command = [sys.executable, "-m", f"bench.{args.name}", *args.options]
    print(f"in {root}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=root).returncode


def cmd_status(args: argparse.Namespace) -> int:
    """The router's view of routing: mapping version in use, spread, imbalance, loads."""
    import httpx

    try:
        stats = httpx.get(f"{args.router}/stats", timeout=10).json()
    except (httpx.HTTPError, ValueError) as exc:
        return _fail(f"cannot read {args.router}/stats: {exc}")
    mapping = stats["mapping"]
    print(
        f"router {args.router}: {stats['matchers']} matchers, {stats['subscribed_words']:,} "
        f"subscribed words\n"
        f"mapping version {mapping['active']} (latest {mapping['latest']}, versions in use "
        f"{mapping['window'][0]}..{mapping['window'][1]})\n"
        f"since this version: {mapping['publications']:,} publications, spread "
        f"{mapping['spread']:.2f}, imbalance {mapping['imbalance']:.2f} (max/avg), "
        f"CV {mapping['cv']:.2f}"
    )
    for matcher, load in enumerate(mapping["loads"]):
        print(f"  matcher-{matcher}: {load:,} publications")
    wanted, awaited = stats.get("matchers_wanted"), stats.get("awaiting_matcher")
    if wanted is not None and wanted != stats["matchers"]:
        step = (
            f"waiting for matcher-{awaited} to be ready"
            if awaited is not None
            else f"moving to mapping version {mapping['latest']}"
            if mapping["latest"] != mapping["active"]
            else "writing a mapping version for them"
        )
        print(f"scaling to {wanted} matchers: {step}")
    shedding = stats.get("shedding") or {"strategy": "off"}
    if shedding["strategy"] == "off":
        print("load shedding: off")
    else:
        limit = shedding["threshold"]
        print(
            f"load shedding ({shedding['strategy']}): level {shedding['level']} of "
            f"{shedding['max_level']} ({'no limit' if limit is None else f'at most {limit:g}'} "
            f"matchers per publication), {shedding['in_flight']:,} of {shedding['buffer']:,} "
            f"publications in flight, {shedding['shed_copies']:,} copies shed"
        )
    return 0


def _wanted_matchers(redis_url: str, namespace: str) -> int | None:
    """The number of matchers the cluster is asked to have (StoreUnavailable)."""
    from .store import SubscriptionStore, connect

    async def read() -> int | None:
        client = connect(redis_url)
        try:
            return await SubscriptionStore(client, namespace).matchers_wanted()
        finally:
            await client.aclose()

    return asyncio.run(read())


def cmd_learn(args: argparse.Namespace) -> int:
    """Run the Spark mapping learner on the routers' publication log and publish the result."""
    try:
        from spark_jobs import learn_mapping
    except ImportError as exc:
        return _fail(f"the Spark jobs need the spark extra (pip install 'wordcast[spark]'): {exc}")
    redis_url = args.redis_url or os.environ.get("REDIS_URL")
    if not redis_url:
        return _fail(
            "give --redis-url or set REDIS_URL: the log is read from and the mapping "
            "written to that Redis"
        )
    namespace = os.environ.get("WORDCAST_NAMESPACE", "wordcast")
    from .errors import StoreUnavailable

    try:
        wanted = _wanted_matchers(redis_url, namespace)
    except StoreUnavailable as exc:
        return _fail(str(exc))
    matchers = args.matchers or wanted
    if matchers is None:
        return _fail("no router has recorded the cluster's number of matchers: give --matchers")
    if wanted is not None and matchers != wanted:
        # The routers would soon replace a version for another number (wordcast.scaling).
        return _fail(
            f"the cluster has {wanted} matchers: learn for them (leave out --matchers), or "
            f"change their number with: wordcast scale {matchers} --algorithm salb"
        )
    argv = ["--matchers", str(matchers), "--algorithm", args.algorithm]
    argv += ["--namespace", namespace, "--publish", redis_url]
    argv += ["--corpus", args.corpus] if args.corpus else ["--publication-log", redis_url]
    return learn_mapping.main(argv)


# Fewer logged publications than this say too little to learn a mapping from.
SCALE_MIN_LOG = 1_000


def cmd_scale(args: argparse.Namespace) -> int:
    """Move the cluster to N matchers (see wordcast.scaling for the steps)."""
    import httpx

    from . import scaling
    from .errors import StoreUnavailable
    from .mapping_store import MappingStore
    from .store import SubscriptionStore, connect

    if args.matchers < 1:
        return _fail("the number of matchers must be at least 1")
    redis_url = args.redis_url or os.environ.get("REDIS_URL")
    if not redis_url:
        return _fail("give --redis-url or set REDIS_URL: the cluster's Redis")
    try:
        current = int(httpx.get(f"{args.router}/stats", timeout=10).json()["matchers"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return _fail(f"cannot read {args.router}/stats: {exc}")
    if current == args.matchers and args.algorithm == "auto":
        print(f"the cluster has {current} matchers already; to learn a new mapping: wordcast learn")
        return 0

    def say(line: str) -> None:
        print(line, flush=True)

    async def run() -> int:
        client = connect(redis_url)
        namespace = os.environ.get("WORDCAST_NAMESPACE", "wordcast")
        store, mappings = SubscriptionStore(client, namespace), MappingStore(client, namespace)
        try:
            if followed := await store.followed():
                raise RuntimeError(
                    f"the routers follow statefulset/{followed}, and would undo this: kubectl "
                    f"scale statefulset/{followed} --replicas={args.matchers} instead"
                )
            algorithm = args.algorithm
            if algorithm == "auto":
                logged = await scaling.logged_publications(store)
                algorithm = "salb" if logged >= SCALE_MIN_LOG else "hash"
                say(f"{logged:,} publications logged: the new mapping is {algorithm}")
            learned = None
            if algorithm != "hash":
                # Written before the number is asked for, so that the routers move to this
                # version rather than write one with stable hashing (wordcast.scaling, step 3).
                from spark_jobs import learn_mapping

                argv = ["--matchers", str(args.matchers), "--algorithm", algorithm]
                argv += ["--namespace", namespace, "--publish", redis_url]
                argv += ["--publication-log", redis_url]
                say(f"learning a {algorithm} mapping for {args.matchers} matchers with Spark…")
                if await asyncio.to_thread(learn_mapping.main, argv) != 0:
                    raise RuntimeError("the mapping learner failed")
                learned = (await mappings.state())[0]
                say(f"mapping v{learned} for {args.matchers} matchers written")
            await scaling.request(store, args.matchers)
            await scaling.wait_for_matchers(store, args.matchers, args.timeout, say)
            if learned is None:
                initial = await mappings.initial() or current
                version = await scaling.wait_for_version(
                    mappings, args.matchers, initial, args.timeout, say
                )
                say(f"mapping v{version} for {args.matchers} matchers written by a router")
            else:
                version = learned
            await scaling.wait_settled(mappings, version, args.timeout, say)
            if args.matchers < current:
                await scaling.wait_removable(
                    store, mappings, args.matchers, current, args.timeout, say
                )
            return version
        finally:
            await client.aclose()

    try:
        version = asyncio.run(run())
    except (StoreUnavailable, TimeoutError, RuntimeError) as exc:
        return _fail(str(exc))
    say(f"the cluster routes to {args.matchers} matchers (mapping v{version})")
    if args.matchers < current:
        say(
            f"matchers {args.matchers} to {current - 1} hold nothing now: a local cluster stops "
            f"them; on Kubernetes: kubectl scale statefulset/matcher --replicas={args.matchers}"
        )
    return 0


def cmd_drain(args: argparse.Namespace) -> int:
    """Hold a matcher being removed up until nothing routes to it and it holds nothing."""
    from pydantic import ValidationError

    from . import scaling
    from .errors import KubernetesUnavailable, MappingError, StoreUnavailable
    from .kube import StatefulSetReplicas
    from .mapping_store import MappingStore
    from .services.matcher.settings import MatcherSettings
    from .store import SubscriptionStore, connect

    try:
        given = {} if args.ordinal is None else {"ordinal": args.ordinal}
        settings = MatcherSettings(**given)
    except ValidationError as exc:
        return _fail(f"cannot tell which matcher this is: {exc.errors()[0]['msg']}")
    ordinal = settings.ordinal

    def say(line: str) -> None:
        print(f"matcher-{ordinal}: {line}", flush=True)

    async def wanted_now(store: SubscriptionStore) -> int | None:
        if not args.statefulset:
            return await store.matchers_wanted()
        replicas = StatefulSetReplicas(args.statefulset)
        try:
            wanted = await replicas.get()
        finally:
            await replicas.aclose()
        if 1 <= wanted <= ordinal:
            # Said at once, rather than at the routers' next look at the StatefulSet.
            await store.want_matchers(wanted)
        return wanted

    async def run() -> str:
        client = connect(settings.redis_url)
        store = SubscriptionStore(client, settings.namespace)
        mappings = MappingStore(client, settings.namespace)
        try:
            wanted = await wanted_now(store)
            if wanted is None or ordinal < wanted:
                return f"stays ({wanted} matchers wanted): only restarting, nothing to drain"
            if wanted == 0:
                return "the whole cluster stops: nothing to move to (subscriptions stay in Redis)"
            say(f"removed ({wanted} matchers wanted): waiting until nothing routes to it…")
            initial = await mappings.initial()

            async def in_use() -> tuple[str, str] | None:
                if await scaling.removable(store, mappings, ordinal, ordinal + 1, initial):
                    return None
                return (
                    f"held: {await store.held_by(ordinal)} subscriptions, or still routed to",
                    f"still in use after {args.timeout:g} s",
                )

            await scaling.wait(in_use, args.timeout, say)
            return "drained: nothing routes to it and it holds nothing"
        finally:
            await client.aclose()

    try:
        say(asyncio.run(run()))
    except (StoreUnavailable, KubernetesUnavailable, MappingError, TimeoutError) as exc:
        return _fail(f"matcher-{ordinal}: {exc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="wordcast", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start a local cluster in the foreground")
    up.add_argument("--matchers", type=int, default=2, help="number of matchers (default 2)")
    up.add_argument("--port", type=int, default=8000, help="router port (default 8000)")
    up.add_argument(
        "--no-demo",
        action="store_true",
        help="no demo receiver and no demo traffic, just the cluster",
    )
    up.add_argument("--data-dir", help="keep Redis data here (default: a temporary directory)")
    up.add_argument("--demo-subscriptions", type=int, default=300)
    up.add_argument("--demo-rate", type=float, default=20.0, help="demo posts per second")
    up.set_defaults(func=cmd_up)

    subscribe = sub.add_parser("subscribe", help="register a subscription")
    subscribe.add_argument("query", nargs="*", help="keywords that must all occur")
    subscribe.add_argument("--callback", required=True, help="webhook URL for the matches")
    subscribe.add_argument(
        "--from-corpus",
        type=int,
        metavar="N",
        help="register N queries drawn from corpus posts instead",
    )
    subscribe.add_argument(
        "--pattern", help="a wildcard pattern (? one character, * any run) instead of keywords"
    )
    subscribe.add_argument(
        "--patterns", action="store_true", help="with --from-corpus: patterns cut from posts"
    )
    subscribe.add_argument("--seed", type=int, default=0)
    subscribe.add_argument("--router", default=DEFAULT_ROUTER)
    subscribe.set_defaults(func=cmd_subscribe)

    publish = sub.add_parser("publish", help="publish texts (arguments, stdin or corpus)")
    publish.add_argument("text", nargs="*")
    publish.add_argument("--corpus", type=int, metavar="N", help="publish N corpus posts")
    publish.add_argument("--batch", type=int, default=500)
    publish.add_argument("--seed", type=int, default=0)
    publish.add_argument("--router", default=DEFAULT_ROUTER)
    publish.set_defaults(func=cmd_publish)

    status = sub.add_parser("status", help="mapping version, spread, imbalance, matcher loads")
    status.add_argument("--router", default=DEFAULT_ROUTER)
    status.set_defaults(func=cmd_status)

    watch = sub.add_parser(
        "watch",
        help="subscribe, show each match as it is delivered, unsubscribe when stopped",
        description="Serves a webhook of its own, registers the queries and patterns with it, "
        "prints every match delivered (checking its signature) and deletes the subscriptions "
        "when it stops: Ctrl-C, --count or --seconds. The matchers must reach the webhook: a "
        "local cluster allows loopback; otherwise give --host and --callback-host.",
    )
    watch.add_argument("query", nargs="*", help="keyword or boolean queries, each quoted")
    watch.add_argument(
        "--pattern", action="append", default=[], help="a wildcard pattern (repeatable)"
    )
    watch.add_argument("--count", type=int, help="stop after this many matches")
    watch.add_argument("--seconds", type=float, help="stop after this long")
    watch.add_argument("--keep", action="store_true", help="leave the subscriptions registered")
    watch.add_argument("--host", default="127.0.0.1", help="where the webhook listens")
    watch.add_argument("--port", type=int, default=0, help="default: any free port")
    watch.add_argument("--callback-host", help="the host the matchers reach it at")
    watch.add_argument("--router", default=DEFAULT_ROUTER)
    watch.set_defaults(func=cmd_watch)

    bench = sub.add_parser(
        "bench",
        help="run a benchmark (from a source checkout), as make bench-NAME does",
        description="Runs python -m bench.NAME in the source checkout; results (JSON, plots) go "
        "to bench/results/ (WORDCAST_BENCH_DIR elsewhere). Options after NAME go to the "
        "benchmark: wordcast bench routing --help.",
    )
    bench.add_argument("name", choices=BENCHMARKS)
    bench.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own options")
    bench.set_defaults(func=cmd_bench)

    learn = sub.add_parser(
        "learn", help="learn a routing mapping with Spark and publish it as a new version"
    )
    learn.add_argument(
        "--matchers",
        type=int,
        help="learn for this many matchers (another number than the cluster's scales it); "
        "default: the cluster's number, as the routers and wordcast scale recorded it",
    )
    learn.add_argument(
        "--algorithm",
        default="salb",
        choices=("salb", "salb-refined", "best", "hash", *VARIANTS),
        help="salb-refined: SALB, then single-word moves that lower the busiest matchers' load; "
        "best: SALB, SALB refined, gFCL, gNFCL or hash, whichever models best on held-out posts",
    )
    learn.add_argument("--corpus", help="learn from a corpus (pypi or a TSV) instead of the log")
    learn.add_argument("--redis-url", help="default: $REDIS_URL")
    learn.set_defaults(func=cmd_learn)

    scale = sub.add_parser(
        "scale",
        help="change the number of matchers: subscriptions move live, nothing is lost",
        description="Ask for N matchers and follow the routers as they move the cluster onto them "
        "(a version with stable hashing, or one learned first) until every router uses only it. "
        "A local cluster (wordcast up) starts and stops its matcher processes itself; on "
        "Kubernetes, kubectl scale the StatefulSet instead (routers that follow it re-map).",
    )
    scale.add_argument("matchers", type=int, help="the number of matchers wanted")
    scale.add_argument(
        "--algorithm",
        default="auto",
        choices=("auto", "hash", "salb", "salb-refined", "best", *VARIANTS),
        help=f"the new mapping; auto: SALB learned from the publication log when it holds at "
        f"least {SCALE_MIN_LOG:,} publications, else stable hashing",
    )
    scale.add_argument("--timeout", type=float, default=600.0, help="seconds per step")
    scale.add_argument("--router", default=DEFAULT_ROUTER)
    scale.add_argument("--redis-url", help="default: $REDIS_URL")
    scale.set_defaults(func=cmd_scale)

    drain = sub.add_parser(
        "drain",
        help="a matcher pod's preStop hook: when scaling down removes it, wait until it is empty",
        description="If the number of matchers wanted (from --statefulset, or Redis) leaves this "
        "matcher out, wait until the routers have moved everything off it and route nothing to "
        "it; otherwise (a restart) return at once. Settings as the matcher's (WORDCAST_MATCHER_*).",
    )
    drain.add_argument("--ordinal", type=int, help="default: the matcher's (host name matcher-K)")
    drain.add_argument(
        "--statefulset", help="read the number wanted from this StatefulSet's replicas"
    )
    drain.add_argument("--timeout", type=float, default=240.0, help="seconds (default 240)")
    drain.set_defaults(func=cmd_drain)

    for name, func in (("router", cmd_router), ("matcher", cmd_matcher)):
        service = sub.add_parser(name, help=f"run one {name} (configured by environment)")
        service.set_defaults(func=func)
    receiver = sub.add_parser("receiver", help="run the demo webhook receiver")
    receiver.add_argument("--port", type=int)
    receiver.add_argument("--quiet", action="store_true")
    receiver.set_defaults(func=cmd_receiver)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result
