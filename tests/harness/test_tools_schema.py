"""JSON Schemas and checked calls of tools made from plain Python functions."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, Field

from trialkit import Task
from trialkit.harness.base import TrialContext
from trialkit.harness.tools import Tool, ToolArgumentsError, call_tool, tool_spec
from trialkit.models.base import ToolSpec


def add(a: int, b: int = 0) -> int:
    """Add two integers.

    The sum is exact.

    Args:
        a: The first number.
        b (int): The second number,
            zero when left out.

    Returns:
        The sum.
    """
    return a + b


def search(
    query: str,
    tags: list[str],
    limit: int | None = None,
    mode: Literal["fast", "deep"] = "fast",
    score: Annotated[float, Field(description="Minimum score.", ge=0)] = 0.5,
    options: dict[str, Any] | None = None,
    exact: bool = False,
) -> list[str]:
    """Search the index."""
    return [query]


class Point(BaseModel):
    x: int
    y: int = 0


def move(point: Point, /, *, by: int) -> Point:
    return Point(x=point.x + by, y=point.y + by)


def described(
    text: Annotated[str, Field(description="From the annotation.")],
) -> str:
    """Echo.

    Args:
        text: From the docstring.
    """
    return text


def returns_none() -> None:
    """Do nothing."""


def test_a_simple_function_becomes_a_tool_spec() -> None:
    assert tool_spec(add) == ToolSpec(
        name="add",
        description="Add two integers.",
        parameters={
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first number."},
                "b": {
                    "type": "integer",
                    "default": 0,
                    "description": "The second number, zero when left out.",
                },
            },
            "required": ["a"],
            "additionalProperties": False,
        },
    )


def test_common_types_map_to_json_schema() -> None:
    spec = tool_spec(search)
    assert spec.description == "Search the index."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "mode": {"enum": ["fast", "deep"], "type": "string", "default": "fast"},
            "score": {
                "type": "number",
                "minimum": 0,
                "default": 0.5,
                "description": "Minimum score.",
            },
            "options": {
                "anyOf": [{"type": "object", "additionalProperties": True}, {"type": "null"}],
                "default": None,
            },
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query", "tags"],
        "additionalProperties": False,
    }


def test_pydantic_models_become_definitions() -> None:
    spec = tool_spec(move)
    assert spec.description == ""
    assert spec.parameters == {
        "$defs": {
            "Point": {
                "type": "object",
                "title": "Point",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
                "required": ["x"],
            }
        },
        "type": "object",
        "properties": {"point": {"$ref": "#/$defs/Point"}, "by": {"type": "integer"}},
        "required": ["point", "by"],
        "additionalProperties": False,
    }


def test_a_field_description_wins_over_the_docstring() -> None:
    properties = tool_spec(described).parameters["properties"]
    assert properties == {"text": {"type": "string", "description": "From the annotation."}}


def test_a_function_without_parameters_has_an_empty_object_schema() -> None:
    assert tool_spec(returns_none).parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_name_and_description_can_be_given() -> None:
    spec = tool_spec(add, name="plus", description="Sum.")
    assert (spec.name, spec.description) == ("plus", "Sum.")


def test_variadic_parameters_are_refused() -> None:
    def many(*values: int) -> int:
        return sum(values)

    def loose(**options: str) -> str:
        return ""

    with pytest.raises(TypeError, match=r"\*values is not supported"):
        tool_spec(many)
    with pytest.raises(TypeError, match=r"\*\*options is not supported"):
        tool_spec(loose)


def test_nameless_callables_are_refused() -> None:
    with pytest.raises(TypeError, match="has no name"):
        tool_spec(lambda x: x)
    with pytest.raises(TypeError, match="must be callable"):
        Tool(3)  # type: ignore[arg-type]


def test_parameter_names_may_clash_with_pydantic_attributes() -> None:
    def fetch(json: str, schema: int = 1, _hidden: bool = False) -> str:
        return f"{json} {schema} {_hidden}"

    assert list(tool_spec(fetch).parameters["properties"]) == ["json", "schema", "_hidden"]
    assert anyio.run(call_tool, fetch, {"json": "j", "_hidden": True}) == "j 1 True"


def test_call_tool_validates_and_converts_the_result() -> None:
    assert anyio.run(call_tool, add, {"a": 2, "b": 3}) == "5"
    assert anyio.run(call_tool, add, {"a": "7"}) == "7"  # lax coercion, as pydantic does
    assert anyio.run(call_tool, search, {"query": "q", "tags": []}) == '["q"]'
    assert anyio.run(call_tool, returns_none, {}) == "null"
    moved = anyio.run(call_tool, move, {"point": {"x": 1}, "by": 2})
    assert moved == '{"x":3,"y":2}'
    assert anyio.run(call_tool, described, {"text": "as is"}) == "as is"


def test_bad_arguments_raise_a_readable_error() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        anyio.run(call_tool, add, {"a": "two", "c": 1})
    assert str(caught.value) == (
        "invalid arguments for add: a: Input should be a valid integer, unable to parse "
        "string as an integer; c: Extra inputs are not permitted"
    )
    with pytest.raises(ToolArgumentsError, match="a: Field required"):
        anyio.run(call_tool, add, {"b": 1})


def test_async_tools_are_awaited_and_sync_tools_run_in_a_thread() -> None:
    import threading

    main = threading.get_ident()
    seen: list[int] = []

    def where() -> str:
        seen.append(threading.get_ident())
        return "sync"

    async def later(n: int) -> dict[str, int]:
        await anyio.lowlevel.checkpoint()
        seen.append(threading.get_ident())
        return {"n": n}

    async def both() -> tuple[str, str]:
        return await call_tool(where, {}), await call_tool(later, {"n": 1})

    assert anyio.run(both) == ("sync", '{"n":1}')
    assert seen[0] != main
    assert seen[1] == main


def test_tool_exceptions_propagate_from_call_tool() -> None:
    def boom() -> str:
        raise RuntimeError("nope")

    with pytest.raises(RuntimeError, match="nope"):
        anyio.run(call_tool, boom, {})


def note_here(ctx: TrialContext, text: str) -> str:
    """Note where the tool ran."""
    return f"{ctx.task.id}#{ctx.trial_index}: {text}"


def test_a_trial_context_parameter_is_hidden_and_injected() -> None:
    tool = Tool(note_here)
    assert tool.spec.parameters["properties"] == {"text": {"type": "string"}}
    assert tool.spec.parameters["required"] == ["text"]
    ctx = TrialContext(task=Task(id="t", input="go"), trial_index=2)
    assert anyio.run(lambda: tool.call({"text": "hi"}, ctx=ctx)) == "t#2: hi"
    with pytest.raises(ToolArgumentsError):  # the model cannot pass the context itself
        anyio.run(lambda: tool.call({"text": "hi", "ctx": "x"}, ctx=ctx))
    with pytest.raises(RuntimeError, match="outside a trial"):
        anyio.run(lambda: tool.call({"text": "hi"}))


def test_two_trial_context_parameters_are_refused() -> None:
    def twice(a: TrialContext, b: TrialContext) -> str:
        """Twice."""
        return ""

    with pytest.raises(TypeError, match="two parameters take the TrialContext"):
        Tool(twice)
