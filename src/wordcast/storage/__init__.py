"""Redis as the system of record: the one package that talks to Redis.

What it owns: every key of a cluster (:mod:`.keys`), the Lua scripts that change subscriptions
atomically (:mod:`.scripts`), and one store per concern: subscription records
(:mod:`.subscriptions`, one shard's; :mod:`.sharded`, all of them; :mod:`.shards`, where they
live), the word maps (:mod:`.word_maps`), the event stream and its follower
(:mod:`.events`), tenants and shared streams (:mod:`.tenants`), the cluster's membership
(:mod:`.membership`), the publication log (:mod:`.publication_log`), mapping versions
(:mod:`.mappings`), the outboxes (:mod:`.outbox`), dead letters (:mod:`.dead_letters`), the
tenants' match streams (:mod:`.match_streams`) and rate limits (:mod:`.ratelimit`). The Redis
client stays inside: callers hold a :class:`Store` and its parts, and Redis's errors become
:class:`~wordcast.errors.StoreUnavailable` here (:mod:`.redis`).

May import: :mod:`wordcast.errors`, :mod:`wordcast.query`, :mod:`wordcast.routing` (placements and
mappings, as stored); never the services, the command line or Spark.

Keys (all under a namespace, ``wordcast`` by default, so several clusters can share one Redis):

``{ns}:records:{b}``        hash id -> packed record, for the ids of bucket b (:func:`.keys.bucket_of`,
                            1,024 buckets a shard): query, terms (space-separated, sorted),
                            callback_url, matcher, created, tenant, placements (JSON,
                            :mod:`wordcast.routing.placement`: which matchers hold it for which
                            mapping versions) and the matchers that hold it, packed as
                            :func:`.records.pack_record` writes; a pattern subscription has
                            pattern and anchor instead of query and terms, and lives on
                            ``matcher`` only until a change in the number of matchers moves it:
                            then it has placements too. Records of the layout before packing (a
                            hash ``{ns}:sub:{id}`` each, with sets of ids per tenant and matcher)
                            are moved here on first use (:mod:`.layout`)
``{ns}:records:…`` id ``{id}~{k}`` alternative k ≥ 1 of a boolean query (:mod:`wordcast.query.boolean`):
                            a keyword record of its own, with the query's text and the words it
                            requires; alternative 0 is record ``{id}`` itself, the subscription
``{ns}:layout``             "packed" once the shard's records are in the packed layout
``{ns}:matcher-counts``     hash matcher -> how many records are placed on it (for any mapping version)
``{ns}:tenant-counts``      hash tenant -> how many records (subscriptions and alternatives) it holds
``{ns}:counters``           hash id -> "matched delivered failed last-match" (:mod:`.counters`)
``{ns}:matcher:{i}:words``  hash word -> count: the subscription word map H(i) of S³-TM §4.2
``{ns}:mapping:window``     "low high": the mapping versions routers may be routing with; a
                            subscription is stored only when it was placed for this window
``{ns}:words``              hash word -> count: the subscribed words s(W) routers route on (Eq. 3.1)
``{ns}:matcher:{i}:anchors`` hash anchor -> count of the pattern subscriptions on matcher i
``{ns}:matcher:{i}:url``    the base URL matcher i answers at (routers reach a matcher added by
                            scaling there, when their configuration does not name it)
``{ns}:cluster:matchers``   the number of matchers the cluster should have: set by the first router
                            (its configured number) and by ``wordcast scale``
``{ns}:cluster:internal_token`` the secret routers show matchers' ``/internal`` endpoints (made by
                            the first service that asks)
``{ns}:pattern_load``       hash matcher -> number of pattern subscriptions placed on it
``{ns}:apikey:{sha256}``    the tenant an API key belongs to, under the key's SHA-256 (keys are not kept)
``{ns}:tenant:{t}:keys``    hash key id -> "sha256 created": tenant t's API keys, for listing and
                            revoking them (the id is the hash's first 16 hex digits)
``{ns}:streams``            set of the names of the shared streams an admin made
``{ns}:stream:{s}:grants``  hash tenant -> "publish subscribe" (either or both): who may publish
                            to shared stream s and who may subscribe to it
``{ns}:tenant:{t}:endpoints`` and ``…:endpoint-urls``, ``{ns}:endpoint:{id}:health``,
``{ns}:endpoints-epoch``    tenants' webhook endpoints, each with one signing secret (:mod:`.endpoints`)
``{ns}:lock:{name}``        and ``…:shared``: a lock's exclusive holder and its shared holders
                            (:mod:`.locks`; they lapse by themselves): ``key:ID`` while a
                            request registers the keyed subscription ID, ``url:HASH`` a tenant's
                            webhook URL, shared to subscribe there, exclusive to change or
                            delete its endpoint
``{ns}:secrets-epoch``      counter moved by every rotation of a signing secret: dispatchers keep the
                            secrets they read until it moves (or the subscription's deletion arrives)
``{ns}:events``             stream of subscription changes (add, del, and move when a mapping change
                            re-places a subscription), in commit order
``{ns}:publications``       bounded stream of sampled analysed publications (time, terms) that the
                            routing learner reads (S³-TM §3: the mapping is learned from traffic)
``{ns}:recent``             bounded stream of the recent published requests (ids, texts, routed
                            terms) that backfills read, kept only when routers are told to
                            (:mod:`.recent`)

Mapping versions are described in :mod:`.mappings`, the outboxes in :mod:`.outbox`.

**Shards.** The keys from ``{ns}:records:{b}`` to ``{ns}:events`` above, with the secrets epoch, the
pattern loads and a copy of the mapping window, make up one shard of the subscription records
(:mod:`.shards`): on one Redis the only shard is the namespace itself, so every key is as listed.
On a Redis Cluster (a ``redis+cluster://`` URL, :mod:`.redis`) the namespace becomes a hash tag,
``{wordcast}:…``, and there is a shard per master, each under a hash tag of its own
(``{ns}:record-shards`` lists them): a subscription's record lives in the shard its id hashes to,
with that shard's share of the counts, H(i), s(W) and anchor maps, and its
events go to that shard's stream. Every change therefore stays one script in one slot, so no
change spans two slots and no crash leaves one half-made; readers add the shards up
(:mod:`.word_maps`) and follow every shard's stream (:mod:`.events`). Tenants, API keys, streams,
mapping versions, membership, rate limits and the publication log stay in the namespace's slot;
the outboxes, which carry most of the traffic, have hash tags of their own (:mod:`.outbox`). A
master's failure is survived by its replica taking over; replication being asynchronous, the
writes that carry a promise (a routed batch's messages, a subscription stored, moved or deleted)
wait for a replica with ``WAIT`` before they are acknowledged (:class:`~.redis.Replication`).

Every change is one Lua script in its shard, so the record, both word maps and the event that
announces it are written atomically: concurrent routers cannot corrupt the counts, and a reader
that loads a snapshot and then replays the events after its starting position always converges to
the committed state. Events carry the words whose count in their shard's s(W) rose from zero
(``born``) or fell to zero (``died``), and
for each matcher the words whose count in its H(i) did (``held``, ``dropped``), so routers keep s(W)
and which matchers hold each word (:func:`wordcast.routing.mapping.route_held`) without rereading them; a
pattern event names the matchers on which its anchor's count rose from or fell to zero, so routers
keep the anchor owners the same way.

"""

from __future__ import annotations

from typing import Any

from wordcast.storage.counters import SubscriptionCounters
from wordcast.storage.dead_letters import DeadLetters
from wordcast.storage.endpoints import EndpointStore
from wordcast.storage.events import EventLog
from wordcast.storage.keys import Keys
from wordcast.storage.locks import Locks
from wordcast.storage.mappings import MappingStore
from wordcast.storage.match_streams import MatchStreams
from wordcast.storage.membership import MembershipStore
from wordcast.storage.outbox import Outbox
from wordcast.storage.publication_log import PublicationLog
from wordcast.storage.ratelimit import RateLimiter
from wordcast.storage.recent import RecentPublications
from wordcast.storage.redis import (
    MAX_CONNECTIONS,
    NO_REPLICAS,
    Replication,
    body_readers,
    connect,
    stored_namespace,
)
from wordcast.storage.sharded import ShardedSubscriptions
from wordcast.storage.shards import Shards
from wordcast.storage.subscriptions import EVENTS_MAX
from wordcast.storage.tenants import TenantStore
from wordcast.storage.word_maps import WordMaps


class Store:
    """Every store of one cluster (``namespace``), over one Redis client."""

    def __init__(
        self,
        client: Any,
        namespace: str = "wordcast",
        events_max: int = EVENTS_MAX,
        replication: Replication = NO_REPLICAS,
        bodies: Any = None,
    ) -> None:
        self._client = client
        self._bodies = bodies
        self.ns = namespace
        self.keys = Keys(namespace)
        self.replication = replication
        self.shards = Shards(client, namespace)
        self.subscriptions = ShardedSubscriptions(client, self.shards, events_max, replication)
        self.word_maps = WordMaps(client, self.shards)
        self.events = EventLog(client, self.shards)
        self.tenants = TenantStore(client, self.keys)
        self.endpoints = EndpointStore(client, self.keys)
        self.membership = MembershipStore(client, self.keys, self.shards)
        self.publication_log = PublicationLog(client, self.keys)
        self.recent = RecentPublications(client, self.keys)
        self.mappings = MappingStore(client, namespace, self.shards)
        self.dead_letters = DeadLetters(client, namespace)
        self.match_streams = MatchStreams(client, namespace, bodies)
        self.counters = SubscriptionCounters(client, self.shards)
        self.locks = Locks(client, self.keys)

    @classmethod
    def connect(
        cls,
        url: str,
        namespace: str = "wordcast",
        events_max: int = EVENTS_MAX,
        wait_replicas: int | None = None,
        write_deadline_s: float = 5.0,
        max_connections: int = MAX_CONNECTIONS,
    ) -> Store:
        """The stores of ``namespace`` at ``url``: on a Redis Cluster (``redis+cluster://``) under
        the namespace as a hash tag (``{wordcast}:records:…``), so that all of them share one slot.
        Promised writes wait for ``wait_replicas`` replicas (:class:`~.redis.Replication`; by
        default one on a Redis Cluster, none on one Redis), and are refused if Redis has not
        confirmed them within ``write_deadline_s``. The pool holds ``max_connections``."""
        replication = Replication.default_for(url, wait_replicas, deadline_s=write_deadline_s)
        client = connect(url, max_connections)
        # Messages (outbox entries, match stream events) are read as the bytes they are
        # written out as: no decoded copy.
        bodies = connect(url, body_readers(max_connections), decode=False)
        return cls(client, stored_namespace(url, namespace), events_max, replication, bodies)

    def outbox(self, matcher: int, reader: int | None = None) -> Outbox:
        """Matcher ``matcher``'s outbox, read by matcher ``reader`` (by default its own)."""
        return Outbox(self._client, self.ns, matcher, reader, self.replication, raw=self._bodies)

    def rate_limiter(self, per_second: float, burst: float, what: str = "") -> RateLimiter:
        """A per-tenant token bucket: of publications, or of ``what`` (its own buckets)."""
        return RateLimiter(
            self._client, f"{self.ns}:{what}" if what else self.ns, per_second, burst
        )

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._bodies is not None:
            await self._bodies.aclose()
