"""How text reads once Unicode look-alikes and JSON escapes are read past.

`fold` maps a character to what it reads as; `score_labels` finds where the text, or any JSON
string in it as a parser decodes it, holds something that reads as a `SCORE:` label. The
look-alikes are Unicode's confusables (UTS #39 `confusables.txt`, as the
`confusable-homoglyphs` package ships it), read on first use rather than kept in a table here.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence

_DROPPED = {"Cf", "Mn", "Me", "Cc"}  # invisible: format characters, combining marks, controls
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
"""Where `str.splitlines` breaks a line (the answer's lines are split the same way)."""
_BIDI_MARKS = "\u200e\u200f"
"""The data wraps right-to-left characters in these; they are no part of the character."""
_SMALL_CAPITAL = re.compile(r"LATIN LETTER SMALL CAPITAL ([A-Z])")
_LEFT_ANGLE = re.compile(r"\bLEFT\b.*\bANGLE\b|\bLESS-THAN (?:SIGN|BRACKET)\b")


@functools.cache
def _confusables() -> tuple[dict[str, str], dict[str, frozenset[str]]]:
    """Unicode's confusables (UTS #39 `confusables.txt`, as the `confusable-homoglyphs` package
    ships it): each non-ASCII character that looks like one printable ASCII character, mapped to
    it; and each non-ASCII character's non-ASCII look-alikes. Read once, on first use."""
    from importlib import resources

    raw = resources.files("confusable_homoglyphs").joinpath("confusables.json")
    data: dict[str, list[dict[str, str]]] = json.loads(raw.read_text(encoding="utf-8"))
    ascii_of: dict[str, set[str]] = {}
    others: dict[str, set[str]] = {}
    for key, glyphs in data.items():
        a = key.strip(_BIDI_MARKS)
        for glyph in glyphs:
            b = glyph["c"].strip(_BIDI_MARKS)
            if len(a) != 1 or len(b) != 1 or a == b:
                continue
            for x, y in ((a, b), (b, a)):
                if x.isascii():
                    continue
                if y.isascii() and y.isprintable():
                    ascii_of.setdefault(x, set()).add(y)
                elif not y.isascii():
                    others.setdefault(x, set()).add(y)
    chosen = {ch: min(options, key=_preference) for ch, options in ascii_of.items()}
    return chosen, {ch: frozenset(found) for ch, found in others.items()}


def _preference(ch: str) -> tuple[int, str]:
    """Which ASCII character a look-alike of several stands for: a letter (lower case first),
    then a digit, then anything else."""
    rank = 0 if ch.islower() else 1 if ch.isalpha() else 2 if ch.isdigit() else 3
    return rank, ch


def _direct(ch: str) -> str | None:
    """The ASCII character that `ch`, or its other case, imitates in Unicode's data."""
    prototypes, _ = _confusables()
    for form in (ch, ch.casefold(), ch.lower(), ch.upper()):
        if len(form) != 1:
            continue
        if form.isascii():
            return form
        if form in prototypes:
            return prototypes[form]
    return None


def _prototype(ch: str) -> str:
    """The ASCII character `ch` imitates, else `ch`: from Unicode's confusables, directly or
    through one look-alike of it, and from the character's Unicode name for two classes the
    data leaves out (small capitals, left angle brackets)."""
    found = _direct(ch)
    if found is not None:
        return found
    name = unicodedata.name(ch, "")
    small = _SMALL_CAPITAL.fullmatch(name)
    if small:
        return small[1]
    if _LEFT_ANGLE.search(name):
        return "<"
    _, others = _confusables()
    via = sorted(x for x in map(_direct, others.get(ch, ())) if x is not None)
    return min(via, key=_preference) if via else ch


@functools.lru_cache(maxsize=1 << 16)
def fold(ch: str) -> str:
    """What one character reads as: compatibility-decomposed, unaccented, each Unicode
    confusable mapped to the ASCII it imitates, lower-case; invisible characters read as
    nothing and every line break as `\\n`."""
    if ch in _LINE_BREAKS:
        return "\n"
    if ch == "\t":
        return ch
    if unicodedata.category(ch) in _DROPPED:
        return ""
    pieces = [
        c for c in unicodedata.normalize("NFKD", ch) if unicodedata.category(c) not in _DROPPED
    ]
    if all(c.isascii() for c in pieces):  # a compatibility form or an accented letter
        return "".join(pieces).casefold()
    whole = _direct(ch)  # before decomposing: "ϲ" is a "c", though it decomposes to a sigma
    if whole is not None:
        return whole.casefold()
    return "".join(_prototype(c) for c in pieces).casefold()


def folded(text: str) -> str:
    return "".join(fold(ch) for ch in text)


_SCORE_LABEL = re.compile(r"(?<![a-z0-9])score[^a-z0-9]*:")
"""A `SCORE:` look-alike anywhere, matched on the folded text (across line breaks, as in a
JSON key `"score"\\n:`); what the text protocol accepts as a score line in the judge's
answer is a subset, so nothing from the content can be read as a score."""
_JSON_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_JSON_DEPTH = 3
"""How many times a string is decoded again (JSON in a JSON string, in a JSON string)."""


def score_labels(text: str, origin: Sequence[int] | None = None, depth: int = 0) -> set[int]:
    """Where, in the original text, a score label starts: one that reads as `SCORE:` after
    folding look-alikes, in `text` itself or in any of its JSON strings as a parser decodes
    them (`"\\u0073core"` is `"score"`), a string followed by a colon being a key."""
    origin = range(len(text)) if origin is None else origin
    found_in, where = skeleton(text, lambda c: True)
    found = {origin[where[m.start()]] for m in _SCORE_LABEL.finditer(found_in)}
    if depth < _JSON_DEPTH:
        for view, view_origin in _json_strings(text):
            found |= score_labels(view, [origin[i] for i in view_origin], depth + 1)
    return found


def _json_strings(text: str) -> Iterator[tuple[str, list[int]]]:
    """Each stretch between two unescaped double quotes, which a parser may read as a string
    (whichever way the quotes pair), decoded as JSON decodes it and followed by what comes after
    its closing quote up to the next one (where a key's colon is); with each character's index
    in `text`."""
    quotes = _unescaped_quotes(text)
    for k, (a, b) in enumerate(itertools.pairwise(quotes)):
        view, origin = _decode_json_string(text, a + 1, b)
        after = quotes[k + 2] if k + 2 < len(quotes) else len(text)
        view += text[b:after]
        origin.extend(range(b, after))
        yield view, origin


def _unescaped_quotes(text: str) -> list[int]:
    quotes: list[int] = []
    backslashes = 0
    for i, ch in enumerate(text):
        if ch == '"' and backslashes % 2 == 0:
            quotes.append(i)
        backslashes = backslashes + 1 if ch == "\\" else 0
    return quotes


def _decode_json_string(text: str, start: int, end: int) -> tuple[str, list[int]]:
    """`text[start:end]` with its JSON escapes decoded, and where each character came from (an
    escape comes from its backslash); an escape JSON does not know is kept as it is."""
    chars: list[str] = []
    origin: list[int] = []
    i = start
    while i < end:
        ch, step = text[i], 1
        if ch == "\\" and i + 1 < end:
            escape = text[i + 1]
            if escape in _JSON_ESCAPES:
                ch, step = _JSON_ESCAPES[escape], 2
            elif escape == "u" and _HEX4.fullmatch(text, i + 2, i + 6):
                code, step = int(text[i + 2 : i + 6], 16), 6
                low = i + 8
                if (
                    0xD800 <= code < 0xDC00
                    and text.startswith("\\u", i + 6)
                    and _HEX4.fullmatch(text, low, low + 4)
                    and 0xDC00 <= int(text[low : low + 4], 16) < 0xE000
                ):
                    code = 0x10000 + ((code - 0xD800) << 10) + int(text[low : low + 4], 16) - 0xDC00
                    step = 12
                ch = chr(code)
        chars.append(ch)
        origin.append(i)
        i += step
    return "".join(chars), origin


def skeleton(text: str, keep: Callable[[str], bool]) -> tuple[str, list[int]]:
    """The folded characters of `text` that `keep` accepts, and where each came from, so a
    match on look-alikes (`</gradеd_output>` with a Cyrillic "е") maps back to the original."""
    skeleton: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        for c in fold(ch):
            if keep(c):
                skeleton.append(c)
                origin.append(i)
    return "".join(skeleton), origin
