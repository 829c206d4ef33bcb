"""The signing secrets a dispatcher signs with, kept while nothing says they changed.

A subscription's secrets change only when they are rotated or the subscription is deleted.
Rotations count up ``{ns}:secrets-epoch`` in Redis, which the cache reads at most every
``CHECK_S``: when it has moved, every secret is read again. Deletions reach the matcher as events
(its follower applies every subscription event) and drop the subscription's entry at once. An
entry that holds a rotated-out secret lapses when that secret's grace period ends, and any entry
after ``MAX_AGE_S``. So a rotation or deletion takes effect within ``CHECK_S``, as when every
dispatcher read every secret again every 5 s, without those reads: up to one Redis read per
match, measured at 39% of Redis's command time (BENCHMARKS.md, "Past one Redis").
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from wordcast.storage import Store
from wordcast.webhooks.signing import Signer

CHECK_S = 5.0
MAX_AGE_S = 300.0
PRUNE_FROM = 10_000  # entries; lapsed ones are dropped when the cache doubles past it

Signers = tuple[Signer, ...] | None  # None: the subscription no longer exists


class SigningSecrets:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache: dict[str, tuple[Signers, float]] = {}  # id -> signers, lapses at (monotonic)
        self._epoch: str | None = None
        self._checked_at = -CHECK_S
        self._prune_at = PRUNE_FROM

    def forget(self, sub_ids: Iterable[str]) -> None:
        """Drop what is kept for these subscriptions (deleted: read again if still asked for)."""
        for sub_id in sub_ids:
            self._cache.pop(sub_id, None)

    async def signers_of(self, sub_ids: Sequence[str]) -> dict[str, Signers]:
        """The signers of each subscription; those not kept (or lapsed) read in one round trip."""
        now = time.monotonic()
        if now - self._checked_at >= CHECK_S:
            self._checked_at = now
            epoch = await self._store.subscriptions.secrets_epoch()
            if epoch != self._epoch:
                self._cache.clear()
                self._prune_at = PRUNE_FROM
                self._epoch = epoch
        cache = self._cache
        if len(cache) >= self._prune_at:
            for sub_id in [k for k, (_, lapses) in cache.items() if lapses <= now]:
                del cache[sub_id]
            self._prune_at = max(PRUNE_FROM, 2 * len(cache))
        known: dict[str, Signers] = {}
        missing = []
        for sub_id in sub_ids:
            kept = cache.get(sub_id)
            if kept is None or kept[1] <= now:
                missing.append(sub_id)
            else:
                known[sub_id] = kept[0]
        if missing:
            found = await self._store.subscriptions.signing_secrets_until(missing)
            wall = time.time()
            for sub_id, entry in found.items():
                if entry is None:
                    known[sub_id] = None
                    cache[sub_id] = (None, now + MAX_AGE_S)
                    continue
                secrets, valid_until = entry
                known[sub_id] = tuple(Signer(secret) for secret in secrets)
                cache[sub_id] = (known[sub_id], now + min(MAX_AGE_S, valid_until - wall))
        return known
