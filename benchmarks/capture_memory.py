"""Capture's memory on a long streamed answer: peak RSS with and without capture.

A server in a process of its own streams one Chat Completions answer whose event-stream body is
`--mb` MB (50 by default), as chunks of about 64 KB, in one of two shapes:

- **long deltas**: 1,000 characters of text per event, so the answer's text is most of the
  body (about 46 MB of text);
- **short deltas**: 8 characters per event, a fifth of `--mb` (10 MB: about 71,000 events,
  0.6 MB of text): what each event costs.

Each kind runs in a fresh child process, which reports its peak RSS (`ru_maxrss`) and its RSS
just before the call (the interpreter, the imports, the event loop: the floor). The figure
that matters is peak minus floor, what the answer cost:

- **sdk**: `openai.OpenAI().chat.completions.create(stream=True)`, the agent joining the
  deltas' text; trialkit imported, no run.
- **trialkit**: the same agent as the harness of a one-trial run, `Runner(capture=False)`, no
  store.
- **trialkit+capture**: the same with capture on (the default): the transcript keeps the
  assembled answer.
- **trialkit+record**: capture recording into a new cassette (the recording keeps every
  event's text, and the cassette writes them).

    python benchmarks/capture_memory.py             # both shapes, 50 MB, about a minute
    python benchmarks/capture_memory.py --mb 10     # smaller

Figures are reported in docs/performance.md; nothing here is asserted in tests (a test checks
the same property as a ratio of tracemalloc peaks: tests/capture/test_stream_memory.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("sdk", "trialkit", "trialkit+capture", "trialkit+record")
SHAPES = {"long deltas": (1000, 1.0), "short deltas": (8, 0.2)}
"""Characters of text per event, and the share of `--mb` the shape streams (the SDK reads
short events slowly: about 20 s per 10 MB here)."""
CHILD_TIMEOUT_S = 600
CHUNK = 64 * 1024


def events(mb: float, delta: int) -> Iterator[bytes]:
    """The answer's SSE events, `mb` MB in all."""
    head = '{"id":"chatcmpl-big","object":"chat.completion.chunk","created":1,"model":"m",'
    text = ("abcdefghij" * (delta // 10 + 1))[:delta]
    event = f'data: {head}"choices":[{{"index":0,"delta":{{"content":"{text}"}}}}]}}\n\n'.encode()
    for _ in range(int(mb * 1_000_000) // len(event)):
        yield event
    stop = f'data: {head}"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}\n\n'
    yield stop.encode()
    yield b"data: [DONE]\n\n"


def serve(mb: float, delta: int) -> None:
    """Answer every POST with the stream, chunked, until SIGTERM."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            pending: list[bytes] = []
            size = 0
            for event in events(mb, delta):
                pending.append(event)
                size += len(event)
                if size >= CHUNK:
                    self._chunk(b"".join(pending))
                    pending, size = [], 0
            if pending:
                self._chunk(b"".join(pending))
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def child(kind: str, url: str) -> None:
    """One kind, in this (fresh) process: prints its floor, peak and the text's length."""
    import anyio
    import openai

    from trialkit import Suite, Task
    from trialkit.models.cassette import CacheMode, Cassette
    from trialkit.run.runner import Runner

    def agent(prompt: str) -> str:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-bench", max_retries=0)
        messages: list[Any] = [{"role": "user", "content": prompt}]
        with (
            client,
            client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True
            ) as chunks,
        ):
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return f"{len(text)} characters"

    floor = rss_mb()
    if kind == "sdk":
        output = agent("hi")
    else:
        with tempfile.TemporaryDirectory() as folder:
            cassette = Cassette(folder, CacheMode.RECORD) if kind == "trialkit+record" else None
            suite = Suite(id="memory", harness=agent, tasks=[Task(id="t", input="hi", graders=[])])
            runner = Runner(capture=kind != "trialkit", cassette=cassette, timeout=CHILD_TIMEOUT_S)
            report = anyio.run(runner.run, suite)
            assert report.summary.errors == 0, report.summary
            output = "run"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000
    print(json.dumps({"floor": floor, "peak": peak, "output": output}))


@contextmanager
def server(mb: float, delta: int) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(mb), str(delta)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.startswith("http://"):
            raise RuntimeError(f"the server did not start (said {line!r})")
        yield line
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def measure(kind: str, url: str) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, url],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        cwd=ROOT,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="the body's size in MB")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(float(args.serve[0]), int(args.serve[1]))
        return
    if args.child:
        child(*args.child)
        return
    print(f"streamed answers of {args.mb:g} MB (short deltas: a fifth); peak RSS of a fresh")
    print("process, MB; cost = peak - floor (the RSS just before the call)")
    print(f"{'shape':<14} {'kind':<18} {'floor':>7} {'peak':>7} {'cost':>7} {'vs sdk':>7} {'s':>5}")
    for shape, (delta, share) in SHAPES.items():
        with server(args.mb * share, delta) as url:
            bare = None
            for kind in KINDS:
                got = measure(kind, url)
                cost = got["peak"] - got["floor"]
                bare = cost if kind == "sdk" else bare
                ratio = f"{cost / bare:.2f}x" if bare else "-"
                print(
                    f"{shape:<14} {kind:<18} {got['floor']:>7.0f} {got['peak']:>7.0f} "
                    f"{cost:>7.0f} {ratio:>7} {got['seconds']:>5.1f}"
                )


if __name__ == "__main__":
    main()
