"""What a container sandbox costs per trial: its start and stop around one short command, against
a bare process start, in the same run.

    python benchmarks/sandbox_docker.py --image IMAGE [--rounds 30] [--engines docker,podman]
        [--podman-image IMAGE] [--json] [--burst N]

Each round, in turn (so that the machine's drift falls on all alike):

- **bare**: `true` started and waited for through `anyio.open_process`;
- **<engine>**: a whole trial's container: `provider.sandbox(workspace, policy)` entered (the
  container started, the workspace handed to its user), `true` run with `exec`, the sandbox
  left (the container removed, the workspace handed back), with `--network none`;
- **<engine>+model-only**: the same with the model proxy's URL bridged in (as root);
- **<engine>+limits**: with memory, process and CPU-time limits.

`--burst N` instead starts N trials at once, with the provider's start bound (the CPU count)
and with none, and prints when the first and the median trial had its container and when all
were done.

Also, once: the suite's image step when the image is already built (the build context hashed
and the tag looked up: what every run after the first pays). Prints the median, p90 and the
median's excess over bare per case, as a table or JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from trialkit.sandbox.base import Limits, NetworkPolicy, SandboxPolicy
from trialkit.sandbox.docker import DockerProvider, PodmanProvider


async def bare() -> float:
    start = time.perf_counter()
    process = await anyio.open_process(["true"])
    await process.wait()
    await process.aclose()
    return time.perf_counter() - start


def policy_of(engine: str, variant: str) -> SandboxPolicy:
    network = NetworkPolicy("model-only" if variant == "model-only" else "none")
    limits = Limits(memory_bytes=512 << 20, processes=256, cpu_seconds=60)
    return SandboxPolicy(
        provider=engine,
        network=network,
        grader_network=network,
        limits=limits if variant == "limits" else Limits(),
    )


async def trial(provider: DockerProvider, variant: str, workspace: Path, endpoint: str) -> float:
    policy = policy_of(provider.name, variant)
    start = time.perf_counter()
    async with provider.sandbox(workspace, policy, [endpoint]) as sandbox:
        result = await sandbox.exec(["true"])
    elapsed = time.perf_counter() - start
    assert result.returncode == 0 and result.limit is None, result
    return elapsed


async def cached_image_step(provider: DockerProvider, image: str) -> float:
    with tempfile.TemporaryDirectory() as folder:
        dockerfile = Path(folder) / "Dockerfile"
        dockerfile.write_text(f"FROM {image}\nENV TRIALKIT_BENCH=1\n")
        policy = SandboxPolicy(provider.name, NetworkPolicy("none"), dockerfile=dockerfile)
        await provider.image_for(policy)  # built here once
        start = time.perf_counter()
        tag = await type(provider)().image_for(policy)  # a new run: hash + lookup only
        elapsed = time.perf_counter() - start
        await provider.engine.run("image", "rm", tag, check=False)
        return elapsed


async def main(rounds: int, providers: dict[str, DockerProvider]) -> dict[str, list[float]]:
    listener = socket.create_server(("127.0.0.1", 0))  # the "model proxy" bridged in
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    cases: list[tuple[str, DockerProvider | None, str]] = [("bare", None, "")]
    for engine, provider in providers.items():
        variants = ["none", "limits"]
        if "model-only" in provider.capabilities().network:
            variants.insert(1, "model-only")
        for variant in variants:
            label = engine if variant == "none" else f"{engine}+{variant}"
            cases.append((label, provider, variant))
    times: dict[str, list[float]] = {label: [] for label, _, _ in cases}
    with tempfile.TemporaryDirectory() as folder:
        for _, provider, variant in cases[1:]:  # warm each once (the image looked up)
            assert provider is not None
            await trial(provider, variant, Path(folder), endpoint)
        for _ in range(rounds):
            for label, provider, variant in cases:
                if provider is None:
                    times[label].append(await bare())
                else:
                    times[label].append(await trial(provider, variant, Path(folder), endpoint))
        for engine, provider in providers.items():
            image = provider.default_image()
            assert image is not None
            times[f"{engine} image step (cached)"] = [await cached_image_step(provider, image)]
    listener.close()
    return times


async def burst(image: str, trials: int, starts: int) -> dict[str, float]:
    """`trials` trials at once, each a container with one `exec`: when the first and the
    median trial had its container, and when all were done."""
    provider = DockerProvider(image=image, starts=starts)
    policy = SandboxPolicy("docker", NetworkPolicy("none"))
    ready: list[float] = []
    start = time.perf_counter()

    async def one() -> None:
        with tempfile.TemporaryDirectory() as folder:
            async with provider.sandbox(Path(folder), policy) as sandbox:
                ready.append(time.perf_counter() - start)
                await sandbox.exec(["true"])

    async with anyio.create_task_group() as group:
        for _ in range(trials):
            group.start_soon(one)
    return {
        "starts": starts,
        "first_ready_s": round(min(ready), 2),
        "median_ready_s": round(statistics.median(ready), 2),
        "all_done_s": round(time.perf_counter() - start, 2),
    }


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    base = statistics.median(times["bare"])
    out = {}
    for case, values in times.items():
        ordered = sorted(values)
        median = statistics.median(ordered)
        out[case] = {
            "n": len(values),
            "median_ms": round(median * 1000, 1),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1),
            "added_ms": round((median - base) * 1000, 1),
        }
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--image", default=os.environ.get("TRIALKIT_TEST_DOCKER_IMAGE"))
    parser.add_argument("--podman-image", default=os.environ.get("TRIALKIT_TEST_PODMAN_IMAGE"))
    parser.add_argument("--engines", default="docker")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--burst",
        type=int,
        default=0,
        help="instead: this many trials at once, with the default start bound and without",
    )
    args = parser.parse_args()
    if args.burst:
        for bound in (os.cpu_count() or 2, args.burst):
            print(json.dumps(anyio.run(burst, args.image, args.burst, bound)))
        sys.exit(0)
    chosen: dict[str, DockerProvider] = {}
    for engine in args.engines.split(","):
        image = args.podman_image if engine == "podman" else args.image
        if not image:
            sys.exit(f"{engine}: give an image (--image / --podman-image)")
        provider = (PodmanProvider if engine == "podman" else DockerProvider)(image=image)
        why = provider.unavailable()
        if why:
            sys.exit(why)
        chosen[engine] = provider
    result = summary(anyio.run(main, args.rounds, chosen))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'case':34} {'n':>4} {'median ms':>10} {'p90 ms':>8} {'added ms':>9}")
        for case, row in result.items():
            print(
                f"{case:34} {row['n']:>4} {row['median_ms']:>10} {row['p90_ms']:>8} "
                f"{row['added_ms']:>9}"
            )
