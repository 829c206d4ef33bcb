"""What a client call raises: the router's refusal (:class:`ApiError`, with its status and
detail) or no answer at all (:class:`RouterUnreachable`)."""

from __future__ import annotations

from typing import Any

import httpx

from wordcast.webhooks import retry_after


class ApiError(RuntimeError):
    def __init__(self, status: int, detail: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.retry_after = retry_after  # seconds, when the answer said (Retry-After)


class RouterUnreachable(RuntimeError):
    """No answer came from the router (refused, reset, timed out, or a name that does not
    resolve)."""


def raise_for_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    raise ApiError(
        response.status_code,
        _readable(detail),
        retry_after.seconds(response.headers.get("retry-after")),
    )


def _readable(detail: Any) -> str:
    """FastAPI's validation errors (a list of {loc, msg}) as ``field: message; …``."""
    if not isinstance(detail, list):
        return str(detail)
    parts = []
    for error in detail:
        if not isinstance(error, dict) or "msg" not in error:
            parts.append(str(error))
            continue
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        parts.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
    return "; ".join(parts)
