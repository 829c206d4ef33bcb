"""The web console with many subscriptions: ``make bench-console``.

A local cluster (two matchers) holds ``--subscriptions`` subscriptions of the development tenant
(two corpus words each, delivered to the match stream), registered through the batch API. Debian's
Chromium (headless, through Selenium and Debian's chromedriver) then opens ``/console`` afresh
``--runs`` times and times, from the navigation's start: the page loaded (its ``load`` event), the
tenant logged in (the menu shown), the subscriptions view filled (its first page, 50 rows); and,
logged in as the admin, the cluster view and the routing view filled. Target: the console loads
(the subscriptions view filled) in under 1 s with 100,000 subscriptions.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from typing import Any

import httpx

from wordcast.corpus.workload import sample_posts
from wordcast.defaults import DEFAULT_ADMIN_TOKEN, DEVELOPMENT_API_KEY
from wordcast.local.cluster import Cluster
from wordcast.local.supervisor import free_port
from wordcast.query.analysis import analyse

from .common import machine, median, write_json

KEY = {"authorization": f"Bearer {DEVELOPMENT_API_KEY}"}


def _queries(count: int, seed: int) -> list[str]:
    # Terms as analysed, of two characters or more: one-character tokens are dropped.
    words = sorted(
        {t for p in sample_posts(5_000, seed=seed) for t in analyse(p.text) if len(t) > 1}
    )
    rng = random.Random(seed)
    return [f"{rng.choice(words)} {rng.choice(words)}" for _ in range(count)]


def _subscribe(router: str, queries: list[str]) -> None:
    started = time.monotonic()
    with httpx.Client(base_url=router, headers=KEY, timeout=120) as api:
        for k in range(0, len(queries), 1_000):
            items = [{"query": q} for q in queries[k : k + 1_000]]
            answer = api.post("/subscriptions/batch", json={"subscriptions": items})
            if answer.status_code != 201:
                raise SystemExit(f"registering subscriptions: {answer.status_code} {answer.text}")
            if k % 20_000 == 0:
                print(f"  {k:,} subscriptions registered", flush=True)
    print(f"  {len(queries):,} registered in {time.monotonic() - started:.0f} s", flush=True)


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(driver))


def _since_start(driver: Any) -> float:
    """Milliseconds since the navigation started, by the page's own clock."""
    return float(driver.execute_script("return performance.now()"))


def _until(driver: Any, condition: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60, poll_frequency=0.005).until(condition)


def one_load(driver: Any, router: str, key: str, view: str, filled: str) -> dict[str, float]:
    from selenium.webdriver.common.by import By

    driver.get(f"{router}/console")
    driver.execute_script("sessionStorage.clear()")
    driver.get(f"{router}/console")  # afresh: the navigation's start is now
    loaded = float(
        driver.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd")
    )
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "login-button").click()
    _until(driver, lambda d: d.find_element(By.ID, "nav").is_displayed())
    logged_in = _since_start(driver)
    if view != "cluster":  # the admin lands on the cluster view; a tenant on its matches
        driver.find_element(By.CSS_SELECTOR, f"nav button[data-view='{view}']").click()
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, filled))
    return {"loaded_ms": loaded, "logged_in_ms": logged_in, "filled_ms": _since_start(driver)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subscriptions", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--name", default="console", help="results file name")
    args = parser.parse_args()
    views = {
        "subscriptions": (DEVELOPMENT_API_KEY, "subscriptions", "#subscriptions tr:nth-child(50)"),
        "cluster": (DEFAULT_ADMIN_TOKEN, "cluster", "#matchers tr"),
        "routing": (DEFAULT_ADMIN_TOKEN, "routing", "#load-plot rect[data-mapping]"),
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in views}
    with Cluster(matchers=2, port=free_port(), receiver=False, out=lambda line: None) as cluster:
        _subscribe(cluster.router_url, _queries(args.subscriptions, seed=1))
        held = httpx.get(
            f"{cluster.router_url}/stats/matchers",
            headers={"authorization": f"Bearer {DEFAULT_ADMIN_TOKEN}"},
            timeout=30,
        ).json()
        print(f"  held: {[m.get('subscriptions') for m in held['matchers']]}", flush=True)
        driver = _browser()
        try:
            for name, (key, view, filled) in views.items():
                one_load(driver, cluster.router_url, key, view, filled)  # warm: caches, JIT
                for _ in range(args.runs):
                    runs[name].append(one_load(driver, cluster.router_url, key, view, filled))
                last = runs[name][-1]
                print(
                    f"{name}: loaded {last['loaded_ms']:.0f} ms, logged in "
                    f"{last['logged_in_ms']:.0f} ms, filled {last['filled_ms']:.0f} ms",
                    flush=True,
                )
        finally:
            driver.quit()
    medians = {
        name: {field: median([r[field] for r in rows]) for field in rows[0]}
        for name, rows in runs.items()
    }
    path = write_json(
        args.name,
        {
            "benchmark": "console",
            "machine": machine(),
            "parameters": vars(args),
            "runs": runs,
            "median": medians,
        },
    )
    print(f"medians: {medians}; results in {path}")


if __name__ == "__main__":
    main()
