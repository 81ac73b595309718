"""Readers for the stack's static files (Dockerfiles, compose files, .dockerignore, .env.example)
shared by test_stack.py, test_entrypoints.py and test_config_sync.py. No Docker engine runs here,
so these implement the small part of each format the tests need, as Docker defines it."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
GPU_COMPOSE_FILE = REPO_ROOT / "docker-compose.gpu.yml"
CLUSTER_COMPOSE_FILE = REPO_ROOT / "docker-compose.cluster.yml"
COMPOSE_FILES = (COMPOSE_FILE, GPU_COMPOSE_FILE, CLUSTER_COMPOSE_FILE)
EMBEDDER_DOCKERFILE = REPO_ROOT / "embedder" / "Dockerfile"
MCP_DOCKERFILE = REPO_ROOT / "mcp" / "Dockerfile"
DOCKERFILES = (EMBEDDER_DOCKERFILE, MCP_DOCKERFILE)
ENV_EXAMPLE = REPO_ROOT / ".env.example"

# --- Dockerfile ----------------------------------------------------------------------------------


@dataclass
class Stage:
    base: str  # FROM image, ARGs substituted
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (KEYWORD, arguments)
    args: dict[str, str] = field(default_factory=dict)  # ARG defaults declared in this stage

    def all(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]

    def env(self) -> dict[str, str]:
        """ENV values of this stage, `${ARG}` references resolved from ARG defaults."""
        out: dict[str, str] = {}
        for rest in self.all("ENV"):
            for token in shlex.split(rest):
                key, sep, value = token.partition("=")
                assert sep, f"ENV {rest!r}: only the KEY=value form is supported here"
                out[key] = substitute(value, {**self.args, **out})
        return out

    def exec_form(self, keyword: str) -> list[str]:
        """The last CMD (or the command of the last HEALTHCHECK) in exec (JSON) form."""
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage"
        rest = found[-1]
        if keyword == "HEALTHCHECK":
            _options, sep, rest = rest.partition(" CMD ")
            assert sep, f"HEALTHCHECK without CMD: {found[-1]!r}"
        argv = json.loads(rest)  # shell form raises here: exec form is required
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        return argv


@dataclass
class Dockerfile:
    path: Path
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def substitute(text: str, values: dict[str, str]) -> str:
    """Docker's `$NAME` / `${NAME}` substitution (unknown names stay as written)."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", repl, text)


def _logical_lines(text: str) -> list[str]:
    """Instructions with `\\` continuations joined and comment lines dropped (as Docker does)."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    assert not current, "Dockerfile ends inside a line continuation"
    return lines


def parse_dockerfile(path: Path) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(path.read_text()):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(substitute(parts[0], global_args), name))
        elif keyword == "ARG" and not stages:
            key, _, default = rest.partition("=")
            global_args[key] = default
        else:
            assert stages, f"{path}: {keyword} before the first FROM"
            stage = stages[-1]
            if keyword == "ARG":
                key, _, default = rest.partition("=")
                stage.args[key] = default if default else global_args.get(key, "")
            stage.instructions.append((keyword, rest))
    assert stages, f"{path}: no FROM"
    return Dockerfile(path, global_args, stages)


# --- compose ---------------------------------------------------------------------------------

# ${NAME}, ${NAME:-default}, ${NAME-default} and ${NAME:?error} (required: no default)
_VAR = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    return data


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def compose_variables(path: Path = COMPOSE_FILE) -> dict[str, str | None]:
    """`${NAME:-default}` references in a compose file's values (comments are not interpolated):
    name -> default (None when it has none)."""
    return {
        m.group(1): "" if (m.group(2) or "").endswith("?") else m.group(3)
        for text in _strings(load_compose(path))
        for m in _VAR.finditer(text)
    }


def interpolate(value: Any, env: dict[str, str] | None = None) -> Any:
    """Compose's variable interpolation for the forms the compose files use."""
    env = env or {}
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def repl(m: re.Match[str]) -> str:
        name, op, default = m.group(1), m.group(2), m.group(3) or ""
        if op == ":-":
            return env.get(name) or default
        if op == "-":
            return env.get(name, default)
        return env.get(name, "")

    return _VAR.sub(repl, value)


def service_environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment:` (mapping or list form), defaults interpolated, as strings."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(interpolate(v)) for k, v in env.items()}


# --- .dockerignore ---------------------------------------------------------------------------


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):  # `**/x` also matches `x` at the top
                out = out[:-2] + "(?:.*/)?"
                i += 1
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def dockerignore_excludes(ignore_file: Path, path: str) -> bool:
    """Whether Docker leaves `path` (relative to the build context) out of the context.

    Docker's rules: patterns are Go filepath.Match globs plus `**`, matched against the path or
    any of its parent folders; `!` re-includes; the last matching pattern wins.
    """
    patterns = [
        line.strip()
        for line in ignore_file.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(regex.match(c) for c in candidates):
            excluded = not negate
    return excluded


# --- settings ----------------------------------------------------------------------------------


@cache
def embedder_settings_class() -> type:
    """The embedder's EmbedderSettings (embed_server.config)."""
    from embed_server.config import EmbedderSettings

    return EmbedderSettings


def env_example_entries() -> dict[str, str]:
    """NAME -> value of every `NAME=value` or `#NAME=value` line of .env.example."""
    entries: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = re.fullmatch(r"#?([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if m:
            assert m.group(1) not in entries, f".env.example: {m.group(1)} listed twice"
            entries[m.group(1)] = m.group(2)
    return entries


def env_example_comments() -> dict[str, str]:
    """NAME -> the comment line right above its entry in .env.example ('' when there is none)."""
    comments: dict[str, str] = {}
    previous = ""
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = re.fullmatch(r"#?([A-Z][A-Z0-9_]*)=(.*)", line.strip())
        if m:
            comments[m.group(1)] = previous[1:].strip() if previous.startswith("# ") else ""
        previous = line.strip()
    return comments


# --- the configuration table ---------------------------------------------------------------


def setting_fields() -> dict[str, list[tuple[str, Any]]]:
    """Setting name -> [(reader, FieldInfo)], one pair per settings class that reads it (the
    scripts' and the MCP server's: Settings and each kind's own model, kb.sources.registry)."""
    from kb.sources import registry

    out: dict[str, list[tuple[str, Any]]] = {}
    for name, info in registry.fields().items():
        out.setdefault(name, []).append(("scripts, MCP server", info))
    for name, info in embedder_settings_class().model_fields.items():
        out.setdefault(name, []).append(("embedder", info))
    return out


def compose_only_names() -> set[str]:
    """Variables compose reads from .env that no settings class reads (e.g. EMBED_MEM_LIMIT)."""
    names = {n for p in COMPOSE_FILES for n in compose_variables(p)}
    return names - set(setting_fields())


def expected_names() -> set[str]:
    return set(setting_fields()) | compose_only_names()


def render_default(name: str) -> str:
    """A setting's default as README shows it."""
    fields = setting_fields().get(name)
    if not fields:  # compose-only: its default sits in docker-compose.yml
        default = compose_variables()[name]
        return f"`{default}`" if default else "(empty)"
    info = fields[0][1]
    if info.default_factory is not None:
        return "number of usable CPU cores"
    value = info.default
    if isinstance(value, Path):
        return f"`{value.relative_to(REPO_ROOT)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`" if value != "" else "(empty)"


def readme_row(name: str) -> str:
    """The docs/guide/configuration.md table row for a setting: name, default, read by, meaning."""
    fields = setting_fields().get(name, [])
    readers = [reader for reader, _ in fields]
    passed = {n for p in COMPOSE_FILES for n in compose_variables(p)}
    if name in passed:
        readers.append("compose" if readers else "docker compose")
    meaning = fields[0][1].description if fields else env_example_comments().get(name, "")
    meaning = meaning.replace("|", "\\|").replace("\n", " ")
    return f"| `{name}` | {render_default(name)} | {'; '.join(readers)} | {meaning} |"


README_TABLE_HEADER = "| Setting | Default | Read by | Meaning |\n| --- | --- | --- | --- |"


CONFIG_DOC = REPO_ROOT / "docs" / "guide" / "configuration.md"


def readme_table_names(doc: Path = CONFIG_DOC) -> list[str] | None:
    """Backticked names in the first column of the settings table under `## Settings` of
    docs/guide/configuration.md, where README's Configuration section sends users (None without
    it)."""
    section = re.search(r"^## Settings\s*$(.*?)(?=^## |\Z)", doc.read_text(), re.M | re.S)
    if section is None:
        return None
    return re.findall(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|", section.group(1), re.M)
