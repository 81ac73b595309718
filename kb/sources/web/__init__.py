"""Web pages as items: the browsers' bookmarks synced as a source (source.py), each page fetched
within limits and never from the user's own network (fetch.py), its article kept as Markdown
(page.py, through kb.content.article), bookmark files of every browser read (bookmarks.py)."""

from kb.sources.web.source import KIND as KIND
