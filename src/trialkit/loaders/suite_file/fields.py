"""Building blocks of the suite-file models: the strict base, shorthands, one-key choices."""

from __future__ import annotations

import datetime
import difflib
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    Tag,
    WithJsonSchema,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from trialkit.task import MAX_TIMEOUT_S, MAX_TRIALS, id_problem

TAG = "~"
"""Union members are tagged `~name`; the tags show up in error locations and are dropped there."""

TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
"""A `{{field}}` of a dataset block; group 1 is the field's name."""


def has_template(text: str) -> bool:
    """Whether `text` holds a `{{field}}` (such a value is checked once it is filled in)."""
    return TEMPLATE.search(text) is not None


def problem(message: str) -> PydanticCustomError:
    """A validation error whose message is shown as it is (no "Value error, " prefix)."""
    return PydanticCustomError("suite_file", "{message}", {"message": message})


class FileModel(BaseModel):
    """Base of everything a suite or task file holds: unknown fields and NaN are errors."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        use_attribute_docstrings=True,
        populate_by_name=True,
    )


class Shorthand(FileModel):
    """Arguments that may be written as their one main value: `contains: paris` means
    `contains: {text: paris}`; with `allow_null`, nothing at all (`valid_json:`) means `{}`.
    Written back in the short form when nothing else is set."""

    short_field: ClassVar[str | None] = None
    short_schema: ClassVar[dict[str, Any]] = {"type": "string"}
    allow_null: ClassVar[bool] = False

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        if data is None and cls.allow_null:
            return {}
        if cls.short_field is None or isinstance(data, dict | BaseModel):
            return data
        return {cls.short_field: data}

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        others = [
            name
            for name, info in type(self).model_fields.items()
            if name != self.short_field and getattr(self, name) != info.get_default()
        ]
        if self.short_field and not others and isinstance(data, dict) and self.short_field in data:
            return data[self.short_field]
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        full = dict(handler(schema))
        head: dict[str, Any] = {k: full.pop(k) for k in ("title", "description") if k in full}
        short = [cls.short_schema] if cls.short_field else []
        empty = [{"type": "null"}] if cls.allow_null else []
        return {**head, "anyOf": [*short, *empty, full]}


def _number_as_text(value: Any) -> Any:
    # `contains: 100` in YAML is a number; a bool is almost surely a mistake (`yes`, `on`).
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


TEXT_SCHEMA: dict[str, Any] = {"type": ["string", "number"]}

Text = Annotated[str, BeforeValidator(_number_as_text), WithJsonSchema(TEXT_SCHEMA)]
"""A string; a number is taken as its text (`contains: 100`)."""


def one_key(
    key: Callable[[Any], str | None], *members: tuple[str, Any], error: str | None = None
) -> Any:
    """A union of models told apart by `key(value)`, e.g. the one key of a grader mapping.

    Errors inside a member name the member's fields, not every member of the union; a value
    `key` cannot place is an error saying `error`.
    """
    tagged = tuple(Annotated[cls, Tag(TAG + name)] for name, cls in members)
    union = tagged[0]
    for member in tagged[1:]:
        union = union | member
    by_class = {cls: name for name, cls in members if isinstance(cls, type)}

    def pick(value: Any) -> str | None:
        name = by_class.get(type(value)) if isinstance(value, BaseModel) else key(value)
        return None if name is None else TAG + name

    if error is None:
        return Annotated[union, Discriminator(pick)]
    return Annotated[
        union, Discriminator(pick, custom_error_type="suite_file", custom_error_message=error)
    ]


def key_among(names: tuple[str, ...]) -> Callable[[Any], str | None]:
    """For `one_key`: the one key of a mapping that is among `names`."""

    def key(value: Any) -> str | None:
        found = [k for k in value if k in names] if isinstance(value, dict) else []
        return found[0] if len(found) == 1 else None

    return key


def plural(noun: str) -> str:
    """`grader` -> `graders`, `harness` -> `harnesses`."""
    return noun + ("es" if noun.endswith(("s", "x", "z", "ch", "sh")) else "s")


def check_one_key(kind: str, names: tuple[str, ...], *, only: bool = True) -> BeforeValidator:
    """Reject anything but a mapping with exactly one of `names` as a key (and, when `only`,
    no other key), saying why."""
    return BeforeValidator(one_key_check(kind, names, only=only))


def one_key_check(kind: str, names: tuple[str, ...], *, only: bool = True) -> Callable[[Any], Any]:
    """The check `check_one_key` runs, as a plain function."""
    listing = ", ".join(names)
    kinds = plural(kind)

    def check(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value
        if not isinstance(value, dict):
            raise problem(
                f"expected a mapping like {{{names[0]}: ...}}, got {describe(value)} "
                f"({kinds}: {listing})"
            )
        chosen = [k for k in value if k in names]
        if only and len(value) == 1 and not chosen:
            name = next(iter(value))
            hint = did_you_mean(name, names)
            raise problem(f"unknown {kind} {name!r}{hint} ({kinds}: {listing})")
        if len(chosen) != 1 or (only and len(value) != 1):
            keys = ", ".join(repr(k) for k in value) or "none"
            one = "one key" if only else "one of these keys"
            raise problem(f"a {kind} is a mapping with {one}: {listing}; got {keys}")
        return value

    return check


def did_you_mean(name: object, known: tuple[str, ...] | list[str]) -> str:
    """`; did you mean 'x'?` for a close match of `name` among `known`, or nothing."""
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, [k for k in known if k != name], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def describe(value: Any) -> str:
    """A short description of a value for messages: its type, and the value when short."""
    if isinstance(value, datetime.date):
        return "a date (quote it to make it text)"
    kind = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "nothing (null)",
    }.get(type(value), type(value).__name__)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        shown = repr(value)
        return f"{kind} {shown if len(shown) <= 40 else shown[:39] + '…'}"
    return kind


_REF = re.compile(r"^[^:\s]+:[A-Za-z_][\w.]*$")


def _check_ref(ref: str) -> str:
    if not has_template(ref) and not _REF.match(ref):
        raise problem(
            f"expected a Python reference module:name (e.g. my_graders:polite), got {ref!r}"
        )
    return ref


PythonRef = Annotated[
    str,
    AfterValidator(_check_ref),
    Field(
        description="module:name, imported with the suite's folder on sys.path "
        "(or path/to/file.py:name, relative to the suite's folder)",
        examples=["my_graders:polite"],
    ),
]


def _check_id(value: str) -> str:
    if (message := id_problem(value)) is not None:
        raise problem(message)
    return value


def _no_bool(value: Any) -> Any:
    """YAML's `true` is a bool, which pydantic would otherwise take for the number 1."""
    if isinstance(value, bool):
        raise problem(f"must be a number, got {str(value).lower()}")
    return value


NotBool = BeforeValidator(_no_bool)
"""On every number a file holds: true and false are never numbers."""

SuiteId = Annotated[str, AfterValidator(_check_id)]
"""A suite id: non-empty, without '/', '#' or control characters (as `Suite` requires)."""
TaskId = Annotated[str, AfterValidator(_check_id)]
"""A task id: non-empty, without '/', '#' or control characters (as `Task` requires)."""

Trials = Annotated[int, Field(strict=True, ge=1, le=MAX_TRIALS)]
Seconds = Annotated[float, NotBool, Field(gt=0, le=MAX_TIMEOUT_S)]
Count = Annotated[int, NotBool, Field(ge=0)]
"""A whole number >= 0 (never true/false)."""
Weight = Annotated[float, NotBool, Field(ge=0.0)]
Fraction = Annotated[float, NotBool, Field(ge=0.0, le=1.0)]
"""A number in [0, 1], e.g. a passing threshold."""
