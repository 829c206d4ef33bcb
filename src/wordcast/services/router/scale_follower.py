"""Scaling's step 3 for one router (:mod:`wordcast.ops.scaling`): follow the number of matchers wanted.

In its mapping step, once the mapping versions are settled, a router copies the matcher
StatefulSet's replicas into the number wanted (when it follows one: ``kubectl scale`` alone is
then enough) and, if the active version routes to another number, writes a version for the number
wanted under the migration lock, once any new matchers are ready. The migration that follows is
the one every mapping change goes through. That version routes by stable hashing; with
``WORDCAST_ROUTER_LEARN_CRONJOB`` set, the router that wrote it starts the learner's CronJob at
once, and the learned version that run publishes replaces it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from prometheus_client import Gauge

from wordcast.errors import KubernetesUnavailable
from wordcast.ops.kube import CronJobRun, StatefulSetReplicas
from wordcast.ops.scaling import first_not_ready, version_for, write_hash_version
from wordcast.services.router.settings import RouterSettings
from wordcast.storage import Store
from wordcast.storage.mappings import MappingStore

log = logging.getLogger(__name__)

MATCHERS = Gauge("wordcast_router_matchers", "Matchers the active mapping version routes to")
MATCHERS_WANTED = Gauge(
    "wordcast_router_matchers_wanted", "Matchers the cluster is asked to have (scaling when apart)"
)
AWAITING = Gauge(
    "wordcast_router_awaiting_matcher_seconds",
    "How long growing has waited for a new matcher to be ready (0 when not waiting)",
)
# A matcher that never becomes ready holds growth for good: say so again this often.
REMIND_EVERY_S = 60.0

# The router's migration lock: runs work(*args, keep_alive) if this router gets it.
Locked = Callable[..., Awaitable[None]]


class ScaleFollower:
    def __init__(
        self,
        settings: RouterSettings,
        store: Store,
        mappings: MappingStore,
        client: httpx.AsyncClient,
    ) -> None:
        self.settings, self.store, self.mappings, self.client = settings, store, mappings, client
        name = settings.follow_statefulset
        self.statefulset = StatefulSetReplicas(name) if name else None
        self.learner = CronJobRun(settings.learn_cronjob) if settings.learn_cronjob else None
        self._read_at = -math.inf
        # As this router last saw them, for /stats: the number wanted, and the first new matcher
        # not ready yet (growing waits for it).
        self.wanted: int | None = None
        self.awaited: int | None = None
        self._awaited_since = self._reminded_at = 0.0
        AWAITING.set_function(lambda: self.awaited_for)

    @property
    def awaited_for(self) -> float:
        """Seconds growth has waited for the matcher ``awaited`` (0 when not waiting)."""
        return 0.0 if self.awaited is None else time.monotonic() - self._awaited_since

    async def step(self, routed: int, locked: Locked) -> None:
        """The versions are settled and the active one routes to ``routed`` matchers."""
        await self._copy_statefulset_replicas()
        wanted = self.wanted = await self.store.membership.matchers_wanted()
        MATCHERS.set(routed)
        if wanted is not None:
            MATCHERS_WANTED.set(wanted)
        missing = None
        if wanted is not None and wanted > routed:
            missing = await first_not_ready(self.store, self.client, wanted, start=routed)
        self._note_awaited(missing, wanted, routed)
        if version_for(wanted, routed, True, missing):
            await locked(self._write_version_for, wanted)

    def _note_awaited(self, missing: int | None, wanted: int | None, routed: int) -> None:
        now = time.monotonic()
        if missing is not None and missing != self.awaited:
            log.info("%s matchers wanted: waiting for matcher-%d to be ready", wanted, missing)
            self._awaited_since = self._reminded_at = now
        elif missing is not None and now - self._reminded_at >= REMIND_EVERY_S:
            log.warning(
                "%s matchers wanted: matcher-%d has not been ready for %.0f s; the cluster "
                "stays on %s matchers until it is",
                wanted,
                missing,
                now - self._awaited_since,
                routed,
            )
            self._reminded_at = now
        self.awaited = missing

    async def _copy_statefulset_replicas(self) -> None:
        if self.statefulset is None:
            return
        now = time.monotonic()
        if now - self._read_at < self.settings.follow_poll_s:
            return
        self._read_at = now
        try:
            replicas = await self.statefulset.get()
        except KubernetesUnavailable as exc:
            log.warning("cannot follow the matchers' StatefulSet: %s", exc)
            return
        # Lives a few reads: `wordcast scale` refuses to ask for a number the routers would undo.
        await self.store.membership.note_followed(
            self.statefulset.name, 3 * self.settings.follow_poll_s
        )
        if replicas >= 1 and replicas != await self.store.membership.matchers_wanted():
            log.info("statefulset/%s asks for %d matchers", self.statefulset.name, replicas)
            await self.store.membership.want_matchers(replicas)

    async def _write_version_for(self, wanted: int, keep_alive: Any) -> None:
        # Checked again under the lock: another router may have written one meanwhile.
        latest, active, window = await self.mappings.state()
        settled = latest == active and window == (active, active)
        routed = await self.mappings.matchers_of(active, self.settings.initial_matchers)
        if await self.store.membership.matchers_wanted() != wanted:
            return  # asked again meanwhile: the next step judges the new number
        if not version_for(wanted, routed, settled, None):
            return
        version = await write_hash_version(self.mappings, wanted)
        log.info(
            "mapping v%d (stable hashing) written for the %d matchers wanted; v%d routes to %d",
            version,
            wanted,
            active,
            routed,
        )
        await self._start_learner(version, wanted)

    async def _start_learner(self, version: int, wanted: int) -> None:
        if self.learner is None:
            return
        # One run per version written: the name makes a second start by another router a no-op.
        job = f"{self.learner.name[:40]}-scale-v{version}"  # a name has at most 63 characters
        try:
            started = await self.learner.start(job)
        except KubernetesUnavailable as exc:
            log.warning("could not start the learner now (%s); the nightly run will learn", exc)
            return
        if started:
            log.info("job/%s started: it learns a mapping for %d matchers", job, wanted)

    async def aclose(self) -> None:
        if self.statefulset is not None:
            await self.statefulset.aclose()
        if self.learner is not None:
            await self.learner.aclose()
