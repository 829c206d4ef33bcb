"""The number of replicas of a StatefulSet, from the Kubernetes API (lightkube, in the pod).

``kubectl scale statefulset/matcher --replicas=N`` changes only the StatefulSet's spec. Routers
that follow it (``WORDCAST_ROUTER_FOLLOW_STATEFULSET``) record N as the number of matchers wanted,
and then re-map the cluster onto N matchers (:mod:`wordcast.scaling`); a matcher pod being stopped
asks it whether it is being removed or only restarted (``wordcast drain``, its preStop hook).
The pods' service account may ``get`` that one StatefulSet's ``scale`` (deploy/k8s/rbac.yaml).
"""

from __future__ import annotations

import httpx2
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError, ConfigError
from lightkube.resources.apps_v1 import StatefulSet

from .errors import KubernetesUnavailable


class StatefulSetReplicas:
    """Reads ``spec.replicas`` of one StatefulSet in the pod's own namespace."""

    def __init__(self, name: str, config: KubeConfig | None = None, **client_options: object):
        self.name = name
        self._config = config
        self._client_options = client_options
        self._client: AsyncClient | None = None

    def _connect(self) -> AsyncClient:
        if self._client is None:
            # Read at the first call, not at start: outside a pod it fails there, with our error.
            config = self._config or KubeConfig.from_env()
            self._client = AsyncClient(config, **self._client_options)  # type: ignore[arg-type]
        return self._client

    async def get(self) -> int:
        """The replicas the StatefulSet asks for now (KubernetesUnavailable)."""
        what = f"reading the replicas of statefulset/{self.name} from the Kubernetes API"
        try:
            scale = await self._connect().get(StatefulSet.Scale, name=self.name)
        except ApiError as exc:
            raise KubernetesUnavailable(f"{what}: {exc.status.code} {exc.status.message}") from exc
        except ConfigError as exc:
            raise KubernetesUnavailable(f"{what}: not in a pod? {exc}") from exc
        except (httpx2.HTTPError, OSError) as exc:
            raise KubernetesUnavailable(f"{what}: {exc}") from exc
        # The API leaves out a zero count.
        replicas = scale.spec.replicas if scale.spec is not None else None
        return int(replicas or 0)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
