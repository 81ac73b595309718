"""IngestOptions: what ingest.py, the dashboard's Sync and the watcher ask of a run, and what the
hand-off to the MCP server carries (its wire form, field by field)."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from kb.ingest.options import DEFAULTS, LOCAL, IngestOptions, carried
from kb.ingest.progress import Progress

# A value other than the default for every option that crosses to the server. A new option
# fails test_every_option_but_stop_and_progress_crosses_the_wire_form_field_by_field until it
# is given one here and carried by to_json/from_json.
SAMPLES: dict[str, list[object]] = {
    "rebuild": [True, "code", "notes"],
    "allow_deletes": [True],
    "youtube_only": [True],
    "only": [frozenset({"inbox", "vault"}), frozenset()],
}


def over_the_wire(options: IngestOptions) -> IngestOptions:
    """What the server reads of `options`, through real JSON text."""
    return IngestOptions.from_json(json.loads(json.dumps(options.to_json())))


def test_every_option_but_stop_and_progress_crosses_the_wire_form_field_by_field():
    local = {f.name for f in dataclasses.fields(IngestOptions) if f.metadata.get(LOCAL)}
    assert local == {"stop", "progress"}  # this process's own: an Event, a terminal
    assert sorted(SAMPLES) == sorted(carried()), "give every new option a sample value here"
    assert sorted(DEFAULTS.to_json()) == sorted(carried()), "to_json must write every option"
    assert over_the_wire(DEFAULTS) == DEFAULTS
    for name, values in SAMPLES.items():
        for value in values:
            options = dataclasses.replace(DEFAULTS, **{name: value})
            assert options != DEFAULTS
            assert getattr(over_the_wire(options), name) == value, name
    everything = IngestOptions(**{name: values[0] for name, values in SAMPLES.items()})
    assert over_the_wire(everything) == everything


def test_stop_and_progress_stay_in_this_process():
    options = IngestOptions(rebuild="code", stop=threading.Event(), progress=Progress())
    assert "stop" not in options.to_json() and "progress" not in options.to_json()
    read = over_the_wire(options)
    assert read.stop is None and read.progress is None and read.rebuild == "code"


def test_a_rebuild_names_every_collection_or_one():
    everything = IngestOptions(rebuild=True)
    assert everything.rebuilds("notes") and everything.rebuilds("code")
    assert IngestOptions(rebuild="code").rebuilds("code")
    assert not IngestOptions(rebuild="code").rebuilds("notes")
    assert not DEFAULTS.rebuilds("notes")


def test_an_option_this_version_does_not_know_is_refused_by_name_never_dropped():
    with pytest.raises(ValueError, match="unknown ingest options: dry_run"):
        IngestOptions.from_json({"rebuild": True, "dry_run": True})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rebuild": 1}, "rebuild"),
        ({"rebuild": ""}, "rebuild"),
        ({"allow_deletes": "yes"}, "allow_deletes"),
        ({"youtube_only": None}, "youtube_only"),
        ({"only": "inbox"}, "only"),
        ({"only": [1]}, "only"),
    ],
)
def test_a_bad_option_value_is_refused_naming_the_option(body: dict[str, object], field: str):
    with pytest.raises(ValueError, match=rf"^{field} must be"):
        IngestOptions.from_json(body)


def test_options_that_are_not_a_json_object_are_refused():
    with pytest.raises(ValueError, match="must be a JSON object"):
        IngestOptions.from_json(["rebuild"])
