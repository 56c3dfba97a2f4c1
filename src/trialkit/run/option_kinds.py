"""How an option's value is written: as text (a flag, an environment variable, an ini key) or
as a TOML value (`[tool.trialkit]`). Each kind reads both, and says what it expected when it
cannot: the caller names where the value was (`trialkit.run.sources`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class Kind:
    """How a value is written: as text (a flag, an environment variable, an ini key) or as a
    TOML value. Each reader raises `ValueError` with what was expected."""

    expected = "a value"

    def from_text(self, text: str) -> Any:
        return text.strip()

    def from_toml(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(self.expected)
        return self.from_text(value)


class Text(Kind):
    """Any text; with `numbers`, a TOML number is taken as written too (`trials = 3`), for
    values that `RunSettings.parse` reads (`N|auto`, `80%`)."""

    def __init__(self, expected: str = "a string", *, numbers: bool = False) -> None:
        self.expected = expected
        self.numbers = numbers

    def from_toml(self, value: Any) -> Any:
        if self.numbers and isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return super().from_toml(value)


class Location(Text):
    """A file or folder (or, with `url`, a URL): relative to the folder of the file that names
    it (`pyproject.toml`, the ini file), else to the working directory."""

    def __init__(self, *, folder: bool = False, url: bool = False) -> None:
        super().__init__("a path" if not url else "a URL or a path")
        self.folder = folder
        self.url = url


class Whole(Kind):
    def __init__(self, minimum: int = 1) -> None:
        self.minimum = minimum
        self.expected = f"a whole number >= {minimum}"

    def from_text(self, text: str) -> Any:
        try:
            number = int(text.strip())
        except ValueError:
            raise ValueError(self.expected) from None
        return self._checked(number)

    def from_toml(self, value: Any) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(self.expected)
        return self._checked(value)

    def _checked(self, number: int) -> int:
        if number < self.minimum:
            raise ValueError(self.expected)
        return number


class Number(Kind):
    """A number above `minimum` (or at it, unless `open`), at most `maximum`."""

    def __init__(
        self,
        expected: str,
        *,
        minimum: float = 0,
        open: bool = True,
        maximum: float | None = None,
    ) -> None:
        self.expected = expected
        self.minimum = minimum
        self.open = open
        self.maximum = maximum

    def from_text(self, text: str) -> Any:
        try:
            number = float(text.strip())
        except ValueError:
            raise ValueError(self.expected) from None
        return self._checked(number)

    def from_toml(self, value: Any) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(self.expected)
        return self._checked(float(value))

    def _checked(self, number: float) -> float:
        low = number > self.minimum if self.open else number >= self.minimum
        if not low or (self.maximum is not None and number > self.maximum):
            raise ValueError(self.expected)
        return number


class Choice(Kind):
    def __init__(self, *choices: str) -> None:
        self.choices = choices
        self.expected = f"one of {', '.join(choices)}"

    def from_text(self, text: str) -> Any:
        value = text.strip().lower()
        if value not in self.choices:
            raise ValueError(self.expected)
        return value


class Flag(Kind):
    """On or off: `true`/`false` in TOML; 1, true, yes, on (or 0, false, no, off) as text."""

    expected = "true or false"

    def from_text(self, text: str) -> Any:
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError(self.expected)

    def from_toml(self, value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError(self.expected)
        return value


class Names(Kind):
    """Names: comma-separated as text, a list of strings in TOML; each once."""

    expected = "names, comma-separated (a list of strings in TOML)"

    def from_text(self, text: str) -> Any:
        return _names([text])

    def from_toml(self, value: Any) -> Any:
        if isinstance(value, str):
            return _names([value])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(self.expected)
        return _names(value)


class Many(Kind):
    """A flag given once for each value (`--task a --task b`): the command line only."""

    expected = "values"


def _names(values: Sequence[str]) -> tuple[str, ...]:
    names = (part.strip() for value in values for part in value.split(","))
    return tuple(dict.fromkeys(name for name in names if name))
