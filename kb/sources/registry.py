"""The kinds of source, found: every module or package of kb.sources that declares `KIND` (a
kb.sources.kind.Kind). kb.app, kb.search and the MCP server reach the kinds only through here, so
a new kind is its own module and nothing else names it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

import kb.sources
from kb.content import ocr
from kb.core.errors import ConfigError
from kb.core.settings import FromEnv, KindSettings, Settings
from kb.core.settings import source_settings as marked
from kb.core.state import State
from kb.sources.base import Source
from kb.sources.kind import Kind, Payload, Shown


@cache
def kinds() -> tuple[Kind, ...]:
    """Every kind, in the order their sources sync."""
    found = []
    for module in pkgutil.iter_modules(kb.sources.__path__, "kb.sources."):
        kind = getattr(importlib.import_module(module.name), "KIND", None)
        if isinstance(kind, Kind):
            found.append(kind)
    return tuple(sorted(found, key=lambda k: k.order))


def kind_of(payload: Payload) -> Kind:
    """The kind a stored item (its first chunk's payload) belongs to: the one that owns it, the
    fallback kind last."""
    for kind in sorted(kinds(), key=lambda k: k.fallback):
        if kind.owns(payload):
            return kind
    raise ConfigError(f"{payload.get('source')!r}: no kind of source owns it")  # pragma: no cover


def prefixes() -> dict[str, str]:
    """{first part of an item's name: the kind that names its items so} ("youtube", "web")."""
    return {k.prefix: k.name for k in kinds() if k.prefix}


def build(
    settings: Settings,
    state: State,
    *,
    only: frozenset[str] | None = None,
    remote_only: bool = False,
) -> list[Source]:
    """Every configured source, in the order a run syncs them. `only`: those origins, and no
    remote kind (a watcher's batch spends no quota); `remote_only`: the remote kinds' alone
    (the others are still built: their settings are checked all the same)."""
    ocr.configure(settings.OCR, state.folder)  # what the sources read, images too, reads so
    built: list[Source] = []
    for kind in kinds():
        if kind.remote and only is not None:
            continue
        made = kind.build(settings, state)
        if kind.remote or not remote_only:
            built += made
    return built if only is None else [s for s in built if s.origin in only]


def unseen(name: str) -> str | None:
    """What why_not_found says of `name`, never stored, when a kind names its items so (its
    `prefix`); None for a name of the inbox or a folder (a file's story)."""
    for kind in kinds():
        if kind.prefix and kind.unseen and name.startswith(f"{kind.prefix}/"):
            return f"never seen: {kind.unseen}"
    return None


def close(sources: Sequence[Source]) -> None:
    for kind in kinds():
        kind.close(sources)


def files(settings: Settings) -> dict[str, Path]:
    """Where each origin's items' files are (kb.search.fresh)."""
    return {origin: path for kind in kinds() for origin, path in kind.files(settings).items()}


def places(settings: Settings) -> dict[str, Path]:
    """The folders each origin's source lists (status, the watcher)."""
    return {origin: path for kind in kinds() for origin, path in kind.places(settings).items()}


def shown(settings: Settings) -> list[tuple[Kind, Shown]]:
    """Every configured source as `status` lists it, kind by kind in sync order; a kind whose
    setting does not parse is one row naming the error."""
    rows: list[tuple[Kind, Shown]] = []
    for kind in kinds():
        try:
            rows += [(kind, row) for row in kind.shown(settings)]
        except ConfigError as exc:
            rows.append((kind, Shown(kind.name, kind.setting, "", "", str(exc))))
    return rows


def models() -> tuple[type[KindSettings], ...]:
    """Every kind's own settings model (Kind.settings_model)."""
    return tuple(dict.fromkeys(k.settings_model for k in kinds() if k.settings_model is not None))


def fields() -> dict[str, FieldInfo]:
    """Every setting the scripts and the MCP server read, by name: Settings' and the kinds'."""
    every = dict(Settings.model_fields)
    for model in models():
        every |= model.model_fields
    return every


def check(settings: Settings) -> None:
    """Every kind's own settings read now (the scripts and the server check them at start):
    ConfigError naming each invalid one."""
    problems = []
    for model in models():
        try:
            settings.of(model)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))


def source_settings() -> tuple[str, ...]:
    """The settings marked SOURCE (Settings' and the kinds'): those that add notes."""
    every: tuple[type[FromEnv], ...] = (Settings, *models())
    return tuple(name for model in every for name in marked(model))


def without_sources(settings: Settings, inbox: Path) -> Settings:
    """`settings` with no source of notes but the inbox `inbox`: every SOURCE setting at its
    default (none), NOTES_DIR `inbox`."""
    every = fields()
    cleared: dict[str, Any] = {name: every[name].default for name in source_settings()}
    return settings.model_copy(update=cleared | {"NOTES_DIR": inbox})
