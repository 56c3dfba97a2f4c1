"""The store at scale: insert rate, and `trialkit report` / `trialkit runs` on big stores.

For each size, one run of 100 tasks (10% of trials failing, 1% erroring) goes into a fresh
SQLite file through `Store.save_trials`, in batches like the runner's. Each trial carries a
realistic small transcript: a tool-using agent's two model calls and a judge's, with their
requests and responses, as the model layer records them. Then the `trialkit` command is timed
in a child process, with that child's own peak RSS (`os.wait4`). Usage:

    python benchmarks/store.py                        # 100,000 and 1,000,000 trials
    python benchmarks/store.py --trials 10000         # one size
    python benchmarks/store.py --keep /tmp/stores     # keep the SQLite files
    python benchmarks/store.py --store URL --trials 1000000 --compare 200000
                                                      # PostgreSQL (an empty database)

`--compare N` also writes two runs of N trials (same tasks, different seeds) and times
`trialkit compare` of them.

Figures are reported in docs/performance.md; nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from trialkit.outcome import Outcome
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.task import SuiteKind
from trialkit.transcript import Message, ModelCall, Timing, ToolCall, Transcript, Usage
from trialkit.trial import Trial, TrialStatus

TASKS = 100
BATCH = 256  # the runner's writer commits at most this many trials at once
VARIANTS = 64  # distinct transcripts per task; trials reuse them (dumping is still per trial)
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
MODEL = "openai/gpt-4o-mini"
JUDGE = "anthropic/claude-3-5-haiku"
SYSTEM = (
    "You are a careful research assistant. Use the search tool when a question needs facts "
    "you are not sure of, cite what you found, and answer in two or three sentences. If the "
    "sources disagree, say so. Never invent a citation."
)
TOOLS = [
    {
        "name": "search",
        "description": "Search the knowledge base and return the best matching passages.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["query"],
        },
    }
]
WORDS = [
    "river",
    "city",
    "capital",
    "population",
    "museum",
    "bridge",
    "founded",
    "century",
    "trade",
    "harbour",
    "railway",
    "university",
    "cathedral",
    "market",
    "province",
    "border",
    "mountain",
    "valley",
    "festival",
    "library",
    "council",
    "treaty",
    "dynasty",
    "empire",
    "republic",
    "census",
    "climate",
    "export",
    "industry",
    "coast",
    "island",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _response(rng: random.Random, message: Message, usage: Usage, finish: str) -> dict[str, object]:
    return {
        "message": message.model_dump(mode="json"),
        "finish_reason": finish,
        "usage": usage.model_dump(mode="json"),
        "model": "gpt-4o-mini-2024-07-18",
        "id": f"chatcmpl-{rng.getrandbits(96):024x}",
        "latency_s": round(rng.uniform(0.3, 2.5), 3),
        "reasoning": [],
    }


def transcript_for(task: int, rng: random.Random) -> tuple[Transcript, str]:
    """A tool-using agent's transcript (two model calls, one search) plus a judge's call."""
    question = f"Question {task}: " + _text(rng, 18)
    answer = _text(rng, 55)
    call = ToolCall(
        id=f"call_{rng.getrandbits(64):016x}",
        name="search",
        arguments={"query": _text(rng, 6), "limit": 3},
        result=" ".join(_text(rng, 25) for _ in range(3)),
        turn=0,
        started_at=round(rng.uniform(0.5, 1.5), 3),
        duration_s=round(rng.uniform(0.01, 0.2), 3),
    )
    messages = [
        Message(role="system", content=SYSTEM),
        Message(role="user", content=question),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", content=call.result or "", name="search", tool_call_id=call.id),
        Message(role="assistant", content=answer),
    ]

    def request(upto: int) -> dict[str, object]:
        sent = [m.model_dump(mode="json", exclude_defaults=True) for m in messages[:upto]]
        return {"schema_version": 1, "model": MODEL, "messages": sent, "tools": TOOLS}

    first = Usage(input_tokens=rng.randint(250, 400), output_tokens=rng.randint(15, 40))
    second = Usage(
        input_tokens=rng.randint(450, 700),
        output_tokens=rng.randint(60, 120),
        cache_read_tokens=256 if rng.random() < 0.5 else 0,
    )
    judged = Usage(input_tokens=rng.randint(300, 450), output_tokens=rng.randint(20, 60))
    rubric = f"Does the answer address the question?\nQuestion: {question}\nAnswer: {answer}"
    verdict = Message(role="assistant", content="PASS. " + _text(rng, 12))
    calls = [
        ModelCall(
            model=MODEL,
            request=request(2),
            response=_response(rng, messages[2], first, "tool_calls"),
            usage=first,
            cost_usd=_cost(first),
            latency_s=round(rng.uniform(0.3, 1.2), 3),
        ),
        ModelCall(
            model=MODEL,
            request=request(4),
            response=_response(rng, messages[4], second, "stop"),
            usage=second,
            cost_usd=_cost(second),
            latency_s=round(rng.uniform(0.5, 2.0), 3),
            turn=0,
        ),
        ModelCall(
            model=JUDGE,
            role="grader",
            request={
                "schema_version": 1,
                "model": JUDGE,
                "messages": [{"role": "user", "content": rubric}],
            },
            response=_response(rng, verdict, judged, "stop"),
            usage=judged,
            cost_usd=_cost(judged, judge=True),
            latency_s=round(rng.uniform(0.3, 1.0), 3),
        ),
    ]
    total = round(rng.uniform(1.0, 4.0), 3)
    transcript = Transcript(
        messages=messages,
        tool_calls=[call],
        model_calls=calls,
        usage=first + second,
        grader_usage=judged,
        timing=Timing(started_at=T0, setup_s=0.01, agent_s=total - 0.6, grading_s=0.55),
    )
    return transcript, answer


def _cost(usage: Usage, *, judge: bool = False) -> float:
    per_in, per_out = (0.8e-6, 4e-6) if judge else (0.15e-6, 0.6e-6)
    return usage.input_tokens * per_in + usage.output_tokens * per_out


def _trial(run_id: str, task: int, index: int, variant: tuple[Transcript, str]) -> Trial:
    transcript, answer = variant
    rng = random.Random(task * 1_000_003 + index)
    fail_rate = 0.02 + 0.16 * task / (TASKS - 1)  # 2% to 18% by task: 10% on average
    draw = rng.random()
    error = draw < 0.01
    verdict = Verdict.ERROR if error else Verdict.FAIL if draw < fail_rate else Verdict.PASS
    judge = round(rng.uniform(0.7, 1.0) if verdict is Verdict.PASS else rng.uniform(0, 0.6), 1)
    scores = [
        Score.from_bool(verdict is Verdict.PASS, name="contains('capital')"),
        Score.from_value(judge, pass_at=0.7, name="judge", rationale=f"scored {judge}"),
    ]
    if error:
        scores = []
    agent_cost = sum(c.cost_usd or 0 for c in transcript.model_calls if c.role == "agent")
    grader_cost = sum(c.cost_usd or 0 for c in transcript.model_calls if c.role == "grader")
    return Trial(
        run_id=run_id,
        task_id=f"task-{task:03d}",
        index=index,
        status=TrialStatus.ERROR if error else TrialStatus.COMPLETED,
        verdict=verdict,
        model=MODEL,
        transcript=transcript,
        outcome=Outcome(output=None if error else answer),
        scores=scores,
        usage=transcript.usage,
        grader_usage=transcript.grader_usage,
        cost_usd=agent_cost + grader_cost,
        grader_cost_usd=grader_cost,
        started_at=T0 + timedelta(milliseconds=index),
        duration_s=round(rng.lognormvariate(0.5, 0.4), 4),
    )


def fill(url: str, total: int, run_id: str | None = None, seed: int = 7) -> dict[str, float]:
    """One run of `total` trials written in batches; the time of `save_trials` alone."""
    run_id = run_id or f"bench-{total}"
    per_task = total // TASKS
    rng = random.Random(seed)
    variants = [[transcript_for(t, rng) for _ in range(VARIANTS)] for t in range(TASKS)]
    run = RunInfo(id=run_id, name="bench", started_at=T0, status="running", config={})
    suite = SuiteInfo(id="bench", kind=SuiteKind.CAPABILITY)
    plans = [TaskPlan(id=f"task-{t:03d}", kind=SuiteKind.CAPABILITY) for t in range(TASKS)]
    saving = 0.0
    started = time.perf_counter()
    with Store(url) as store:
        store.create_run(run, suite, plans)
        batch: list[Trial] = []
        for index in range(per_task):
            for task in range(TASKS):
                batch.append(_trial(run_id, task, index, variants[task][index % VARIANTS]))
                if len(batch) == BATCH:
                    began = time.perf_counter()
                    store.save_trials(batch)
                    saving += time.perf_counter() - began
                    batch = []
        if batch:
            began = time.perf_counter()
            store.save_trials(batch)
            saving += time.perf_counter() - began
        store.finish_run(run.model_copy(update={"status": "completed", "finished_at": T0}))
    wall = time.perf_counter() - started
    return {
        "insert_s": round(saving, 1),
        "inserts_per_s": round(per_task * TASKS / saving),
        "fill_wall_s": round(wall, 1),
    }


# Run by a fresh, small interpreter: a child forked from this process (which holds the trials
# it generated) would count this process's memory in its own peak RSS until it execs.
_TIMER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
if done.returncode:
    sys.exit(done.stderr.decode())
print(json.dumps({"s": round(wall, 2), "peak_rss_mb": round(peak / 1024, 1)}))
"""


def timed(command: list[str]) -> dict[str, float]:
    """Wall time and peak RSS (`RUSAGE_CHILDREN` of a fresh parent) of one command."""
    done = subprocess.run(
        [sys.executable, "-c", _TIMER, *command], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def compression() -> dict[str, int]:
    """Bytes of one realistic transcript as JSON text and as the store packs it."""
    from trialkit.store.encoding import pack_json

    transcript, _ = transcript_for(1, random.Random(1))
    text = transcript.model_dump_json()
    _, packed = pack_json(text)
    return {"transcript_json_bytes": len(text.encode()), "packed_bytes": len(packed or b"")}


def measure(total: int, folder: Path) -> dict[str, object]:
    path = folder / f"store-{total}.db"
    path.unlink(missing_ok=True)
    url = sqlite_url(path)
    figures: dict[str, object] = {"trials": total, **fill(url, total)}
    figures["db_mb"] = round(path.stat().st_size / 1e6, 1)
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        figures["wal_mb"] = round(wal.stat().st_size / 1e6, 1)
    return figures | commands(url, f"bench-{total}")


def commands(url: str, run: str) -> dict[str, object]:
    """`trialkit report` (table and JSON) of `run` and `trialkit runs`, each timed."""
    trialkit = [sys.executable, "-m", "trialkit"]
    return {
        "report_table": timed([*trialkit, "report", run, "--store", url]),
        "report_json": timed([*trialkit, "report", run, "--format", "json", "--store", url]),
        "runs": timed([*trialkit, "runs", "--store", url]),
    }


def measure_url(url: str, total: int) -> dict[str, object]:
    """`measure` on a store that is not a file: an empty database at `url`."""
    figures: dict[str, object] = {"trials": total, **fill(url, total)}
    return figures | commands(url, f"bench-{total}")


def measure_compare(url: str, total: int) -> dict[str, object]:
    """Two runs of `total` trials, and `trialkit compare` of them."""
    a, b = f"compare-{total}-a", f"compare-{total}-b"
    fill(url, total, a, seed=11)
    fill(url, total, b, seed=12)
    trialkit = [sys.executable, "-m", "trialkit"]
    return {
        "compare_trials": total,
        "compare": timed([*trialkit, "compare", a, b, "--store", url]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, action="append", help="trials (repeatable)")
    parser.add_argument("--keep", type=Path, help="write the stores in this folder and keep them")
    parser.add_argument("--store", help="an empty store's URL (PostgreSQL) instead of SQLite files")
    parser.add_argument("--compare", type=int, help="also time compare of two runs of N trials")
    args = parser.parse_args()
    sizes = args.trials or [100_000, 1_000_000]
    print(json.dumps(compression()), flush=True)
    if args.store:
        for total in sizes:
            print(json.dumps(measure_url(args.store, total)), flush=True)
        if args.compare:
            print(json.dumps(measure_compare(args.store, args.compare)), flush=True)
        return
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        for total in sizes:
            print(json.dumps(measure(total, folder)), flush=True)


if __name__ == "__main__":
    main()
