"""The Grafana dashboard and the Prometheus alerting rules in ``deploy/monitoring`` against what the
services really export: every metric they query is one a running router or matcher serves on
/metrics, and the rules pass ``promtool check rules`` and their own ``promtool test rules``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT, RunningCluster

MONITORING = ROOT / "deploy" / "monitoring"
DASHBOARD = MONITORING / "wordcast-dashboard.json"
ALERTS = MONITORING / "alerts.yaml"
PROMETHEUS_OWN = {"up"}  # series Prometheus makes itself, for every target it scrapes
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}


def _served(cluster: RunningCluster) -> set[str]:
    """Every series name the router and the matchers serve (or would, for a labelled metric with
    no child yet: its family is announced all the same)."""
    names: set[str] = set()
    for url in [cluster.router_url, *cluster.matcher_urls]:
        text = httpx.get(f"{url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(text):
            names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
            names.update(sample.name for sample in family.samples)
    return names


def _queried(expressions: list[str]) -> set[str]:
    return {name for e in expressions for name in re.findall(r"\b(?:wordcast_\w+|up)\b", e)}


def _dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def _alert_expressions() -> list[str]:
    rules = yaml.safe_load(ALERTS.read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_the_dashboard_queries_only_metrics_the_services_export(cluster: RunningCluster) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]), panel["title"]
        assert panel["targets"]
        assert all(t["expr"] and t["refId"] for t in panel["targets"])
    served = _served(cluster)
    queried = _queried(_dashboard_expressions(dashboard))
    assert len(queried) > 20
    assert queried - served == set(), "the dashboard queries series no service exports"


def test_the_alerts_query_only_metrics_the_services_export(cluster: RunningCluster) -> None:
    queried = _queried(_alert_expressions())
    assert {"wordcast_outbox_depth", "wordcast_matcher_ready"} <= queried
    assert queried - _served(cluster) - PROMETHEUS_OWN == set()
    for url in cluster.matcher_urls:  # serving, so not alerting
        text = httpx.get(f"{url}/metrics", timeout=10).text
        assert re.search(r"^wordcast_matcher_ready 1\.0$", text, re.MULTILINE), url


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool missing (make test installs Debian's prometheus)",
)
def test_the_alerting_rules_pass_promtool_and_fire_on_their_own_test_series() -> None:
    checked = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "5 rules found" in checked.stdout
    tested = subprocess.run(
        ["promtool", "test", "rules", "alerts-test.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=MONITORING,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
