"""`trialkit._sync`: sync entry points run async work whether or not this thread runs a loop,
with nothing but anyio (sniffio is not a dependency of trialkit, nor of anyio since 4.16)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import anyio
import anyio.lowlevel

from trialkit._sync import in_event_loop, run_blocking


def test_no_loop_in_a_plain_thread() -> None:
    assert not in_event_loop()
    seen: list[bool] = []
    worker = threading.Thread(target=lambda: seen.append(in_event_loop()))
    worker.start()
    worker.join()
    assert seen == [False]


def test_a_loop_is_seen_under_asyncio_and_anyio() -> None:
    async def ask() -> bool:
        return in_event_loop()

    assert asyncio.run(ask()) is True
    assert anyio.run(ask) is True


def test_run_blocking_runs_here_or_beside_a_running_loop() -> None:
    async def work() -> tuple[str, bool]:
        await anyio.lowlevel.checkpoint()
        return threading.current_thread().name, in_event_loop()

    here = threading.current_thread().name
    assert run_blocking(work) == (here, True)

    async def from_a_notebook_cell() -> tuple[str, bool]:
        return run_blocking(work)  # a loop runs on this thread: the work gets its own

    thread, in_loop = asyncio.run(from_a_notebook_cell())
    assert thread != here and in_loop


def test_sniffio_is_not_needed() -> None:
    """With `sniffio` unimportable (as in a fresh `pip install trialkit`), a loop is still seen
    and a sync run inside one still works."""
    code = """
import sys
sys.modules["sniffio"] = None  # any `import sniffio` now raises ImportError
import asyncio
import anyio
from trialkit._sync import in_event_loop, run_blocking

async def nested():
    return in_event_loop(), run_blocking(lambda: anyio.sleep(0))

print(in_event_loop(), asyncio.run(nested()))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False (True, None)"


def test_a_loop_running_outside_any_task_is_seen() -> None:
    """A loop's callback runs with the loop running and no current task (Playwright's sync API
    calls user code so): a sync run there must go beside the loop, not try to start one."""
    loop = asyncio.new_event_loop()
    seen: list[object] = []

    def callback() -> None:
        try:
            seen.append(in_event_loop())
            seen.append(run_blocking(anyio.lowlevel.checkpoint))
        except BaseException as exc:
            seen.append(exc)
        finally:
            loop.stop()

    loop.call_soon(callback)
    try:
        loop.run_forever()
    finally:
        loop.close()
    assert seen == [True, None]
