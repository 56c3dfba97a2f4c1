"""`ViewServer`: the viewer's application (`app.create_app`) served by uvicorn.

The socket is bound when the server is made, so a port already taken is an `OSError` before
anything is served. `serve_forever()` blocks (the CLI: Ctrl-C stops it); `start()` serves
from a background thread (tests, notebooks) until `close()`.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

import uvicorn

from trialkit.store import Store
from trialkit.view import pages
from trialkit.view.app import create_app

START_TIMEOUT_S = 30


class ViewServer:
    """The viewer of one store, listening on `host`:`port` (0: a free port); it takes labels
    from its review forms unless `read_only` (or listening beyond loopback)."""

    def __init__(
        self, store: Store, *, host: str = "127.0.0.1", port: int = 0, read_only: bool = False
    ) -> None:
        self.store = store
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # Named TCP, so that asyncio turns Nagle's algorithm off on each connection: without it
        # a response written in two parts waits out the browser's delayed ACK (40 ms a page).
        self.socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((host, port))
            self.socket.listen(128)
        except OSError:
            self.socket.close()
            raise
        self.app = create_app(store, allowed_hosts=self.allowed_hosts(), read_only=read_only)
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            proxy_headers=False,
            ws="none",
            timeout_graceful_shutdown=5,
        )
        self.uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None
        self.warming = threading.Thread(target=pages.warm_up, name="trialkit-view-warm-up")
        """Compiles the templates and imports numpy while the server starts (`pages.warm_up`)."""
        self.warming.daemon = True
        self.warming.start()

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def host(self) -> str:
        return str(self.socket.getsockname()[0])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def allowed_hosts(self) -> set[str] | None:
        """The `Host` headers answered; None (any) when it listens beyond loopback."""
        try:
            loopback = ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            loopback = self.host == "localhost"
        if not loopback:
            return None
        names = {self.host, "localhost", "127.0.0.1", "[::1]"}
        if ":" in self.host:
            names.add(f"[{self.host}]")
        return {f"{name}:{self.port}" for name in names}

    def serve_forever(self) -> None:
        """Serve until Ctrl-C (which then raises `KeyboardInterrupt` here) or `close()`."""
        self.uvicorn.run(sockets=[self.socket])

    def start(self) -> ViewServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the viewer did not start on {self.url}")
            time.sleep(0.01)
        return self

    def close(self) -> None:
        self.uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.socket.close()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
