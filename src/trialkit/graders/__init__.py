"""Graders: code checks over the output, composition, and the `@grader` decorator."""

from trialkit.graders.base import (
    FunctionGrader,
    GradeContext,
    Grader,
    GraderLike,
    GraderResult,
    as_grader,
    grader,
    shared,
)
from trialkit.graders.compose import all_of, any_of, weighted
from trialkit.graders.text import (
    agent_failed,
    contains,
    equals,
    matches,
    not_contains,
    parse_json_output,
    predicate,
    valid_json,
)

__all__ = [
    "FunctionGrader",
    "GradeContext",
    "Grader",
    "GraderLike",
    "GraderResult",
    "agent_failed",
    "all_of",
    "any_of",
    "as_grader",
    "contains",
    "equals",
    "grader",
    "matches",
    "not_contains",
    "parse_json_output",
    "predicate",
    "shared",
    "valid_json",
    "weighted",
]
