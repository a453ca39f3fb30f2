"""`hindsight testbed`: emulated cluster nodes on one machine (docs/testbed.md).

Layout of a testbed NAME with N nodes (everything lives in namespaces the testbed creates, so the
machine's own interfaces, routes and `lo` are never touched)::

    netns NAME-br   bridge br0, ports p0..p{N-1}        (tbf on each port: traffic *to* node i)
    netns NAME-nI   eth0 = 10.77.0.(I+1)/24, lo up      (tbf on eth0: traffic *from* node i)
                    eth0 <-veth-> p{I} in NAME-br

Every veth is created directly inside its namespaces (`ip link add ... netns`), so nothing
appears in the root namespace even for a moment, and deleting a namespace deletes its devices.
The state file /run/hindsight-testbed-NAME.json is written *before* anything is created, so
`down` can remove a half-built testbed after a crash; `up` refuses to build over leftovers.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click

from hindsight.errors import UsageError, UserError

STATE_DIR = Path(os.environ.get("HINDSIGHT_TESTBED_STATE_DIR", "/run"))
DEFAULT_NAME = "hs"
DEFAULT_SUBNET = "10.77.0.0/24"
NODE_DEV = "eth0"          # the same name in every node, so one FI_TCP_IFACE fits all ranks
BRIDGE_DEV = "br0"
MARK = "hindsight-testbed"  # device alias: proves a namespace is ours when the state file is gone
MAX_NODES = 64
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$", re.IGNORECASE)
RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
#: tbf admits at most this much queueing delay before dropping (a switch port buffer)
TBF_LATENCY = "100ms"


class TestbedError(UserError):
    """A problem the user can fix (not root, bad flag, leftovers, testbed not up)."""


class TestbedFlagError(TestbedError, UsageError):
    """A flag's value the testbed cannot take (exit 2, as any usage error); a spec's testbed
    table that gives it is the spec's error (``validation.spec``)."""


# -- parsing -------------------------------------------------------------------------------------


def parse_rate(text: str) -> int:
    """'100mbit', '1gbit', '10gbit', '1.5gbit', '500kbit' -> bits per second."""
    m = RATE_RE.match(str(text).strip())
    if not m:
        raise TestbedFlagError(f"--rate {text!r}: expected a number and a unit kbit, mbit or "
                               "gbit (for example 100mbit, 1gbit, 10gbit)")
    bps = float(m.group(1)) * RATE_UNITS[m.group(2).lower()]
    if not 1e5 <= bps <= 1e11:
        raise TestbedFlagError(f"--rate {text!r}: must be between 100kbit and 100gbit")
    return int(bps)


def check_name(name: str, flag: str = "--name") -> str:
    """``name`` if a testbed can have it; else the error of ``flag``, the flag that gave it."""
    if not NAME_RE.match(name or ""):
        raise TestbedFlagError(f"{flag} {name!r}: 1-12 characters, lower-case letters and "
                               "digits, starting with a letter")
    return name


def check_nodes(nodes: int) -> int:
    if not isinstance(nodes, int) or not 2 <= nodes <= MAX_NODES:
        raise TestbedFlagError(f"--nodes must be between 2 and {MAX_NODES}, not {nodes}")
    return nodes


def bridge_ns(name: str) -> str:
    return f"{name}-br"


def node_ns(name: str, i: int) -> str:
    return f"{name}-n{i}"


def state_path(name: str) -> Path:
    return STATE_DIR / f"hindsight-testbed-{name}.json"


def tbf_args(rate_bps: int) -> list[str]:
    """tbf parameters; the bucket size (burst) is the compromise measured here (docs/testbed.md).

    A bucket refills while a ping-pong's reply travels the other way, so a message smaller than
    the bucket goes through at up to twice the rate: with 32 KiB at 100 Mbit/s, 4-32 KiB
    messages took 42 ns/B instead of 80. A bucket too small for the kernel's timer lateness loses
    tokens: 2 frames at 1 Gbit/s gave 15 ns/B for 16 MiB instead of 8. So: two full frames up to
    200 Mbit/s (one frame lasts >= 60 us there; 83.6 ns/B for 1 MiB at 100 Mbit/s), above that
    0.5 ms of traffic (8.1-8.4 ns/B at 1 Gbit/s), at most 128 KiB (8.4 Gbit/s at 10 Gbit/s).
    """
    if rate_bps <= 200_000_000:
        burst = 2 * 1514
    else:
        burst = min(max(2 * 1514, rate_bps // 8 // 2000), 128 * 1024)
    return ["tbf", "rate", f"{rate_bps}bit", "burst", str(burst), "latency", TBF_LATENCY]


# -- running ip / tc -----------------------------------------------------------------------------


def require_tools() -> None:
    """Root and iproute2, or one clear error."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, veth and tc); "
                           "run as root, e.g. with sudo")
    missing = [t for t in ("ip", "tc") if not _tool(t)]
    if missing:
        raise TestbedError(f"the testbed needs iproute2: {', '.join(missing)} not found "
                           "(apt-get install iproute2)")


def _tool(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}")
                                       if os.access(p, os.X_OK)), None)


def _run(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """One ip/tc call with an argument list (never a shell string)."""
    exe = _tool(args[0]) or args[0]
    r = subprocess.run([exe] + args[1:], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise TestbedError(f"{' '.join(args)}: {(r.stderr or r.stdout).strip() or 'failed'}")
    return r


def list_netns() -> list[str]:
    r = _run(["ip", "-j", "netns", "list"], check=False)
    try:
        return [d["name"] for d in json.loads(r.stdout or "[]")]
    except (ValueError, KeyError, TypeError):
        return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _links(ns: str) -> list[dict]:
    r = _run(["ip", "-n", ns, "-j", "link", "show"], check=False)
    try:
        return json.loads(r.stdout or "[]")
    except ValueError:
        return []


def _ours(ns: str, name: str) -> bool:
    """A namespace named like ours is ours if its devices carry our alias, or it has no device
    but lo (`up` crashed between `ip netns add` and the first veth)."""
    links = [d for d in _links(ns) if d.get("ifname") != "lo"]
    return not links or any(d.get("ifalias") == f"{MARK} {name}" for d in links)


def leftovers(name: str) -> list[str]:
    """Namespaces of testbed NAME that exist now (with or without a state file)."""
    pat = re.compile(rf"^{re.escape(name)}-(br|n\d+)$")
    return sorted(ns for ns in list_netns() if pat.match(ns))


def read_state(name: str) -> dict[str, Any] | None:
    p = state_path(name)
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except ValueError:
        return {"name": name, "status": "unreadable", "namespaces": []}


def _write_state(state: dict[str, Any]) -> None:
    p = state_path(state["name"])
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, p)


def _check_subnet(subnet: str, nodes: int) -> ipaddress.IPv4Network:
    try:
        net = ipaddress.IPv4Network(subnet, strict=True)
    except ValueError as exc:
        raise TestbedFlagError(f"--subnet {subnet!r}: {exc}") from None
    if not net.is_private:
        raise TestbedFlagError(f"--subnet {subnet}: use a private range (10/8, 172.16/12, "
                               "192.168/16)")
    if net.num_addresses - 2 < nodes:
        raise TestbedFlagError(f"--subnet {subnet}: too small for {nodes} nodes")
    # The testbed's addresses live only inside its namespaces, but an overlap with the machine's
    # own networks would make addresses in traces and logs ambiguous: refuse it.
    for args in (["ip", "-j", "addr", "show"], ["ip", "-j", "route", "show"]):
        r = _run(args, check=False)
        try:
            rows = json.loads(r.stdout or "[]")
        except ValueError:
            continue
        for row in rows:
            cands = [f"{a['local']}/{a.get('prefixlen', 32)}" for a in row.get("addr_info", [])
                     if a.get("family") == "inet"]
            if row.get("dst") and row["dst"] != "default":
                cands.append(row["dst"] if "/" in row["dst"] else row["dst"] + "/32")
            for c in cands:
                try:
                    if ipaddress.IPv4Network(c, strict=False).overlaps(net):
                        raise TestbedError(f"--subnet {subnet} overlaps {c} on this machine; "
                                           "choose another with --subnet")
                except ValueError:
                    continue
    return net


# -- up / down / status --------------------------------------------------------------------------


def up(name: str = DEFAULT_NAME, nodes: int = 2, rate: str = "1gbit",
       subnet: str = DEFAULT_SUBNET) -> dict[str, Any]:
    """Create the testbed; returns its state. On any failure everything created is removed."""
    check_name(name)
    check_nodes(nodes)
    rate_bps = parse_rate(rate)
    require_tools()
    old = leftovers(name)
    if state_path(name).exists() or old:
        raise TestbedError(f"testbed {name} already exists or an earlier run left "
                           f"{', '.join(old) or state_path(name)} behind: run "
                           f"`hindsight testbed down --name {name}` first")
    net = _check_subnet(subnet, nodes)
    hosts = list(net.hosts())
    state = {
        "name": name, "status": "creating", "nodes": nodes, "rate": rate.lower(),
        "rate_bps": rate_bps, "subnet": str(net), "bridge_ns": bridge_ns(name),
        "interface": NODE_DEV, "tbf": tbf_args(rate_bps),
        "node": [{"ns": node_ns(name, i), "addr": str(hosts[i]), "dev": NODE_DEV,
                  "bridge_port": f"p{i}"} for i in range(nodes)],
        "namespaces": [bridge_ns(name)] + [node_ns(name, i) for i in range(nodes)],
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "creator_pid": os.getpid(),
    }
    _write_state(state)             # first, so that `down` finds a half-built testbed
    try:
        _build(state, net.prefixlen)
    except BaseException:
        down(name)
        raise
    state["status"] = "up"
    _write_state(state)
    return state


def _build(state: dict[str, Any], prefix: int) -> None:
    name, br = state["name"], state["bridge_ns"]
    alias = f"{MARK} {name}"
    _run(["ip", "netns", "add", br])
    _run(["ip", "-n", br, "link", "add", BRIDGE_DEV, "type", "bridge"])
    _run(["ip", "-n", br, "link", "set", BRIDGE_DEV, "alias", alias])
    _run(["ip", "-n", br, "link", "set", BRIDGE_DEV, "up"])
    for node in state["node"]:
        ns, port = node["ns"], node["bridge_port"]
        _run(["ip", "netns", "add", ns])
        # Both ends are born in their namespaces: nothing appears in the root namespace.
        _run(["ip", "link", "add", "name", NODE_DEV, "netns", ns, "type", "veth",
              "peer", "name", port, "netns", br])
        _run(["ip", "-n", ns, "link", "set", NODE_DEV, "alias", alias])
        _run(["ip", "-n", br, "link", "set", port, "alias", alias])
        _run(["ip", "-n", br, "link", "set", port, "master", BRIDGE_DEV])
        _run(["ip", "-n", ns, "addr", "add", f"{node['addr']}/{prefix}", "dev", NODE_DEV])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(["ip", "-n", ns, "link", "set", NODE_DEV, "up"])
        _run(["ip", "-n", br, "link", "set", port, "up"])
        # Rate-limit both directions: egress of the node's end (node -> switch) and egress of
        # the switch port (switch -> node), like a full-duplex link of that rate.
        _run(["tc", "-n", ns, "qdisc", "replace", "dev", NODE_DEV, "root"] + state["tbf"])
        _run(["tc", "-n", br, "qdisc", "replace", "dev", port, "root"] + state["tbf"])


def down(name: str = DEFAULT_NAME) -> list[str]:
    """Remove testbed NAME (idempotent). Returns the namespaces deleted."""
    check_name(name)
    require_tools()
    state = read_state(name)
    present = set(list_netns())
    listed = set(state.get("namespaces", [])) if state else set()
    # Without a readable state file, only namespaces that prove to be ours are deleted.
    found = {ns for ns in leftovers(name) if ns in listed or _ours(ns, name)}
    gone = []
    for ns in sorted((listed & present) | found):
        # Deleting the namespace deletes its veth ends and qdiscs with it.
        _run(["ip", "netns", "del", ns])
        gone.append(ns)
    state_path(name).unlink(missing_ok=True)
    return gone


def iface_bytes(ns: str, dev: str = NODE_DEV) -> dict[str, int]:
    """The kernel's byte counters of a device in a namespace (tx, rx)."""
    r = _run(["ip", "-n", ns, "-j", "-s", "link", "show", "dev", dev])
    s = json.loads(r.stdout)[0]["stats64"]
    return {"tx": int(s["tx"]["bytes"]), "rx": int(s["rx"]["bytes"])}


def qdisc_bytes(ns: str, dev: str = NODE_DEV) -> int:
    """Bytes the tbf qdisc of a device sent (proves the traffic went through the shaper)."""
    r = _run(["tc", "-n", ns, "-j", "-s", "qdisc", "show", "dev", dev])
    return sum(int(q.get("bytes", 0)) for q in json.loads(r.stdout or "[]") if q.get("kind") == "tbf")


def status(name: str = DEFAULT_NAME) -> dict[str, Any]:
    """State file + what exists now; 'up' only if every namespace and qdisc is in place."""
    check_name(name)
    require_tools()
    state = read_state(name)
    present = leftovers(name)
    if state is None:
        return {"name": name, "status": "leftovers" if present else "down", "present": present}
    missing = [ns for ns in state.get("namespaces", []) if ns not in present]
    out = dict(state, present=present, missing=missing)
    if state.get("status") != "up" or missing:
        out["status"] = "broken" if present else "down (stale state file)"
        return out
    out["counters"] = {n["ns"]: iface_bytes(n["ns"]) for n in state["node"]}
    return out


def require_up(name: str) -> dict[str, Any]:
    """The state of a testbed that is up, for `collect`/`calibrate --testbed` (the flag a bad
    name is said as)."""
    check_name(name, "--testbed")
    require_tools()
    st = status(name)
    if st["status"] != "up":
        raise TestbedError(f"testbed {name} is not up ({st['status']}): run "
                           f"`hindsight testbed up --name {name} --nodes N --rate R`")
    return st


# -- launching ranks inside the nodes ------------------------------------------------------------

#: MPI over TCP through the node's eth0: no shared memory between ranks (NOLOCAL), libfabric's
#: tcp provider bound to the testbed interface (its address is what the peers connect to).
TESTBED_ENV = {"MPIR_CVAR_NOLOCAL": "1", "FI_PROVIDER": "tcp", "MPIR_CVAR_CH4_NETMOD": "ofi",
               "FI_TCP_IFACE": NODE_DEV}


def node_of_rank(nprocs: int, nodes: int, placement: str = "block") -> list[int]:
    """block: ranks 0..k-1 on node 0, ... (k = ceil(P/N)); cyclic: rank r on node r mod N."""
    if placement == "cyclic":
        return [r % nodes for r in range(nprocs)]
    if placement != "block":
        raise TestbedError(f"placement must be block or cyclic, not {placement!r}")
    per = math.ceil(nprocs / nodes)
    return [r // per for r in range(nprocs)]


def mpmd_command(launcher: list[str], program: list[str], state: dict[str, Any], nprocs: int,
                 placement: str = "block") -> list[str]:
    """An mpiexec MPMD line with one segment per rank: `-n 1 ip netns exec NAME-nK PROGRAM`.
    `ip netns exec` switches the network namespace and then execs the program, so the rank keeps
    the PMI socket hydra's proxy handed it (PMI_FD): the PMI wire-up needs no network, and every
    MPI byte goes through the node's veth.

    The ranks keep the machine's host name (no HINDSIGHT_HOSTNAME): all nodes read one clock, so
    the clock offsets are exactly 0, whereas per-host alignment would measure them with 32 round
    trips after the run's epoch; on this loaded 2-core machine those took up to 250 ms of the
    traces' lead-in, which a prediction for another network then carried along. The placement
    is in the manifest's ``network`` (``node_of_rank``) and in HINDSIGHT_TESTBED_NODE."""
    ip = _tool("ip") or "ip"
    where = node_of_rank(nprocs, state["nodes"], placement)
    cmd = list(launcher)
    for r in range(nprocs):
        node = state["node"][where[r]]
        if r:
            cmd.append(":")
        cmd += ["-n", "1", "-env", "HINDSIGHT_TESTBED_NODE", str(where[r]),
                ip, "netns", "exec", node["ns"]] + list(program)
    return cmd


def network_record(state: dict[str, Any], nprocs: int, placement: str = "block") -> dict:
    """What the manifest / profile says about the network of a testbed run."""
    where = node_of_rank(nprocs, state["nodes"], placement)
    return {"transport": "tcp", "testbed": state["name"], "rate": state["rate"],
            "rate_bps": state["rate_bps"], "nodes": state["nodes"], "placement": placement,
            "node_of_rank": where,
            "ranks_per_node": [where.count(i) for i in range(state["nodes"])],
            "interface": state["interface"], "subnet": state["subnet"],
            "addresses": [n["addr"] for n in state["node"]], "env": dict(TESTBED_ENV)}


def counters(state: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {n["ns"]: iface_bytes(n["ns"]) for n in state["node"]}


def counters_delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    return {ns: {k: after[ns][k] - before[ns][k] for k in after[ns]} for ns in after}


# -- the click group -----------------------------------------------------------------------------


_name_opt = click.option("--name", default=DEFAULT_NAME, show_default=True,
                         help="testbed name (namespaces NAME-br, NAME-n0, ...)")


@click.group("testbed")
def testbed_cmd() -> None:
    """Emulated cluster nodes: network namespaces, veth links, tbf rate limits (root only)."""


@testbed_cmd.command("up")
@click.option("--nodes", type=int, default=2, show_default=True, help="number of nodes N")
@click.option("--rate", default="1gbit", show_default=True,
              help="link rate of every node, both directions (100mbit, 1gbit, 10gbit)")
@click.option("--subnet", default=DEFAULT_SUBNET, show_default=True,
              help="private IPv4 subnet of the node addresses")
@_name_opt
def up_cmd(nodes: int, rate: str, subnet: str, name: str) -> None:
    """Create N nodes joined by a rate-limited bridge."""
    st = up(name, nodes, rate, subnet)
    click.echo(f"testbed {name} up: {nodes} nodes at {st['rate']} "
               f"({', '.join(n['ns'] + '=' + n['addr'] for n in st['node'])}); "
               f"state {state_path(name)}")


@testbed_cmd.command("down")
@_name_opt
def down_cmd(name: str) -> None:
    """Remove the testbed (safe to repeat; also cleans up after a crash)."""
    gone = down(name)
    click.echo(f"testbed {name} down" + (f": removed {', '.join(gone)}" if gone
                                         else " (nothing to remove)"))


@testbed_cmd.command("status")
@_name_opt
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def status_cmd(name: str, as_json: bool) -> None:
    """Show whether the testbed is up, its nodes and their byte counters."""
    st = status(name)
    if as_json:
        click.echo(json.dumps(st, indent=1))
        return
    click.echo(f"testbed {name}: {st['status']}")
    for n in st.get("node", []):
        c = st.get("counters", {}).get(n["ns"])
        click.echo(f"  {n['ns']}: {n['addr']} on {n['dev']}, {st['rate']}"
                   + (f", tx {c['tx']} B, rx {c['rx']} B" if c else ""))
    if st.get("missing"):
        click.echo(f"  missing: {', '.join(st['missing'])}")
    if st["status"] == "leftovers":
        click.echo(f"  leftovers without state file: {', '.join(st['present'])} "
                   f"(`hindsight testbed down --name {name}` removes them)")
