"""The examples in examples/imports run end to end, offline."""

from pathlib import Path

from tests.importers._run import answering, verdicts
from trialkit.loaders.importers import load_import_target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "imports"


def test_promptfoo_example_runs_with_echo() -> None:
    suite = load_import_target(str(EXAMPLES / "promptfoo" / "promptfooconfig.yaml"))
    assert suite is not None and suite.model == "scripted/echo"
    assert verdicts(suite) == {
        "french-greeting@prompt-1": "pass",
        "french-greeting@formal": "pass",
        "each-language-is-named@prompt-1": "pass",
        "each-language-is-named@formal": "pass",
        "each-language-is-named-2@prompt-1": "pass",
        "each-language-is-named-2@formal": "pass",
        "scored-checks@prompt-1": "pass",
        "scored-checks@formal": "pass",
    }


def test_openai_evals_example() -> None:
    model = answering(
        {
            "What is 12 times 12?": "144",
            "What is 7 plus 8?": "It is 15",  # Match needs the answer first
            "What is 100 divided by 4?": "25",
            "How many sides does a hexagon have? Answer with the number only.": "six",
        }
    )
    suite = load_import_target(
        f"evals:{EXAMPLES / 'openai_evals' / 'arithmetic.jsonl'}", model=model
    )
    assert suite is not None
    assert verdicts(suite) == {
        "arithmetic-1": "pass",
        "arithmetic-2": "fail",
        "arithmetic-3": "pass",
        "arithmetic-4": "pass",
    }


def test_inspect_example() -> None:
    model = answering(
        lambda prompt: "ANSWER: B" if "Australia" in prompt else prompt.replace("What is", "It is")
    )
    suite = load_import_target(str(EXAMPLES / "inspect" / "capitals.jsonl"), model=model)
    assert suite is not None
    # echo-like answers name no capital; the multiple-choice answer is right
    assert verdicts(suite) == {
        "france": "fail",
        "japan": "fail",
        "kenya": "fail",
        "australia-mc": "pass",
    }
