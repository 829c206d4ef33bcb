"""The pages a browser loads from a service, every asset served by the service itself.

FastAPI's own ``/docs`` page loads Swagger UI from a CDN and starts it with an inline script, so
it shows nothing on an air-gapped network and breaks under a Content-Security-Policy that allows
only the page's own origin. Here Swagger UI's files come from the ``fastapi-offline`` package (a
maintained bundle of them) and its start-up script is a file of ours, so the docs page and the
router's web console (``/console``: ``static/console.html``, ``.js`` and ``.css``) load nothing
from elsewhere, and are served with :data:`CONTENT_SECURITY_POLICY`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Only this origin, for everything; images may also be data: URIs (Swagger UI's icons are).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
PAGES = ("/docs", "/console", "/assets/")
STATIC = Path(str(files("wordcast.services") / "static"))
SWAGGER_UI = Path(fastapi_offline.__file__).parent / "static"

DOCS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}: API docs</title>
<link rel="icon" href="/assets/swagger-ui/favicon.png">
<link rel="stylesheet" href="/assets/swagger-ui/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/assets/swagger-ui/swagger-ui-bundle.js"></script>
<script src="/assets/wordcast/docs.js"></script>
</body>
</html>
"""


class SecurityHeaders:
    """Sends :data:`CONTENT_SECURITY_POLICY` (and no-sniff) with every page and asset (a pure
    ASGI middleware: it leaves streamed answers, the match stream's, streaming)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or (path != "/" and not path.startswith(PAGES)):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
                    (b"x-content-type-options", b"nosniff"),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


def serve_pages(app: FastAPI) -> None:
    """The docs page at /docs and the assets under /assets; the app must be made with
    ``docs_url=None, redoc_url=None``."""
    page = DOCS_PAGE.format(title=app.title)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page)

    # Browsers ask every page's origin for /favicon.ico (a JSON answer's too), and log a 404.
    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(SWAGGER_UI / "favicon.png", media_type="image/png")

    app.mount("/assets/swagger-ui", StaticFiles(directory=SWAGGER_UI), name="swagger-ui")
    app.mount("/assets/wordcast", StaticFiles(directory=STATIC), name="wordcast-assets")
    app.add_middleware(SecurityHeaders)


LANDING_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="/favicon.ico">
<link rel="stylesheet" href="/assets/wordcast/console.css">
</head>
<body>
<main class="landing">
<h1>{title}</h1>
<p>Keyword, boolean and wildcard subscriptions matched against a stream of publications.</p>
<ul>
<li><a href="/console">The web console</a>: subscriptions, live matches, dead letters, routing.</li>
<li><a href="/docs">The API docs</a>: every route, tried from the browser.</li>
<li><a href="/stats">/stats</a> and <a href="/metrics">/metrics</a>: what this router is doing.</li>
</ul>
</main>
</body>
</html>
"""


def serve_console(app: FastAPI) -> None:
    """The web console at /console: a page over the router's own API (its script logs in with
    the key given, a tenant's or the admin token, and keeps it for the browser tab only); and at
    / a page that leads to it and to the docs."""
    landing = LANDING_PAGE.format(title=app.title)

    @app.get("/", include_in_schema=False)
    async def home() -> HTMLResponse:
        return HTMLResponse(landing)

    @app.get("/console", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC / "console.html", headers={"cache-control": "no-cache"})
