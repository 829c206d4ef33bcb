"""A failing endpoint's share of a dispatcher's delivery slots (pure bookkeeping, no Redis)."""

from __future__ import annotations

from typing import Any, cast

from wordcast.services.matcher.endpoints import DeliveryEndpoints
from wordcast.storage.endpoints import Endpoint


def test_a_failing_endpoint_holds_at_most_its_share_of_the_slots() -> None:
    endpoints = DeliveryEndpoints(cast(Any, None), failing_share=0.25, slots=8)
    assert endpoints.failing_slots == 2
    bad = Endpoint("ep_bad", "acme", "http://bad/hook", "whsec_x")
    good = Endpoint("ep_good", "acme", "http://good/hook", "whsec_y")

    with endpoints.attempting("acme", bad.url), endpoints.attempting("acme", bad.url):
        assert endpoints.may_start("acme", bad.url)  # healthy: no bound
        endpoints.attempted(bad, False, 0.1, "HTTP 500", 3)
        assert not endpoints.may_start("acme", bad.url)  # failing, and holds 2 slots
        with endpoints.attempting("acme", good.url), endpoints.attempting("acme", good.url):
            endpoints.attempted(good, True, 0.01, "", 1)
            assert endpoints.may_start("acme", good.url)
    assert endpoints.may_start("acme", bad.url)  # its attempts ended
    assert not endpoints.in_flight

    with endpoints.attempting("acme", bad.url), endpoints.attempting("acme", bad.url):
        endpoints.attempted(bad, True, 0.05, "", 3)  # it recovered
        assert endpoints.may_start("acme", bad.url)
