"""Trials on a Ray cluster: `Runner(executor="ray")`, `trialkit run --executor ray`.

The same split as worker processes (`trialkit.executors.processes`): this process plans,
schedules, stores and reports; Ray actors run the trials. Each actor loads the suite from its
source once (suites hold functions, which are never pickled), with the run's model settings,
and runs its share of the concurrency on its own event loop. A trial goes to the actor with the
fewest trials in flight and comes back as the finished `Trial`.

Connecting: `ray.init()` joins the cluster that `RAY_ADDRESS` names (or that `ray start`
started on this machine), and otherwise starts a local one for the run, stopped afterwards. A
Ray already initialised in this process (by your code) is used as it is and left running.
Usage statistics are turned off for the cluster trialkit starts.

Actors need not have the suite's files or trialkit at the paths they have here: each actor gets
the suite's folder and this trialkit through a Ray runtime environment, given when the actor is
created (`trialkit.executors.ray_runtime`). They get the environment of the Ray node (API keys
included), not this process's, plus the variables `--ray-env` names, which travel in their
set-up (never in the runtime environment, which Ray logs).

Results land in this process: actors send each finished trial back, and never open the store or
the cassette folder. A run with a cassette first starts a keeper on this process's Ray node,
which reads and writes the folder for the actors (`trialkit.executors.ray_cassette`), so the
folder need not be on their nodes.

An actor that dies (its process crashed or was killed) turns its trials in flight into errors
and is replaced, at most `MAX_DEATHS` times in a run. An actor that does not answer a trial
within the trial's timeout plus `ANSWER_GRACE` is killed and replaced the same way. When the
run ends or is cancelled, every actor is killed.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from trialkit.executors import ray_cassette, ray_runtime
from trialkit.executors.processes import WorkerError, hand_back, lost_trial, worker_setup
from trialkit.task import Suite
from trialkit.transcript import ModelCall
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.run.planner import Planner
    from trialkit.run.trial import PlannedTask

MAX_DEATHS = 5
"""Actor deaths a run survives (each actor is replaced); one more fails the run."""
START_TIMEOUT = 180.0
"""Seconds the actors may take to be placed, import trialkit and load the suite."""
ANSWER_GRACE = 60.0
"""Seconds past a trial's own timeout before its actor counts as hung."""
STOP_TIMEOUT = 30.0
"""Seconds the actors get to report what they used when the run ends."""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""Colour codes, which Ray puts in the messages of remote errors."""

_runs_on_our_ray = 0
"""Runs of this process using a Ray that trialkit started (`--models` runs several at once):
the last one to end shuts it down."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise WorkerError(
            "--executor ray needs Ray: pip install 'trialkit[ray]' (or pip install ray)"
        ) from exc
    return ray


class TrialActor:
    """What runs in each Ray actor: the suite, loaded once, and its trials."""

    def __init__(self, setup: dict[str, Any], keeper: Any = None) -> None:
        from trialkit._gc import fewer_collections
        from trialkit.executors.worker import _Worker

        os.environ.update(setup["env"])  # --ray-env: before the suite (and its agents) load
        # The cassette's calls to the keeper block the event loop the way reading a local
        # cassette does (they are sync), on purpose: Ray need not warn about it.
        os.environ.setdefault("RAY_WARN_BLOCKING_GET_INSIDE_ASYNC", "0")
        cassette = setup["cassette"]
        remote = None
        if keeper is not None and cassette is not None:
            remote = ray_cassette.RemoteCassette(cassette["root"], cassette["mode"], keeper)
        shipped = ray_runtime.localise(setup, Path.cwd())  # cwd: the shipped copy
        self.worker = _Worker(shipped, cassette=remote)
        self.concurrency: int = setup["concurrency"]
        self._collections = fewer_collections()
        self._collections.__enter__()  # for the actor's whole life: it only runs trials

    def ready(self) -> int:
        return os.getpid()

    async def run(self, request: dict[str, Any]) -> str:
        import anyio.to_thread

        from trialkit.models.context import use_settings

        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = max(threads.total_tokens, self.concurrency)
        with use_settings(self.worker.settings):
            return await self.worker.run_one(request)

    async def finish(self) -> dict[str, Any]:
        """Close the harness; the cassette keys used and the calls of no trial."""
        await self.worker.trials.aclose()
        await self.worker.harness.aclose()
        return {"keys": self.worker.used_keys(), "calls": self.worker.run_calls()}


class _Actor:
    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.in_flight = 0
        self.ready = False
        """It has loaded the suite: trials may go to it."""
        self.dead = False


class RayPool:
    """Ray actors that run trials; `run` has the signature of `TrialRunner.run`.

    Use it through `open_ray_pool`, which starts the actors and always kills them.
    """

    def __init__(
        self,
        ray: Any,
        setup: dict[str, Any],
        *,
        actors: int,
        run_id: str,
        runtime_env: dict[str, Any],
    ) -> None:
        self.ray = ray
        self.setup = setup
        self.runtime_env = runtime_env
        """What each actor is created with: the shipped folder and trialkit, by URI."""
        self.size = actors
        self.run_id = run_id
        self.actors: list[_Actor] = []
        self.deaths = 0
        self.started = 0
        self.scope = anyio.CancelScope()
        """Cancelled when the pool gives up, so the run's trials stop waiting."""
        self.failure: WorkerError | None = None
        self.keys: set[str] = set()
        self.run_calls: list[ModelCall] = []
        self.keeper: Any = None
        """The run's cassette, kept on this process's node (`ray_cassette`); None without."""
        self._remote = ray.remote(TrialActor)
        self.changed = anyio.Event()
        """Set (and renewed) when an actor becomes ready or is lost."""

    async def start(self) -> None:
        """Start the cassette's keeper, then the actors; return when all have loaded the suite."""
        await self._start_keeper()
        fresh = [self._new_actor() for _ in range(self.size)]
        with anyio.move_on_after(START_TIMEOUT) as waited:
            for actor in fresh:
                await self._ready(actor)
        if waited.cancelled_caught:
            raise WorkerError(
                f"the Ray actors did not start within {START_TIMEOUT:g} s: the cluster may "
                f"have fewer free CPUs than the {self.size} actors asked for (--workers)"
            )

    async def _start_keeper(self) -> None:
        cassette = self.setup["cassette"]
        if cassette is None or cassette["mode"] == "live":
            return
        self.keeper = ray_cassette.start_keeper(
            self.ray,
            cassette["root"],
            cassette["mode"],
            name=f"trialkit-{self.run_id}-cassette",
            py_modules=self.runtime_env["py_modules"],
        )
        try:
            with anyio.fail_after(START_TIMEOUT):
                await self.keeper.ready.remote()
        except TimeoutError:
            raise WorkerError(
                f"the Ray actor that keeps the cassette {cassette['root']} on this node did "
                f"not start within {START_TIMEOUT:g} s"
            ) from None
        except self.ray.exceptions.RayError as exc:
            raise WorkerError(
                f"cannot keep the cassette for the Ray actors: {_init_failure(exc)}"
            ) from None

    def _new_actor(self) -> _Actor:
        self.started += 1
        options = self._remote.options(
            max_concurrency=max(1, self.setup["concurrency"]),
            num_cpus=1,
            name=f"trialkit-{self.run_id}-{self.started}",
            runtime_env=self.runtime_env,
        )
        handle = options.remote(self.setup, self.keeper)
        actor = _Actor(handle)
        self.actors.append(actor)
        return actor

    async def _ready(self, actor: _Actor) -> None:
        try:
            await actor.handle.ready.remote()
        except self.ray.exceptions.RayActorError as exc:
            raise WorkerError(
                f"a Ray actor could not load the suite: {_init_failure(exc)}"
            ) from None
        actor.ready = True
        self._notify()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def _pick(self) -> _Actor:
        while True:
            ready = [a for a in self.actors if a.ready and not a.dead]
            if ready:
                return min(ready, key=lambda a: a.in_flight)
            await self.changed.wait()  # a replacement started, or the pool gave up

    async def run(self, item: PlannedTask, index: int) -> Trial:
        """Run one trial on the actor with the fewest trials in flight."""
        actor = await self._pick()
        request = {"task": item.task.id, "index": index, "timeout": item.timeout}
        started_at, started = datetime.now(UTC), time.perf_counter()
        actor.in_flight += 1
        ref = actor.handle.run.remote(request)
        try:
            with anyio.move_on_after(item.timeout + ANSWER_GRACE) as waited:
                payload = await ref
            if waited.cancelled_caught:
                why = f"did not answer within {item.timeout + ANSWER_GRACE:g} s; it was stopped"
                await self._lost(actor, why)
                return _lost_trial(item, index, self.run_id, why, started_at, started)
        except self.ray.exceptions.RayActorError as exc:
            why = f"died before the trial finished: {_cause(exc)}"
            await self._lost(actor, why)
            return _lost_trial(item, index, self.run_id, why, started_at, started)
        except self.ray.exceptions.RayError as exc:
            why = f"could not run the trial: {_cause(exc)}"
            return _lost_trial(item, index, self.run_id, why, started_at, started)
        except BaseException:
            with contextlib.suppress(Exception):
                self.ray.cancel(ref)  # the run was cancelled: stop the trial there too
            raise
        finally:
            actor.in_flight -= 1
        return Trial.model_validate_json(payload)

    async def _lost(self, actor: _Actor, why: str) -> None:
        """An actor died or hung: kill it, and replace it while deaths are few."""
        if actor.dead:
            return
        actor.dead = True
        self._notify()
        with contextlib.suppress(Exception):
            self.ray.kill(actor.handle)
        self.deaths += 1
        if self.deaths > MAX_DEATHS:
            self.failure = WorkerError(f"{self.deaths} Ray actors were lost (the last {why})")
            self.scope.cancel()
            return
        replacement: _Actor | None = None
        try:
            replacement = self._new_actor()
            with anyio.fail_after(START_TIMEOUT):
                await self._ready(replacement)
        except (WorkerError, TimeoutError) as exc:
            if replacement is not None:
                replacement.dead = True
            self.failure = WorkerError(f"cannot replace a lost Ray actor: {exc}")
            self.scope.cancel()

    async def stop(self) -> None:
        """Collect what each live actor used (cassette keys, calls of no trial)."""
        with anyio.move_on_after(STOP_TIMEOUT):
            for actor in self.actors:
                if actor.dead:
                    continue
                with contextlib.suppress(self.ray.exceptions.RayError):
                    used = await actor.handle.finish.remote()
                    self.keys.update(used["keys"])
                    self.run_calls.extend(ModelCall.model_validate(c) for c in used["calls"])

    def kill(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor.handle)
            actor.dead = True

    async def stop_keeper(self) -> None:
        """After the actors are gone: the keeper finishes the writes it was sent (Ray's
        graceful exit), then it is killed if it is still there."""
        if self.keeper is None:
            return
        with contextlib.suppress(Exception), anyio.move_on_after(STOP_TIMEOUT):
            await self.keeper.__ray_terminate__.remote()
        with contextlib.suppress(Exception):
            self.ray.kill(self.keeper)


@contextlib.asynccontextmanager
async def open_ray_pool(
    suite: Suite, runner: Planner, run_id: str, *, actors: int | None, concurrency: int
) -> AsyncIterator[RayPool]:
    """Ray actors for one run; when the block ends (or fails) none is left running, and a Ray
    this run started is shut down. `actors` None: one per CPU of the cluster."""
    global _runs_on_our_ray
    env_vars = ray_runtime.actor_env_vars(runner.options.ray_env)  # before connecting
    ray = import_ray()
    ours = _runs_on_our_ray > 0 or not ray.is_initialized()
    if not ray.is_initialized():
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never send telemetry
        try:
            ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=True)
        except Exception as exc:  # no cluster at RAY_ADDRESS, or none could be started
            where = os.environ.get("RAY_ADDRESS") or "a local cluster"
            raise WorkerError(f"cannot join or start Ray ({where}): {_cause(exc)}") from exc
    _runs_on_our_ray += ours
    try:
        count = actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
        count = min(count, concurrency)
        share = -(-concurrency // count)
        setup, runtime_env = _shipped_setup(suite, runner, run_id, share, env_vars)
        runtime_env = await anyio.to_thread.run_sync(ray_runtime.upload, runtime_env)
        pool = RayPool(ray, setup, actors=count, run_id=run_id, runtime_env=runtime_env)
        error: BaseException | None = None
        try:
            await pool.start()
            with pool.scope:
                yield pool
            if pool.failure is None:
                await pool.stop()
        except BaseException as exc:  # raised again below
            error = exc
        finally:
            pool.kill()
            with anyio.CancelScope(shield=True):
                await pool.stop_keeper()
        hand_back(runner, pool.keys, pool.run_calls, error or pool.failure)
    finally:
        _runs_on_our_ray -= ours
        if ours and _runs_on_our_ray == 0:  # the last run on the Ray trialkit started
            ray.shutdown()


def _shipped_setup(
    suite: Suite, runner: Planner, run_id: str, concurrency: int, env_vars: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The actors' set-up, naming the suite as it is in the shipped folder and holding the
    `--ray-env` variables, and their runtime environment."""
    setup = worker_setup(suite, runner, run_id, concurrency)
    assert suite.source is not None  # worker_setup checked
    folder, source = ray_runtime.shipped_folder(suite.source)
    cassette = setup["cassette"]
    if cassette is not None:  # the keeper uses it here: make it, as a recording would
        Path(cassette["root"]).mkdir(parents=True, exist_ok=True)
    setup = {**setup, "source": source, "shipped": str(folder), "env": env_vars}
    root = None if cassette is None else cassette["root"]
    return setup, ray_runtime.runtime_env(folder, root)


def _init_failure(exc: Any) -> str:
    """What an actor's `__init__` raised, as its last line says it (`TargetError: file:line:
    ...`), not the remote traceback Ray's message quotes before it."""
    if not getattr(exc, "actor_init_failed", False):
        return _cause(exc)
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    return lines[-1][:1000] if lines else _cause(exc)


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in text[:6])[:1000] or type(exc).__name__


def _lost_trial(
    item: PlannedTask, index: int, run_id: str, why: str, started_at: datetime, started: float
) -> Trial:
    message = f"the Ray actor running this trial {why}"
    return lost_trial(item, index, run_id, message, started_at, started)
