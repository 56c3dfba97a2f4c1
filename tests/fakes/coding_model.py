"""Behaviours of the fake provider that answer real command-line coding agents.

```python
with ProviderServer(default=WritesFile("hello.txt", "hello\\n")) as server:
    ...  # run Claude Code or Codex against server.anthropic_base_url / server.openai_base_url
```

Like a real coding model, `WritesFile` writes by absolute path: it reads the agent's working
directory from the request (Claude Code's system prompt says `Primary working directory: X`,
Codex's environment context `<cwd>X</cwd>`) and calls the agent's own file tool with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.fakes import provider_wire as wire
from tests.fakes.provider_server import Reply, ToolUse
from tests.fakes.provider_wire import Api

_WORKING_DIRECTORY = re.compile(r"Primary working directory: *(\S[^\n]*)|<cwd>([^<\n]+)</cwd>")


@dataclass(frozen=True)
class WritesFile:
    """Write `content` to `path` (relative to the agent's working directory), then say `answer`.

    While the conversation holds no tool result the answer is one call of the file tool of the
    request's API: Anthropic Messages `Write {file_path, content}` (Claude Code), a Responses
    custom `apply_patch` call with an `*** Add File:` patch (Codex), a Chat Completions
    `write_file {path, content}`; every path absolute. Once a tool result is there, the answer
    is `answer`. A pure function of the request (the call's id is a digest of the last user
    text), so concurrent trials get the right answer in any order. With no working directory
    in the request it answers a text that says so.
    """

    path: str = "hello.txt"
    content: str = "hello\n"
    answer: str = "Wrote hello.txt"
    delay: float = 0.0

    def reply_to(self, api: Api, request: dict[str, Any]) -> Reply:
        if wire.tool_results(api, request):
            return Reply(self.answer)
        directory = working_directory(api, request)
        if directory is None:
            return Reply(f"WritesFile: no working directory in the request to write {self.path}")
        target = f"{directory.rstrip('/')}/{self.path}"
        digest = wire.digest(self.path, wire.last_user_text(api, request))
        if api == "messages":
            arguments = {"file_path": target, "content": self.content}
            return Reply(tool_calls=[ToolUse("Write", arguments, id=f"toolu_{digest}")])
        if api == "responses":
            patch = add_file_patch(target, self.content)
            call = ToolUse("apply_patch", patch, id=f"call_{digest}", custom=True)
            return Reply(tool_calls=[call])
        arguments = {"path": target, "content": self.content}
        return Reply(tool_calls=[ToolUse("write_file", arguments, id=f"call_{digest}")])


def add_file_patch(path: str, content: str) -> str:
    """The `apply_patch` input that creates `path` with `content` (each line prefixed by `+`)."""
    added = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{added}*** End Patch"


def working_directory(api: Api, request: dict[str, Any]) -> str | None:
    """The agent's working directory as its prompt states it, or None."""
    for text in _prompt_texts(api, request):
        match = _WORKING_DIRECTORY.search(text)
        if match:
            return (match.group(1) or match.group(2)).strip()
    return None


def _prompt_texts(api: Api, request: dict[str, Any]) -> Iterator[str]:
    """The texts of the prompt, where each API's agents state their working directory first."""
    if api == "messages":
        yield wire.text_of(request.get("system"))
    if api == "responses":
        items = request.get("input")
        if isinstance(items, str):
            yield items
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict):
                yield wire.text_of(item.get("content"))
        if isinstance(request.get("instructions"), str):
            yield request["instructions"]
        return
    for message in request.get("messages") or ():
        if isinstance(message, dict):
            yield wire.text_of(message.get("content"))
