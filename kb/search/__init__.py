"""Search, browse and read what is stored. `search(searcher, request)` is the one search entry
(kb/search/entry.py); the filters are written once, in kb/search/filters.py."""

from kb.search.entry import TOOL_MAX_K, RerankOptions, Searcher, SearchRequest, search

__all__ = ["TOOL_MAX_K", "RerankOptions", "SearchRequest", "Searcher", "search"]
