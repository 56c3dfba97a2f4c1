"""Import a promptfoo config (`promptfooconfig.yaml`): prompts × tests × providers as tasks.

```python
suite = load_promptfoo("promptfooconfig.yaml")
```

What is imported, and how:

- `prompts`: strings with `{{var}}` placeholders, chat prompts (a JSON list of messages),
  `{raw, label}` or `{id: file://..., label}` objects, and `file://` references (relative to
  the config, globs allowed) to text files (split into several prompts at `---` lines) or to
  JSON/YAML/JSONL chat prompts. Prompt functions (.py, .js) are problems.
- `tests` (inline, or `file://` YAML/JSON/JSONL files) merged with `defaultTest` as promptfoo
  does: vars are overlaid, the default assertions come first, the test's `threshold` wins.
  A var holding a list of strings, or a `file://` glob, makes one task per value, as in
  promptfoo; a `file://` var holds the file's text (JSON and YAML files: their data).
- Placeholders are `{{ name }}` or `{{ name.field }}`; Nunjucks tags and filters, and vars a
  test does not define, are problems (promptfoo would render them as empty text).
- `assert`: the deterministic types (see `SUPPORTED_TYPES`), each also with `not-`;
  `assert-set`; `weight` and `threshold`. Without a threshold every assertion must pass
  (one of weight 0 is only reported); with one, the weighted mean of the scores must reach it.
  Any other type (llm-rubric, javascript, python, similar, model-graded-*, ...) is listed, with
  every place it appears, in the one error the import raises: nothing is dropped.
- `providers` (or `targets`): `openai:MODEL`, `openai:chat:MODEL`, `openai:responses:MODEL`
  become `openai/MODEL`; `anthropic:messages:MODEL` becomes `anthropic/MODEL`; `echo` becomes
  `scripted/echo`. One provider becomes the suite's model. With several, each test becomes
  one task per provider (id suffix `@<provider>`, tag `<provider>`), so one run compares them
  as promptfoo's matrix does. `model=` replaces the providers altogether.
- `evaluateOptions.repeat` becomes the trial count. The suite is a regression suite: like
  `promptfoo eval`, the run fails when any test fails.

Task ids come from test descriptions (else `test-N`), with `@<prompt>` when there are several
prompts and `@<provider>` when there are several providers; repeats get `-2`, `-3`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.graders.base import Grader
from trialkit.loaders.importers._common import (
    Problems,
    json_kind,
    read_messages,
    read_text,
    slug,
    unique_ids,
)
from trialkit.loaders.importers._promptfoo_asserts import (
    FAILED,
    SUPPORTED_TYPES,
    UNSUPPORTED_HINT,
    AssertionBuilder,
)
from trialkit.loaders.importers._promptfoo_parts import (
    NO_PROVIDER,
    Doc,
    Provider,
    Spot,
    YamlPath,
    dotted,
    json_or_none,
    read_doc,
    read_providers,
    render,
)
from trialkit.loaders.importers._promptfoo_prompts import Files, Prompt, read_prompts
from trialkit.task import Suite, SuiteError, Task
from trialkit.transcript import Message

if TYPE_CHECKING:
    from trialkit.models.base import Model


_TOP_KEYS = {"description", "prompts", "providers", "targets", "tests", "defaultTest"}
_INERT_TOP_KEYS = {
    "$schema",
    "evaluateOptions",
    "outputPath",
    "sharing",
    "writeLatestResults",
    "tags",
    "env",
    "commandLineOptions",
    "derivedMetrics",
    "metadata",
}
"""Keys that change how promptfoo runs or shares an eval, not what a test checks."""
_TEST_KEYS = {"description", "vars", "assert", "threshold", "options", "metadata"}
_INERT_OPTIONS = {"provider", "rubricPrompt", "disableVarExpansion"}


def load_promptfoo(
    path: str | Path, *, model: str | Model | None = None, suite_id: str | None = None
) -> Suite:
    """A regression suite from a promptfoo config; every problem is raised at once as
    `ImportFailed`. `model` replaces the config's providers."""
    return _Importer(Path(path), model).suite(suite_id)


@dataclass
class _Test:
    doc: Doc
    path: YamlPath
    spec: dict[str, Any]
    number: int


class _Importer:
    def __init__(self, path: Path, model: str | Model | None) -> None:
        self.path = path
        self.base = path.parent
        self.model = model
        self.problems = Problems(str(path))
        self.files = Files(self.base, self.problems)
        self.unsupported: dict[str, list[str]] = {}

    def report(self, at: str | Spot, message: str) -> None:
        self.problems.add(str(at), message)

    def suite(self, suite_id: str | None) -> Suite:
        doc = read_doc(self.path, self.problems)
        self.problems.raise_if_any()
        assert doc is not None
        config = doc.data
        if not isinstance(config, dict):
            self.report(
                doc.source, f"expected a promptfoo config (a mapping), got {json_kind(config)}"
            )
            self.problems.raise_if_any()
        for key in config:
            if key not in _TOP_KEYS and key not in _INERT_TOP_KEYS:
                self.report(doc.at((key,)), "not supported by the promptfoo importer")
        prompts = read_prompts(doc, config.get("prompts"), self.files)
        providers = (
            [NO_PROVIDER] if self.model is not None else read_providers(doc, config, self.report)
        )
        default = config.get("defaultTest") or {}
        if not isinstance(default, dict):
            self.report(
                doc.at(("defaultTest",)), "expected a mapping (file references are not supported)"
            )
            default = {}
        tasks = self._tasks(prompts, providers, self._tests(doc, config.get("tests")), doc, default)
        trials = self._repeat(doc, config.get("evaluateOptions"))
        description = config.get("description")
        if not tasks and not self.problems:
            self.report(doc.source, "no tests to import")
        self._raise_if_any()
        single = providers[0] if len(providers) == 1 else None
        return Suite(
            id=suite_id or self._suite_id(description),
            kind="regression",
            trials=trials,
            tasks=tasks,
            model=self.model if self.model is not None else (single.model if single else None),
            config=single.config if single else None,
            description=description if isinstance(description, str) else None,
            metadata={
                "source": "promptfoo",
                "path": str(self.path),
                "providers": [p.source for p in providers if p.source],
                **({"metadata": config["metadata"]} if "metadata" in config else {}),
            },
        )

    def _raise_if_any(self) -> None:
        summary = hint = None
        if self.unsupported:
            summary = "unsupported assertion types: " + ", ".join(
                f"{kind} ({_places(len(set(at)))})" for kind, at in sorted(self.unsupported.items())
            )
            hint = UNSUPPORTED_HINT.format(types=", ".join(SUPPORTED_TYPES))
        self.problems.raise_if_any(summary, hint)

    def _suite_id(self, description: object) -> str:
        if isinstance(description, str) and slug(description):
            return slug(description)
        stem = self.path.stem
        if stem.startswith("promptfooconfig") and slug(self.path.resolve().parent.name):
            return slug(self.path.resolve().parent.name)
        return slug(stem) or "promptfoo"

    def _repeat(self, doc: Doc, options: object) -> int:
        if not isinstance(options, dict) or "repeat" not in options:
            return 1
        repeat = options["repeat"]
        if isinstance(repeat, int) and not isinstance(repeat, bool) and repeat >= 1:
            return repeat
        self.report(
            doc.at(("evaluateOptions", "repeat")), f"expected a whole number >= 1, got {repeat!r}"
        )
        return 1

    # --- tests ------------------------------------------------------------------------------

    def _tests(self, doc: Doc, raw: object) -> list[_Test]:
        if raw is None:
            return [_Test(doc, ("tests",), {}, 1)]
        items: list[tuple[Doc, YamlPath, object]] = []
        entries: list[tuple[YamlPath, object]]
        if isinstance(raw, str):
            entries = [(("tests",), raw)]
        elif isinstance(raw, list):
            entries = [(("tests", i), item) for i, item in enumerate(raw)]
        else:
            self.report(doc.at(("tests",)), f"expected a list of tests, got {json_kind(raw)}")
            return []
        for path, item in entries:
            if isinstance(item, str) and item.startswith("file://"):
                for file in self.files.paths(item, doc.at(path)):
                    items.extend(self._test_file(file, doc.at(path)))
            else:
                items.append((doc, path, item))
        tests: list[_Test] = []
        for number, (source, path, item) in enumerate(items, start=1):
            if not isinstance(item, dict):
                self.report(source.at(path), f"expected a test (a mapping), got {json_kind(item)}")
                continue
            for key in sorted(set(map(str, item)) - _TEST_KEYS):
                self.report(source.at((*path, key)), "not supported by the promptfoo importer")
            tests.append(_Test(source, path, item, number))
        return tests

    def _test_file(self, path: Path, at: str) -> list[tuple[Doc, YamlPath, object]]:
        suffix = path.suffix.lower()
        if suffix in (".yaml", ".yml", ".json"):
            doc = read_doc(path, self.problems)
            if doc is None:
                return []
            data = doc.data if isinstance(doc.data, list) else [doc.data]
            return [
                (doc, (i,) if isinstance(doc.data, list) else (), t) for i, t in enumerate(data)
            ]
        if suffix == ".jsonl":
            text = read_text(path, self.problems)
            found: list[tuple[Doc, YamlPath, object]] = []
            for number, line in enumerate((text or "").splitlines(), start=1):
                if line.strip():
                    found.append((Doc(str(path), None, {(): number}), (), json_or_none(line)))
            return found
        self.report(at, f"{path.name}: only YAML, JSON and JSONL test files are supported")
        return []

    def _tasks(
        self,
        prompts: list[Prompt],
        providers: list[Provider],
        tests: list[_Test],
        doc: Doc,
        default: dict[str, Any],
    ) -> list[Task]:
        planned: list[_Planned] = []
        cases: list[str] = []
        for test in tests:
            for vars_ in self._var_sets(test, doc, default):
                cases.append(_test_name(test))
                graders = self._graders(test, vars_, doc, default)
                for number, prompt in enumerate(prompts, start=1):
                    rendered = self._render_prompt(prompt, vars_, test)
                    if graders is None or rendered is None:
                        continue
                    for provider in providers:
                        planned.append(
                            _Planned(
                                len(cases) - 1,
                                test,
                                vars_,
                                number,
                                prompt,
                                provider,
                                rendered,
                                graders,
                            )
                        )
        case_names = unique_ids(cases)
        several_prompts, several_providers = len(prompts) > 1, len(providers) > 1
        names = []
        for plan in planned:
            parts = [case_names[plan.case]]
            if several_prompts:
                parts.append(_prompt_name(plan))
            if several_providers:
                parts.append(plan.provider.label)
            names.append("@".join(parts))
        tasks: list[Task] = []
        for task_id, plan in zip(unique_ids(names), planned, strict=True):
            task = self._task(task_id, plan, default, several_prompts, several_providers)
            if task is not None:
                tasks.append(task)
        return tasks

    def _task(
        self,
        task_id: str,
        plan: _Planned,
        default: dict[str, Any],
        several_prompts: bool,
        several_providers: bool,
    ) -> Task | None:
        spec = plan.test.spec
        metadata: dict[str, Any] = {}
        for source in (default.get("metadata"), spec.get("metadata")):
            if isinstance(source, dict):
                metadata.update(source)
        description = spec.get("description")
        metadata |= {
            "vars": plan.vars,
            **({"description": description} if isinstance(description, str) else {}),
            **({"prompt": plan.prompt.label} if plan.prompt.label else {}),
            **({"provider": plan.provider.source} if plan.provider.source else {}),
        }
        tags = [_prompt_name(plan)] if several_prompts else []
        if several_providers:
            tags.append(plan.provider.label)
        try:
            return Task(
                id=task_id,
                input=plan.input,
                graders=list(plan.graders),
                metadata=metadata,
                tags=tags,
                model=plan.provider.model if several_providers else None,
                config=plan.provider.config if several_providers else None,
            )
        except (SuiteError, ValueError) as exc:
            self.report(plan.test.doc.at(plan.test.path), str(exc))
            return None

    def _var_sets(self, test: _Test, doc: Doc, default: dict[str, Any]) -> list[dict[str, Any]]:
        """The vars of each task a test makes: list values and file globs multiply."""
        merged: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for owner, path, raw in (
            (doc, ("defaultTest", "vars"), default.get("vars")),
            (test.doc, (*test.path, "vars"), test.spec.get("vars")),
        ):
            if raw is None:
                continue
            if not isinstance(raw, dict):
                self.report(owner.at(path), f"expected a mapping of vars, got {json_kind(raw)}")
                return []
            for key, value in raw.items():
                merged[str(key)] = value
                sources[str(key)] = owner.at((*path, key))
        options = {**_mapping(default.get("options")), **_mapping(test.spec.get("options"))}
        expand = not options.get("disableVarExpansion")
        choices: list[list[Any]] = []
        for key, value in merged.items():
            if isinstance(value, str) and value.startswith("file://"):
                loaded = [
                    self.files.value(f, sources[key]) for f in self.files.paths(value, sources[key])
                ]
                if not loaded or any(v is FAILED for v in loaded):
                    return []
                choices.append(loaded)
            elif expand and isinstance(value, list) and value and isinstance(value[0], str):
                choices.append(value)
            else:
                choices.append([value])
        return [dict(zip(merged, combo, strict=True)) for combo in itertools.product(*choices)]

    def _graders(
        self, test: _Test, vars_: dict[str, Any], doc: Doc, default: dict[str, Any]
    ) -> list[Grader] | None:
        specs: list[tuple[Spot, object]] = []
        for owner, path, raw in (
            (doc, ("defaultTest", "assert"), default.get("assert")),
            (test.doc, (*test.path, "assert"), test.spec.get("assert")),
        ):
            if raw is None:
                continue
            if not isinstance(raw, list):
                self.report(owner.at(path), f"expected a list of assertions, got {json_kind(raw)}")
                return None
            specs.extend((Spot(owner, (*path, i)), spec) for i, spec in enumerate(raw))
        for owner, path, raw in (
            (doc, ("defaultTest", "options"), default.get("options")),
            (test.doc, (*test.path, "options"), test.spec.get("options")),
        ):
            for key in sorted(set(map(str, _mapping(raw))) - _INERT_OPTIONS):
                self.report(owner.at((*path, key)), "not supported by the promptfoo importer")
        threshold = test.spec.get("threshold", default.get("threshold"))
        before = len(self.problems.items)
        builder = AssertionBuilder(
            lambda value, at: self._render_value(value, str(at), vars_),
            self.report,
            self.unsupported,
        )
        graders = builder.graders(specs, threshold, Spot(test.doc, test.path))
        return None if len(self.problems.items) > before else graders

    # --- templates --------------------------------------------------------------------------

    def _render_prompt(
        self, prompt: Prompt, vars_: dict[str, Any], test: _Test
    ) -> str | list[Message] | None:
        context = f" (vars of {dotted(test.path) or 'the test'})"
        if isinstance(prompt.template, str):
            return render(prompt.template, vars_, prompt.at, self.report, context)
        rendered: list[dict[str, Any]] = []
        for message in prompt.template:
            content = message.get("content")
            if isinstance(content, str):
                text = render(content, vars_, prompt.at, self.report, context)
                if text is None:
                    return None
                message = {**message, "content": text}
            rendered.append(message)
        return read_messages(list(rendered), prompt.at, self.problems)

    def _render_value(self, value: object, at: str, vars_: dict[str, Any]) -> Any:
        if isinstance(value, str):
            if value.startswith("file://"):
                files = self.files.paths(value, at)
                if len(files) != 1:
                    if files:
                        self.report(at, f"{value}: names {len(files)} files, expected one")
                    return FAILED
                return self.files.value(files[0], at)
            rendered = render(value, vars_, at, self.report)
            return FAILED if rendered is None else rendered
        if isinstance(value, list):
            items = [self._render_value(v, at, vars_) if isinstance(v, str) else v for v in value]
            return FAILED if any(i is FAILED for i in items) else items
        return value


@dataclass
class _Planned:
    case: int
    """Which test-and-vars combination this is, in order."""
    test: _Test
    vars: dict[str, Any]
    prompt_number: int
    prompt: Prompt
    provider: Provider
    input: str | list[Message]
    graders: list[Grader]


def _prompt_name(plan: _Planned) -> str:
    return slug(plan.prompt.label or "") or f"prompt-{plan.prompt_number}"


def _places(count: int) -> str:
    return "1 place" if count == 1 else f"{count} places"


def _test_name(test: _Test) -> str:
    description = test.spec.get("description")
    if isinstance(description, str) and slug(description):
        return slug(description)
    return f"test-{test.number}"


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
