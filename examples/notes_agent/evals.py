"""A notes agent at work: it files journal entries in a notes folder, graded on the files it
produced and the order of its tool calls — not on what it says it did.

    trialkit run examples/notes_agent/evals.py

Offline by default: a scripted model (scripted.py) plays the agent's model. To evaluate a real
model instead, name it: `NOTES_AGENT_MODEL=openai/gpt-4o-mini trialkit run ...`.
"""

from __future__ import annotations

import os
from pathlib import Path

from notes import agent
from scripted import model as scripted_model

from trialkit import Suite, Task, Turns, graders
from trialkit.environments import Workspace

HERE = Path(__file__).parent
BOILER = "Areas/Home/2026-11-27 Boiler.md"

suite = Suite(
    id="notes-agent",
    kind="mixed",  # each task says whether it is a regression or a capability task
    trials=5,
    model=os.environ.get("NOTES_AGENT_MODEL") or scripted_model,
    harness=agent,
    environment=Workspace(HERE / "fixtures" / "notes"),  # a fresh copy for every trial
    graders=[graders.no_tool_errors()],
    tasks=[
        Task(
            id="file-sleep-entry",
            kind="regression",  # must pass on every trial
            input="Journal 2026-11-28: Slept badly again, awake from 3am until 5am. "
            "File it as a note titled 'Sleep'.",
            graders=[
                graders.tool_order("read_index", "write_note", "link_note"),
                graders.file_contains("Areas/Health/2026-11-28 Sleep.md", "awake from 3am"),
                graders.file_contains(
                    "index.md",
                    pattern=r"^## Health\n(- .*\n)*- \[\[Areas/Health/2026-11-28 Sleep\]\]",
                ),
                graders.only_changed("Areas/Health/*.md", "index.md"),
            ],
        ),
        Task(
            id="file-review-entry",
            kind="capability",  # passes if any trial passes; pass^k shows how reliably
            input="Journal 2026-11-29: Wrote the quarterly review of the billing project. "
            "File it under Work as a note titled 'Quarterly review', and link it also from "
            "Areas/Work/README.md.",
            graders=[
                graders.file_exists("Areas/Work/2026-11-29 Quarterly review.md"),
                graders.file_contains("index.md", "[[Areas/Work/2026-11-29 Quarterly review]]"),
                graders.file_contains(
                    "Areas/Work/README.md", "[[Areas/Work/2026-11-29 Quarterly review]]"
                ),
                graders.tool_called("link_note", args={"into": "Areas/Work/README.md"}),
            ],
        ),
        Task(
            id="ask-before-filing",
            kind="regression",
            input=Turns(
                "Journal 2026-11-27: The boiler is making the knocking noise again. "
                "Not yet: first tell me which area you would file it under.",
                "Yes, file it there, titled 'Boiler'.",
            ),
            # Asked after each turn: proves the note appeared in turn 2, not before.
            probes={"boiler_note": lambda ws: (ws.path / BOILER).exists()},
            graders=[
                graders.probe("boiler_note", values=[False, True]),
                graders.file_contains(BOILER, "knocking noise"),
            ],
        ),
        Task(
            id="refuse-missing-area",
            kind="regression",
            expect="failure",  # impossible: the agent must say so and touch nothing
            input="Journal 2026-11-30: Paid the electricity bill. File it under the Finance "
            "area as a note titled 'Bills'.",
            graders=[
                graders.agent_failed(),  # it gave up: outcome.failed
                graders.tool_not_called("write_note"),
                graders.unchanged("**"),
            ],
        ),
    ],
)
