"""The Spark jobs and the number of matchers: ``learn`` (the mapping learner), ``termstats`` (term
statistics), ``scale`` and ``drain`` (a matcher pod's preStop hook); see :mod:`wordcast.ops.scaling`."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wordcast.cli.common import NO_REDIS, add_router_option, cluster_redis, fail, positive, whole
from wordcast.learning.partitioning import VARIANTS

if TYPE_CHECKING:
    from wordcast.learning.salb import SalbResult
    from wordcast.storage import Store


def _wanted_matchers(redis_url: str, namespace: str) -> int | None:
    """The number of matchers the cluster is asked to have (StoreUnavailable)."""
    from wordcast.storage import Store

    async def read() -> int | None:
        store = Store.connect(redis_url, namespace)
        try:
            return await store.membership.matchers_wanted()
        finally:
            await store.aclose()

    return asyncio.run(read())


def _run_job(name: str, main: Callable[[list[str]], int], argv: list[str]) -> int:
    """The Spark job ``name``'s entry point; its refusals (``SystemExit("name: why")``, for
    ``python -m``) become this command's errors."""
    try:
        return main(argv)
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise  # argparse's, or an exit status
        return fail(exc.code.removeprefix(f"{name}: "))


def cmd_learn(args: argparse.Namespace) -> int:
    """Run the Spark mapping learner on the routers' publication log and publish the result."""
    try:
        from wordcast.spark_jobs import learn_mapping
    except ImportError as exc:
        return fail(f"the Spark jobs need the spark extra (pip install 'wordcast[spark]'): {exc}")
    found = cluster_redis(args)
    if found is None:
        return fail(f"{NO_REDIS} (the log is read from and the mapping written to that Redis)")
    redis_url, namespace = found
    from wordcast.errors import StoreUnavailable

    try:
        wanted = _wanted_matchers(redis_url, namespace)
    except StoreUnavailable as exc:
        return fail(str(exc))
    matchers = args.matchers or wanted
    if matchers is None:
        return fail("no router has recorded the cluster's number of matchers: give --matchers")
    if wanted is not None and matchers != wanted:
        # The routers would soon replace a version for another number (wordcast.ops.scaling).
        return fail(
            f"the cluster has {wanted} matchers: learn for them (leave out --matchers), or "
            f"change their number with: wordcast scale {matchers} --algorithm salb"
        )
    argv = ["--matchers", str(matchers), "--algorithm", args.algorithm]
    argv += ["--namespace", namespace, "--publish", redis_url]
    argv += ["--corpus", args.corpus] if args.corpus else ["--publication-log", redis_url]
    argv += ["--master", args.master] if args.master else []
    return _run_job("learn_mapping", learn_mapping.main, argv)


def cmd_termstats(args: argparse.Namespace) -> int:
    """Run the Spark term-statistics job (QueryNote's document frequencies and co-occurrences)."""
    try:
        from wordcast.spark_jobs import term_stats
    except ImportError as exc:
        return fail(f"the Spark jobs need the spark extra (pip install 'wordcast[spark]'): {exc}")
    if args.corpus and args.redis_url:
        return fail("give --corpus or --redis-url (the routers' publication log), not both")
    argv = ["--out", str(args.out), "--min-pair-df", str(args.min_pair_df)]
    argv += ["--limit", str(args.limit)] if args.limit else []
    if args.corpus:
        argv += ["--corpus", args.corpus]
    else:
        found = cluster_redis(args)
        if found is None:
            return fail(
                "give --corpus, or --redis-url or $REDIS_URL for the publication log: no local "
                "cluster is running, whose `wordcast up` would have said where its Redis is"
            )
        redis_url, namespace = found
        argv += ["--publication-log", redis_url, "--namespace", namespace]
    argv += ["--master", args.master] if args.master else []
    return _run_job("term_stats", term_stats.main, argv)


# Fewer logged publications than this say too little to learn a mapping from.
SCALE_MIN_LOG = 1_000
# `wordcast scale --algorithm salb` holds the migration lock this long between renewals (x 1/3).
SCALE_LOCK_TTL_S = 30.0


def _learn(
    matchers: int, algorithm: str, namespace: str, redis_url: str
) -> tuple[SalbResult, dict[str, object]]:
    """The Spark learner on the publication log: its mapping and meta, not yet published."""
    from wordcast.spark_jobs import learn_mapping

    argv = ["--matchers", str(matchers), "--algorithm", algorithm, "--namespace", namespace]
    return learn_mapping.learned_mapping([*argv, "--publication-log", redis_url])


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_scale(args: argparse.Namespace) -> int:
    """Move the cluster to N matchers (see wordcast.ops.scaling for the steps)."""
    import httpx

    from wordcast.errors import StoreUnavailable

    if args.matchers < 1:
        return fail("the number of matchers must be at least 1")
    found = cluster_redis(args)
    if found is None:
        return fail(NO_REDIS)
    redis_url, namespace = found
    try:
        current = int(httpx.get(f"{args.router}/stats", timeout=10).json()["matchers"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return fail(f"cannot read {args.router}/stats: {exc}")
    if current == args.matchers and args.algorithm == "auto":
        print(f"the cluster has {current} matchers already; to learn a new mapping: wordcast learn")
        return 0
    try:
        version = asyncio.run(_scale(args, redis_url, namespace, current))
    except (StoreUnavailable, TimeoutError, RuntimeError) as exc:
        return fail(str(exc))
    _say(f"the cluster routes to {args.matchers} matchers (mapping v{version})")
    if args.matchers < current:
        _say(
            f"matchers {args.matchers} to {current - 1} hold nothing now: a local cluster stops "
            f"them; on Kubernetes: kubectl scale statefulset/matcher --replicas={args.matchers}"
        )
    return 0


async def _scale(args: argparse.Namespace, redis_url: str, namespace: str, current: int) -> int:
    """Ask for ``args.matchers``, see a mapping version for them written and in use alone, and
    (when shrinking) the removed matchers emptied; returns that version."""
    from wordcast.ops import scaling
    from wordcast.storage import Store

    store = Store.connect(redis_url, namespace)
    mappings = store.mappings
    try:
        if followed := await store.membership.followed():
            raise RuntimeError(
                f"the routers follow statefulset/{followed}, and would undo this: kubectl "
                f"scale statefulset/{followed} --replicas={args.matchers} instead"
            )
        algorithm = args.algorithm
        if algorithm == "auto":
            logged = await scaling.logged_publications(store)
            algorithm = "salb" if logged >= SCALE_MIN_LOG else "hash"
            _say(f"{logged:,} publications logged: the new mapping is {algorithm}")
        if algorithm == "hash":
            await scaling.request(store, args.matchers)
            await scaling.wait_for_matchers(store, args.matchers, args.timeout, _say)
            initial = await mappings.initial() or current
            version = await scaling.wait_for_version(
                mappings, args.matchers, initial, args.timeout, _say
            )
            _say(f"mapping v{version} for {args.matchers} matchers written by a router")
        else:
            version = await _learn_for_scaling(args, store, algorithm, namespace, redis_url)
        await scaling.wait_settled(mappings, version, args.timeout, _say)
        if args.matchers < current:
            await scaling.wait_removable(
                store, mappings, args.matchers, current, args.timeout, _say
            )
        return version
    finally:
        await store.aclose()


async def _learn_for_scaling(
    args: argparse.Namespace, store: Store, algorithm: str, namespace: str, redis_url: str
) -> int:
    """Learn a mapping for the new number and write it once its matchers answer, holding the
    migration lock throughout: meanwhile no router writes a hashing version for the new number
    (wordcast.ops.scaling, step 3). Returns the version written."""
    from wordcast.ops import scaling

    owner = f"wordcast-scale-{uuid.uuid4().hex}"
    async with scaling.holding_migration_lock(
        store.mappings, owner, SCALE_LOCK_TTL_S, args.timeout, _say
    ):
        await scaling.request(store, args.matchers)
        _say(f"learning a {algorithm} mapping for {args.matchers} matchers with Spark…")
        mapping, meta = await asyncio.to_thread(
            _learn, args.matchers, algorithm, namespace, redis_url
        )
        await scaling.wait_for_matchers(store, args.matchers, args.timeout, _say)
        learned = await store.mappings.write(
            mapping.matchers,
            mapping.words,
            mapping.versions,
            mapping.frequencies,
            {**meta, "reason": "scale"},
        )
    _say(f"mapping v{learned} for {args.matchers} matchers written")
    return learned


def cmd_drain(args: argparse.Namespace) -> int:
    """Hold a matcher being removed up until nothing routes to it and it holds nothing."""
    from pydantic import ValidationError

    from wordcast.errors import KubernetesUnavailable, MappingError, StoreUnavailable
    from wordcast.ops import scaling
    from wordcast.ops.kube import StatefulSetReplicas
    from wordcast.services.matcher.settings import MatcherSettings
    from wordcast.storage import Store

    try:
        given = {} if args.ordinal is None else {"ordinal": args.ordinal}
        settings = MatcherSettings(**given)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        return fail(f"cannot tell which matcher this is: {problem}")
    ordinal = settings.ordinal

    def say(line: str) -> None:
        print(f"matcher-{ordinal}: {line}", flush=True)

    async def wanted_now(store: Store) -> int | None:
        if not args.statefulset:
            return await store.membership.matchers_wanted()
        replicas = StatefulSetReplicas(args.statefulset)
        try:
            wanted = await replicas.get()
        finally:
            await replicas.aclose()
        if 1 <= wanted <= ordinal:
            # Said at once, rather than at the routers' next look at the StatefulSet.
            await store.membership.want_matchers(wanted)
        return wanted

    async def run() -> str:
        store = Store.connect(settings.redis_url, settings.namespace)
        mappings = store.mappings
        try:
            wanted = await wanted_now(store)
            if wanted is None:
                return "stays (no number of matchers recorded): nothing to drain"
            if ordinal < wanted:
                return f"stays ({wanted} matchers wanted): only restarting, nothing to drain"
            if wanted == 0:
                return "the whole cluster stops: nothing to move to (subscriptions stay in Redis)"
            say(f"removed ({wanted} matchers wanted): waiting until nothing routes to it…")
            await scaling.wait_removable(store, mappings, ordinal, ordinal + 1, args.timeout, say)
            return "drained: nothing routes to it and it holds nothing"
        finally:
            await store.aclose()

    try:
        say(asyncio.run(run()))
    except (StoreUnavailable, KubernetesUnavailable, MappingError, TimeoutError) as exc:
        return fail(f"matcher-{ordinal}: {exc}")
    return 0


SPARK_MASTER_HELP = (
    "the Spark master to run on: spark://host:7077 (a standalone cluster), k8s://https://… "
    "(Kubernetes), or local[N]; default $SPARK_MASTER, else local[*] in this process"
)


def register(sub: Any) -> None:
    """Add this module's commands to the ``wordcast`` parser."""
    learn = sub.add_parser(
        "learn", help="learn a routing mapping with Spark and publish it as a new version"
    )
    learn.add_argument(
        "--matchers",
        type=whole(1),
        help="the cluster's number of matchers, as the routers and wordcast scale recorded it "
        "(the default; another is refused: change it with wordcast scale N --algorithm salb); "
        "needed only before any router has started",
    )
    learn.add_argument(
        "--algorithm",
        default="salb",
        choices=("salb", "salb-refined", "best", "hash", *VARIANTS),
        help="salb-refined: SALB, then single-word moves that lower the busiest matchers' load; "
        "best: SALB, SALB refined, gFCL, gNFCL or hash, whichever models best on held-out posts",
    )
    learn.add_argument("--corpus", help="learn from a corpus (pypi or a TSV) instead of the log")
    learn.add_argument(
        "--redis-url", help="default: $REDIS_URL, else the local cluster wordcast up runs"
    )
    learn.add_argument("--master", help=SPARK_MASTER_HELP)
    learn.set_defaults(func=cmd_learn)

    termstats = sub.add_parser(
        "termstats",
        help="compute term statistics with Spark (for matchers running QueryNote)",
        description="Document frequencies and the pruned co-occurrence pairs of the Luwak thesis "
        "§6.2, from the routers' publication log (default) or a corpus, as a JSON file that "
        "matchers load with WORDCAST_MATCHER_TERM_STATS.",
    )
    termstats.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    termstats.add_argument("--corpus", help="pypi, debian, or a TSV with a 'text' column")
    termstats.add_argument(
        "--redis-url",
        help="the log's Redis (default: $REDIS_URL, else the local cluster wordcast up runs)",
    )
    termstats.add_argument("--limit", type=whole(1), help="use only the first N documents")
    termstats.add_argument(
        "--min-pair-df", type=whole(1), default=50, help="keep pairs found together this often"
    )
    termstats.add_argument("--master", help=SPARK_MASTER_HELP)
    termstats.set_defaults(func=cmd_termstats)

    scale = sub.add_parser(
        "scale",
        help="change the number of matchers: subscriptions move live, nothing is lost",
        description="Ask for N matchers and follow the routers as they move the cluster onto them "
        "(a version with stable hashing, or one it learns meanwhile, holding the routers back) "
        "until every router uses only it. "
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
    scale.add_argument("--timeout", type=positive, default=600.0, help="seconds per step")
    add_router_option(scale)
    scale.add_argument(
        "--redis-url", help="default: $REDIS_URL, else the local cluster wordcast up runs"
    )
    scale.set_defaults(func=cmd_scale)

    drain = sub.add_parser(
        "drain",
        help="a matcher pod's preStop hook: when scaling down removes it, wait until it is empty",
        description="If the number of matchers wanted (from --statefulset, or Redis) leaves this "
        "matcher out, wait until the routers have moved everything off it and route nothing to "
        "it; otherwise (a restart) return at once. Settings as the matcher's (WORDCAST_MATCHER_*).",
    )
    drain.add_argument(
        "--ordinal", type=whole(0), help="default: the matcher's (host name matcher-K)"
    )
    drain.add_argument(
        "--statefulset", help="read the number wanted from this StatefulSet's replicas"
    )
    drain.add_argument("--timeout", type=positive, default=240.0, help="seconds (default 240)")
    drain.set_defaults(func=cmd_drain)
