"""The fault suite's network and disks (issue 15): every node of a cluster in its own network
namespace, so one can be cut off from all the others, and a small disk that can be filled.

    net = Network.create()              # a bridge and a /24 of its own (its name and subnet are random)
    host = net.add_host("b11")          # a namespace with a veth into the bridge: host.ip
    cmd = host.wrap(["ketch", ...])     # the command run inside it (`ip netns exec`)
    host.isolate(); host.heal()         # drop every packet in and out of it (iptables in its namespace)
    net.close()                         # namespaces, veths, bridge and the FORWARD rule removed

The test process stays in the root namespace and reaches every host through the bridge (the host
side, `net.gateway`), as a client on another machine would; an isolated host is unreachable for
clients too. Packets are dropped, not refused: the peers of an isolated node see timeouts, as with a
pulled cable. Docker's FORWARD policy (DROP) would stop the bridged packets, so the bridge gets an
ACCEPT rule of its own for its life.

`SmallDisk` mounts a tmpfs of a given size (a data directory on it fills up when `fill()` writes a
file that takes all the free space; `free()` removes it).

Root only (network namespaces, iptables, mount); `available()` says whether this machine can.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def available() -> str | None:
    """None when namespaces, veths and iptables work here, else why not."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "iptables", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


class Host:
    """One network namespace with a veth into the bridge, named after its node."""

    def __init__(self, net: "Network", name: str, ip: str):
        self.net, self.name, self.ip = net, name, ip
        self.ns = f"{net.prefix}{name}"
        self.isolated = False

    def wrap(self, cmd: list[str]) -> list[str]:
        """`cmd` run inside this host (`ip netns exec` execs it: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.ns, *cmd]

    def _in(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run("ip", "netns", "exec", self.ns, *cmd, check=check)

    def isolate(self) -> None:
        """Every packet in or out of this host's veth dropped (loopback inside it still works)."""
        self._in("iptables", "-A", "INPUT", "-i", "eth0", "-j", "DROP")
        self._in("iptables", "-A", "OUTPUT", "-o", "eth0", "-j", "DROP")
        self.isolated = True

    def heal(self) -> None:
        self._in("iptables", "-F", check=False)
        self.isolated = False


class Network:
    """A bridge with a random /24 in 10.0.0.0/8 and hosts attached to it; see module docstring."""

    def __init__(self, prefix: str, subnet: str):
        self.prefix = prefix  # of every interface and namespace name (<= 15 characters in all)
        self.subnet = subnet  # "10.a.b"
        self.bridge = f"{prefix}br"
        self.gateway = f"{subnet}.1"
        self.hosts: dict[str, Host] = {}
        self._rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]

    @classmethod
    def create(cls) -> "Network":
        rng = random.Random()
        net = cls(f"kf{os.getpid() % 1000}{rng.randrange(100)}", f"10.{rng.randrange(100, 250)}.{rng.randrange(256)}")
        try:
            _run("ip", "link", "add", net.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{net.gateway}/24", "dev", net.bridge)
            _run("ip", "link", "set", net.bridge, "up")
            _run("iptables", "-I", *net._rule)
        except Exception:
            net.close()
            raise
        return net

    def add_host(self, name: str) -> Host:
        host = Host(self, name, f"{self.subnet}.{10 + len(self.hosts)}")
        veth = f"{self.prefix}{name}"[:15]
        _run("ip", "netns", "add", host.ns)
        self.hosts[name] = host
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.ns)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        host._in("ip", "addr", "add", f"{host.ip}/24", "dev", "eth0")
        host._in("ip", "link", "set", "eth0", "up")
        host._in("ip", "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        for host in self.hosts.values():
            _run("ip", "netns", "del", host.ns, check=False)  # its end of the veth pair goes with it
        _run("ip", "link", "del", self.bridge, check=False)
        _run("iptables", "-D", *self._rule, check=False)


class SmallDisk:
    """A tmpfs of `size_mb` at `path`, and a file that fills it."""

    def __init__(self, path: Path, size_mb: int):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(self.path))
        self.filler = self.path / "filler"

    def fill(self) -> None:
        """Writes until the disk is full (ENOSPC ends the write)."""
        block = b"\0" * (1 << 20)
        try:
            with open(self.filler, "wb") as f:
                while True:
                    f.write(block)
                    f.flush()
        except OSError:
            pass

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        _run("umount", "-l", str(self.path), check=False)
