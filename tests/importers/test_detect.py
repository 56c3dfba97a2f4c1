from pathlib import Path

import pytest

from trialkit.loaders.importers import ImportFailed, detect_format, load_import_target
from trialkit.loaders.importers.detect import split_prefix

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "imports"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    write = {
        "evals.jsonl": '\n{"input": "q", "ideal": "a"}\n',
        "inspect.jsonl": '{"input": "q", "target": "a"}\n',
        "mc.jsonl": '{"input": "q", "choices": ["a", "b"], "target": "A"}\n',
        "inspect.json": '[{"input": "q", "target": "a"}]',
        "inspect.csv": "id,input,target\n1,q,a\n",
        "other.csv": "question,answer\nq,a\n",
        "other.jsonl": '{"prompt": "q"}\n',
        "broken.jsonl": "{oops\n",
        "config.yaml": "prompts: [hi]\nproviders: [echo]\n",
        "promptfooconfig.yaml": "not: [valid",
        "suite.yaml": "id: s\nprompts: [x]\ntasks: []\ntests: []\n",
        "plain.yaml": "id: s\ntasks: []\n",
        "rows.parquet": "",
        "agent.py": "x = 1\n",
    }
    for name, text in write.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("evals.jsonl", "evals"),
        ("inspect.jsonl", "inspect"),
        ("mc.jsonl", "inspect"),
        ("inspect.json", "inspect"),
        ("inspect.csv", "inspect"),
        ("config.yaml", "promptfoo"),
        ("promptfooconfig.yaml", "promptfoo"),  # by its name, even when broken
        ("rows.parquet", "hf"),
        ("other.csv", None),
        ("other.jsonl", None),
        ("broken.jsonl", None),
        ("suite.yaml", None),  # a trialkit suite file
        ("plain.yaml", None),
        ("agent.py", None),
        ("absent.jsonl", None),
        (".", None),
    ],
)
def test_detect_format(files: Path, name: str, kind: str | None) -> None:
    assert detect_format(files / name) == kind


def test_prefixes(files: Path) -> None:
    assert split_prefix(f"evals:{files / 'other.jsonl'}") == ("evals", files / "other.jsonl")
    assert split_prefix("hf:data/") == ("hf", Path("data/"))
    assert split_prefix("inspect:rows.csv") == ("inspect", Path("rows.csv"))
    assert split_prefix("evals:suite") is None  # a Python target: module evals, attribute suite
    assert split_prefix("pkg.module:suite") is None
    assert split_prefix("C:\\evals\\x.py") is None


def test_load_import_target(files: Path) -> None:
    suite = load_import_target(str(files / "inspect.csv"), model="scripted/echo")
    assert suite is not None and suite.model == "scripted/echo"
    forced = load_import_target(f"inspect:{files / 'inspect.jsonl'}")
    assert forced is not None and forced.metadata["source"] == "inspect_ai"
    with pytest.raises(ImportFailed, match="ideal: missing"):
        load_import_target(f"evals:{files / 'inspect.jsonl'}")
    assert load_import_target(str(files / "agent.py")) is None
    assert load_import_target("package.module:suite") is None
    with pytest.raises(ImportFailed, match=r"missing\.jsonl: no such file or folder"):
        load_import_target("evals:missing.jsonl")
    with pytest.raises(ImportFailed, match="invalid YAML"):
        load_import_target(str(files / "promptfooconfig.yaml"))


def test_the_examples_are_recognised() -> None:
    assert detect_format(EXAMPLES / "promptfoo" / "promptfooconfig.yaml") == "promptfoo"
    assert detect_format(EXAMPLES / "openai_evals" / "arithmetic.jsonl") == "evals"
    assert detect_format(EXAMPLES / "inspect" / "capitals.jsonl") == "inspect"
