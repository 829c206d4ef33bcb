"""What wordcast asks of the Kubernetes API (lightkube, in the pod): a StatefulSet's replicas, and
a run of the learner's CronJob now.

``kubectl scale statefulset/matcher --replicas=N`` changes only the StatefulSet's spec. Routers
that follow it (``WORDCAST_ROUTER_FOLLOW_STATEFULSET``) record N as the number of matchers wanted,
and then re-map the cluster onto N matchers (:mod:`wordcast.ops.scaling`); a matcher pod being stopped
asks it whether it is being removed or only restarted (``wordcast drain``, its preStop hook).
The pods' service account may ``get`` that one StatefulSet's ``scale`` (deploy/k8s/rbac.yaml).

Such a re-mapping routes by stable hashing until a mapping is learned for N; a router that wrote
one starts the learner's CronJob at once (``WORDCAST_ROUTER_LEARN_CRONJOB``) rather than leave the
cluster on hashing until the nightly run: :class:`CronJobRun` creates a Job from the CronJob's
template, as ``kubectl create job --from=cronjob/…`` does. The routers' account may also ``get``
that CronJob and ``create`` Jobs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx2
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.batch_v1 import CronJob, Job

from wordcast.errors import KubernetesUnavailable

T = TypeVar("T")


class _Api:
    """One lazily made client in the pod's own namespace; its errors become ours."""

    def __init__(self, config: KubeConfig | None, client_options: dict[str, object]) -> None:
        self._config = config
        self._client_options = client_options
        self._client: AsyncClient | None = None

    def _connect(self) -> AsyncClient:
        if self._client is None:
            # Read at the first call, not at start: outside a pod it fails there, with our error.
            config = self._config or KubeConfig.from_env()
            self._client = AsyncClient(config, **self._client_options)  # type: ignore[arg-type]
        return self._client

    async def call(self, what: str, request: Callable[[AsyncClient], Awaitable[T]]) -> T:
        """``request`` on the client (KubernetesUnavailable saying ``what`` failed)."""
        try:
            return await request(self._connect())
        except ApiError as exc:
            raise KubernetesUnavailable(f"{what}: {exc.status.code} {exc.status.message}") from exc
        except ConfigError as exc:
            raise KubernetesUnavailable(f"{what}: not in a pod? {exc}") from exc
        except (httpx2.HTTPError, OSError) as exc:
            raise KubernetesUnavailable(f"{what}: {exc}") from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class StatefulSetReplicas(_Api):
    """Reads ``spec.replicas`` of one StatefulSet in the pod's own namespace."""

    def __init__(self, name: str, config: KubeConfig | None = None, **client_options: object):
        super().__init__(config, client_options)
        self.name = name

    async def get(self) -> int:
        """The replicas the StatefulSet asks for now (KubernetesUnavailable)."""
        scale = await self.call(
            f"reading the replicas of statefulset/{self.name} from the Kubernetes API",
            lambda client: client.get(StatefulSet.Scale, name=self.name),
        )
        # The API leaves out a zero count.
        replicas = scale.spec.replicas if scale.spec is not None else None
        return int(replicas or 0)


class CronJobRun(_Api):
    """Runs one CronJob now: a Job from its template, owned by it (as ``kubectl create job
    --from=cronjob/NAME`` makes), so the CronJob's history limits clean it up."""

    def __init__(self, name: str, config: KubeConfig | None = None, **client_options: object):
        super().__init__(config, client_options)
        self.name = name

    async def start(self, job_name: str) -> bool:
        """Create Job ``job_name``; False if one of that name exists already (another router
        started it). Raises KubernetesUnavailable."""
        cronjob = await self.call(
            f"reading cronjob/{self.name} from the Kubernetes API",
            lambda client: client.get(CronJob, name=self.name),
        )
        if cronjob.metadata is None or cronjob.spec is None:
            raise KubernetesUnavailable(f"cronjob/{self.name} came back without its spec")
        template = cronjob.spec.jobTemplate
        labels = dict(template.metadata.labels or {}) if template.metadata else {}
        annotations = dict(template.metadata.annotations or {}) if template.metadata else {}
        annotations["cronjob.kubernetes.io/instantiate"] = "manual"
        job = Job(
            metadata=ObjectMeta(
                name=job_name,
                labels=labels,
                annotations=annotations,
                ownerReferences=[
                    OwnerReference(
                        apiVersion="batch/v1",
                        kind="CronJob",
                        name=self.name,
                        uid=cronjob.metadata.uid or "",
                        controller=True,
                    )
                ],
            ),
            spec=template.spec,
        )
        try:
            await self.call(
                f"creating job/{job_name} from cronjob/{self.name}",
                lambda client: client.create(job),
            )
        except KubernetesUnavailable as exc:
            if isinstance(exc.__cause__, ApiError) and exc.__cause__.status.code == 409:
                return False
            raise
        return True
