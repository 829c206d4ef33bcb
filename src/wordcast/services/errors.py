"""The one mapping from wordcast's errors (:mod:`wordcast.errors`) to HTTP answers.

Every service installs it once (:func:`install_error_handlers`); routes and dependencies raise
wordcast's errors and never build an HTTP error of their own for them, as encode/httpx maps its
transport errors at one boundary. The answer is always ``{"detail": message}``.
"""

from __future__ import annotations

import math

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from wordcast.errors import (
    AnswerTooLarge,
    Conflict,
    Forbidden,
    Gone,
    InvalidInput,
    MappingError,
    NotFound,
    RateLimited,
    Unauthenticated,
    Unavailable,
    WordcastError,
)
from wordcast.services.common import validation_refused

# Most specific first: the first class an error is an instance of decides.
STATUS: tuple[tuple[type[WordcastError], int], ...] = (
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (Gone, 410),
    (RateLimited, 429),
    (AnswerTooLarge, 413),
    (InvalidInput, 422),
    (MappingError, 422),
    (Unavailable, 503),
)


def status_of(exc: WordcastError) -> int:
    """The HTTP status of an error; 500 for one that should never reach a client."""
    return next((status for kind, status in STATUS if isinstance(exc, kind)), 500)


async def wordcast_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, WordcastError)
    headers = {}
    if isinstance(exc, Unauthenticated):
        headers["www-authenticate"] = "Bearer"
    if isinstance(exc, RateLimited):
        headers["retry-after"] = str(max(1, math.ceil(exc.retry_after_s)))
    return JSONResponse({"detail": str(exc)}, status_code=status_of(exc), headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(WordcastError, wordcast_error)
    app.add_exception_handler(RequestValidationError, validation_refused)
