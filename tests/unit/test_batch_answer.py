"""The batch registration's answer, written with orjson from plain values, is byte for byte what
the SubscriptionOut model writes (issue 41: a thousand models a request were a tenth of it)."""

from __future__ import annotations

import orjson
import pytest

from wordcast.routing.placement import Placement
from wordcast.services.router.routes.subscriptions import _as_json, _out
from wordcast.storage.endpoints import Endpoint
from wordcast.storage.records import Subscription, delivery_address

HOOK = "http://127.0.0.1:9/hook"
ENDPOINT = Endpoint("ep_1", "dev", HOOK, "whsec_c2VjcmV0")
SUBS = [
    Subscription("a", "official api", ("api", "offici"), HOOK, 0, placements=(Placement(0, 0),)),
    Subscription("b", 'rust OR (go -"java beans")', ("rust",), delivery_address(HOOK, True), 1),
    Subscription("c", "", (), delivery_address("", True), 1, pattern="wordc*st", anchor="wordc"),
    Subscription("d", "naïve café ☕", ("café", "naïv"), delivery_address("", True), 0, stream="n"),
]


@pytest.mark.parametrize("sub", SUBS, ids=lambda sub: sub.id)
@pytest.mark.parametrize("endpoint", [ENDPOINT, None], ids=["endpoint", "none"])
def test_the_answer_is_written_as_the_model_writes_it(
    sub: Subscription, endpoint: Endpoint | None
) -> None:
    shown = endpoint if sub.webhook_url else None
    assert orjson.dumps(_as_json(sub, shown)) == _out(sub, shown).model_dump_json().encode()
