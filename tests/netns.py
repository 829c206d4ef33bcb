"""Test hosts on this machine: network namespaces joined by a bridge, whose links a test cuts and
heals, for tests of what crosses a network (issue 11's partitions).

Each host is a namespace of its own (``ip netns``) with one veth into a bridge in this (the test's)
namespace, which holds the subnet's first address: the test process reaches every host, and every
host reaches it. Nothing leaves the bridge's /24 of 10.231.0.0/16. A cut between two hosts drops
every packet between their addresses in both namespaces (iptables ``DROP``, silently, as a
partition does: a connection open across it hangs and a new one times out). Needs root and
iptables (``make test`` installs it from Debian's packages when missing).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import stop_processes


def unavailable() -> str | None:
    """Why this machine cannot make test hosts (None if it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install iproute2 iptables)"
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


@dataclass
class Host:
    """One test host: a network namespace with one address on the test network."""

    name: str
    namespace: str
    address: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spawn(self, argv: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        """``argv`` run inside the host (its output appended to ``log``), stopped with the host."""
        with log.open("ab") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace, *argv],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process

    def _drop(self, action: str, other: Host) -> None:
        for chain, side in (("OUTPUT", "-d"), ("INPUT", "-s")):
            _run("ip", "netns", "exec", self.namespace, "iptables", action, chain, side,
                 other.address, "-j", "DROP")  # fmt: skip


class HostNetwork:
    """A bridge and the hosts on it; :meth:`close` removes every trace (processes included)."""

    def __init__(self) -> None:
        problem = unavailable()
        if problem:
            raise RuntimeError(problem)
        self.tag = f"{os.getpid() % 10_000:04d}{random.randrange(100):02d}"
        self.prefix = f"10.231.{random.randrange(1, 255)}"
        self.bridge = f"wcb{self.tag}"
        self.address = f"{self.prefix}.1"  # the test process's own, on the bridge
        self.hosts: list[Host] = []
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.address}/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def host(self, name: str) -> Host:
        """A new host (``name``: a few letters) with the subnet's next address."""
        number = 10 + len(self.hosts)
        host = Host(name, f"wct{self.tag}-{name}", f"{self.prefix}.{number}")
        veth = f"wcv{self.tag}{number}"
        _run("ip", "netns", "add", host.namespace)
        self.hosts.append(host)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
             host.namespace)  # fmt: skip
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _run("ip", "-n", host.namespace, "link", "set", "eth0", "up")
        _run("ip", "-n", host.namespace, "link", "set", "lo", "up")
        return host

    def cut(self, one: Host, other: Host) -> None:
        """Every packet between the two hosts dropped, both ways, from now on."""
        one._drop("-A", other)
        other._drop("-A", one)

    def heal(self, one: Host, other: Host) -> None:
        one._drop("-D", other)
        other._drop("-D", one)

    def close(self) -> None:
        for host in self.hosts:
            stop_processes(host.processes, 10)
            subprocess.run(["ip", "netns", "del", host.namespace], check=False)
        subprocess.run(["ip", "link", "del", self.bridge], check=False)
