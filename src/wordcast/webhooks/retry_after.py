"""Reading an HTTP ``Retry-After`` header (RFC 9110 §10.2.3), for every part that waits on one:
the matchers' deliveries (a receiver's answer) and the client (a router's ``429``)."""

from __future__ import annotations

import email.utils
import time


def seconds(value: str | None) -> float | None:
    """Seconds from a Retry-After value (delta-seconds or an HTTP date); None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
