"""The base of every grader entry a suite file can hold."""

from __future__ import annotations

from typing import Any, ClassVar

from trialkit.graders.base import GraderLike
from trialkit.loaders.errors import FieldPath
from trialkit.loaders.suite_file.context import BuildContext
from trialkit.loaders.suite_file.fields import FileModel


class GraderEntry(FileModel):
    """A grader in a suite file: a mapping whose one key is the grader's short name."""

    name: ClassVar[str]

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        """The runtime grader, or `None` after recording a problem at `path`."""
        raise NotImplementedError

    def _make(
        self, ctx: BuildContext, path: FieldPath, make: Any, *args: Any, **kw: Any
    ) -> GraderLike | None:
        try:
            made: GraderLike = make(*args, **kw)
            return made
        except (TypeError, ValueError) as exc:
            ctx.problem((*path, self.name), str(exc))
            return None
