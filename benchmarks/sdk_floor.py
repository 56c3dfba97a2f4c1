"""The CPU floor of one model call through the `openai` SDK, with no network at all.

`benchmarks/latency.py` measures calls against a fake server on loopback, so its CPU per call
includes HTTP, sockets and the server. This benchmark takes all of that away: the SDK gets an
in-memory transport (`openai.AsyncOpenAI(http_client=httpx2.AsyncClient(transport=...))`, the
SDK's own way to replace its transport) that answers every request at once with a fixed chat
completion. What is left is the CPU that building the request, the SDK's client and parsing the
response cost, and nothing a faster server or network could remove.

Four measurements, each in a fresh process, C concurrent calls (default 200), N calls in all:

- **sdk**: the bare SDK: C asyncio tasks sharing a counter call `chat.completions.create`.
- **sdk-post**: the same calls through the route trialkit's `openai/...` models take: the SDK's
  `client.post` with the body as JSON, the answer read with `json.loads`.
- **trialkit**: a suite of N trials (100 tasks, a string input, one `contains` grader) on
  `openai/gpt-4o-mini` with that client, run by `Runner(concurrency=C)`, no store.
- **trialkit+store**: the same with the SQLite store on (a temp file).

Each reports calls per second and CPU per call (user + system, this process). Dividing the
machine's cores by the CPU per call gives the most calls per second that the work can reach on
this machine, however fast the server and the network: the ceiling that a latency-bound run
(C / L) meets once C / L passes it.

    python benchmarks/sdk_floor.py              # 5,000 calls, C = 200, three runs each
    python benchmarks/sdk_floor.py --calls 2000 --runs 1

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASKS = 100
MODEL = "gpt-4o-mini"
CHILD_TIMEOUT = 300.0  # seconds for one measurement
KINDS = ("sdk", "sdk-post", "trialkit", "trialkit+store")


def _completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-floor",
            "object": "chat.completion",
            "created": 1,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
        }
    ).encode()


def _client() -> Any:
    """An SDK client whose transport answers in memory, echoing the prompt's token."""
    import httpx2
    import openai

    answers: dict[bytes, bytes] = {}

    class Instant(httpx2.AsyncBaseTransport):
        """Finds the prompt's token with a byte search and answers from a cache: as little
        work as a transport can do, so that what is measured is the SDK's."""

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            body = await request.aread()
            start = body.index(b"tok-")
            token = body[start : start + 8]
            if token not in answers:
                answers[token] = _completion(token.decode())
            return httpx2.Response(
                200, headers={"content-type": "application/json"}, content=answers[token]
            )

    return openai.AsyncOpenAI(
        api_key="x",
        base_url="http://127.0.0.1:9/v1",  # never connected to: the transport answers
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=Instant()),
    )


def _prompt(task: int) -> str:
    return f"Repeat this token: tok-{task:04d}"  # as in latency.py


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _sdk(total: int, concurrency: int, route: str) -> None:
    import anyio

    client = _client()
    left = total

    async def caller() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            task = left % TASKS
            messages = [{"role": "user", "content": _prompt(task)}]
            if route == "create":
                answer = await client.chat.completions.create(model=MODEL, messages=messages)
                content = answer.choices[0].message.content
            else:  # the route trialkit's openai/... models take
                body = {"model": MODEL, "messages": messages}
                raw = await client.post("/chat/completions", body=body, cast_to=bytes)
                content = json.loads(raw)["choices"][0]["message"]["content"]
            assert content == f"tok-{task:04d}"

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(caller)
    await client.close()


async def _trialkit(total: int, concurrency: int, store_url: str | None) -> None:
    from latency import _suite  # the same suite as the latency benchmark's (this folder)

    from trialkit import Runner
    from trialkit.models import get_model
    from trialkit.store import Store

    model = get_model(f"openai/{MODEL}", client=_client(), max_concurrency=None)
    store = Store(store_url) if store_url else None
    report = await Runner(concurrency=concurrency, store=store).run(_suite(total, model))
    summary = report.summary
    assert summary.passed == total and summary.errors == 0, (summary.passed, summary.errors)
    await model.aclose()


async def _warm_up() -> None:
    """One call on a throwaway client: the SDK imports its resources and builds its response
    models on first use, a one-off cost of about half a second that is not per call."""
    client = _client()
    await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": _prompt(0)}]
    )
    await client.close()


def measure(kind: str, total: int, concurrency: int) -> dict[str, Any]:
    import anyio

    anyio.run(_warm_up)
    with tempfile.TemporaryDirectory() as folder:
        store_url = f"sqlite:///{Path(folder) / 'floor.db'}" if kind == "trialkit+store" else None
        route = {"sdk": "create", "sdk-post": "post"}.get(kind)
        work = _sdk(total, concurrency, route) if route else None
        cpu, started = _cpu_s(), time.perf_counter()
        if work is not None:
            anyio.run(lambda: work)
        else:
            anyio.run(_trialkit, total, concurrency, store_url)
        elapsed, cpu = time.perf_counter() - started, _cpu_s() - cpu
    return {
        "kind": kind,
        "calls": total,
        "concurrency": concurrency,
        "per_s": round(total / elapsed, 1),
        "cpu_ms": round(1000 * cpu / total, 3),
    }


def _child(kind: str, total: int, concurrency: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind]
    out = subprocess.run(
        [*command, "--calls", str(total), "--concurrency", str(concurrency)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"the {kind} measurement failed:\n{out.stderr[-3000:]}")
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="calls per measurement")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.calls, args.concurrency)))
        return
    cores = os.cpu_count() or 1
    print(
        f"python {sys.version.split()[0]}, {cores} cores, {args.calls} calls, "
        f"C = {args.concurrency}, in-memory transport (no network), {args.runs} run(s) each"
    )
    print(f"{'':>15} {'calls/s':>8} {'CPU/call ms (runs)':>28} {'ceiling on all cores':>21}")
    for kind in KINDS:
        rows = [_child(kind, args.calls, args.concurrency) for _ in range(args.runs)]
        cpu = statistics.median(row["cpu_ms"] for row in rows)
        rate = statistics.median(row["per_s"] for row in rows)
        runs = ", ".join(f"{row['cpu_ms']:.3f}" for row in rows)
        print(f"{kind:>15} {rate:>8.0f} {cpu:>8.3f} ({runs}) {cores * 1000 / cpu:>15.0f} calls/s")


if __name__ == "__main__":
    main()
