"""Retry-After as the client and the matchers' deliveries read it."""

from __future__ import annotations

import email.utils
import time

import pytest

from wordcast.webhooks.retry_after import seconds


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), ("0.5", 0.5), ("-2", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_delta_seconds_and_bad_values(value: str | None, expected: float | None) -> None:
    assert seconds(value) == expected


def test_an_http_date_is_the_time_left_until_it() -> None:
    later = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert seconds(later) == pytest.approx(60, abs=2)
    earlier = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert seconds(earlier) == 0.0
