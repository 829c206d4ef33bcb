"""The router service: ``uvicorn --factory wordcast.services.router.main:create_app``."""

from __future__ import annotations

from fastapi import FastAPI

from wordcast import __version__, limits
from wordcast.services.common import BodySizeLimit, metrics_router, tune_garbage_collection
from wordcast.services.errors import install_error_handlers
from wordcast.services.lifespan import service_lifespan
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


def create_app(settings: RouterSettings | None = None) -> FastAPI:
    settings = settings or RouterSettings()

    lifespan = service_lifespan(
        settings,
        lambda store: RouterState(settings, store),
        "router",
        lambda state: [
            (state.follower.run(), "events"),
            (state.versions.watch(), "mappings"),
            (state.versions.report(), "version reports"),
            (state.shedder.run(), "load shedding"),
            (state.tenants.follow_revocations(), "key revocations"),
            (state.publishing.write_samples(), "publication log"),
            (state.match_streams.follow(), "match stream positions"),
            (state.keep_history(), "rate history"),
        ],
        RouterState.close,
    )

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
