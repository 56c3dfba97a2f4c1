"""Tools from plain Python functions: a JSON Schema from the signature, a checked call.

```python
def add(a: int, b: int = 0) -> int:
    \"\"\"Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    \"\"\"
    return a + b

tool_spec(add)  # ToolSpec(name="add", description="Add two numbers.", parameters={...})
await call_tool(add, {"a": 2, "b": 3})  # "5"
```

The parameters' types come from their type hints, read by pydantic, so `str`, `int`, `float`,
`bool`, `list[str]`, `dict`, `Literal[...]`, `X | None`, `Annotated[X, Field(...)]` and pydantic
models all work. Descriptions come from `Field(description=...)` or, failing that, from a
Google-style `Args:` section of the docstring.

A tool that needs to know which trial it serves (to work in that trial's workspace, say)
declares a parameter annotated `TrialContext`; it is left out of the schema the model sees and
filled in by `Tool.call(arguments, ctx=...)`:

```python
def write_note(ctx: TrialContext, path: str, text: str) -> str:
    \"\"\"Write a note.\"\"\"
    (ctx.world.path / path).write_text(text)
    return "saved"
```
"""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from trialkit._calls import is_async, run_blocking
from trialkit.harness.base import TrialContext
from trialkit.models.base import ToolSpec

__all__ = ["GiveUp", "Tool", "ToolArgumentsError", "call_tool", "tool_spec"]


class ToolArgumentsError(ValueError):
    """The arguments a model gave a tool do not fit the tool's signature."""


class GiveUp(Exception):
    """Raised by a tool to end the agent's turn as a reported failure.

    A `give_up(reason)` tool that raises it lets a model say "this cannot be done" in a way
    graders can check (`outcome.failed`), which is what an `expect="failure"` task looks for.
    """


class _NoFieldTitles(GenerateJsonSchema):
    """Leave out the `title` pydantic derives from each field name: noise to a model."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class Tool:
    """A Python function (sync or async) made callable by a model.

    `spec` describes it to the model; `call` validates the model's arguments against the
    signature, runs the function (sync ones in a worker thread) and returns its result as text.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool must be callable, got {type(fn).__name__}")
        self.fn = fn
        found = name or getattr(fn, "__name__", None)
        if not isinstance(found, str) or not found or found == "<lambda>":
            raise TypeError(f"tool {fn!r} has no name: define it with `def` or give name=...")
        self.name: str = found
        doc = inspect.getdoc(fn) or ""
        self.description = description if description is not None else _summary(doc)
        self._positional: list[str] = []
        self._keyword: list[str] = []
        self.context_param: str | None = None
        """The parameter that receives the `TrialContext`, if the tool takes one."""
        self._model = self._arguments_model(_arg_docs(doc))
        schema = self._model.model_json_schema(schema_generator=_NoFieldTitles)
        schema.pop("title", None)
        schema.setdefault("properties", {})
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)

    def _arguments_model(self, docs: Mapping[str, str]) -> type[BaseModel]:
        try:
            signature = inspect.signature(self.fn)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"tool {self.name!r}: cannot read its signature: {exc}") from None
        try:
            hints = typing.get_type_hints(self.fn, include_extras=True)
        except Exception as exc:
            raise TypeError(f"tool {self.name!r}: cannot resolve its type hints: {exc}") from None
        fields: dict[str, Any] = {}
        for index, (pname, param) in enumerate(signature.parameters.items()):
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                star = "*" if param.kind is param.VAR_POSITIONAL else "**"
                raise TypeError(
                    f"tool {self.name!r}: {star}{pname} is not supported; a tool's parameters "
                    "must be named, so the model can be told what to pass"
                )
            annotation = hints.get(pname, Any)
            if annotation is TrialContext:
                if self.context_param is not None:
                    raise TypeError(f"tool {self.name!r}: two parameters take the TrialContext")
                if param.kind is param.POSITIONAL_ONLY:
                    raise TypeError(
                        f"tool {self.name!r}: the TrialContext parameter {pname!r} "
                        "cannot be positional-only"
                    )
                self.context_param = pname
                continue
            if param.kind is param.POSITIONAL_ONLY:
                self._positional.append(pname)
            else:
                self._keyword.append(pname)
            default = ... if param.default is param.empty else param.default
            info: dict[str, Any] = {"alias": pname}
            if pname in docs and not _has_description(annotation):
                info["description"] = docs[pname]
            # Internal names keep parameters such as `json` or `_x` clear of BaseModel's own.
            fields[f"p{index}"] = (annotation, Field(default, **info))
        return create_model(
            f"{self.name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
            **fields,
        )

    def validate(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments to call the function with.

        Raises `ToolArgumentsError` when `arguments` do not fit the signature.
        """
        try:
            parsed = self._model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolArgumentsError(_explain(self.name, exc)) from None
        values = {
            field.alias or key: getattr(parsed, key)
            for key, field in type(parsed).model_fields.items()
        }
        return [values[n] for n in self._positional], {n: values[n] for n in self._keyword}

    async def call(self, arguments: Mapping[str, Any], *, ctx: TrialContext | None = None) -> str:
        """Validate `arguments`, run the tool and return its result as text.

        `ctx` is passed to a tool that declared a `TrialContext` parameter. Raises
        `ToolArgumentsError` for bad arguments, and whatever the tool raises.
        """
        args, kwargs = self.validate(arguments)
        if self.context_param is not None:
            if ctx is None:
                raise RuntimeError(
                    f"tool {self.name!r} takes the trial's context, but was called outside a "
                    "trial (pass ctx=...)"
                )
            kwargs[self.context_param] = ctx
        if is_async(self.fn):
            result = await self.fn(*args, **kwargs)
        else:
            # Abandoned when the trial is cancelled: a blocking tool cannot hold up its trial,
            # the tool server's stop, or the end of the process.
            result = await run_blocking(functools.partial(self.fn, *args, **kwargs))
            if inspect.isawaitable(result):
                result = await result
        return as_text(result)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


def tool_spec(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> ToolSpec:
    """The `ToolSpec` of a function: its name, docstring summary and a JSON Schema of its
    parameters. Raises `TypeError` for functions a model cannot call (`*args`, `**kwargs`)."""
    return Tool(fn, name=name, description=description).spec


async def call_tool(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> str:
    """Call `fn` with a model's `arguments`, validated against its signature; the result as
    text (a string as it is, anything else as JSON)."""
    return await Tool(fn).call(arguments)


def as_text(value: object) -> str:
    """A tool's return value as the text the model sees: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()


def _has_description(annotation: object) -> bool:
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(
        isinstance(extra, FieldInfo) and extra.description
        for extra in typing.get_args(annotation)[1:]
    )


def _explain(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    return f"invalid arguments for {name}: " + "; ".join(problems)


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _summary(doc: str) -> str:
    """The docstring's first paragraph, on one line."""
    lines: list[str] = []
    for line in doc.strip().splitlines():
        if not line.strip() or _SECTION.match(line.strip()):
            break
        lines.append(line.strip())
    return " ".join(lines)


def _arg_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style `Args:` section."""
    docs: dict[str, str] = {}
    lines = doc.splitlines()
    inside = False
    section_indent = 0
    entry_indent: int | None = None
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped)
        if header:
            inside = header.group(1) in ("Args", "Arguments", "Parameters", "Params")
            section_indent, entry_indent, current = indent, None, None
            continue
        if not inside:
            continue
        if not stripped:
            continue
        if indent <= section_indent:
            inside = False
            continue
        if entry_indent is None:
            entry_indent = indent
        match = _ARG.match(stripped)
        if indent == entry_indent and match:
            current = match.group(1)
            docs[current] = match.group(2).strip()
        elif current is not None and indent > entry_indent:
            docs[current] = f"{docs[current]} {stripped}".strip()
    return docs
