"""The one Redis client of a process, and the translation of Redis's errors into wordcast's."""

from __future__ import annotations

import contextlib
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from wordcast.errors import StoreUnavailable


@contextlib.contextmanager
def translated(action: str) -> Any:
    try:
        yield
    except RedisError as exc:
        raise StoreUnavailable(f"Redis failed while {action}: {exc}") from exc


def connect(url: str) -> aioredis.Redis:
    """One client (and so one connection pool) per process; responses decoded as text."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=5,
        health_check_interval=15,
        retry_on_timeout=True,
    )


def answers(url: str, timeout_s: float = 1.0) -> str | None:
    """Why the Redis at ``url`` does not answer a PING now (None if it does); for processes that
    start or wait for a Redis server (``wordcast up``), outside any event loop."""
    import redis

    try:
        client = redis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
    except ValueError as exc:
        return f"{url!r} is not a Redis URL: {exc}"
    try:
        client.ping()
        return None
    except redis.RedisError as exc:
        return str(exc) or type(exc).__name__
    finally:
        client.close()
