"""The webhook endpoints a dispatcher delivers to: their secrets, their health, their share.

A message goes to one of its tenant's endpoints (:mod:`wordcast.storage.endpoints`), found by its
URL, and is signed with that endpoint's secret: one HMAC per message, whatever number of
subscriptions its matches are for. A subscription stored before endpoints existed has a URL and
a secret of its own; its first message makes the endpoint of that URL, and while the migration
window (``WORDCAST_MATCHER_SUBSCRIPTION_SIGNATURES_UNTIL``) is open its own secret signs too, so
that a receiver verifying with it keeps verifying until it has the endpoint's.

Endpoints are kept as read until ``{ns}:endpoints-epoch`` moves (every change to an endpoint
moves it), looked at every ``CHECK_S``: a rotation, a disabling or a deletion takes effect within
that, with no Redis read per message.

Each dispatcher tallies its attempts per endpoint and adds them to the endpoint's health every
``FLUSH_S`` (one script per endpoint that saw attempts): delivered and failed counts, latency,
last error. An endpoint failing for longer than ``endpoint_disable_after_s`` (no success since)
is disabled there, with the reason; its messages then go to the dead letters, from where they
can be replayed once it is enabled again.

Slots are shared fairly (:meth:`DeliveryEndpoints.may_start`): an endpoint not known healthy
(no attempt of this dispatcher has succeeded yet, or its last one failed) may hold at most
``failing_slots`` of the delivery slots, and so may all such endpoints of one tenant together;
the failing ones of every tenant together hold at most half the slots. A receiver that accepts
connections and never answers therefore cannot take the slots the other tenants need, however
many of them do so: the healthy ones always keep half.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from wordcast.errors import StoreUnavailable
from wordcast.storage import Store
from wordcast.storage.endpoints import Endpoint, HealthTally
from wordcast.webhooks.signing import Signer

log = logging.getLogger(__name__)

CHECK_S = 5.0
FLUSH_S = 1.0
DISABLE_AFTER_S = 5 * 86400.0  # the setting's default
FAILING_SLOTS = 0.25  # the setting's default


class KnownEndpoint:
    """An endpoint as a dispatcher signs for it."""

    __slots__ = ("endpoint", "lapses", "signers")

    def __init__(self, endpoint: Endpoint, now: float) -> None:
        self.endpoint = endpoint
        secrets, until = endpoint.signing_secrets(time.time())
        self.signers = tuple(Signer(secret) for secret in secrets)
        self.lapses = now + min(300.0, until - time.time())  # monotonic


class DeliveryEndpoints:
    """The endpoints of the messages a dispatcher delivers, and what it saw of them."""

    def __init__(
        self,
        store: Store,
        disable_after_s: float = DISABLE_AFTER_S,
        failing_share: float = FAILING_SLOTS,
        slots: int = 64,
        subscription_signatures_until: float = 0.0,
    ) -> None:
        self._store = store
        # The migration window's end (Unix time): until then subscriptions' own secrets sign too.
        self.subscription_signatures_until = subscription_signatures_until
        self._disable_after_s = disable_after_s
        self.failing_slots = max(1, math.ceil(slots * failing_share))
        self.failing_slots_in_all = max(1, slots // 2)
        self._known: dict[tuple[str, str], KnownEndpoint] = {}
        self._epoch: str | None = None
        self._checked_at = -CHECK_S
        self._tallies: dict[tuple[str, str], HealthTally] = {}  # (tenant, endpoint id)
        self._flushed_at = time.monotonic()
        self._failing: set[tuple[str, str]] = set()  # (tenant, URL) whose last attempt failed
        self._healthy: set[tuple[str, str]] = set()  # (tenant, URL) whose last attempt succeeded
        self.in_flight: Counter[tuple[str, str]] = Counter()  # (tenant, URL) -> attempts now

    async def of(self, tenant: str, url: str, fresh: bool = False) -> KnownEndpoint:
        """The endpoint of the tenant's ``url`` (made if it has none: a subscription from before
        endpoints); read from Redis now if ``fresh``, not as kept."""
        if fresh:
            self._known.pop((tenant, url), None)
        now = time.monotonic()
        if now - self._checked_at >= CHECK_S:
            self._checked_at = now
            epoch = await self._store.endpoints.epoch()
            if epoch != self._epoch:
                self._known.clear()
                self._epoch = epoch
        known = self._known.get((tenant, url))
        if known is None or known.lapses <= now:
            endpoint = await self._store.endpoints.for_url(tenant, url)
            known = self._known[(tenant, url)] = KnownEndpoint(endpoint, now)
        return known

    def may_start(self, tenant: str, url: str) -> bool:
        """Whether an attempt to this URL may take a slot now: always if its endpoint is known
        healthy; otherwise while it, its tenant's endpoints not known healthy, and (if it is
        failing) every failing endpoint hold less than their shares (module docstring)."""
        key = (tenant, url)
        if key in self._healthy:
            return True
        if self.in_flight[key] >= self.failing_slots:
            return False
        healthy = self._healthy
        tenants = sum(n for k, n in self.in_flight.items() if k[0] == tenant and k not in healthy)
        if tenants >= self.failing_slots:
            return False
        if key not in self._failing:
            return True
        failing = sum(n for k, n in self.in_flight.items() if k in self._failing)
        return failing < self.failing_slots_in_all

    @contextmanager
    def attempting(self, tenant: str, url: str) -> Iterator[None]:
        """Count an attempt to the URL as in flight while it lasts."""
        self.take_slot(tenant, url)
        try:
            yield
        finally:
            self.free_slot(tenant, url)

    def take_slot(self, tenant: str, url: str) -> None:
        """Count an attempt to the URL as in flight from now: when it is started, not when its
        task first runs, so that the attempts started in one go are held to the shares."""
        self.in_flight[tenant, url] += 1

    def free_slot(self, tenant: str, url: str) -> None:
        key = (tenant, url)
        self.in_flight[key] -= 1
        if not self.in_flight[key]:
            del self.in_flight[key]

    def attempted(
        self, endpoint: Endpoint, ok: bool, latency_s: float, error: str, matches: int
    ) -> None:
        tally = self._tally(endpoint)
        now = time.time()
        if ok:
            tally.attempts_ok += 1
            tally.delivered += matches
            tally.latency_ms += latency_s * 1000
            tally.last_success = now
            tally.first_failure = 0.0
            self._failing.discard((endpoint.tenant, endpoint.url))
            self._healthy.add((endpoint.tenant, endpoint.url))
        else:
            tally.attempts_failed += 1
            tally.last_error, tally.last_error_at = error[:500], now
            if not tally.first_failure:
                tally.first_failure = now
            self._failing.add((endpoint.tenant, endpoint.url))
            self._healthy.discard((endpoint.tenant, endpoint.url))

    def gave_up_on(self, tenant: str, url: str, matches: int) -> None:
        """Count matches given up on against the endpoint of the tenant's ``url``, if known."""
        known = self._known.get((tenant, url))
        if known is not None:
            self._tally(known.endpoint).failed += matches

    def _tally(self, endpoint: Endpoint) -> HealthTally:
        key = (endpoint.tenant, endpoint.id)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = HealthTally()
        return tally

    async def flush(self, force: bool = False) -> None:
        """Add the tallies to the endpoints' health (every ``FLUSH_S``, or now if ``force``)."""
        if not self._tallies or (not force and time.monotonic() - self._flushed_at < FLUSH_S):
            return
        self._flushed_at = time.monotonic()
        tallies, self._tallies = self._tallies, {}
        now = time.time()
        for (tenant, endpoint_id), tally in tallies.items():
            try:
                reason = await self._store.endpoints.record_health(
                    tenant, endpoint_id, tally, now, self._disable_after_s
                )
            except StoreUnavailable as exc:  # counts only: the deliveries are recorded anyway
                log.warning("could not record endpoint %s's health: %s", endpoint_id, exc)
                continue
            if reason:
                log.warning("endpoint %s of tenant %r disabled: %s", endpoint_id, tenant, reason)
                # Read again at its next attempt: its messages go to the dead letters now, not
                # after the next look at the epoch.
                for key, known in list(self._known.items()):
                    if (known.endpoint.tenant, known.endpoint.id) == (tenant, endpoint_id):
                        del self._known[key]
