"""kb.ingest.plan: a listing against what is stored gives write / unchanged / gone."""

from kb.ingest.plan import plan


def test_new_edited_and_partly_stored_notes_are_written_and_identical_ones_left_alone():
    stored = {
        "same.md": {"p1": "h1"},
        "edited.md": {"p2": "old"},
        "shrunk.md": {"p3": "h3", "p4": "h3"},
    }
    wanted = {
        "same.md": {"p1": "h1"},
        "edited.md": {"p2": "new"},
        "shrunk.md": {"p3": "h3"},
        "new.md": {"p5": "h5"},
    }
    result = plan(wanted, stored)
    assert result.write == ["edited.md", "shrunk.md", "new.md"]
    assert result.unchanged == ["same.md"]
    assert result.gone == []  # a partial listing never says a note is gone


def test_a_full_listing_reports_stored_notes_without_an_item_as_gone_unless_still_held():
    stored = {"kept.md": {"a": "1"}, "deleted.md": {"b": "2"}, "unreadable.md": {"c": "3"}}
    result = plan({"kept.md": {"a": "1"}}, stored, full=True, holds=lambda s: s == "unreadable.md")
    assert result.gone == ["deleted.md"]
    assert result.unchanged == ["kept.md"]


def test_a_soft_deleted_note_is_restored_when_listed_unchanged_and_never_gone_again():
    stored = {
        "back.md": {"a": "deleted:1"},
        "edited.md": {"b": "deleted:2"},
        "still-gone.md": {"c": "deleted:3"},
    }
    wanted = {"back.md": {"a": "1"}, "edited.md": {"b": "new"}}
    result = plan(wanted, stored, full=True, holds=lambda s: False)
    assert result.restore == ["back.md"]
    assert result.write == ["edited.md"]  # came back changed: written again
    assert result.unchanged == [] and result.gone == []


def test_a_note_restored_by_hand_is_never_gone_and_is_settled_once_listed_again():
    stored = {
        "away.md": {"a": "restored:1"},
        "back.md": {"b": "restored:2"},
        "edited.md": {"c": "restored:3"},
    }
    wanted = {"back.md": {"b": "2"}, "edited.md": {"c": "new"}}
    result = plan(wanted, stored, full=True, holds=lambda s: False)
    assert result.gone == []  # its file stays away on purpose
    assert result.unchanged == ["back.md"] and result.write == ["edited.md"]
    assert result.settle == ["back.md", "edited.md"]
