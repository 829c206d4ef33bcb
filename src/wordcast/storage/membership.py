"""Who the cluster is: the matchers' URLs, the number of matchers wanted, the StatefulSet the routers
follow, and the internal token routers show matchers."""

from __future__ import annotations

import secrets
from typing import Any

from wordcast.storage.keys import Keys
from wordcast.storage.redis import translated
from wordcast.storage.shards import Shards


class MembershipStore:
    def __init__(self, client: Any, keys: Keys, shards: Shards | None = None) -> None:
        self.client = client
        self.keys = keys
        self.shards = shards or Shards(client, keys.ns)

    async def register_matcher(self, matcher: int, url: str) -> None:
        with translated("registering a matcher's URL"):
            await self.client.set(self.keys.matcher_url(matcher), url)

    async def internal_token(self) -> str:
        """The cluster's shared secret for the matchers' ``/internal`` endpoints: made by the first
        service to ask (random, 32 bytes), read by every other. Whoever reads Redis reads every
        other secret of the cluster too, so it adds no exposure. Setting it to a new value
        rotates it: matchers and routers read it again when the other side shows another."""
        key = self.keys.internal_token
        with translated("reading the cluster's internal token"):
            await self.client.set(key, secrets.token_urlsafe(32), nx=True)
            token = await self.client.get(key)
        return str(token)

    async def want_matchers(self, matchers: int, *, only_if_unset: bool = False) -> None:
        with translated("recording the number of matchers wanted"):
            await self.client.set(self.keys.matchers_wanted, matchers, nx=only_if_unset)

    async def matchers_wanted(self) -> int | None:
        with translated("reading the number of matchers wanted"):
            value = await self.client.get(self.keys.matchers_wanted)
        return int(value) if value is not None else None

    async def note_followed(self, statefulset: str, ttl_s: float) -> None:
        """Say that routers copy this StatefulSet's replicas into the number wanted (for a while:
        a router that stops following stops saying so)."""
        with translated("noting the StatefulSet the routers follow"):
            await self.client.set(self.keys.follows, statefulset, px=int(ttl_s * 1000))

    async def followed(self) -> str | None:
        """The StatefulSet whose replicas the routers copy into the number wanted, if any."""
        with translated("reading the StatefulSet the routers follow"):
            value = await self.client.get(self.keys.follows)
        return str(value) if value is not None else None

    async def held_by(self, matcher: int) -> int:
        """How many subscriptions matcher i holds (for any mapping version in use)."""
        shards = await self.shards.keys()
        pipe = self.client.pipeline(transaction=False)
        for keys in shards:
            pipe.hget(keys.matcher_counts, matcher)
        with translated("counting a matcher's subscriptions"):
            return sum(int(count or 0) for count in await pipe.execute())

    async def forget_matcher(self, matcher: int) -> None:
        """Drop the URL of a matcher removed by scaling down."""
        with translated("forgetting a matcher's URL"):
            await self.client.delete(self.keys.matcher_url(matcher))

    async def matcher_url(self, matcher: int) -> str | None:
        with translated("reading a matcher's URL"):
            url = await self.client.get(self.keys.matcher_url(matcher))
        return str(url) if url is not None else None
