"""``wordcast up`` (a local cluster in the foreground) and the single services it runs:
``wordcast router``, ``matcher`` and ``receiver`` (settings from the environment)."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wordcast.cli.common import (
    fail,
    positive,
    serve,
    serve_workers,
    service_settings,
    terminate_on_sigterm,
    whole,
)
from wordcast.limits import MAX_BATCH_PUBLICATIONS

if TYPE_CHECKING:
    from wordcast.local.cluster import Cluster


def cmd_router(_: argparse.Namespace) -> int:
    from wordcast.services.router.main import create_app
    from wordcast.services.router.settings import RouterSettings

    settings = service_settings(RouterSettings)
    if settings.workers > 1:
        return serve_workers(
            "wordcast.services.router.main:create_worker_app", settings, settings.workers
        )
    return serve(create_app(settings), settings)


def cmd_matcher(_: argparse.Namespace) -> int:
    from wordcast.services.matcher.main import create_app
    from wordcast.services.matcher.settings import MatcherSettings

    settings = service_settings(MatcherSettings)
    return serve(create_app(settings), settings)


def cmd_receiver(args: argparse.Namespace) -> int:
    from wordcast.services.receiver.main import ReceiverSettings, create_app

    settings = service_settings(ReceiverSettings)
    if args.port is not None:
        settings.port = args.port
    if args.quiet:
        settings.quiet = True
    else:  # before the first delivery, a word that it runs and where
        print(
            f"receiving webhooks at http://{settings.host}:{settings.port}/ (each match is "
            "printed; Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
    return serve(create_app(settings), settings, "warning")


DEMO_RECORD = "demo-subscriptions.json"  # in the cluster's data directory


async def _demo(cluster: object, subscriptions: int, rate: float) -> None:
    """Register corpus-drawn subscriptions, then publish corpus posts at a readable pace forever.

    The ids registered are recorded in the cluster's data directory: a cluster started again on
    the same ``--data-dir`` deletes the previous run's demo subscriptions first (they deliver to
    that run's receiver, on another port), so the demo holds one set however often it starts."""
    from wordcast.client import RouterClient
    from wordcast.corpus.workload import (
        post_boolean_queries,
        post_patterns,
        post_queries,
        sample_posts,
    )
    from wordcast.local.cluster import Cluster

    assert isinstance(cluster, Cluster)
    print("demo: loading posts from the pypi corpus…", flush=True)
    posts = sample_posts(20_000, seed=int(time.time()))
    queries = post_queries(posts, subscriptions, sizes=(2, 2, 3))
    boolean = post_boolean_queries(posts, max(1, subscriptions // 5))
    patterns = post_patterns(posts, max(1, subscriptions // 3), min_length=6, max_length=12)
    record = cluster.data_dir / DEMO_RECORD
    async with RouterClient(cluster.router_url) as client:
        if record.exists():
            previous = json.loads(record.read_text())
            await client.unsubscribe_many(previous, progress=False)
            print(f"demo: {len(previous)} subscriptions of the previous demo deleted", flush=True)
        made = await client.subscribe_many(queries + boolean, cluster.callback_url)
        made += await client.subscribe_many(patterns, cluster.callback_url, kind="pattern")
        record.write_text(json.dumps([str(sub["id"]) for sub in made]))
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
            # Through publish_many, which waits out a matcher restarting or a `wordcast scale`.
            body = [{"id": p.id, "text": p.text} for p in chunk]
            await client.publish_many(body, batch=MAX_BATCH_PUBLICATIONS, progress=False)
            await asyncio.sleep(batch / rate)


# About 100 MB and a share of the cores each: past this, a laptop only thrashes.
MAX_LOCAL_MATCHERS = 64


def cmd_up(args: argparse.Namespace) -> int:
    from wordcast.local.cluster import Cluster
    from wordcast.local.supervisor import port_in_use

    if not 1 <= args.matchers <= MAX_LOCAL_MATCHERS:
        return fail(
            f"--matchers must be 1 to {MAX_LOCAL_MATCHERS} for a local cluster (each matcher is a "
            "process of its own); more belong on Kubernetes"
        )
    if args.redis_shards and os.environ.get("REDIS_URL"):
        return fail("--redis-shards starts a Redis Cluster of its own: unset REDIS_URL, or drop it")
    busy = port_in_use(args.port)
    if busy:
        # Under `make run`, the way to another port is make's variable, not the option.
        how = "make run PORT=P" if os.environ.get("MAKELEVEL") else "--port P"
        return fail(
            f"the router cannot listen on port {args.port} ({busy.strerror}); "
            f"give another with {how}"
        )
    if not args.no_demo:
        from wordcast.corpus.files import CorpusNotFound, corpus_dir

        try:
            corpus_dir()  # before anything starts: the demo publishes corpus posts
        except CorpusNotFound as exc:
            return fail(f"the demo needs the pypi corpus: {exc}; or start without it: --no-demo")
    terminate_on_sigterm()
    namespace = os.environ.get("WORDCAST_NAMESPACE", "wordcast")
    try:
        cluster = Cluster(
            matchers=args.matchers,
            port=args.port,
            redis_url=os.environ.get("REDIS_URL") or None,
            namespace=namespace,
            receiver=not args.no_demo,
            data_dir=Path(args.data_dir) if args.data_dir else None,
            redis_shards=args.redis_shards,
        )
    except ValueError as exc:  # a Redis Cluster of too few shards
        return fail(str(exc))
    except OSError as exc:  # making the embedded Redis's directory; nothing has started yet
        if not args.data_dir:
            raise
        return fail(f"cannot keep Redis data in --data-dir {args.data_dir}: {exc.strerror}")
    return _run_until_stopped(cluster, args, namespace)


def _run_until_stopped(cluster: Cluster, args: argparse.Namespace, namespace: str) -> int:
    """Start ``cluster``, record it for the other commands (:mod:`wordcast.local.record`), run
    the demo or wait, and stop everything on Ctrl-C (or SIGTERM)."""
    from wordcast.local import record
    from wordcast.local.cluster import describe

    try:
        cluster.start()
        for line in describe(cluster):
            print(line, flush=True)
        record.write(
            record.LocalCluster(cluster.redis_url, namespace, cluster.router_url, os.getpid())
        )
        print(f"wordcast is up: router at {cluster.router_url}", flush=True)
        if args.no_demo:
            while True:
                time.sleep(3600)
        else:
            asyncio.run(_demo(cluster, args.demo_subscriptions, args.demo_rate))
    except KeyboardInterrupt:
        print("\nstopping wordcast…", flush=True)
    except (RuntimeError, TimeoutError) as exc:
        record.remove(os.getpid())
        cluster.stop()
        return fail(str(exc))
    record.remove(os.getpid())
    cluster.stop()
    print("stopped", flush=True)
    return 0


def register(sub: Any) -> None:
    """Add this module's commands to the ``wordcast`` parser."""
    up = sub.add_parser(
        "up",
        help="start a local cluster in the foreground",
        description="Starts an embedded Redis (unless REDIS_URL is set), matchers and a router, "
        "and a demo: a receiver that prints what it is sent, subscriptions from the sample "
        "corpus delivered to it, and posts published at --demo-rate. Ctrl-C stops everything. "
        "With --data-dir, Redis keeps its data there and a restart finds the same "
        "subscriptions (the demo's are not added twice).",
    )
    up.add_argument(
        "--matchers",
        type=int,
        default=2,
        help=f"number of matchers, 1 to {MAX_LOCAL_MATCHERS} (default 2)",
    )
    up.add_argument("--port", type=whole(1, 65535), default=8000, help="router port (default 8000)")
    up.add_argument(
        "--no-demo",
        action="store_true",
        help="no demo receiver and no demo traffic, just the cluster",
    )
    up.add_argument("--data-dir", help="keep Redis data here (default: a temporary directory)")
    up.add_argument(
        "--redis-shards",
        type=whole(0, 64),
        default=0,
        help="run on an embedded Redis Cluster of this many masters (3 or more), a replica each, "
        "instead of one Redis (default 0: one Redis)",
    )
    up.add_argument(
        "--demo-subscriptions",
        type=whole(1),
        default=300,
        help="keyword subscriptions the demo makes from the corpus (default 300)",
    )
    up.add_argument("--demo-rate", type=positive, default=20.0, help="demo posts per second")
    up.set_defaults(func=cmd_up)

    for name, func in (("router", cmd_router), ("matcher", cmd_matcher)):
        service = sub.add_parser(
            name,
            help=f"run one {name} (configured by environment)",
            description=f"Runs one {name} in the foreground, as a pod does; its settings come "
            "from WORDCAST_* environment variables (docs/CONFIGURATION.md lists them).",
        )
        service.set_defaults(func=func)
    receiver = sub.add_parser(
        "receiver",
        help="run the demo webhook receiver",
        description="A webhook receiver that prints each match it is POSTed (it checks no "
        "signature): a callback URL to try subscriptions with, offline.",
    )
    receiver.add_argument(
        "--port", type=whole(0, 65535), help="the port to listen on (default 8200)"
    )
    receiver.add_argument("--quiet", action="store_true", help="print nothing per delivery")
    receiver.set_defaults(func=cmd_receiver)
