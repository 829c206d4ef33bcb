"""The router's ring buffer of rates for the console's charts."""

from __future__ import annotations

from wordcast.services.router.history import WINDOW_S, History, Sample


def test_rates_are_differences_per_second_and_a_restart_is_no_traffic() -> None:
    history = History(every_s=2.0)
    assert history.shown()["points"] == []
    history.add(Sample(100.0, 10, 100, 90, 5))
    history.add(Sample(102.0, 30, 140, 130, 7))
    history.add(Sample(104.0, 30, 20, 10, 0))  # a matcher restarted: its counts fell
    shown = history.shown()
    assert shown["updated"] == 104.0
    assert shown["points"] == [
        {
            "at": 102.0,
            "publications_per_s": 10.0,
            "matches_per_s": 20.0,
            "deliveries_per_s": 20.0,
            "backlog": 7,
        },
        {
            "at": 104.0,
            "publications_per_s": 0.0,
            "matches_per_s": 0.0,
            "deliveries_per_s": 0.0,
            "backlog": 0,
        },
    ]


def test_only_the_last_15_minutes_are_kept() -> None:
    history = History(every_s=60.0)
    for minute in range(40):
        history.add(Sample(60.0 * minute, minute, 0, 0, 0))
    points = history.shown()["points"]
    assert len(points) == WINDOW_S // 60
    assert points[-1]["at"] - points[0]["at"] == WINDOW_S - 60
