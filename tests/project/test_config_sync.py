"""The settings the code reads, `.env.example` and the settings table of docs/guide/configuration.md
name exactly the same settings, with the same defaults: a setting added in one place and
forgotten in another fails here, and the failure prints the lines to paste."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import TypeAdapter
from stack_files import (
    COMPOSE_FILES,
    ENV_EXAMPLE,
    README_TABLE_HEADER,
    REPO_ROOT,
    compose_only_names,
    compose_variables,
    embedder_settings_class,
    env_example_comments,
    env_example_entries,
    expected_names,
    readme_row,
    readme_table_names,
    setting_fields,
)

from kb.core.settings import Settings
from kb.sources import registry


def _difference_report(where: str, listed: set[str], lines_for_missing: list[str]) -> str:
    missing = expected_names() - listed
    extra = listed - expected_names()
    report = [f"{where} is out of sync with the settings classes and docker-compose.yml"]
    if missing:
        report += ["missing (add these lines):", *lines_for_missing]
    if extra:
        report.append(f"not read by anything (remove): {', '.join(sorted(extra))}")
    return "\n".join(report)


def _env_lines(name: str) -> list[str]:
    fields = setting_fields().get(name)
    description = fields[0][1].description if fields else "..."
    return [f"# {description}", f"#{name}=..."]


def test_env_example_lists_exactly_the_settings_the_code_and_compose_read() -> None:
    listed = set(env_example_entries())
    missing = sorted(expected_names() - listed)
    lines = [line for name in missing for line in _env_lines(name)]
    assert listed == expected_names(), _difference_report(".env.example", listed, lines)


def test_readme_configuration_table_lists_exactly_the_same_names() -> None:
    names = readme_table_names()
    if names is None:
        table = [README_TABLE_HEADER, *(readme_row(n) for n in sorted(expected_names()))]
        pytest.fail(
            "docs/guide/configuration.md has no '## Settings' section; add it with:\n"
            + "\n".join(table)
        )
    assert len(names) == len(set(names)), "docs/guide/configuration.md lists a name twice"
    missing = sorted(expected_names() - set(names))
    rows = ([README_TABLE_HEADER] if not names else []) + [readme_row(n) for n in missing]
    report = _difference_report("docs/guide/configuration.md", set(names), rows)
    assert set(names) == expected_names(), report


def test_the_two_settings_classes_agree_on_shared_names() -> None:
    # LOG_LEVEL is read by both: one name must mean one thing with one default.
    for name, fields in setting_fields().items():
        defaults = {repr(info.default) for _, info in fields}
        assert len(defaults) == 1, f"{name}: different defaults {defaults}"


def test_env_example_shows_the_code_defaults() -> None:
    for name, value in env_example_entries().items():
        fields = setting_fields().get(name)
        if not fields:  # compose-only: the default is the one in docker-compose.yml
            assert value == compose_variables()[name], name
            continue
        info = fields[0][1]
        parsed = TypeAdapter(info.annotation).validate_python(value)
        if info.default_factory is not None:
            continue  # machine-dependent (e.g. EMBED_THREADS): the value only has to parse
        expected = info.default
        if isinstance(expected, Path):
            parsed = REPO_ROOT / parsed  # shown relative to the repository
        assert parsed == expected, (
            f".env.example: {name}={value!r}, the code's default is {expected!r}"
        )


def test_env_example_calls_a_value_an_example_where_the_default_depends_on_the_machine() -> None:
    # EMBED_THREADS defaults to the usable CPU cores: a number shown for it is not "the default"
    for name, value in env_example_entries().items():
        fields = setting_fields().get(name)
        if fields and fields[0][1].default_factory is not None:
            comment = env_example_comments()[name]
            assert f"{value} is only an example" in comment, f".env.example: {name}: {comment}"


def test_compose_defaults_equal_the_code_defaults() -> None:
    # `${COLLECTION:-notes}` must not quietly give the containers another default than the code.
    fields = setting_fields()
    for path in COMPOSE_FILES:
        for name, default in compose_variables(path).items():
            assert default is not None, f"{path.name}: ${{{name}}} needs a :-default"
            if name in fields:
                info = fields[name][0][1]
                parsed = TypeAdapter(info.annotation).validate_python(default)
                assert parsed == info.default, f"{path.name}: {name} defaults to {default!r}"


def test_env_example_marks_what_compose_passes_into_the_containers() -> None:
    marked = {n for n, c in env_example_comments().items() if c.endswith("[compose]")}
    passed = {n for p in COMPOSE_FILES for n in compose_variables(p)} - compose_only_names()
    assert marked == passed


def test_every_env_example_entry_has_a_comment_above_it() -> None:
    for name, comment in env_example_comments().items():
        assert comment, f".env.example: {name} has no comment line above it"


def test_env_example_uncommented_is_a_valid_env_file(tmp_path: Path) -> None:
    # A user who uncomments every line gets the defaults, not a validation error.
    env_file = tmp_path / ".env"
    env_file.write_text(re.sub(r"(?m)^#([A-Z])", r"\1", ENV_EXAMPLE.read_text()))
    settings = Settings(_env_file=env_file)
    registry.check(settings)  # every kind's own settings, read from the same file
    assert Settings.model_fields["COLLECTION"].default == settings.COLLECTION
    embedder = embedder_settings_class()(_env_file=env_file)
    assert embedder_settings_class().model_fields["EMBED_MODEL"].default == embedder.EMBED_MODEL
