"""Signing one webhook message with many secrets, as the Standard Webhooks specification says.

A message of wordcast carries the matches of up to 64 subscriptions that share a callback URL, and
is signed with each of their secrets (:mod:`wordcast.storage.outbox`). ``standardwebhooks``'
``Webhook.sign`` signs for one secret: it formats and encodes the signed content
``id.timestamp.body`` (the whole body, about 16 KB here) again for every secret. Building it once
and passing it to the library's own HMAC (``standardwebhooks.webhooks.hmac_data``) for each key gives
the same signatures; on the end-to-end benchmark the formatting per secret was the largest single
cost of a matcher (15% of its time, plus 9% hashing).

The secrets are parsed by ``standardwebhooks.Webhook`` itself, and the tests check that every
signature equals ``Webhook.sign``'s and that ``Webhook.verify`` accepts the header.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import UTC, datetime
from math import floor

from standardwebhooks import Webhook
from standardwebhooks.webhooks import hmac_data


class Signer:
    """One secret's key, parsed by the library (``whsec_`` prefix, base64, padding)."""

    __slots__ = ("key",)

    def __init__(self, secret: str) -> None:
        self.key: bytes = Webhook(secret)._whsecret


def signature_header(
    signers: Sequence[Signer], msg_id: str, timestamp: datetime, body: bytes
) -> str:
    """The ``webhook-signature`` header: one ``v1,…`` signature per signer, space-separated,
    over ``body`` as it is sent (UTF-8 JSON)."""
    seconds = floor(timestamp.replace(tzinfo=UTC).timestamp())  # as Webhook.sign reads it
    to_sign = f"{msg_id}.{seconds}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac_data(signer.key, to_sign)).decode() for signer in signers
    )
