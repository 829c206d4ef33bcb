"""Signing for many secrets at once gives exactly the library's signatures (the oracle)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook

from wordcast.webhooks.signing import Signer, signature_header

keys = st.binary(min_size=1, max_size=64)
secrets = st.lists(
    st.tuples(keys, st.booleans(), st.booleans()).map(
        # with or without the whsec_ prefix, padded or not: the forms Webhook accepts
        lambda k: (
            ("whsec_" if k[1] else "")
            + (
                base64.b64encode(k[0]).decode()
                if k[2]
                else base64.b64encode(k[0]).decode().rstrip("=")
            )
        )
    ),
    min_size=1,
    max_size=8,
)
bodies = st.text(st.characters(exclude_categories=("Cs",)), max_size=2_000)  # UTF-8 encodable
ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(secrets, ids, bodies, st.integers(0, 4_000_000_000), st.booleans())
def test_every_signature_is_the_librarys(
    chosen: list[str], msg_id: str, body: str, seconds: int, aware: bool
) -> None:
    when = datetime.fromtimestamp(seconds, tz=UTC) + timedelta(microseconds=123_456)
    if not aware:
        when = when.replace(tzinfo=None)  # the library reads a naive time as UTC
    header = signature_header([Signer(s) for s in chosen], msg_id, when, body.encode())
    assert header.split(" ") == [Webhook(s).sign(msg_id, when, body) for s in chosen]


@settings(max_examples=50, deadline=None)
@given(secrets, ids, bodies)
def test_the_library_verifies_the_header_with_any_one_of_the_secrets(
    chosen: list[str], msg_id: str, body: str
) -> None:
    now = datetime.now(tz=UTC)
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature_header(
            [Signer(s) for s in chosen], msg_id, now, body.encode()
        ),
    }
    for secret in chosen:
        assert Webhook(secret).verify(body, headers, json_parse=False) is None
