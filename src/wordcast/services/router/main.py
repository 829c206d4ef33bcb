"""The router service: ``uvicorn --factory wordcast.services.router.main:create_app``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from wordcast import __version__, limits
from wordcast.services.common import (
    BodySizeLimit,
    configure_logging,
    in_background,
    metrics_router,
    tune_garbage_collection,
)
from wordcast.services.errors import install_error_handlers
from wordcast.services.pages import serve_console, serve_pages
from wordcast.services.router.routes import (
    admin,
    deadletters,
    endpoints,
    health,
    matches,
    publications,
    subscriptions,
)
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.state import RouterState
from wordcast.storage import Store


def create_app(settings: RouterSettings | None = None) -> FastAPI:
    settings = settings or RouterSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level)
        store = Store.connect(
            settings.redis_url,
            settings.namespace,
            settings.events_max,
            settings.redis_wait_replicas,
            settings.redis_write_deadline_s,
            settings.redis_max_connections,
        )
        state = RouterState(settings, store)
        app.state.router = state
        try:
            async with (
                in_background(state.follower.run(), "events"),
                in_background(state.versions.watch(), "mappings"),
                in_background(state.versions.report(), "version reports"),
                in_background(state.shedder.run(), "load shedding"),
                in_background(state.tenants.follow_revocations(), "key revocations"),
                in_background(state.publishing.write_samples(), "publication log"),
                in_background(state.match_streams.follow(), "match stream positions"),
                in_background(state.keep_history(), "rate history"),
            ):
                yield
        finally:
            await state.close()
            await store.aclose()

    app = FastAPI(
        title="wordcast router",
        version=__version__,
        description="Keyword subscriptions matched against a stream of publications.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=limits.MAX_REQUEST_BYTES, timeout_s=settings.body_timeout_s
    )
    app.include_router(subscriptions.router)
    app.include_router(endpoints.router)
    app.include_router(publications.router)
    app.include_router(deadletters.router)
    app.include_router(matches.router)
    app.include_router(admin.router)
    app.include_router(deadletters.admin)
    app.include_router(health.router)
    app.include_router(health.probes)
    app.include_router(metrics_router())
    serve_pages(app)
    serve_console(app)
    return app


def create_worker_app() -> FastAPI:
    """The app of one of ``WORDCAST_ROUTER_WORKERS`` router processes (uvicorn calls it in each
    worker it spawns), its settings read from the environment."""
    tune_garbage_collection()
    return create_app(RouterSettings())
