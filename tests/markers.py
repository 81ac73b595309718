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

And one `xdist_group` each, for `make test`'s two pytest-xdist workers (`-n 2 --dist loadgroup`:
a group runs on one worker, its tests one after another):
- ONE_AT_A_TIME: the `slow` tests (the kill suite and the soak, which hold deadlines, the
  retrieval gate, fuzzing, the model switch, the bench smokes that build engines) and those
  that measure the machine (ONE_AT_A_TIME_TESTS): never two of them at once, so each has the
  other core for its child processes, as in a serial run;
- every other test: its module, so that a module-scoped fixture (a server, an ingested store,
  Chromium) starts once and its tests share it, as they do serially.
Everything else is already per worker: ports come from the OS (helpers.free_port), files from
tmp_path/tmp_path_factory (one base folder per worker), and no test writes in the checkout.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

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


ONE_AT_A_TIME = "one-at-a-time"
# tests, by node id prefix, that measure the machine: another worker's load would change what
# they measure
ONE_AT_A_TIME_TESTS = (
    # its "after" state wants the core its own hog does not hold (its "before" accepts the
    # other worker's load, said in the log)
    "tests/unit/embedder/test_embedder_threads.py::test_queries_go_to_one_thread_while_another",
    # the memory bench: resident memory of embedder processes side by side, and the throughput
    # bench's ratios (marked slow too)
    "tests/bench/test_bench_smoke.py::",
)


def xdist_group(item: pytest.Item) -> str:
    if item.get_closest_marker("slow") is not None or item.nodeid.startswith(ONE_AT_A_TIME_TESTS):
        return ONE_AT_A_TIME
    return item.nodeid.split("::", 1)[0]


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
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


def group_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker is not None else item.nodeid


# pytest-xdist's own `--dist loadgroup` tells its scheduler a test's group by a suffix it appends
# to the node id on the worker, which pytest 9.2's node ids no longer take (pytest-xdist issue
# 1386: every test would go out on its own, silently). Instead each worker writes its table of
# groups to a folder the controller made, and the controller's scheduler (xdist's loadscope,
# keyed by that table) reads it once all workers have collected.
GROUPS_FOLDER = "xdist_groups_folder"  # the key in each worker's workerinput
groups_folder_key = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and config.getoption("dist", "no") == "loadgroup":
        config.stash[groups_folder_key] = Path(tempfile.mkdtemp(prefix="xdist-groups-"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if groups_folder_key in config.stash:
        shutil.rmtree(config.stash[groups_folder_key], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if groups_folder_key in node.config.stash:
        node.workerinput[GROUPS_FOLDER] = str(node.config.stash[groups_folder_key])


class ByGroup(LoadScopeScheduling):
    """xdist's loadscope with the workers' groups for scopes: a group runs on one worker."""

    def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
        super().__init__(config, log)
        self.folder, self.groups = folder, dict[str, str]()

    def _split_scope(self, nodeid: str) -> str:
        if not self.groups:  # every worker has collected (and written) by now
            for table in sorted(self.folder.glob("*.json")):
                self.groups.update(json.loads(table.read_text(encoding="utf-8")))
        return self.groups.get(nodeid, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ByGroup | None:
    if groups_folder_key not in config.stash:
        return None
    return ByGroup(config, log, config.stash[groups_folder_key])


# after pytest-randomly's shuffle (pytest takes only hooks named pytest_*: specname says which)
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_on_a_worker(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """On an xdist worker: ONE_AT_A_TIME's tests first (a stable sort: the same order on every
    worker), so that `--no-loadscope-reorder` hands the longest group out first rather than
    last, when the other worker would have nothing left to run beside it; then the groups,
    for the controller."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    items.sort(key=lambda item: group_of(item) != ONE_AT_A_TIME)
    if GROUPS_FOLDER in workerinput:
        table = Path(workerinput[GROUPS_FOLDER]) / f"{workerinput['workerid']}.json"
        partial = table.with_suffix(".partial")
        partial.write_text(json.dumps({item.nodeid: group_of(item) for item in items}), "utf-8")
        partial.rename(table)
