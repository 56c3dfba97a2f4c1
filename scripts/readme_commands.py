"""Print one of the README's two front-door commands, exactly as a reader copies it.

python scripts/readme_commands.py quickstart   # the block after the "Quickstart" paragraph
python scripts/readme_commands.py tests        # the block after "Tests:"

`.ci/run` runs what this prints, so CI checks the commands the README shows, never a copy.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
LABELS = {"quickstart": "Quickstart", "tests": "Tests:"}
_BLOCK = re.compile(r"^```bash\n(.*?)\n```$", re.MULTILINE | re.DOTALL)


def command(which: str, text: str) -> str:
    """The bash block that follows the first paragraph starting with the label of `which`."""
    label = LABELS[which]
    start = next((m.start() for m in re.finditer(rf"^{re.escape(label)}", text, re.M)), None)
    if start is None:
        raise LookupError(f"README.md has no paragraph starting with {label!r}")
    block = _BLOCK.search(text, start)
    if block is None:
        raise LookupError(f"README.md has no ```bash block after {label!r}")
    return block.group(1).strip()


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in LABELS:
        print(f"usage: {sys.argv[0]} {'|'.join(LABELS)}", file=sys.stderr)
        sys.exit(2)
    try:
        print(command(sys.argv[1], README.read_text(encoding="utf-8")))
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
