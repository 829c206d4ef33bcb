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
    endpoints.attempted(bad, True, 0.01, "", 1)  # known healthy: no bound

    with endpoints.attempting("acme", bad.url), endpoints.attempting("acme", bad.url):
        assert endpoints.may_start("acme", bad.url)
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


def test_an_endpoint_not_yet_known_healthy_holds_its_share_and_so_does_its_tenant() -> None:
    endpoints = DeliveryEndpoints(cast(Any, None), failing_share=0.25, slots=8)
    endpoints.take_slot("acme", "http://a/hook")
    endpoints.take_slot("acme", "http://a/hook")
    assert not endpoints.may_start("acme", "http://a/hook")  # never answered yet: 2 of 8
    assert not endpoints.may_start("acme", "http://b/hook")  # its tenant holds 2 already
    assert endpoints.may_start("zeta", "http://z/hook")  # another tenant is not held back
    endpoints.free_slot("acme", "http://a/hook")
    assert endpoints.may_start("acme", "http://b/hook")


def test_failing_endpoints_of_every_tenant_together_leave_half_the_slots() -> None:
    endpoints = DeliveryEndpoints(cast(Any, None), failing_share=0.25, slots=8)
    assert endpoints.failing_slots_in_all == 4
    for tenant in ("t1", "t2", "t3"):
        dead = Endpoint(f"ep_{tenant}", tenant, f"http://{tenant}/hook", "whsec_x")
        endpoints.attempted(dead, False, 10.0, "ReadTimeout", 1)
    for tenant in ("t1", "t1", "t2", "t2"):
        assert endpoints.may_start(tenant, f"http://{tenant}/hook")
        endpoints.take_slot(tenant, f"http://{tenant}/hook")
    assert not endpoints.may_start("t3", "http://t3/hook")  # 4 of 8 held by failing ones
    assert endpoints.may_start("t4", "http://t4/hook")  # a new tenant's endpoint starts
