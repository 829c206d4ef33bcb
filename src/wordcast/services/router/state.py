"""The router's state: its parts, wired together.

Keyword subscriptions are placed with LASP among the eligible matchers of every mapping version
in use (:mod:`.subscription_placer`), registered and deleted for tenants (:mod:`.subscribing`),
delivered to their webhook endpoints (:mod:`.endpoints`); publications are analysed
(:mod:`.analysing`) and multicast (:mod:`.publishing`). Which versions are in use, and moving the
subscriptions when a new one appears, is :mod:`.versions`; the requests to matchers are
:mod:`.matchers`; API keys are :mod:`.tenants`, shared streams :mod:`.shared_streams`, each
tenant's match stream :mod:`.match_stream`; what the console shows of routing is
:mod:`.insight`, and its learning runs :mod:`.learning`; the routing table (the word maps and
anchor owners that routing reads) is :mod:`.routing_table`. The router keeps only state it can
rebuild from Redis.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import Any

from wordcast.routing.lasp import LinearCost
from wordcast.routing.mapping import HashMapping
from wordcast.services.router.backfill_starter import BackfillStarter
from wordcast.services.router.endpoints import Endpoints
from wordcast.services.router.history import History
from wordcast.services.router.insight import hot_words, load_figures
from wordcast.services.router.learning import LearningRuns
from wordcast.services.router.match_stream import MatchStreamServer
from wordcast.services.router.matchers import MatcherClient
from wordcast.services.router.overload import LoadShedder
from wordcast.services.router.publishing import Publishing
from wordcast.services.router.routing_table import RoutingTable
from wordcast.services.router.settings import RouterSettings
from wordcast.services.router.shared_streams import SharedStreams
from wordcast.services.router.subscribing import Subscribing
from wordcast.services.router.subscription_placer import SubscriptionPlacer
from wordcast.services.router.tenants import Tenants
from wordcast.services.router.versions import MappingVersions, MappingView
from wordcast.storage import Store
from wordcast.storage.events import EventFollower
from wordcast.storage.records import SubscriptionEvent, changes_word_maps


class RouterState:
    def __init__(self, settings: RouterSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.tenants = Tenants(settings, store)
        self.matcher_client = MatcherClient(settings, store)
        self.routing_table = RoutingTable()
        self.follower = EventFollower(
            store.events,
            self._load_snapshot,
            self._apply,
            reader=f"router:{socket.gethostname()}:{os.getpid()}",
            forget_after_s=settings.events_kept_for_s,
            rows=changes_word_maps,
        )
        self.cost = LinearCost(settings.lasp_cost_slope, settings.lasp_cost_intercept)
        self.versions = MappingVersions(
            settings, store, self.matcher_client, self.follower, self.cost, self._switched
        )
        self.shedder = LoadShedder(settings, settings.initial_matchers, store)
        self.rate_limiter = store.rate_limiter(
            settings.publications_per_second, settings.publication_burst
        )
        placer = SubscriptionPlacer(
            settings, store, self.versions, self.cost, lambda: self.routing_table.anchors
        )
        self.subscribing = Subscribing(
            settings, store, self.tenants, placer, self.follower, self.matcher_client
        )
        self.endpoints = Endpoints(settings, store, self.subscribing.delete_subscriptions)
        self.backfill_starter = BackfillStarter(settings, store, self.matcher_client, self.follower)
        self.match_streams = MatchStreamServer(settings, store.match_streams, self.tenants)
        self.learning = LearningRuns(settings, self.routing_insight)
        self.shared_streams = SharedStreams(
            store, self.tenants, self.subscribing.delete_subscriptions
        )
        self.publishing = Publishing(
            settings,
            store,
            self.tenants,
            self.versions,
            self.matcher_client,
            self.shedder,
            lambda: (
                self.routing_table.held,
                self.routing_table.anchors,
                self.routing_table.wildcards,
            ),
        )
        self.history = History(settings.history_every_s)

    async def keep_history(self) -> None:
        # Asked afresh, not through the shared answer /stats/matchers keeps for a second: a
        # round every history_every_s would otherwise keep that answer always a little old.
        await self.history.keep(
            lambda: self.publishing.published, lambda: self.matcher_client.ask_stats(self.view.span)
        )

    async def routing_insight(self, samples: int = 5_000, words: int = 20) -> dict[str, Any]:
        """Routing on the latest ``samples`` logged publications under hash routing and the
        latest learned mapping, and the ``words`` hottest subscribed words (:mod:`.insight`)."""
        recent = [terms for _, terms in await self.store.publication_log.recent(samples)]
        active, latest_version = self.view.active, self.versions.latest
        latest = await self.versions.mapping(latest_version) if latest_version else None
        matchers = latest.matchers if latest is not None else active.matchers
        held = self.routing_table.held
        compared = [load_figures("hash", HashMapping(matchers), recent, held)]
        if latest is not None:
            compared.append(load_figures("learned", latest, recent, held))
        return {
            "publications": len(recent),
            "active_version": active.version,
            "latest_version": latest_version,
            "mappings": compared,
            "hot_words": hot_words(recent, held, active, words),
        }

    @property
    def view(self) -> MappingView:
        return self.versions.view

    @property
    def ready(self) -> bool:
        return self.follower.ready.is_set() and self.versions.reported

    async def close(self) -> None:
        await self.learning.aclose()
        await self.publishing.flush_samples()
        await self.matcher_client.aclose()
        await self.versions.aclose()

    def _switched(self, active: HashMapping) -> None:
        """A new active version: new batches route with it, and are measured apart."""
        self.publishing.switched(active)
        self.shedder.resize(active.matchers)

    async def _load_snapshot(self) -> None:
        self.matcher_client.authorize(await self.store.membership.internal_token())
        # The nightly learner learns for the number recorded (wordcast scale changes it).
        await self.store.membership.want_matchers(
            self.settings.initial_matchers, only_if_unset=True
        )
        await self.versions.mappings.record_initial(self.settings.initial_matchers)
        await self.versions.refresh()
        await self.routing_table.load(self.store, self.view.span)

    def _apply(self, events: Iterable[SubscriptionEvent]) -> None:
        self.routing_table.apply(events)
