"""Each node in its own Linux network namespace, joined by a veth pair to a bridge in the host namespace (root).

    with Network(3) as net:            # bridge + 3 namespaces, unique names for this run
        net.ip(1)                      # "10.<a>.<b>.1": node 1's address (the host is .254 on the bridge)
        net.exec_prefix(1)             # ["ip", "netns", "exec", "kf-<run>-1"]: run a process there
        net.partition([[1], [2, 3]])   # nftables drops between the groups (clients on the host still reach all)
        net.loss(2, 20)                # drop 20 % of node 2's packets at random (nftables numgen)
        net.duplicate(2, 10)           # send 10 % of node 2's packets twice (nftables dup)
        net.heal()                     # every rule gone

Names carry a random run id (``kf-<id>-<node>``, ``kf<id>b``, ``kf<id>h<node>``) so parallel runs never clash,
and a marker ``/run/klog-faults/<id>`` holds the owner's pid: :func:`remove_stale` deletes what runs that died
without cleaning up left behind. ``close()`` kills every process still in the namespaces, deletes them and the
bridge, and is called on every exit path (context manager, and ``atexit`` as a last resort).

``mount_disk`` gives a node a small filesystem of its own (a tmpfs named ``kf-<id>-disk<node>``, unmounted
with the rest), which :func:`fill_disk` fills to the last block for a full-disk fault.

Delay and reordering need the kernel's ``sch_netem``; :func:`netem_available` says whether this kernel has it (the
harness records a delay step it cannot apply as ``unsupported`` instead of pretending). Loss and duplication
work without it (nftables ``numgen`` and ``dup``).
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Network", "NetworkUnavailable", "netem_available", "remove_stale", "network_available", "fill_disk",
           "free_disk"]

MARKER_DIR = Path("/run/klog-faults")
NFT_TABLE = "klogfaults"
#: duplication needs nftables' ``dup``, which the ip family has and inet has not: a table of its own
NFT_DUP_TABLE = "klogfaultsdup"
#: at most this many nodes (addresses .1 to .MAX_NODES; the host is .254)
MAX_NODES = 9
#: the largest per-node filesystem (tmpfs: RAM, though only what is written)
MAX_DISK_MIB = 4096
#: the filler file of a full-disk fault, at the top of the node's filesystem
FILLER_NAME = "klog-faults-filler"
HOST_OCTET = 254


class NetworkUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no ``ip`` or ``nft``)."""


def _run(*cmd: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, input=input, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def network_available() -> str | None:
    """None if this process can build namespaces and nftables rules, else why not."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (bash tools/install-peers.sh installs nftables)"
    return None


_NETEM: bool | None = None


def netem_available() -> bool:
    """Whether ``tc qdisc ... netem`` works on this kernel (probed once on a throwaway veth pair)."""
    global _NETEM
    if _NETEM is None:
        name = f"kfp{secrets.token_hex(3)}"
        try:
            _run("ip", "link", "add", name, "type", "veth", "peer", "name", name + "x")
            _NETEM = _run("tc", "qdisc", "add", "dev", name, "root", "netem", "delay", "1ms",
                          check=False).returncode == 0
        except (RuntimeError, OSError):
            _NETEM = False
        finally:
            _run("ip", "link", "del", name, check=False)
    return _NETEM


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the namespaces and bridges of runs whose owner process is gone; returns their run ids."""
    removed: list[str] = []
    if not MARKER_DIR.is_dir():
        return removed
    for marker in MARKER_DIR.iterdir():
        try:
            pid = int(marker.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = -1
        if pid > 0 and _pid_alive(pid):
            continue
        run_id = marker.name
        _teardown(run_id, MAX_NODES)
        marker.unlink(missing_ok=True)
        removed.append(run_id)
    return removed


def _ns_name(run_id: str, node: int) -> str:
    return f"kf-{run_id}-{node}"


def _disk_name(run_id: str, node: int) -> str:
    return f"kf-{run_id}-disk{node}"


def _unmount_disks(run_id: str) -> None:
    """Unmount this run's small filesystems (lazily: a process of a dead run may still hold a file there)."""
    for line in Path("/proc/mounts").read_text().splitlines():
        source, target = line.split()[:2]
        if source.startswith(f"kf-{run_id}-disk"):
            target = target.replace("\\040", " ")
            if _run("umount", target, check=False).returncode != 0:
                _run("umount", "-l", target, check=False)


def _teardown(run_id: str, nodes: int) -> None:
    _unmount_disks(run_id)
    for node in range(1, nodes + 1):
        ns = _ns_name(run_id, node)
        # the host end first: a namespace's veth pairs otherwise vanish only when the kernel gets round to it
        _run("ip", "link", "del", f"kf{run_id}h{node}", check=False)
        if not Path(f"/run/netns/{ns}").exists():
            continue
        pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        _run("ip", "netns", "del", ns, check=False)
    _run("ip", "link", "del", f"kf{run_id}b", check=False)


def fill_disk(path: str | os.PathLike[str]) -> int:
    """Fill the filesystem holding ``path`` to the last block with a preallocated filler file (its size is
    returned); :func:`free_disk` removes it."""
    filler = Path(path) / FILLER_NAME
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = 0
        while True:  # what is free changes while the node writes: grow until nothing more fits
            st = os.statvfs(filler)
            free = st.f_bavail * st.f_frsize
            if free < st.f_frsize:
                return size
            try:
                os.posix_fallocate(fd, size, free)
                size += free
            except OSError:  # ENOSPC: less is free than statvfs said (the node wrote meanwhile); take one block
                try:
                    os.posix_fallocate(fd, size, st.f_frsize)
                    size += st.f_frsize
                except OSError:
                    return size
    finally:
        os.close(fd)


def free_disk(path: str | os.PathLike[str]) -> None:
    (Path(path) / FILLER_NAME).unlink(missing_ok=True)


class Network:
    def __init__(self, nodes: int) -> None:
        why = network_available()
        if why:
            raise NetworkUnavailable(why)
        assert 1 <= nodes <= MAX_NODES, nodes
        self.nodes = list(range(1, nodes + 1))
        self.run_id = secrets.token_hex(3)
        self.bridge = f"kf{self.run_id}b"
        self.subnet = self._free_subnet()
        self._closed = True
        self._rules: dict[int, list[str]] = {}
        self._netem: set[int] = set()
        self._duplicating: set[int] = set()

    @staticmethod
    def _free_subnet() -> ipaddress.IPv4Network:
        used = _run("ip", "-4", "route", "show", "table", "all", check=False).stdout
        for _ in range(100):
            net = ipaddress.IPv4Network(f"10.{secrets.randbelow(54) + 200}.{secrets.randbelow(256)}.0/24")
            if f"{net.network_address}/24" not in used:
                return net
        raise RuntimeError("no free 10.x.y.0/24 subnet found")

    def ip(self, node: int) -> str:
        return str(self.subnet.network_address + node)

    @property
    def host_ip(self) -> str:
        return str(self.subnet.network_address + HOST_OCTET)

    def namespace(self, node: int) -> str:
        return _ns_name(self.run_id, node)

    def exec_prefix(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(node)]

    # -- lifecycle -------------------------------------------------------------------------------------------
    def open(self) -> Network:
        remove_stale()
        MARKER_DIR.mkdir(parents=True, exist_ok=True)
        (MARKER_DIR / self.run_id).write_text(f"{os.getpid()}\n")
        self._closed = False
        atexit.register(self.close)
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for node in self.nodes:
                ns, host_end, ns_end = self.namespace(node), f"kf{self.run_id}h{node}", f"kf{self.run_id}n{node}"
                _run("ip", "netns", "add", ns)
                _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
                _run("ip", "link", "set", ns_end, "netns", ns)
                _run("ip", "link", "set", host_end, "master", self.bridge, "up")
                _run(*self.exec_prefix(node), "ip", "addr", "add", f"{self.ip(node)}/24", "dev", ns_end)
                _run(*self.exec_prefix(node), "ip", "link", "set", ns_end, "up")
                _run(*self.exec_prefix(node), "ip", "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _teardown(self.run_id, len(self.nodes))
        (MARKER_DIR / self.run_id).unlink(missing_ok=True)
        atexit.unregister(self.close)

    def __enter__(self) -> Network:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def leftovers(self) -> list[str]:
        """Namespaces, links or mounts of this run that still exist (empty after close())."""
        names = [self.namespace(n) for n in self.nodes if Path(f"/run/netns/{self.namespace(n)}").exists()]
        lines = _run("ip", "-o", "link", "show", check=False).stdout.splitlines()
        links = [line.split(":")[1].strip().split("@")[0] for line in lines if line.count(":") >= 2]
        mounts = [line.split()[0] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.startswith(f"kf-{self.run_id}-disk")]
        return names + [link for link in links if link.startswith(f"kf{self.run_id}")] + mounts

    # -- disks -----------------------------------------------------------------------------------------------
    def mount_disk(self, node: int, path: str | os.PathLike[str], size_mib: int) -> None:
        """Give ``node`` a filesystem of its own at ``path``: a ``size_mib`` tmpfs (unmounted by ``close()``),
        so filling it (:func:`fill_disk`) runs that node, and only it, out of space."""
        assert 1 <= size_mib <= MAX_DISK_MIB, size_mib
        Path(path).mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", _disk_name(self.run_id, node), str(path))

    # -- faults ----------------------------------------------------------------------------------------------
    def _apply(self, node: int) -> None:
        rules = self._rules.get(node, [])
        script = f"table inet {NFT_TABLE}\ndelete table inet {NFT_TABLE}\n"
        if rules:
            body = "\n".join(rules)
            script += (f"table inet {NFT_TABLE} {{\n chain input {{ type filter hook input priority 0; policy accept;\n"
                       f"{body.replace('ADDR', 'saddr')}\n }}\n chain output {{ type filter hook output priority 0;"
                       f" policy accept;\n{body.replace('ADDR', 'daddr')}\n }}\n}}\n")
        _run(*self.exec_prefix(node), "nft", "-f", "-", input=script)

    def partition(self, groups: Sequence[Sequence[int]]) -> None:
        """Drop every packet between nodes of different groups (both ways; the host reaches everyone)."""
        group_of = {n: i for i, g in enumerate(groups) for n in g}
        for node in self.nodes:
            others = [self.ip(o) for o in self.nodes if o != node and group_of.get(o) != group_of.get(node)]
            if others:
                self._rules.setdefault(node, []).append(f"  ip ADDR {{ {', '.join(others)} }} drop")
                self._apply(node)

    def cut(self, links: Sequence[Sequence[int]]) -> None:
        """Drop every packet on each of the node-to-node ``links`` (pairs), both ways."""
        for a, b in links:
            for here, there in ((a, b), (b, a)):
                self._rules.setdefault(here, []).append(f"  ip ADDR {self.ip(there)} drop")
        for node in {n for link in links for n in link}:
            self._apply(node)

    def isolate(self, node: int) -> None:
        self.partition([[node], [n for n in self.nodes if n != node]])

    def loss(self, node: int, percent: int) -> None:
        """Drop ``percent`` % of node's packets to and from its peers and the host, at random."""
        assert 0 < percent < 100, percent
        self._rules.setdefault(node, []).append(f"  ip ADDR {self.subnet} numgen random mod 100 < {percent} drop")
        self._apply(node)

    def duplicate(self, node: int, percent: int) -> None:
        """Send ``percent`` % of node's packets to its peers and the host twice (nftables ``dup``; netem's
        duplication without netem)."""
        assert 0 < percent < 100, percent
        script = (f"table ip {NFT_DUP_TABLE}\ndelete table ip {NFT_DUP_TABLE}\ntable ip {NFT_DUP_TABLE} {{\n"
                  f" chain output {{ type filter hook output priority 0; policy accept;\n"
                  f"  ip daddr {self.subnet} numgen random mod 100 < {percent} dup to ip daddr\n }}\n}}\n")
        _run(*self.exec_prefix(node), "nft", "-f", "-", input=script)
        self._duplicating.add(node)

    def delay(self, node: int, delay_ms: int) -> None:
        if not netem_available():
            raise NotImplementedError("this kernel has no sch_netem (CONFIG_NET_SCH_NETEM): delay is unsupported")
        _run(*self.exec_prefix(node), "tc", "qdisc", "add", "dev", f"kf{self.run_id}n{node}", "root", "netem",
             "delay", f"{delay_ms}ms")
        self._netem.add(node)

    def heal(self) -> None:
        for node in list(self._rules):
            self._rules[node] = []
            self._apply(node)
        self._rules.clear()
        for node in self._netem:
            _run(*self.exec_prefix(node), "tc", "qdisc", "del", "dev", f"kf{self.run_id}n{node}", "root", check=False)
        self._netem.clear()
        for node in self._duplicating:
            _run(*self.exec_prefix(node), "nft", "delete", "table", "ip", NFT_DUP_TABLE, check=False)
        self._duplicating.clear()
