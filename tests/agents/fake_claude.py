"""A stand-in for a command-line agent (Claude Code's print mode), for trialkit's tests.

    fake_claude.py [--output-format text|json|stream-json] [--resume ID]
                   [--mcp-config FILE] [--mcp-url URL] [PROMPT]

The prompt (the last argument, or stdin without one) is a script, one command a line:

    say TEXT          the final answer
    think TEXT        a thinking block
    write PATH TEXT   a built-in tool call ("Write") that writes PATH in the current folder
    mcp TOOL JSON     calls TOOL on trialkit's MCP server (the official `mcp` client)
    env               answers with its arguments, folder, TRIALKIT_* and FAKE_* variables and
                      the --mcp-config file's text, as JSON
    fail TEXT         exits with code 3, TEXT on stderr (and in an error result with JSON)
    crash TEXT        prints half a traceback on stdout, TEXT on stderr, exits with code 1
    hang [stubborn]   starts a grandchild `sleep 300`, writes both pids to $PIDS_FILE and
                      sleeps; `stubborn` ignores SIGTERM
    background        starts a `sleep 300` that keeps stdout open, writes its pid, and exits

The MCP server's URL comes from --mcp-url, else the --mcp-config file, else TRIALKIT_MCP_URL.
The session id is `sess-<task>-<trial>`; with --resume the answer says which one it resumed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio


class Agent:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        task = os.environ.get("TRIALKIT_TASK_ID", "none")
        self.session_id = options.resume or f"sess-{task}-{os.environ.get('TRIALKIT_TRIAL')}"
        self.answer = ""
        self.steps = 0
        self.client: Any = None

    def emit(self, event: dict[str, Any]) -> None:
        if self.options.output_format == "stream-json":
            print(json.dumps({**event, "session_id": self.session_id}), flush=True)

    def say(self, *blocks: dict[str, Any]) -> None:
        self.steps += 1
        message_id = f"msg_{self.steps}"
        for block in blocks:  # one event per block, as Claude Code prints them
            message = {
                "id": message_id,
                "role": "assistant",
                "content": [block],
                "usage": {"input_tokens": 3, "output_tokens": 2},
            }
            self.emit({"type": "assistant", "message": message, "parent_tool_use_id": None})

    def tool_result(self, call_id: str, text: str, is_error: bool = False) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if is_error:
            block["is_error"] = True
        self.emit({"type": "user", "message": {"role": "user", "content": [block]}})

    async def run(self, script: str) -> None:
        self.emit({"type": "system", "subtype": "init", "tools": ["Write"], "cwd": os.getcwd()})
        for line in script.splitlines():
            verb, _, rest = line.strip().partition(" ")
            done = getattr(self, f"do_{verb}")(rest)
            if inspect.isawaitable(done):
                await done
        if self.options.resume:
            self.answer += f" (resumed {self.options.resume})"
        result = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": self.answer,
            "num_turns": self.steps,
            "total_cost_usd": 0.0123,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
            },
        }
        if self.options.output_format == "json":
            print(json.dumps({**result, "session_id": self.session_id}))
        elif self.options.output_format == "stream-json":
            self.emit(result)
        else:
            print(self.answer)

    def do_say(self, text: str) -> None:
        self.say({"type": "text", "text": text})
        self.answer = text

    def do_think(self, text: str) -> None:
        self.say({"type": "thinking", "thinking": text, "signature": "sig"})

    def do_write(self, rest: str) -> None:
        path, _, text = rest.partition(" ")
        call_id = f"toolu_{self.steps + 1}"
        self.say({"type": "tool_use", "id": call_id, "name": "Write", "input": {"path": path}})
        Path(path).write_text(text)
        self.tool_result(call_id, f"wrote {path}")

    async def do_mcp(self, rest: str) -> None:
        name, _, arguments = rest.partition(" ")
        args = json.loads(arguments or "{}")
        call_id = f"toolu_{self.steps + 1}"
        tool_use = {"type": "tool_use", "id": call_id, "name": f"mcp__trialkit__{name}"}
        self.say({**tool_use, "input": args})
        result = await self.client.call_tool(name, args)
        text = "\n".join(block.text for block in result.content)
        self.tool_result(call_id, text, result.is_error)
        self.answer = f"{name}: {'error' if result.is_error else 'ok'}: {text}"

    def do_env(self, _: str) -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith(("TRIALKIT_", "FAKE_"))}
        seen = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": env}
        if self.options.mcp_config:
            seen["mcp_config"] = Path(self.options.mcp_config).read_text()
        self.answer = json.dumps(seen)

    def do_fail(self, text: str) -> None:
        failure = {"type": "result", "subtype": "error_during_execution", "is_error": True}
        if self.options.output_format == "json":
            print(json.dumps({**failure, "result": text, "session_id": self.session_id}))
        self.emit({**failure, "result": text})
        print(f"warming up\nfatal: {text}", file=sys.stderr)
        sys.exit(3)

    def do_crash(self, text: str) -> None:
        print("Traceback (most recent call last):", flush=True)
        print(text, file=sys.stderr)
        sys.exit(1)

    def do_hang(self, how: str) -> None:
        if how == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        Path(os.environ["PIDS_FILE"]).write_text(f"{os.getpid()} {child.pid}")
        time.sleep(300)

    def do_background(self, _: str) -> None:
        child = subprocess.Popen(["sleep", "300"])  # inherits stdout: the pipe stays open
        Path(os.environ["PIDS_FILE"]).write_text(f"{child.pid}")
        self.answer = "left something running"


def mcp_url(options: argparse.Namespace) -> str:
    if options.mcp_url:
        return str(options.mcp_url)
    if options.mcp_config:
        config = json.loads(Path(options.mcp_config).read_text())
        return str(config["mcpServers"]["trialkit"]["url"])
    return os.environ["TRIALKIT_MCP_URL"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--resume")
    parser.add_argument("--mcp-config")
    parser.add_argument("--mcp-url")
    parser.add_argument("prompt", nargs="?")
    options = parser.parse_args()
    script = options.prompt if options.prompt is not None else sys.stdin.read()
    agent = Agent(options)
    if not any(line.strip().startswith("mcp ") for line in script.splitlines()):
        await agent.run(script)
        return
    from mcp import Client

    async with Client(mcp_url(options)) as client:
        agent.client = client
        await agent.run(script)


if __name__ == "__main__":
    anyio.run(main)
