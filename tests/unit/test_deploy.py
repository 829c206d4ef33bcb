"""The Kubernetes manifests (deploy/k8s) against the Kubernetes schemas and against wordcast itself.

No cluster runs here, so these are the checks that can fail on this machine: every object is
valid for Kubernetes (strict: an unknown field is an error), every setting the manifests give is
one a wordcast service reads and accepts, the router's matcher URLs name exactly the StatefulSet's
pods on the port they listen on, the probes are routes the services serve, the commands parse with
the wordcast CLI, and the learner learns for as many matchers as there are.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import AliasChoices
from pydantic_settings import BaseSettings

from tests.helpers import ROOT
from wordcast.cli import build_parser
from wordcast.services.common import ServiceSettings
from wordcast.services.matcher.routes.health import probes as matcher_probes
from wordcast.services.matcher.settings import MatcherSettings
from wordcast.services.router.routes.health import probes as router_probes
from wordcast.services.router.settings import RouterSettings
from wordcast.storage.redis import is_cluster

DEPLOY = ROOT / "deploy" / "k8s"
KUBERNETES = "1.30.0"  # the oldest release still supported when these were written


def _objects() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                yield path.name, document


OBJECTS = list(_objects())
BY_KIND = {(obj["kind"], obj["metadata"]["name"]): obj for _, obj in OBJECTS}
CONFIG: dict[str, str] = BY_KIND[("ConfigMap", "wordcast")]["data"]


def _container(kind: str, name: str) -> dict[str, Any]:
    obj = BY_KIND[(kind, name)]
    spec = obj["spec"]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    containers: list[dict[str, Any]] = spec["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: dict[str, Any]) -> dict[str, str]:
    """The environment a container gets: the ConfigMap, then its own variables."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == "wordcast"
        env |= CONFIG
    for variable in container.get("env", []):
        if variable.get("valueFrom", {}).get("fieldRef"):
            continue  # the pod's own facts, only to build the settings below from
        value = variable.get("value", "from-a-secret")
        env[variable["name"]] = value.replace("$(POD_NAME)", f"{container['name']}-3")
    return env


def _names(settings: type[BaseSettings]) -> set[str]:
    """Every environment variable a settings class reads."""
    prefix = settings.model_config.get("env_prefix", "")
    names = set()
    for field_name, field in settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names |= {str(choice) for choice in alias.choices}
        elif isinstance(alias, str):
            names.add(alias)
        else:
            names.add(f"{prefix}{field_name}".upper())
    return names


@pytest.mark.parametrize(("path", "obj"), OBJECTS, ids=[f"{p}:{o['kind']}" for p, o in OBJECTS])
def test_every_object_is_valid_kubernetes(path: str, obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_the_kustomization_lists_every_manifest_namespace_first() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    files = sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == files
    assert kustomization["resources"][0] == files[0] == "00-namespace.yaml"
    assert {obj["metadata"].get("namespace", "wordcast") for _, obj in OBJECTS} == {"wordcast"}


@pytest.mark.parametrize(
    ("kind", "name", "settings"),
    [("Deployment", "router", RouterSettings), ("StatefulSet", "matcher", MatcherSettings)],
)
def test_services_read_and_accept_every_setting_given(
    kind: str, name: str, settings: type[ServiceSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(_container(kind, name))
    known = _names(RouterSettings) | _names(MatcherSettings) | {"REDIS_URL"}
    unknown = {variable for variable in env if variable not in known}
    assert not unknown, f"settings no service reads (a typo?): {unknown}"
    for variable in list(os.environ):
        if variable.startswith("WORDCAST_") or variable == "REDIS_URL":
            monkeypatch.delenv(variable)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("HOSTNAME", f"{name}-3")  # what a StatefulSet pod's host name looks like
    loaded = settings()  # production settings: refuses defaults that must not reach a cluster
    assert loaded.redis_url == "redis://redis:6379/0"
    if isinstance(loaded, MatcherSettings):
        assert loaded.ordinal == 3


def test_router_knows_every_matcher_pod_on_its_port() -> None:
    matchers = BY_KIND[("StatefulSet", "matcher")]
    service = BY_KIND[("Service", "matcher")]
    assert service["spec"]["clusterIP"] == "None", "pods need DNS names: a headless service"
    assert matchers["spec"]["serviceName"] == service["metadata"]["name"]
    port = int(CONFIG["WORDCAST_MATCHER_PORT"])
    assert _container("StatefulSet", "matcher")["ports"][0]["containerPort"] == port
    assert service["spec"]["ports"][0]["targetPort"] == port
    assert CONFIG["WORDCAST_ROUTER_MATCHER_URLS"] == f"http://matcher-{{ordinal}}.matcher:{port}"
    assert int(CONFIG["WORDCAST_ROUTER_MATCHERS"]) == matchers["spec"]["replicas"]
    # A matcher registers, for wordcast scale to check, the URL routers reach it at.
    advertised = _env(_container("StatefulSet", "matcher"))["WORDCAST_MATCHER_ADVERTISE_URL"]
    assert advertised == CONFIG["WORDCAST_ROUTER_MATCHER_URLS"].format(ordinal=3)
    router_port = int(CONFIG["WORDCAST_ROUTER_PORT"])
    assert _container("Deployment", "router")["ports"][0]["containerPort"] == router_port
    assert BY_KIND[("Service", "router")]["spec"]["ports"][0]["targetPort"] == router_port


@pytest.mark.parametrize(("kind", "name"), [("Deployment", "router"), ("StatefulSet", "matcher")])
def test_probes_are_routes_the_service_serves(kind: str, name: str) -> None:
    probes = router_probes if name == "router" else matcher_probes
    served = {route.path for route in probes.routes}  # type: ignore[attr-defined]
    container = _container(kind, name)
    port = container["ports"][0]["containerPort"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == port
        assert container[probe]["httpGet"]["path"] in served


def test_commands_parse_and_the_learner_learns_for_the_clusters_matchers() -> None:
    parser = build_parser()
    for kind, name in [
        ("Deployment", "router"),
        ("StatefulSet", "matcher"),
        ("CronJob", "learn-mapping"),
    ]:
        args = parser.parse_args(_container(kind, name)["args"])
        assert args.command == ("learn" if kind == "CronJob" else name)
    learner = parser.parse_args(_container("CronJob", "learn-mapping")["args"])
    assert learner.matchers is None, "a fixed number would undo every wordcast scale nightly"
    assert "REDIS_URL" in _env(_container("CronJob", "learn-mapping"))


def _pod_labels(kind: str, name: str) -> dict[str, str]:
    spec = BY_KIND[(kind, name)]["spec"]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    labels: dict[str, str] = spec["template"]["metadata"]["labels"]
    return labels


def test_network_policies_let_exactly_wordcast_pods_in() -> None:
    router = _pod_labels("Deployment", "router")["app"]
    matcher = _pod_labels("StatefulSet", "matcher")["app"]
    learner = _pod_labels("CronJob", "learn-mapping")["app"]
    redis = _pod_labels("StatefulSet", "redis")["app"]
    to_matchers = BY_KIND[("NetworkPolicy", "matcher-from-routers")]["spec"]
    assert to_matchers["podSelector"]["matchLabels"] == {"app": matcher}
    (rule,) = to_matchers["ingress"]
    assert [peer["podSelector"]["matchLabels"] for peer in rule["from"]] == [{"app": router}]
    assert rule["ports"][0]["port"] == int(CONFIG["WORDCAST_MATCHER_PORT"])
    to_redis = BY_KIND[("NetworkPolicy", "redis-from-wordcast")]["spec"]
    assert to_redis["podSelector"]["matchLabels"] == {"app": redis}
    (rule,) = to_redis["ingress"]
    (peer,) = rule["from"]
    (expression,) = peer["podSelector"]["matchExpressions"]
    assert set(expression["values"]) == {router, matcher, learner}
    assert rule["ports"][0]["port"] == int(CONFIG["REDIS_URL"].rsplit(":", 1)[1].split("/")[0])


def test_redis_has_a_memory_limit_below_its_containers_and_evicts_nothing() -> None:
    """The matchers push back at 90% of Redis's maxmemory, so it must have one. An evicted key
    would be a lost outbox entry or subscription, so nothing is evicted; and the container leaves
    room above maxmemory for the fork that rewrites the append-only file."""
    redis = _container("StatefulSet", "redis")
    options = dict(zip(redis["args"][::2], redis["args"][1::2], strict=True))
    assert options["--maxmemory-policy"] == "noeviction"
    maxmemory = _size(options["--maxmemory"], {"gb": 2**30, "mb": 2**20})
    container_limit = _size(redis["resources"]["limits"]["memory"], {"Gi": 2**30, "Mi": 2**20})
    assert 0 < maxmemory <= 0.75 * container_limit


def _size(text: str, units: dict[str, int]) -> int:
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(text.removesuffix(unit)) * factor
    raise AssertionError(f"{text!r}: no unit of {sorted(units)}")


def test_kubectl_scale_alone_re_maps_the_cluster() -> None:
    """Routers follow the matcher StatefulSet's replicas, a pod being removed waits in its preStop
    hook until it is empty and may be reached meanwhile, and both may read that one number."""
    matchers = BY_KIND[("StatefulSet", "matcher")]
    name = matchers["metadata"]["name"]
    router_env = _env(_container("Deployment", "router"))
    assert router_env["WORDCAST_ROUTER_FOLLOW_STATEFULSET"] == name

    pod = matchers["spec"]["template"]["spec"]
    hook = _container("StatefulSet", "matcher")["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[0] == "wordcast"
    drain = build_parser().parse_args(hook[1:])
    assert (drain.command, drain.statefulset, drain.ordinal) == ("drain", name, None)
    matcher_settings = MatcherSettings.model_fields
    shutdown = float(matcher_settings["shutdown_drain_s"].default)
    assert drain.timeout + shutdown < pod["terminationGracePeriodSeconds"]
    assert BY_KIND[("Service", "matcher")]["spec"]["publishNotReadyAddresses"] is True

    role = BY_KIND[("Role", "read-matcher-scale")]
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "resourceNames": [name],
            "verbs": ["get"],
        }
    ]
    binding = BY_KIND[("RoleBinding", "wordcast-reads-matcher-scale")]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    accounts = {s["name"] for s in binding["subjects"] if s["kind"] == "ServiceAccount"}
    router_pod = BY_KIND[("Deployment", "router")]["spec"]["template"]["spec"]
    assert {pod["serviceAccountName"], router_pod["serviceAccountName"]} <= accounts
    assert ("ServiceAccount", pod["serviceAccountName"]) in BY_KIND
    assert ("ServiceAccount", router_pod["serviceAccountName"]) in BY_KIND


def test_a_router_that_re_maps_by_hashing_may_start_the_learner_and_nothing_more() -> None:
    learner = BY_KIND[("CronJob", "learn-mapping")]["metadata"]["name"]
    router_env = _env(_container("Deployment", "router"))
    assert router_env["WORDCAST_ROUTER_LEARN_CRONJOB"] == learner
    role = BY_KIND[("Role", "start-learner")]
    assert role["rules"] == [
        {
            "apiGroups": ["batch"],
            "resources": ["cronjobs"],
            "resourceNames": [learner],
            "verbs": ["get"],
        },
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
    ]
    binding = BY_KIND[("RoleBinding", "routers-start-learner")]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    router_account = BY_KIND[("Deployment", "router")]["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    matcher_account = BY_KIND[("StatefulSet", "matcher")]["spec"]["template"]["spec"][
        "serviceAccountName"
    ]
    granted = {s["name"] for s in binding["subjects"] if s["kind"] == "ServiceAccount"}
    assert granted == {router_account}
    assert matcher_account not in granted


# -- the Redis Cluster variant (kustomize overlay) ---------------------------------------------------
OVERLAY = DEPLOY / "overlays" / "redis-cluster"


def _overlay(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((OVERLAY / name).read_text()) if d]


def _by_kind(documents: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}


@pytest.mark.parametrize("obj", _overlay("redis-cluster.yaml"), ids=lambda o: o["kind"])
def test_the_redis_cluster_overlays_objects_are_valid_kubernetes(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_the_overlay_puts_a_redis_cluster_in_the_single_redis_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kustomization = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../..", "redis-cluster.yaml"]
    assert (OVERLAY / kustomization["resources"][0] / "kustomization.yaml").exists()
    patches = [p["path"] for p in kustomization["patches"]]
    deleted = _by_kind(_overlay("without-single-redis.yaml"))
    assert all(d["$patch"] == "delete" for d in deleted.values())
    # It deletes the base's single Redis and everything naming it alone, and nothing else.
    assert set(deleted) == {
        ("StatefulSet", "redis"),
        ("Service", "redis"),
        ("NetworkPolicy", "redis-from-wordcast"),
    }
    assert set(deleted) <= set(BY_KIND)
    (config,) = _overlay("config.yaml")
    assert (config["kind"], config["metadata"]["name"]) in BY_KIND
    assert set(patches) == {"without-single-redis.yaml", "config.yaml"}

    # Every service accepts the settings it then gets, and they name a node of the cluster.
    for name, value in (CONFIG | config["data"]).items():
        monkeypatch.setenv(name, value)
    settings = ServiceSettings()
    assert is_cluster(settings.redis_url)
    assert settings.redis_wait_replicas == 1
    statefulset = _by_kind(_overlay("redis-cluster.yaml"))[("StatefulSet", "redis-cluster")]
    service = statefulset["spec"]["serviceName"]
    host = settings.redis_url.split("://")[1].split(":")[0]
    assert host == f"{statefulset['metadata']['name']}-0.{service}.wordcast.svc"


def test_the_job_forms_every_node_into_masters_with_a_replica_each() -> None:
    objects = _by_kind(_overlay("redis-cluster.yaml"))
    statefulset = objects[("StatefulSet", "redis-cluster")]
    pods = statefulset["spec"]["replicas"]
    script = objects[("Job", "redis-cluster-create")]["spec"]["template"]["spec"]["containers"][0][
        "command"
    ][-1]
    nodes = script.split('nodes="')[1].split('"')[0].split()
    assert nodes == [f"redis-cluster-{k}.redis-cluster.wordcast.svc:6379" for k in range(pods)]
    assert "--cluster-replicas 1 --cluster-yes" in script
    assert pods // 2 >= 3, "Redis Cluster wants three masters at least"
    # The nodes announce the very names the Job joins them by.
    (script,) = statefulset["spec"]["template"]["spec"]["containers"][0]["args"]
    words = script.split()
    announced = words[words.index("--cluster-announce-hostname") + 1].strip('"')
    assert announced.replace("$POD_NAME", "redis-cluster-0") == nodes[0].split(":")[0]
    # A node that ran before waits out its replica's promotion before it starts again.
    delay = float(re.search(r"sleep (\d+)", script)[1])  # type: ignore[index]
    timeout_ms = int(words[words.index("--cluster-node-timeout") + 1])
    assert delay * 1000 >= 2 * timeout_ms
    assert script.index("sleep") < script.index("exec redis-server")


def test_the_nodes_reach_each_other_and_only_wordcast_reaches_them() -> None:
    policy = _by_kind(_overlay("redis-cluster.yaml"))[
        ("NetworkPolicy", "redis-cluster-from-wordcast")
    ]
    clients, peers = policy["spec"]["ingress"]
    allowed = set(clients["from"][0]["podSelector"]["matchExpressions"][0]["values"])
    wordcast_apps = {
        obj["spec"]["template"]["metadata"]["labels"]["app"]
        for (kind, _), obj in BY_KIND.items()
        if kind in ("Deployment", "StatefulSet") and obj["metadata"]["name"] != "redis"
    }
    learner = BY_KIND[("CronJob", "learn-mapping")]["spec"]["jobTemplate"]["spec"]["template"]
    assert allowed == wordcast_apps | {learner["metadata"]["labels"]["app"], "redis-cluster-create"}
    assert [p["port"] for p in clients["ports"]] == [6379]
    assert peers["from"] == [{"podSelector": {"matchLabels": {"app": "redis-cluster"}}}]
    assert sorted(p["port"] for p in peers["ports"]) == [6379, 16379]


# -- the learner on Spark's Kubernetes mode (kustomize overlay) ---------------------------------------
SPARK_OVERLAY = DEPLOY / "overlays" / "spark-on-kubernetes"


def _spark_overlay(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SPARK_OVERLAY / name).read_text()) if d]


@pytest.mark.parametrize("obj", _spark_overlay("spark-rbac.yaml"), ids=lambda o: o["kind"])
def test_the_spark_overlays_objects_are_valid_kubernetes(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, KUBERNETES, strict=True)


def test_the_learner_submits_to_kubernetes_as_the_cli_and_spark_read_it() -> None:
    kustomization = yaml.safe_load((SPARK_OVERLAY / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["../..", "spark-rbac.yaml"]
    assert [p["path"] for p in kustomization["patches"]] == ["learner.yaml"]
    (patch,) = _spark_overlay("learner.yaml")
    assert (patch["kind"], patch["metadata"]["name"]) in BY_KIND
    pod = patch["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    base = _container("CronJob", "learn-mapping")
    assert container["name"] == base["name"]

    args = build_parser().parse_args(container["args"])
    assert args.command == "learn"
    assert args.master == "k8s://https://kubernetes.default.svc:443"
    assert args.matchers is None, "a fixed number would undo every wordcast scale nightly"

    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    submit = env["PYSPARK_SUBMIT_ARGS"]["value"].split()
    assert submit[-1] == "pyspark-shell"
    conf = dict(submit[k + 1].split("=", 1) for k in range(0, len(submit) - 1, 2))
    assert all(submit[k] == "--conf" for k in range(0, len(submit) - 1, 2))
    assert conf["spark.kubernetes.container.image"] == base["image"]
    assert conf["spark.kubernetes.namespace"] == patch["metadata"]["namespace"]
    # Executors reach the driver at its pod's IP, given by Kubernetes before it is used.
    assert conf["spark.driver.host"] == "$(POD_IP)"
    assert list(env).index("POD_IP") < list(env).index("PYSPARK_SUBMIT_ARGS")

    # The driver's service account exists and may manage exactly its executors' objects.
    rbac = _by_kind(_spark_overlay("spark-rbac.yaml"))
    account = conf["spark.kubernetes.authenticate.serviceAccountName"]
    assert pod["serviceAccountName"] == account
    assert ("ServiceAccount", account) in rbac
    binding = rbac[("RoleBinding", account)]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": "wordcast"}
    ]
    (rule,) = rbac[("Role", binding["roleRef"]["name"])]["rules"]
    assert {"pods", "configmaps", "services"} <= set(rule["resources"])
    assert {"create", "delete", "watch"} <= set(rule["verbs"])
