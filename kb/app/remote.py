"""The notes through the MCP server that holds embedded storage (kb.app.notes chose it).

Reading goes through the server's tools (`search_notes`, `related_notes`, `why_not_found`,
`read_note`, `list_deleted`): a JSON-RPC `tools/call` on its streamable HTTP endpoint, which is
stateless with JSON answers (notes_server.app), so one POST is one call; the same
kb.search.SearchRequest as the tool's arguments, the same results back as kb's own types. The
MCP SDK's client is not used here: importing it loads the SDK's server stack too (uvicorn,
starlette, the protocol's models: over a second of CPU), which a terminal search would pay on
every run (bench/query_start.py); the standard library's HTTP client costs nothing to load.
What changes the index goes through the server's hand-off routes (mcp/notes_server/
ingest_route.py): an ingest (POST /ingest, the run's IngestOptions.to_json, answered with its
Summary), a deleted note's life (POST /lifecycle) and eval.py's measure (POST /evaluate), each
with the key of STATE_DIR/server.json; MCP_TOKEN, when set, is sent too. While the server's run
waits for (or holds) the ingest lock, its progress is read from STATE_DIR, as a local run's.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any

from kb.app.handoff import EVALUATE_PATH, INGEST_PATH, KEY_HEADER, LIFECYCLE_PATH, Announced
from kb.core.errors import IngestError, StoreError
from kb.core.schema import INBOX, Explanation, Hit
from kb.core.settings import Settings
from kb.core.state import JOIN_POLL_S, JOIN_SAY_S, State
from kb.ingest.options import IngestOptions
from kb.ingest.progress import Summary
from kb.search import PARAMETERS, TOOL_MAX_K, SearchRequest
from kb.search.filters import Filters
from kb.search.related import Related, RelatedNote
from kb.search.rerank import Reranked

if TYPE_CHECKING:
    from mcp_types import CallToolResult

    from kb.ingest.lifecycle import DeletedNote
    from kb.search.read import Passage

TIMEOUT_S = 120.0  # a search may wait for the embedder's current batch
ACCEPT = {"Accept": "application/json, text/event-stream"}  # what streamable HTTP requires
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_HIT_FIELDS = [f.name for f in fields(Hit) if f.init]  # uri is made from the others
# an Explanation's fields a result leaves out when null (those without a default)
_UNSET_EXPLANATION = {f.name: None for f in fields(Explanation) if f.default is MISSING}
Say = Callable[[str], None]


class RemoteError(StoreError):
    """The MCP server could not answer, or refused; the message says which and why."""


def arguments(request: SearchRequest) -> dict[str, object]:
    """`request` as search_notes' arguments (kb.search.PARAMETERS: the same names; one left at
    its default is not sent, the tool's default being the same; the tool clamps k to
    TOOL_MAX_K)."""
    sent: dict[str, object] = {"query": request.query, **request.filters.arguments()}
    for spec in PARAMETERS:
        value = getattr(request, spec.name)
        if value != spec.default:
            sent[spec.name] = spec.argument(value)
    return sent


def hit_of(item: dict[str, object]) -> Hit:
    """A result of search_notes as the Hit it was made from (a field left out is its default;
    `source`, the one without a default that may be null, None)."""
    values = {"source": None} | {name: item[name] for name in _HIT_FIELDS if name in item}
    if isinstance(values.get("explain"), dict):
        given = _UNSET_EXPLANATION | values["explain"]  # type: ignore[operator]
        values["explain"] = Explanation(**given)
    return Hit(**values)  # type: ignore[arg-type]


def answer_json(structured: object, texts: Iterable[str]) -> dict[str, Any] | None:
    """A tool's answer: the JSON object of its text (the server sends each result once, as
    compact JSON text: docs/design/tool-surface.md), or the structured content of an older
    server; None if it has neither."""
    if isinstance(structured, dict):
        return structured
    try:
        answer = json.loads("".join(texts))
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def answer_of(result: CallToolResult) -> dict[str, Any] | None:
    """answer_json of a result the MCP SDK's client returned (mcp/check.py, the image check)."""
    return answer_json(result.structured_content,
                       (getattr(part, "text", "") for part in result.content))  # fmt: skip


class RemoteNotes:
    """kb.app.notes.Notes through `server` (see the module docstring)."""

    def __init__(self, settings: Settings, server: Announced) -> None:
        self.settings = settings
        self.server = server
        self.url = f"{server.url}/mcp"
        self.held = (
            f"{settings.QDRANT_PATH} is held by the MCP server (pid {server.pid}) at {server.url}"
        )

    def silent(self, failure: BaseException) -> str:
        return (
            f"{self.held}, which is not accepting connections ({failure}): it is starting or "
            "stopping; run this again once it is up, or once it has exited"
        )

    # --- reading: the server's tools -------------------------------------------------------

    def send(
        self, url: str, body: dict[str, Any], headers: dict[str, str], timeout: float | None
    ) -> tuple[int, Any]:
        """POST `body` as JSON (no proxy: the server is this machine's): the status and the
        JSON answer (None when the answer is not JSON). RemoteError when nothing answers."""
        headers = {"Content-Type": "application/json", **headers}
        if self.settings.MCP_TOKEN:
            headers["Authorization"] = f"Bearer {self.settings.MCP_TOKEN}"
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        try:
            with _OPENER.open(request, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except OSError as exc:  # URLError too: refused, reset, timed out
            raise RemoteError(self.silent(getattr(exc, "reason", exc))) from None
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode("utf-8", "replace")[:200] or None

    def call(self, tool: str, sent: dict[str, object]) -> dict[str, Any]:
        """`tool`'s answer (answer_json); RemoteError saying why there is none."""
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": sent}}  # fmt: skip
        status, answer = self.send(self.url, rpc, ACCEPT, TIMEOUT_S)
        if status != 200 or not isinstance(answer, dict):
            detail = answer.get("error") if isinstance(answer, dict) else answer
            raise RemoteError(f"{self.held}; it refused {tool} (HTTP {status}: {detail})")
        if isinstance(answer.get("error"), dict):
            message = answer["error"].get("message")
            raise RemoteError(f"{self.held}; it refused {tool}: {message}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise RemoteError(f"{tool} (through the MCP server) returned no result")
        if result.get("isError"):
            parts = result.get("content") or []
            text = " ".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))
            raise RemoteError(f"{tool} (through the MCP server): {text}")
        parts = result.get("content") or []
        texts = (str(part.get("text", "")) for part in parts if isinstance(part, dict))
        content = answer_json(result.get("structuredContent"), texts)
        if content is None:
            raise RemoteError(f"{tool} (through the MCP server) returned no JSON result")
        return content

    def search(self, request: SearchRequest) -> Reranked:
        if request.k > TOOL_MAX_K:
            raise RemoteError(f"-k {request.k}: through the MCP server at most {TOOL_MAX_K}")
        content = self.call("search_notes", arguments(request))
        found = content.get("results")
        if not isinstance(found, list):
            raise RemoteError("search_notes returned no results list")
        hits = [hit_of(item) for item in found]
        note, no_match = content.get("note"), content.get("no_good_match")
        return Reranked(hits, reranked=any(h.rerank_score is not None for h in hits),
                        note=note if isinstance(note, str) else None,
                        no_good_match=no_match if isinstance(no_match, bool) else None)  # fmt: skip

    def related(self, source: str, k: int) -> Related:
        found = self.call("related_notes", {"source": source, "k": k})
        notes = [RelatedNote(**note) for note in found.pop("notes", [])]
        return Related(notes=notes, **found)

    def why(
        self, source: str, query: str | None, filters: Filters, per_note: int | None
    ) -> dict[str, Any]:
        if per_note != 1:  # the tool's one per_note: a parameter more would cost every call
            raise RemoteError(f"--why with --per-note {per_note or 0}: through the MCP server "
                              "a note's rank is looked up with --per-note 1 only")  # fmt: skip
        sent: dict[str, object] = {"source": source, "query": query}
        if filters.arguments():
            sent["filters"] = filters.arguments()
        return self.call("why_not_found", sent)

    def read(self, source: str, start_line: int) -> Passage:
        from kb.search.read import Passage  # its module reads files: redaction's patterns

        return Passage(**self.call("read_note", {"source": source, "start_line": start_line}))

    def list_deleted(self) -> list[DeletedNote]:
        from kb.ingest.lifecycle import DeletedNote

        return [DeletedNote(**note) for note in self.call("list_deleted", {}).get("notes", [])]

    # --- changing the index: the hand-off routes -----------------------------------------

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST `body` to a hand-off route with the server's key, waiting as long as it runs
        (an ingest takes as long as its notes take to embed): the status and JSON answer.
        IngestError when the server refuses."""
        status, answer = self.send(
            self.server.url + path, body, {KEY_HEADER: self.server.key}, timeout=None
        )
        if status not in (200, 409) or not isinstance(answer, dict):
            detail = answer.get("error") if isinstance(answer, dict) else answer
            raise IngestError(f"{self.held}; it refused {path} (HTTP {status}: {detail})")
        return status, answer

    def ingest(self, options: IngestOptions, say: Say) -> Summary:
        """The server runs it (joining a run that holds the lock there); its progress is read
        from STATE_DIR meanwhile. Ctrl-C (`options.stop`) cannot reach that run: it stops
        waiting, and says so."""
        say(f"{self.held}: it runs this ingest")
        answered: list[tuple[int, dict[str, Any]] | BaseException] = []

        def ask() -> None:
            try:
                answered.append(self.post(INGEST_PATH, options.to_json()))
            except BaseException as exc:  # handed to the caller's thread
                answered.append(exc)

        asking = threading.Thread(target=ask, name="ingest-handoff", daemon=True)
        asking.start()
        state, said, shown = State(self.settings.STATE_DIR), "", 0.0
        while asking.is_alive():
            if options.stop is not None and options.stop.is_set():
                raise IngestError(f"interrupted: the MCP server (pid {self.server.pid}) "
                                  "finishes this ingest on its own; its log says when")  # fmt: skip
            line = state.progress()
            now = time.monotonic()
            if line and line != said and now - shown >= JOIN_SAY_S:
                say(f"  {line}")
                said, shown = line, now
            asking.join(JOIN_POLL_S)
        answer = answered[0]
        if isinstance(answer, BaseException):
            raise answer
        status, body = answer
        try:
            done = Summary.from_json(body["summary"]) if body.get("summary") else None
        except (TypeError, ValueError) as exc:
            raise IngestError(f"{self.held}; its answer is not a summary: {exc}") from None
        if status == 409 or done is None:
            raise IngestError(str(body.get("error") or "the server's ingest stopped"), done)
        return done

    def ingest_saved(self, write: Callable[[], str], say: Say) -> str:
        with State(self.settings.STATE_DIR).lock(joining=say):
            source = write()  # the inbox is this user's folder: written here, indexed there
        say(f"saved {source} in the inbox")
        summary = self.ingest(IngestOptions(only=frozenset({INBOX})), say)
        return f"saved {source}: indexed by the MCP server ({summary.chunks} passages)"

    def lifecycle(self, action: str, **values: object) -> Any:
        status, body = self.post(LIFECYCLE_PATH, {"action": action, **values})
        if status == 409:
            raise IngestError(str(body.get("error")))
        return body.get("result")

    def delete(self, source: str, *, hard: bool) -> list[str]:
        return list(self.lifecycle("hard_delete" if hard else "delete", source=source))

    def restore(self, source: str) -> bool:
        return bool(self.lifecycle("restore", source=source))

    def purge(self, older_than_days: int) -> list[str]:
        return list(self.lifecycle("purge", days=older_than_days))

    def evaluate(self, limit: int, paraphrase: bool) -> dict[str, Any] | None:
        status, body = self.post(EVALUATE_PATH, {"limit": limit, "paraphrase": paraphrase})
        if status == 409:
            raise RemoteError(f"eval (through the MCP server): {body.get('error')}")
        result = body.get("result")
        return result if isinstance(result, dict) else None

    def close(self) -> None:
        pass  # each call has its own connection
