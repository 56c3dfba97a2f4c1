"""A stand-in for a generic command-line agent that calls its provider with the official SDK,
taking the base URL and key from `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` and `*_API_KEY`.

    sdk_agent.py [--output text|json|stream-json] [--base-url URL] PROMPT

PROMPT is one command:

    anthropic TEXT    one streamed Messages call; the answer is the model's text
    responses TEXT    one streamed Responses call (openai SDK)
    chat TEXT         one Chat Completions call (openai SDK)
    tool TEXT         a Messages round trip: a call offering `Write`, the tool's result sent
                      back, the model's last text as the answer (stream-json shows both)
    env               answers with its base URLs, HOME and the files in HOME, as JSON

With `--output json` (or `stream-json`) it ends with a Claude Code-like result that reports its
own usage and `total_cost_usd`.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

REPORTED_USAGE = {
    "input_tokens": 10,
    "output_tokens": 5,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 20,
}
REPORTED_COST = 0.5
WRITE = {
    "name": "Write",
    "description": "Write a file",
    "input_schema": {
        "type": "object",
        "properties": {"file_path": {"type": "string"}},
        "required": ["file_path"],
    },
}


def emit(options: argparse.Namespace, event: dict[str, Any]) -> None:
    if options.output == "stream-json":
        print(json.dumps(event), flush=True)


def anthropic_client(options: argparse.Namespace) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=options.base_url, max_retries=0)


def openai_client(options: argparse.Namespace) -> Any:
    import openai

    return openai.OpenAI(base_url=options.base_url, max_retries=0)


def ask_anthropic(options: argparse.Namespace, text: str) -> str:
    with anthropic_client(options) as client:
        message = {"role": "user", "content": text}
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=[message]
        ) as stream:
            return "".join(stream.text_stream)


def ask_responses(options: argparse.Namespace, text: str) -> str:
    with (
        openai_client(options) as client,
        client.responses.stream(model="gpt-4o-mini", input=text) as stream,
    ):
        return str(stream.get_final_response().output_text)


def ask_chat(options: argparse.Namespace, text: str) -> str:
    with openai_client(options) as client:
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
        )
        return str(answer.choices[0].message.content)


def round_trip(options: argparse.Namespace, text: str) -> str:
    with anthropic_client(options) as client:
        messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
        first = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=messages, tools=[WRITE]
        )
        (use,) = [block for block in first.content if block.type == "tool_use"]
        block = {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}
        emit(options, {"type": "assistant", "message": {"role": "assistant", "content": [block]}})
        result = {"type": "tool_result", "tool_use_id": use.id, "content": "written"}
        emit(options, {"type": "user", "message": {"role": "user", "content": [result]}})
        messages += [
            {"role": "assistant", "content": [block]},
            {"role": "user", "content": [result]},
        ]
        second = client.messages.create(
            model="claude-sonnet-4-5", max_tokens=64, messages=messages, tools=[WRITE]
        )
        return "".join(b.text for b in second.content if b.type == "text")


def environment() -> str:
    home = Path(os.environ["HOME"])
    files = (
        {
            str(path.relative_to(home)): {
                "text": path.read_text(),
                "mode": oct(stat.S_IMODE(path.stat().st_mode)),
            }
            for path in sorted(home.rglob("*"))
            if path.is_file()
        }
        if home.name.startswith("trialkit-home-")
        else {}
    )  # a home of trialkit's, not the user's
    seen = {
        "env": {
            key: os.environ.get(key)
            for key in (
                "ANTHROPIC_BASE_URL",
                "OPENAI_BASE_URL",
                "TRIALKIT_ANTHROPIC_BASE_URL",
                "TRIALKIT_OPENAI_BASE_URL",
                "HOME",
            )
        },
        "argv": sys.argv[1:],
        "home_mode": oct(stat.S_IMODE(home.stat().st_mode)),
        "files": files,
    }
    return json.dumps(seen)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", default="text")
    parser.add_argument("--base-url")
    parser.add_argument("prompt")
    options = parser.parse_args()
    verb, _, text = options.prompt.strip().partition(" ")
    actions = {
        "anthropic": ask_anthropic,
        "responses": ask_responses,
        "chat": ask_chat,
        "tool": round_trip,
    }
    emit(options, {"type": "system", "subtype": "init", "session_id": "sess-1"})
    answer = environment() if verb == "env" else actions[verb](options, text)
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": answer,
        "session_id": "sess-1",
        "total_cost_usd": REPORTED_COST,
        "usage": REPORTED_USAGE,
    }
    if options.output == "json":
        print(json.dumps(result))
    elif options.output == "stream-json":
        emit(options, result)
    else:
        print(answer)


if __name__ == "__main__":
    main()
