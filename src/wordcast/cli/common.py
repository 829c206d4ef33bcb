"""What every command shares: the router URL default, errors, serving one service."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from wordcast.local.record import LocalCluster
    from wordcast.services.common import ServiceSettings

T = TypeVar("T")

DEFAULT_ROUTER = "http://127.0.0.1:8000"


def add_router_option(parser: Any) -> None:
    parser.add_argument(
        "--router",
        help="the router's URL (default: $WORDCAST_URL, else the local cluster wordcast up "
        "runs, else http://127.0.0.1:8000)",
    )


def default_router() -> str:
    """``$WORDCAST_URL``, else the router of the local cluster ``wordcast up`` is running (which
    may be on another port than the default: ``wordcast up --port``), else the default; either
    of the last two named on stderr, so that no command acts on a cluster silently."""
    if os.environ.get("WORDCAST_URL"):
        return os.environ["WORDCAST_URL"]
    found = local_cluster()
    if found is None:
        print(
            f"wordcast: no local cluster of yours is running: acting on {DEFAULT_ROUTER} (give "
            "--router or WORDCAST_URL for another)",
            file=sys.stderr,
        )
        return DEFAULT_ROUTER
    print(
        f"wordcast: acting on the local cluster at {found.router_url} (wordcast up, pid "
        f"{found.pid})",
        file=sys.stderr,
    )
    return found.router_url


def local_cluster() -> LocalCluster | None:
    """The one local cluster of this user that ``wordcast up`` runs, if any
    (:mod:`wordcast.local.record`); with several, the command stops and names them."""
    from wordcast.local import record

    clusters = record.running()
    if len(clusters) > 1:
        named = ", ".join(f"{c.router_url} (pid {c.pid})" for c in clusters)
        raise SystemExit(
            fail(
                f"{len(clusters)} local clusters are running: {named}; say which with --router "
                "URL (or WORDCAST_URL, and REDIS_URL for the commands that need Redis)"
            )
        )
    return clusters[0] if clusters else None


def add_admin_token_option(parser: Any) -> None:
    parser.add_argument(
        "--admin-token",
        help="the routers' admin token (default: $WORDCAST_ADMIN_TOKEN, else a development "
        "cluster's)",
    )


def admin_token(args: argparse.Namespace) -> str:
    """--admin-token, else $WORDCAST_ADMIN_TOKEN, else the token a development cluster accepts."""
    from wordcast.defaults import DEFAULT_ADMIN_TOKEN

    return str(args.admin_token or os.environ.get("WORDCAST_ADMIN_TOKEN") or DEFAULT_ADMIN_TOKEN)


def whole(low: int = 1, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from ``low`` to ``high``, or a clear refusal."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"must be {bounds} (got {value})")
        return value

    return parse


def positive(text: str) -> float:
    """An argparse type: a number above zero (seconds, rates), or a clear refusal."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0 (got {text})")
    return value


def counted(n: int, noun: str, plural: str = "") -> str:
    """``1 subscription``, ``2 subscriptions``, ``1 match``, ``3 matches``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


NO_REDIS = (
    "give --redis-url or set REDIS_URL (and WORDCAST_NAMESPACE if not 'wordcast'): no local "
    "cluster is running, whose `wordcast up` would have said where its Redis is"
)


def cluster_redis(args: argparse.Namespace) -> tuple[str, str] | None:
    """The Redis URL and namespace of the cluster a command acts on: ``--redis-url`` or
    ``$REDIS_URL`` (with ``$WORDCAST_NAMESPACE``), else those of the local cluster ``wordcast up``
    is running (:mod:`wordcast.local.record`); None if there is neither."""
    url = getattr(args, "redis_url", None) or os.environ.get("REDIS_URL")
    if url:
        return url, os.environ.get("WORDCAST_NAMESPACE", "wordcast")
    found = local_cluster()
    return (found.redis_url, found.namespace) if found else None


def fail(message: str) -> int:
    print(f"wordcast: error: {message}", file=sys.stderr)
    return 2


S = TypeVar("S")


def service_settings(cls: Callable[[], S]) -> S:
    """A service's settings from the environment; InvalidInput naming each variable that is wrong
    (the CLI prints it), not pydantic's traceback."""
    from pydantic import ValidationError

    from wordcast.errors import InvalidInput

    try:
        return cls()
    except ValidationError as exc:
        prefix = str(getattr(cls, "model_config", {}).get("env_prefix", ""))
        problems = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if error["loc"]:
                name = str(error["loc"][0])
                variable = name if name.isupper() else f"{prefix}{name}".upper()
                message = f"{variable}={error['input']!r}: {message}"
            problems.append(message)
        raise InvalidInput("; ".join(problems)) from None


def serve(app: object, settings: ServiceSettings, log_level: str | None = None) -> int:
    import uvicorn

    from wordcast.services.common import header_timeout, tune_garbage_collection

    # Here, not in the apps' lifespans: only a service process of its own should freeze what it
    # built (an app started inside a test run would freeze the test process's objects too).
    tune_garbage_collection()

    # Keep idle connections open well past httpx's 5 s pool expiry: with equal timeouts a client can
    # send on a connection the server is closing, and gets a reset instead of an answer.
    uvicorn.run(
        app,  # type: ignore[arg-type]
        host=settings.host,
        port=settings.port,
        log_level=log_level or settings.log_level,
        access_log=False,
        timeout_keep_alive=30,
        http=header_timeout(settings.header_timeout_s),
        # A request still open on shutdown must not keep a matcher being removed alive for ever.
        timeout_graceful_shutdown=5,
    )
    return 0


def serve_workers(factory: str, settings: ServiceSettings, workers: int) -> int:
    """``workers`` processes sharing one port, each building its app with ``factory`` (an import
    string) from the environment, as uvicorn's supervisor spawns them; their Prometheus metrics
    kept in a directory of files that any of them reads back whole."""
    import uvicorn

    from wordcast.services.common import WORKER_HEADER_TIMEOUT_ENV

    with tempfile.TemporaryDirectory(prefix="wordcast-metrics-") as metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
        os.environ[WORKER_HEADER_TIMEOUT_ENV] = str(settings.header_timeout_s)
        uvicorn.run(
            factory,
            factory=True,
            workers=workers,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            access_log=False,
            timeout_keep_alive=30,
            http="wordcast.services.common:WorkerHeaderTimeoutProtocol",
            timeout_graceful_shutdown=5,
        )
    return 0


def terminate_on_sigterm() -> None:
    """SIGTERM stops the command as Ctrl-C does; so does SIGINT, even for a process started in
    the background of a script, which inherits SIGINT ignored (and Python leaves it so)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def against_router(router: str, work: Coroutine[Any, Any, T]) -> tuple[T | None, str | None]:
    """Run a client coroutine; API and connection failures become one clear message."""
    from wordcast.client import ApiError, RouterUnreachable, StreamLost
    from wordcast.errors import WordcastError

    try:
        return asyncio.run(work), None
    except (ApiError, RouterUnreachable, StreamLost) as exc:
        return None, str(exc)
    except WordcastError:
        raise  # says itself what went wrong (a missing corpus is an OSError too, not the router's)
    except BrokenPipeError:
        raise  # the reader of our output went away (`| head`): main stops quietly
    except OSError as exc:
        return None, f"cannot reach the router at {router}: {exc}"
