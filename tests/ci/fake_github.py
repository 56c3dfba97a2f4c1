"""A fake GitHub REST API on 127.0.0.1 that keeps issue comments and records every request."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGitHub:
    url: str = ""
    token: str = ""
    requests: list[Request] = field(default_factory=list)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    refuse: int | None = None  # answer every request with this status
    _next_id: int = 1000

    def add_comment(self, number: int, body: str) -> int:
        self._next_id += 1
        self.comments[self._next_id] = {"id": self._next_id, "number": number, "body": body}
        return self._next_id

    def handle(self, request: Request) -> tuple[int, Any]:
        self.requests.append(request)
        if self.refuse is not None:
            return self.refuse, {"message": "Resource not accessible by integration"}
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials"}
        parts = request.path.strip("/").split("/")
        # /repos/{owner}/{repo}/issues/{number}/comments
        if len(parts) == 6 and parts[3] == "issues" and parts[5] == "comments":
            number = int(parts[4])
            if request.method == "GET":
                page = int(request.query.get("page", ["1"])[0])
                per_page = int(request.query.get("per_page", ["30"])[0])
                mine = [c for c in self.comments.values() if c["number"] == number]
                chosen = mine[(page - 1) * per_page : page * per_page]
                return 200, [self._shown(c) for c in chosen]
            if request.method == "POST":
                comment_id = self.add_comment(number, request.body["body"])
                return 201, self._shown(self.comments[comment_id])
        # /repos/{owner}/{repo}/issues/comments/{id}
        if len(parts) == 6 and parts[3] == "issues" and parts[4] == "comments":
            comment = self.comments.get(int(parts[5]))
            if comment is None:
                return 404, {"message": "Not Found"}
            if request.method == "PATCH":
                comment["body"] = request.body["body"]
                return 200, self._shown(comment)
        return 404, {"message": "Not Found"}

    def _shown(self, comment: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": comment["id"],
            "body": comment["body"],
            "html_url": f"https://github.example/pr/{comment['number']}#c{comment['id']}",
        }


@contextmanager
def fake_github(token: str) -> Iterator[FakeGitHub]:
    fake = FakeGitHub(token=token)

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            split = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request(
                method=self.command,
                path=split.path,
                query=parse_qs(split.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            status, data = fake.handle(request)
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
