"""Property-based API tests from each service's own OpenAPI schema (Schemathesis, in-process ASGI).

Every operation is called with generated valid and invalid requests; no answer may be a 5xx, and
every answer must match the schema's response for its status code. The router runs in-process next
to a real cluster (same Redis, same matchers), so publications really are routed and matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.python import asgi as st_asgi
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.helpers import AUTH, RunningCluster, eventually
from wordcast.services.matcher.main import create_app as matcher_app
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.services.receiver.main import create_app as receiver_app
from wordcast.services.router.main import create_app as router_app
from wordcast.services.router.settings import RouterSettings
from wordcast.storage.redis import connect_sync

CHECKS = [not_a_server_error, response_schema_conformance]
MATCHER_NAMESPACE = "test-schemathesis-m"
EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


# The schemas come from apps that are never started (only their OpenAPI documents are read); the
# calls go to apps configured by the fixtures below, which Schemathesis starts (lifespan included)
# and stops after each test: every test waits for its app to be ready again (_ready), else a
# fresh router answers /readyz with 503 while it loads.
# The match stream answers 200 with a stream that never ends; its refusals are
# test_match_stream's.
ROUTER = schemathesis.openapi.from_dict(
    router_app(RouterSettings(environment="development")).openapi()
).exclude(path="/matches/stream")
MATCHER = schemathesis.openapi.from_dict(matcher_app(MatcherSettings(ordinal=0)).openapi())
RECEIVER = schemathesis.openapi.from_dict(receiver_app().openapi())


@pytest.fixture(scope="module", autouse=True)
def _stop_apps() -> Iterator[None]:
    """Schemathesis keeps the apps it started running; stop them before Redis goes away."""
    yield
    st_asgi.shutdown_lifespans()


def _ready(app: Any) -> Any:
    """Start the app (unless it runs) and wait until it has loaded from Redis."""
    with st_asgi.get_client(app) as client:
        eventually(
            lambda: client.get("http://testserver/readyz").status_code == 200,
            what="the service ready",
        )
    return app


@pytest.fixture(scope="module")
def router_asgi(cluster: RunningCluster, redis_url: str) -> Any:
    settings_ = RouterSettings(
        redis_url=redis_url,
        namespace=cluster.namespace,
        matcher_urls=cluster.matcher_urls,
        environment="development",
    )
    return _ready(router_app(settings_))


@pytest.fixture(scope="module")
def matcher_asgi(redis_url: str) -> Any:
    settings_ = MatcherSettings(redis_url=redis_url, namespace=MATCHER_NAMESPACE, ordinal=0)
    return _ready(matcher_app(settings_))


@pytest.fixture(scope="module")
def receiver_asgi() -> Any:
    return _ready(receiver_app())


@ROUTER.parametrize()
@EXAMPLES
def test_router(case: Any, router_asgi: Any) -> None:
    case.call_and_validate(app=_ready(router_asgi), headers=AUTH, checks=CHECKS)


@MATCHER.parametrize()
@EXAMPLES
def test_matcher(case: Any, matcher_asgi: Any, redis_url: str) -> None:
    app = _ready(matcher_asgi)
    # As a router calls it: with the cluster's internal token, so /internal is fuzzed past it.
    token = connect_sync(redis_url).get(f"{MATCHER_NAMESPACE}:cluster:internal_token")
    case.call_and_validate(app=app, headers={"authorization": f"Bearer {token}"}, checks=CHECKS)


@RECEIVER.parametrize()
@EXAMPLES
def test_receiver(case: Any, receiver_asgi: Any) -> None:
    case.call_and_validate(app=_ready(receiver_asgi), checks=CHECKS)
