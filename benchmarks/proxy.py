"""The model proxy's added latency per call: a command-line agent's calls, through it and not.

A command-line agent (Claude Code, Codex) is a process of its own, and the model proxy
(`trialkit/capture/proxy.py`) lives in trialkit's process; so three processes here, on
loopback:

- **the fake upstream**: `tests/fakes/provider_server.py` (`main()`), answering Anthropic
  Messages after L (`--latency`, 0 by default, so that the proxy's cost shows), echoing the
  last user message; streamed (`"stream": true`, as Claude Code always asks) or plain;
- **the proxy**: a small driver (this file, `--child proxy`) starts a `ModelProxy`, opens one
  trial (`TranscriptRecorder`, default `ModelSettings`: capture on, no cassette) with the fake
  upstream as its Anthropic upstream, and serves. It takes commands on its stdin: between two
  batches the client asks it for its CPU time (`resource.getrusage`, user + system) and for
  the calls the trial's transcript holds (every proxied call must be there), and a new trial
  is opened for the next batch. gc thresholds are a trialkit run's (`trialkit/_gc.py`);
- **the client** (`--child client`), standing in for the agent: C (`--concurrency`, 10)
  tasks sharing a counter, each posting `/v1/messages` with raw `httpx` (one
  `AsyncClient`, keep-alive, as an agent's SDK does; `--sdk` uses `anthropic.AsyncAnthropic`,
  `max_retries=0`, whose own CPU then crowds the two cores more) and reading the whole answer.
  A call's latency is from the request's start to the answer's last byte.

The client takes turns, a batch of calls at a time: **direct** (to the fake upstream's URL)
and **proxy** (to the trial's `anthropic_base_url`), AB then BA, `--batches` of each after a
warm-up batch of each, so that the machine's drift (tens of percent over seconds on a shared
virtual machine) falls on both alike. Each batch starts a new `httpx` client. Reported for
each: per-call latency p50 / p95 / mean over all its calls, calls per second (the median
batch), the client's CPU per call, and the proxy process's CPU per call; and the added
latency: the median over the turns of the difference proxy − direct in each batch's p50 and
mean. The issue's target: the proxy adds at most 1 ms per call at C = 10.

Two request bodies: **small** (a short system prompt, one tool, one user message: ~1 KB) and
**large** (~115 KB, what Claude Code sends: a 26 KB system prompt, 24 tool definitions and
some conversation), each streamed and plain.

The parent measures the CPU other processes took during each client child (less the fake
upstream's and the children's own) and runs a child again (at most `--retries` times) while
it was over `--busy` cores; a child with no quiet attempt is marked `*`. Every child has a
time limit, every loop a count, the driver ends when its stdin closes, and the servers are
always stopped. `--profile FILE` runs cProfile on the proxy's thread and writes its stats.

    python benchmarks/proxy.py                    # both bodies, streamed and plain, L = 0
    python benchmarks/proxy.py --latency 0.05     # a 50 ms model
    python benchmarks/proxy.py --body large --no-plain --profile /tmp/proxy.prof
    python benchmarks/proxy.py --quick            # a smoke run, about half a minute

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import select
import statistics
import subprocess
import sys
import time
from typing import Any

from capture_cpu import _mark, add_shared_options, banner, run_child  # this folder
from latency import fake_server  # this folder

MODEL = "claude-sonnet-4-5"
KINDS = ("direct", "proxy")
TOKEN = b"tok-000000"
"""Where each call's own token goes in the body (the fake upstream echoes it back)."""
DELTA = re.compile(rb'"text_delta", "text": "([^"]*)"')
STOP = b'data: {"type": "message_stop"}\n\n'
DRIVER_START_TIMEOUT = 30.0  # seconds for the driver to print its base URL
DRIVER_REPLY_TIMEOUT = 15.0  # seconds for an answer to a command (it waits for settle())
DRIVER_LIFETIME = 600.0  # the driver stops by itself after this, whatever happens
CALL_TIMEOUT = 30.0

# --- the request bodies -----------------------------------------------------------------------


def _tool(i: int, large: bool) -> dict[str, Any]:
    words = "Use this tool when the task needs it; read its parameters carefully. " * 20
    properties = {
        f"param_{j}": {
            "type": "string" if j % 3 else "integer",
            "description": f"Parameter {j} of tool {i}. " + ("It matters. " * 12 if large else ""),
        }
        for j in range(8 if large else 2)
    }
    return {
        "name": f"tool_{i:02d}",
        "description": f"Tool {i}. " + (words if large else "Does one thing."),
        "input_schema": {"type": "object", "properties": properties, "required": ["param_1"]},
    }


def request_body(size: str, stream: bool) -> bytes:
    """A Messages request whose last user message holds `TOKEN`: small (~1 KB) or large
    (~115 KB: a 26 KB system prompt, 24 tools, a conversation padded to the size)."""
    large = size == "large"
    system = ("You are a coding agent. Follow the instructions and the tools' rules. " * 370)[
        : 26_000 if large else 60
    ]
    tools = [_tool(i, large) for i in range(24 if large else 1)]
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 1024,
        "system": [{"type": "text", "text": system}],
        "tools": tools,
        "messages": [],
        "stream": stream,
    }
    if large:
        turn = "Read the file and tell me what the function does, line by line. " * 30
        while len(json.dumps(body)) < 112_000:
            body["messages"] += [
                {"role": "user", "content": turn},
                {"role": "assistant", "content": [{"type": "text", "text": turn}]},
            ]
    body["messages"].append({"role": "user", "content": TOKEN.decode()})
    return json.dumps(body).encode()


# --- the proxy driver -------------------------------------------------------------------------


def drive_proxy(upstream: str, profile: str | None) -> None:
    """Serve one trial at a time; commands on stdin, answers (JSON lines) on stdout."""
    import cProfile

    from trialkit._gc import fewer_collections
    from trialkit.capture.proxy import ModelProxy
    from trialkit.models.context import ModelSettings
    from trialkit.transcript import TranscriptRecorder

    def cpu_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    upstreams = {"anthropic": upstream, "openai": upstream + "/v1"}
    profiler = cProfile.Profile(time.thread_time) if profile else None  # CPU, not wall
    proxy = ModelProxy().start()
    trial = None
    deadline = time.monotonic() + DRIVER_LIFETIME
    try:
        with fewer_collections():
            if profiler is not None:
                assert proxy._loop is not None
                proxy._loop.call_soon_threadsafe(profiler.enable)  # on the proxy's thread
            number = 0
            while time.monotonic() < deadline:
                ready, _, _ = select.select([sys.stdin], [], [], 1.0)
                if not ready:
                    continue
                line = sys.stdin.readline()
                if not line or line.strip() == "stop":  # EOF: the client is gone
                    break
                calls = 0
                if trial is not None:
                    settled = trial.settle(DRIVER_REPLY_TIMEOUT)
                    calls = len(trial.recorder.transcript.model_calls) if settled else -1
                    trial.close()
                recorder = TranscriptRecorder("task", number)
                trial = proxy.open_trial(recorder, ModelSettings(), upstreams)
                number += 1
                answer = {"url": trial.anthropic_base_url, "calls": calls, "cpu_s": cpu_s()}
                print(json.dumps(answer), flush=True)
            if profiler is not None and proxy._loop is not None:
                proxy._loop.call_soon_threadsafe(profiler.disable)
                time.sleep(0.2)  # the call above runs on the proxy's thread
                profiler.dump_stats(profile)  # type: ignore[arg-type]
    finally:
        proxy.stop()


class Driver:
    """The client's handle on the proxy driver, a child process of the client's."""

    def __init__(self, upstream: str, profile: str | None) -> None:
        command = [sys.executable, __file__, "--child", "proxy", "--url", upstream]
        command += ["--profile", profile] if profile else []
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def next_trial(self, timeout: float) -> dict[str, Any]:
        """The CPU the driver has used, the calls of the trial just ended, a new trial's URL."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("next\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            raise RuntimeError(f"the proxy driver did not answer (exit code {self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
                self.proc.wait(15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


# --- the client ---------------------------------------------------------------------------------


async def _batch(url: str, calls: int, concurrency: int, body: bytes, sdk: bool) -> list[float]:
    """`calls` calls, `concurrency` at a time, on a new client; each call's seconds."""
    import anyio
    import httpx

    stream = b'"stream": true' in body
    request = json.loads(body) if sdk else None
    latencies: list[float] = []
    state = {"next": 0, "wrong": 0}
    headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}
    headers["content-type"] = "application/json"
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    if sdk:
        from anthropic import AsyncAnthropic

        client: Any = AsyncAnthropic(
            base_url=url, api_key="sk-bench", max_retries=0, timeout=CALL_TIMEOUT
        )
    else:
        client = httpx.AsyncClient(base_url=url, timeout=CALL_TIMEOUT, limits=limits)

    async def one(i: int) -> bool:
        token = b"tok-%06d" % i
        if request is not None:
            fields = {**request, "messages": [*request["messages"][:-1]]}
            fields["messages"].append({"role": "user", "content": token.decode()})
            if stream:
                text = []
                async with await client.messages.create(**fields) as events:
                    async for event in events:
                        if event.type == "content_block_delta":
                            text.append(event.delta.text)
                return "".join(text) == token.decode()
            message = await client.messages.create(**fields)
            return bool(message.content[0].text == token.decode())
        content = body.replace(TOKEN, token)
        async with client.stream("POST", "/v1/messages", content=content, headers=headers) as r:
            answer = await r.aread()
        if stream:  # the text comes in pieces, one delta each
            answer = b"".join(DELTA.findall(answer)) if answer.endswith(STOP) else b""
        return r.status_code == 200 and token in answer

    async def caller() -> None:
        while state["next"] < calls:  # bounded by the count (and the child's time limit)
            i = state["next"]
            state["next"] += 1
            started = time.perf_counter()
            right = await one(i)
            latencies.append(time.perf_counter() - started)
            state["wrong"] += not right

    try:
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(caller)
    finally:
        if sdk:
            await client.close()
        else:
            await client.aclose()
    assert state["wrong"] == 0, f"{state['wrong']} answers were not the echo"
    return latencies


def _stats(latencies: list[float], seconds: float) -> dict[str, float]:
    ms = sorted(1000 * x for x in latencies)
    return {
        "p50": statistics.median(ms),
        "p95": ms[min(len(ms) - 1, int(0.95 * len(ms)))],
        "mean": statistics.fmean(ms),
        "per_s": len(ms) / seconds,
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The client child: direct and proxy batches taking turns; one JSON row."""
    import anyio

    body = request_body(args.body, args.stream)
    calls, batches = args.calls // args.batches, args.batches
    driver = Driver(args.url, args.profile)
    found: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    pooled: dict[str, list[float]] = {kind: [] for kind in KINDS}
    try:
        trial = driver.next_trial(DRIVER_START_TIMEOUT)

        def run(kind: str, size: int) -> dict[str, float]:
            nonlocal trial
            url = trial["url"] if kind == "proxy" else args.url
            own = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            latencies = anyio.run(_batch, url, size, args.concurrency, body, args.sdk)
            seconds = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            row = _stats(latencies, seconds)
            row["client_cpu_ms"] = (
                1000 * (after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime) / size
            )
            if kind == "proxy":
                ended = driver.next_trial(DRIVER_REPLY_TIMEOUT)
                if ended["calls"] != size:
                    raise AssertionError(f"{size} calls proxied, {ended['calls']} captured")
                row["proxy_cpu_ms"] = 1000 * (ended["cpu_s"] - trial["cpu_s"]) / size
                trial = ended
            pooled[kind] += latencies
            return row

        for kind in KINDS:  # warm-up: imports, connections, the proxy's first trial
            run(kind, max(calls // 2, args.concurrency))
        for turn in range(batches):
            for kind in KINDS if turn % 2 == 0 else KINDS[::-1]:
                found[kind].append(run(kind, calls))
    finally:
        driver.stop()
    row: dict[str, Any] = {"calls": calls * batches, "batches": batches}
    for kind in KINDS:
        row[kind] = _stats(pooled[kind][-calls * batches :], 1.0)
        row[kind]["per_s"] = statistics.median(b["per_s"] for b in found[kind])
        row[kind]["client_cpu_ms"] = statistics.median(b["client_cpu_ms"] for b in found[kind])
    row["proxy"]["proxy_cpu_ms"] = statistics.median(b["proxy_cpu_ms"] for b in found["proxy"])
    for stat in ("p50", "mean"):
        diffs = [p[stat] - d[stat] for p, d in zip(found["proxy"], found["direct"], strict=True)]
        row[f"added_{stat}"] = statistics.median(diffs)
        row[f"added_{stat}_range"] = [min(diffs), max(diffs)]
    return row


# --- the parent ---------------------------------------------------------------------------------


def _print(case: str, row: dict[str, Any]) -> None:
    direct, proxy = row["direct"], row["proxy"]
    for kind, cells in (("direct", direct), ("proxy", proxy)):
        cpu = f"{cells['proxy_cpu_ms']:>8.3f}" if "proxy_cpu_ms" in cells else f"{'':>8}"
        print(
            f"{case if kind == 'direct' else '':>16}{_mark(row) if kind == 'direct' else '':1} "
            f"{kind:>6} {cells['p50']:>7.2f} {cells['p95']:>7.2f} {cells['mean']:>7.2f} "
            f"{cells['per_s']:>8.0f} {cells['client_cpu_ms']:>9.3f} {cpu}"
        )
    low, high = row["added_p50_range"]
    print(
        f"{'':>17} {'added':>6} {row['added_p50']:>+7.2f} {'':>7} {row['added_mean']:>+7.2f}"
        f"   (p50 per turn: {low:+.2f} to {high:+.2f} ms; target: at most +1 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, help="calls of each kind per case (600)")
    parser.add_argument("--batches", type=int, help="batches of each kind per case (6)")
    parser.add_argument("--body", choices=["small", "large", "both"], default="both")
    parser.add_argument("--no-plain", action="store_true", help="streamed answers only")
    parser.add_argument("--no-stream", action="store_true", help="plain answers only")
    parser.add_argument("--sdk", action="store_true", help="the anthropic SDK as the client")
    parser.add_argument("--quick", action="store_true", help="a smoke run (about half a minute)")
    parser.add_argument("--profile", help="cProfile the proxy's thread into this file")
    parser.add_argument("--stream", action="store_true", help=argparse.SUPPRESS)
    add_shared_options(parser)
    parser.set_defaults(concurrency=10, latency=0.0)
    args = parser.parse_args()
    if args.child == "proxy":
        drive_proxy(args.url, args.profile)
        return
    if args.child == "client":
        print(json.dumps(measure(args)))
        return
    calls, batches = (200, 2) if args.quick else (600, 6)
    if args.quick:
        args.retries = 0
    calls, batches = args.calls or calls, args.batches or batches
    if calls < batches * args.concurrency:
        parser.error("--calls: at least --batches x --concurrency")
    bodies = ["small", "large"] if args.body == "both" else [args.body]
    streams = [s for s in (True, False) if not (args.no_plain if not s else args.no_stream)]
    banner()
    print(
        f"per-call latency at C = {args.concurrency}, fake upstream L = {args.latency * 1000:g} ms "
        f"(own process), client {'anthropic SDK' if args.sdk else 'raw httpx'} (own process), "
        f"proxy in a third; {batches} batches of {calls // batches} calls of each kind, taking "
        "turns, after a warm-up; times in ms"
    )
    print(
        f"{'':>17} {'':>6} {'p50':>7} {'p95':>7} {'mean':>7} {'calls/s':>8} {'client CPU':>9} "
        f"{'proxy CPU':>8}"
    )
    others: list[float] = []
    with fake_server(args.latency) as (url, pid):
        for body in bodies:
            for stream in streams:
                command = [__file__, "--child", "client", "--url", url, "--body", body]
                command += ["--calls", str(calls), "--batches", str(batches)]
                command += ["--concurrency", str(args.concurrency)]
                command += ["--stream"] if stream else []
                command += ["--sdk"] if args.sdk else []
                if args.profile:
                    command += ["--profile", f"{args.profile}.{body}-{int(stream)}"]
                case = f"{body}, {'streamed' if stream else 'plain'}"
                row = run_child(args, case, command, pid)
                others.append(row["others_cores"])
                _print(case, row)
    print(f"other work on the machine: {min(others):.2f}-{max(others):.2f} cores")
    print(f"(* = other work on the machine took more than {args.busy:g} cores during that run)")


if __name__ == "__main__":
    main()
