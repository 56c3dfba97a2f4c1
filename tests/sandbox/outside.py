"""A network namespace of the test's own that stands for "this machine" and its network.

`run_outside(argv)` runs a command in a new user and network namespace with `lo` up and one more
interface, `tk0`, holding `OUTER_ADDRESS`: an address of this (stand-in) machine that is not
loopback, where the tests listen for what must never arrive, and the IPv4 addresses of the real
machine's DNS servers (from /etc/resolv.conf), where a fake DNS server listens for lookups. The
namespace has no route anywhere else, so whatever a broken `--offline` let through still never
leaves the real machine. `trialkit run --offline` inside makes its own namespace in this one.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

import pytest

OUTER_ADDRESS = "198.18.0.1"
"""In RFC 2544's benchmarking range: on `tk0` of the outer namespace only."""
ROOT = Path(__file__).resolve().parents[2]


def nameservers() -> list[str]:
    """The IPv4 DNS servers this machine's C library asks (put on `tk0` outside)."""
    try:
        lines = Path("/etc/resolv.conf").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            try:
                address = ipaddress.ip_address(fields[1])
            except ValueError:
                continue
            if address.version == 4 and not address.is_loopback:
                found.append(str(address))
    return found


def _setup() -> str:
    steps = [
        "ip link set lo up",
        "(ip link add tk0 type dummy 2>/dev/null || ip link add tk0 type ifb)",
        f"ip addr add {OUTER_ADDRESS}/24 dev tk0",
        *(f"ip addr add {address}/32 dev tk0" for address in nameservers()),
        "ip link set tk0 up",
    ]
    return " && ".join(steps)


def outer_prefix() -> list[str]:
    """The command prefix that runs a command in the outer namespace (skips when impossible)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("unshare and ip (util-linux, iproute2) are needed for a test namespace")
    prefix = ["unshare", "--user", "--map-root-user", "--net", "sh", "-c"]
    probe = subprocess.run(
        [*prefix, _setup()], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot make a test network namespace here: {probe.stderr.strip()}")
    return [*prefix, _setup() + ' && exec "$@"', "sh"]


def run_outside(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run `argv` in the outer namespace, from the repository's root, its output as text."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*outer_prefix(), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )
