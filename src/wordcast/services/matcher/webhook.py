"""One delivery attempt: a message signed and POSTed to its webhook, and what came of it.

Each message is signed (:mod:`wordcast.webhooks.signing`) as the Standard Webhooks specification says
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``: HMAC-SHA256 over
``id.timestamp.body``) with the secret of its endpoint (:mod:`.endpoints`; and a previous secret
too during a rotation's grace period), and while the migration window is open with the secret of
every subscription it carries matches for that has one of its own; any one of them verifies it.
A message whose subscriptions are all deleted is dropped; one to a disabled endpoint is not sent
(it becomes a dead letter, to be replayed once the endpoint is enabled again). The callback
address is resolved and checked (:mod:`wordcast.webhooks.netguard`) before every attempt, and the
connection goes to the address checked. Of the answer only the status, headers and the first few
KiB are read. A 410 deletes the subscriptions (the receiver said it is gone for good).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

import httpx
from prometheus_client import Counter

from wordcast import limits
from wordcast.errors import UnresolvableCallback, UnsafeCallback
from wordcast.services.matcher.connections import Connections
from wordcast.services.matcher.endpoints import DeliveryEndpoints, KnownEndpoint
from wordcast.services.matcher.secrets import SigningSecrets
from wordcast.storage import Store
from wordcast.storage.outbox import MAX_SIGNERS, Message
from wordcast.webhooks import retry_after
from wordcast.webhooks.netguard import AddressPolicy, resolve
from wordcast.webhooks.signing import Signer, signature_header

log = logging.getLogger(__name__)

ATTEMPTS = Counter(
    "wordcast_delivery_attempts",
    "Delivery attempts, by outcome and by what brought it (success, http_503, network, …)",
    ["outcome", "cause"],
)


class Outcome(StrEnum):
    """What a delivery attempt came to: the dispatcher acts on it, the metrics count it by it."""

    DELIVERED = "delivered"
    RETRY = "retry"  # a network error, a status other than 2xx and 410, a deadline
    GONE = "gone"  # the receiver answered 410: its subscriptions are deleted
    DELETED = "deleted"  # every subscription the message is for is gone
    REFUSED = "refused"  # the address is one the policy forbids
    DISABLED = "disabled"  # the endpoint is


@dataclass(frozen=True, slots=True)
class Attempt:
    """An attempt's outcome, why (for the log and dead letters), and how long the receiver
    asked to wait (``Retry-After``), if it did."""

    outcome: Outcome
    reason: str = ""
    wait_s: float | None = None


def counted(outcome: Outcome, cause: str, reason: str = "", wait_s: float | None = None) -> Attempt:
    """``Attempt(outcome, reason, wait_s)``, counted in the attempts metric with its cause."""
    ATTEMPTS.labels(outcome.value, cause).inc()
    return Attempt(outcome, reason, wait_s)


class Webhooks:
    """Makes delivery attempts, with ``slots`` connections at most."""

    def __init__(
        self,
        store: Store,
        policy: AddressPolicy,
        slots: int,
        timeout_s: float,
        endpoints: DeliveryEndpoints,
    ) -> None:
        self._store = store
        self._policy = policy
        self._connections = Connections(slots, timeout_s)
        self.secrets = SigningSecrets(store)
        self.endpoints = endpoints

    async def aclose(self) -> None:
        await self._connections.aclose()

    async def _signers_of(
        self, message: Message, fresh: bool = False
    ) -> tuple[KnownEndpoint, list[Signer]] | None:
        """The message's endpoint (read afresh if ``fresh``) and its signers (None: every
        subscription it is for is gone)."""
        known = await self.secrets.signers_of(message.subscription_ids)
        if all(known[sub_id] is None for sub_id in message.subscription_ids):
            return None
        endpoint = await self.endpoints.of(message.tenant, message.callback_url, fresh)
        signers = list(endpoint.signers)
        if time.time() < self.endpoints.subscription_signatures_until:
            own = [signer for sub_id in message.subscription_ids for signer in known[sub_id] or ()]
            signers += own[: 2 * MAX_SIGNERS]
        return endpoint, signers

    async def attempt(self, message: Message) -> Attempt:
        """One POST, and what it came to."""
        found = await self._signers_of(message)
        if found is None:
            return counted(Outcome.DELETED, "subscription_deleted", "the subscription was deleted")
        if not found[0].endpoint.enabled:
            # Read again before giving up: an endpoint enabled since it was read (a replay right
            # after enabling it) takes the message now, not after the next look at the epoch.
            found = await self._signers_of(message, fresh=True)
            if found is None:
                return counted(
                    Outcome.DELETED, "subscription_deleted", "the subscription was deleted"
                )
        known, signers = found
        endpoint = known.endpoint
        if not endpoint.enabled:
            why = f": {endpoint.disabled_reason}" if endpoint.disabled_reason else ""
            reason = f"endpoint {endpoint.id} is disabled{why}"
            return counted(Outcome.DISABLED, "endpoint_disabled", reason)
        started = time.monotonic()
        made = await self._post(message, signers)
        self.endpoints.attempted(
            endpoint,
            made.outcome is Outcome.DELIVERED,
            time.monotonic() - started,
            made.reason,
            message.matches,
        )
        return made

    def gave_up(self, message: Message) -> None:
        """Count the message's matches as failed in its endpoint's health (if it has one)."""
        self.endpoints.gave_up_on(message.tenant, message.callback_url, message.matches)

    async def _post(self, message: Message, signers: Sequence[Signer]) -> Attempt:
        try:
            target = await resolve(message.callback_url, self._policy)
        except UnresolvableCallback as exc:
            return counted(Outcome.RETRY, "unresolvable", str(exc))
        except UnsafeCallback as exc:
            return counted(Outcome.REFUSED, "refused_address", str(exc))
        now = datetime.now(tz=UTC)
        signatures = signature_header(signers, message.webhook_id, now, message.body)
        headers = {
            "content-type": "application/json",
            "host": target.host_header,
            "webhook-id": message.webhook_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signatures,
        }
        extensions = {"sni_hostname": target.host} if target.url.scheme == "https" else {}
        try:
            # Reading the outboxes may start a few more deliveries than ``concurrency`` (each
            # outbox gives its share, rounded up): those wait here for a connection.
            async with (
                self._connections.client(target) as client,
                client.stream(
                    "POST",
                    target.connect_url,
                    content=message.body,
                    headers=headers,
                    extensions=extensions,
                ) as response,
            ):
                await _read_at_most(response, limits.MAX_WEBHOOK_RESPONSE_BYTES)
        except httpx.HTTPError as exc:
            return counted(Outcome.RETRY, "network", f"{type(exc).__name__}: {exc}")
        status = response.status_code
        if response.is_success:
            return counted(Outcome.DELIVERED, "success")
        if status == 410:
            await self._delete_gone(message.subscription_ids)
            return counted(Outcome.GONE, "http_410", "HTTP 410")
        wait = retry_after.seconds(response.headers.get("retry-after"))
        return counted(Outcome.RETRY, f"http_{status}", f"HTTP {status}", wait)

    async def _delete_gone(self, sub_ids: Sequence[str]) -> None:
        """A 410 means the receiver is gone for good: delete its subscriptions (those still
        there; one deleted meanwhile is passed over)."""
        last_event, _ = await self._store.subscriptions.delete_many(sub_ids)
        if last_event is not None:
            log.warning(
                "subscriptions deleted, their webhook answered 410 Gone: %s", ", ".join(sub_ids)
            )


async def _read_at_most(response: httpx.Response, limit: int) -> None:
    """Read what a webhook sends back, up to ``limit`` bytes: only its status and headers count.

    A short body read to its end leaves the connection reusable. A longer one is left unread:
    closing the stream then closes the connection, so a receiver answering with hundreds of
    megabytes costs a matcher a few kilobytes, not the whole answer in memory."""
    read = 0
    async for chunk in response.aiter_raw():
        read += len(chunk)
        if read > limit:
            return
