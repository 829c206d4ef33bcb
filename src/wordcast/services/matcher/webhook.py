"""One delivery attempt: a message signed and POSTed to its webhook, and what came of it.

Each message is signed (:mod:`wordcast.webhooks.signing`) as the Standard Webhooks specification says
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``: HMAC-SHA256 over
``id.timestamp.body``) with the secret of every subscription it carries matches for (and a
previous secret too during a rotation's grace period); any one of them verifies it. The callback
address is resolved and checked (:mod:`wordcast.webhooks.netguard`) before every attempt, and the
connection goes to the address checked. Of the answer only the status, headers and the first few
KiB are read. A 410 deletes the subscriptions (the receiver said it is gone for good).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import httpx
from prometheus_client import Counter

from wordcast import limits
from wordcast.errors import UnresolvableCallback, UnsafeCallback
from wordcast.services.matcher.connections import Connections
from wordcast.services.matcher.secrets import SigningSecrets
from wordcast.storage import Store
from wordcast.storage.outbox import Message
from wordcast.webhooks import retry_after
from wordcast.webhooks.netguard import AddressPolicy, resolve
from wordcast.webhooks.signing import Signer, signature_header

log = logging.getLogger(__name__)

ATTEMPTS = Counter("wordcast_delivery_attempts", "Webhook POSTs made", ["outcome"])

# (outcome, reason, seconds the receiver asked us to wait); outcome is one of delivered, gone
# (410), deleted (the subscriptions are gone), refused (a forbidden address) or retry.
Outcome = tuple[str, str, float | None]


class Webhooks:
    """Makes delivery attempts, with ``slots`` connections at most."""

    def __init__(self, store: Store, policy: AddressPolicy, slots: int, timeout_s: float) -> None:
        self._store = store
        self._policy = policy
        self._connections = Connections(slots, timeout_s)
        self.secrets = SigningSecrets(store)

    async def aclose(self) -> None:
        await self._connections.aclose()

    async def _signers_of(self, message: Message) -> list[Signer]:
        """A signer for each secret of the message's subscriptions that still exist."""
        known = await self.secrets.signers_of(message.subscription_ids)
        return [signer for sub_id in message.subscription_ids for signer in known[sub_id] or ()]

    async def attempt(self, message: Message) -> tuple[str, str, float | None]:
        """One POST: (outcome, reason, seconds the receiver asked us to wait)."""
        signers = await self._signers_of(message)
        if not signers:
            ATTEMPTS.labels("subscription_deleted").inc()
            return "deleted", "the subscription was deleted", None
        try:
            target = await resolve(message.callback_url, self._policy)
        except UnresolvableCallback as exc:
            ATTEMPTS.labels("unresolvable").inc()
            return "retry", str(exc), None
        except UnsafeCallback as exc:
            ATTEMPTS.labels("refused_address").inc()
            return "refused", str(exc), None
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
                    content=message.body.encode(),
                    headers=headers,
                    extensions=extensions,
                ) as response,
            ):
                await _read_at_most(response, limits.MAX_WEBHOOK_RESPONSE_BYTES)
        except httpx.HTTPError as exc:
            ATTEMPTS.labels("network").inc()
            return "retry", f"{type(exc).__name__}: {exc}", None
        status = response.status_code
        ATTEMPTS.labels("success" if response.is_success else f"http_{status}").inc()
        if response.is_success:
            return "delivered", "", None
        if status == 410:
            await self._disable(message.subscription_ids)
            return "gone", "HTTP 410", None
        return "retry", f"HTTP {status}", retry_after.seconds(response.headers.get("retry-after"))

    async def _disable(self, sub_ids: Sequence[str]) -> None:
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
