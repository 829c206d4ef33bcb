"""One lifespan for every service with a Redis store (the router, the matcher): configure
logging, connect the store, build the service's state, run its background work for as long as
the service runs, then stop that work, close the state and the store, in that order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

from fastapi import FastAPI

from wordcast.services.common import ServiceSettings, configure_logging, in_background
from wordcast.storage import Store

State = TypeVar("State")
Work = Sequence[tuple[Coroutine[Any, Any, None], str]]  # a coroutine and what it is, for logs


def connect_store(settings: ServiceSettings) -> Store:
    """The service's store, as its settings describe it."""
    return Store.connect(
        settings.redis_url,
        settings.namespace,
        settings.events_max,
        settings.redis_wait_replicas,
        settings.redis_write_deadline_s,
        settings.redis_max_connections,
    )


def service_lifespan(
    settings: ServiceSettings,
    make_state: Callable[[Store], State],
    name: str,
    background: Callable[[State], Work],
    close: Callable[[State], Awaitable[None]],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The lifespan of a service whose state ``make_state`` builds on its store, kept as
    ``app.state.<name>``; ``background`` names the work that runs while it serves (each stopped,
    last first, when it stops) and ``close`` what ends the state before the store closes."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level)
        store = connect_store(settings)
        state = make_state(store)
        setattr(app.state, name, state)
        try:
            async with AsyncExitStack() as running:
                for work, what in background(state):
                    await running.enter_async_context(in_background(work, what))
                yield
        finally:
            await close(state)
            await store.aclose()

    return lifespan
