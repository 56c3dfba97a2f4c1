"""`shape_problem`: where a parsed body first differs from the shape a provider reads, said as
a path into the body (the message a malformed answer's error carries)."""

from __future__ import annotations

import pytest

from trialkit.models._convert import NULL, TEXT, ListOf, Obj, Shape, shape_problem

_TOOL_CALL = Obj({"function": Obj({"name": (str,), "arguments": TEXT})})


@pytest.mark.parametrize(
    ("value", "shape", "where", "expected"),
    [
        (
            {"a": {"b": [1, "x"]}},
            Obj({"a": Obj({"b": ListOf((int,))})}),
            "",
            ("a.b[1] is a string, expected a whole number"),
        ),
        ({"a": {}}, Obj({"a": Obj({"b": Obj({})})}), "", "a.b is missing"),
        (
            {"function": {"name": 3}},
            _TOOL_CALL,
            "choices[0].message.tool_calls[2]",
            ("choices[0].message.tool_calls[2].function.name is a number, expected a string"),
        ),
        (
            [{"x": True}],
            ListOf(Obj({"x": (int, NULL)})),
            "",
            ("[0].x is true, expected a whole number or null"),
        ),
        (
            [[[1], [2, "x"]]],
            ListOf(ListOf(ListOf((int,)))),
            "",
            ("[0][1][1] is a string, expected a whole number"),
        ),
        ("text", Obj({}), "", "the body is a string, expected an object"),
        (
            [],
            ListOf((int,), non_empty=True),
            "",
            ("the body is an empty list, expected a non-empty list"),
        ),
        (None, Obj({}), "usage", "usage is null, expected an object"),
    ],
)
def test_the_first_mismatch_is_named_by_its_path(
    value: object, shape: Shape, where: str, expected: str
) -> None:
    assert shape_problem(value, shape, where) == expected


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ({"a": None, "b": [1, 2]}, Obj({"a": Obj({}, nullable=True), "b": ListOf((int,))})),
        ({}, Obj({"a": (str, NULL), "b": ListOf((int,), nullable=True)})),
        ({"function": {"name": "f", "arguments": None}, "extra": [1]}, _TOOL_CALL),
        (None, ListOf((int,), nullable=True)),
    ],
)
def test_a_body_of_the_shape_has_no_problem(value: object, shape: Shape) -> None:
    assert shape_problem(value, shape) is None
