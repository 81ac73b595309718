"""The suite's markers, set at collection on every test (pyproject registers them):

- `process`: the test starts real processes — an embedder, the MCP server, a script, Chromium —
  through a fixture that starts one (PROCESS_FIXTURES, directly or through another fixture), or
  in its own code or a helper of its module that it calls (a name of PROCESS_NAMES used); or it
  says so itself (`@pytest.mark.process`, e.g. for a fork);
- `unit`: every other test (in-process: seconds);
- `slow`: minutes of real work, set by hand (e.g. the retrieval gate, fuzzing, the soak, the kill
  suite).

`make test-fast` runs `-m "unit and not slow"`, the inner loop; `make test` runs everything
(what CI runs). A short `git ls-files` from kb.sources does not make a test `process`.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest

# fixtures that start processes; a test using one through another fixture has it in its closure
PROCESS_FIXTURES = frozenset({"start_embedder", "start_server", "browser"})
# names whose use in a test (or in a helper of its module that it calls) starts a process
PROCESS_NAMES = frozenset(
    {"subprocess", "run_script", "ServiceProcess", "EmbedderProcess", "ServerProcess", "Child"}
)


def _names(code: types.CodeType) -> Iterator[str]:
    """The global and attribute names `code` uses, its lambdas' and comprehensions' included."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def calls_processes(function: types.FunctionType, module: types.ModuleType) -> bool:
    """Whether `function`, or a function of `module` it uses (transitively), names one of
    PROCESS_NAMES."""
    seen: set[str] = set()
    todo = [function]
    while todo:
        names = set(_names(todo.pop().__code__))
        if names & PROCESS_NAMES:
            return True
        for name in names - seen:
            seen.add(name)
            helper = vars(module).get(name)
            if isinstance(helper, types.FunctionType) and helper.__module__ == module.__name__:
                todo.append(helper)
    return False


def starts_processes(item: pytest.Item) -> bool:
    if item.get_closest_marker("process") is not None:
        return True
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    function, module = getattr(item, "function", None), getattr(item, "module", None)
    if not isinstance(function, types.FunctionType) or module is None:
        return True  # not a plain test function: assume the worst
    return calls_processes(function, module)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.process if starts_processes(item) else pytest.mark.unit)
