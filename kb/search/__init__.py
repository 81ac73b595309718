"""Search, browse and read what is stored. `search(searcher, request)` is the one search entry
(kb/search/entry.py); the filters are written once, in kb/search/filters.py, the search
parameters in kb/search/parameters.py (SearchRequest's fields)."""

from kb.search.entry import (
    PARAMETERS,
    TOOL_MAX_K,
    RerankOptions,
    Searcher,
    SearchRequest,
    search,
)

__all__ = ["PARAMETERS", "TOOL_MAX_K", "RerankOptions", "SearchRequest", "Searcher", "search"]
