"""The matcher service: ``wordcast matcher``, or ``uvicorn --factory …matcher.main:create_app``."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from wordcast import __version__, limits
from wordcast.errors import StoreUnavailable
from wordcast.services.common import BodySizeLimit, metrics_router
from wordcast.services.errors import install_error_handlers
from wordcast.services.lifespan import service_lifespan
from wordcast.services.matcher.routes import health, internal
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.services.matcher.state import MatcherState
from wordcast.services.pages import serve_pages

log = logging.getLogger(__name__)


def create_app(settings: MatcherSettings | None = None) -> FastAPI:
    settings = settings or MatcherSettings()

    async def close(state: MatcherState) -> None:
        try:
            await state.checkpoint()
        except OSError as exc:
            log.warning("could not write the matcher's checkpoint: %s", exc)
        await state.backfills.stop()
        await state.dispatcher.close(settings.shutdown_drain_s)
        try:
            await state.hand_on_if_removed()
        except StoreUnavailable as exc:  # the take-over bound still gets them to the others
            log.warning("could not hand on this matcher's unfinished deliveries: %s", exc)

    lifespan = service_lifespan(
        settings,
        lambda store: MatcherState(settings, store),
        "matcher",
        lambda state: [
            (state.follower.run(), "events"),
            (state.dispatcher.run(), "dispatch"),
            (state.register(), "registration"),
            (state.keep_checkpoints(), "checkpoints"),
            (state.counting.keep(), "counters"),
        ],
        close,
    )

    app = FastAPI(
        title=f"wordcast matcher {settings.ordinal}",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    serve_pages(app)
    install_error_handlers(app)
    app.add_middleware(
        BodySizeLimit, max_bytes=limits.MAX_ROUTED_BATCH_BYTES, timeout_s=settings.body_timeout_s
    )
    app.include_router(internal.router)
    app.include_router(health.router)
    app.include_router(health.probes)
    app.include_router(metrics_router())
    return app
