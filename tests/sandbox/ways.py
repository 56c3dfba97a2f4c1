"""The ways out `probe_suite.py` tries, and what a trial shows for each (kept apart from the
suite, whose import starts a thread)."""

from __future__ import annotations

BANNER = "hello from the loopback service"

CLOSED_AT_THE_KERNEL = {
    "curl": "curl exit 7",
    "python_child": "Network is unreachable",
    "udp_child": "Network is unreachable",
    "os_system": "system exit 7",
    "ctypes_connect": "errno 101",
    "dns_child": "getent exit 2",
    "no_route": "interfaces: lo; routes: 0",
}
"""Ways out a trialkit namespace closes, and what the agent then sees."""
REACHABLE = {"loopback_python": BANNER, "loopback_curl": BANNER, "late_python": BANNER}
"""This machine's loopback services, reached through the bridge (`late_python`: a service
that starts listening once the run is under way, so after the namespace was entered)."""
