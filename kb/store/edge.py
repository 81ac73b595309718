"""Embedded storage on Qdrant's own engine in-process (qdrant-edge), behind the part of
qdrant-client's API that kb.store.points and kb.store.collection use, so both speak to a server, to
qdrant-client's local mode or to this alike.

Layout under QDRANT_PATH: `edge/<collection>/shard/` (one qdrant-edge shard per collection),
`edge/<collection>/collection.json` (its vectors and our metadata: a shard keeps none) and
`edge/<collection>.lock` (one process per collection: a shard refuses a second open anyway,
the lock makes that a clear message). `edge/aliases.json` names collections by alias as a
server's aliases do (kb.ingest.switch points the searched name at a rebuilt index): every call
taking a collection's name resolves an alias first, except create and delete (real collections
only, as on a server); an alias may take the name of a collection that still exists (an index
made before aliases), which makes the switch from it atomic here too. Requests arrive as
qdrant-client `models` objects and are translated here; results come back shaped as
qdrant-client's. A shard has no grouped query: kb.store.points groups by note itself for
embedded storage (`Store._collapsed`).

`optimize()` (building HNSW and merging segments) blocks, interpreter lock held, for up to
minutes: kb.store.optimize runs it after ingest.py's writes and before make local's server starts,
never on a search.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import qdrant_edge as qe

from kb.core.errors import StoreError
from kb.core.state import PRIVATE_FILE, private_folder
from kb.store.models import models

EDGE_DIR = "edge"  # under QDRANT_PATH; qdrant-client's local mode uses `collection/`
META_FILE = "collection.json"
ALIASES_FILE = "aliases.json"  # {alias: collection}, replaced whole (atomic) at each change
SHARD_DIR = "shard"
_SCHEMAS = {
    "keyword": qe.PayloadSchemaType.Keyword,
    "integer": qe.PayloadSchemaType.Integer,
    "float": qe.PayloadSchemaType.Float,
    "bool": qe.PayloadSchemaType.Bool,
    "datetime": qe.PayloadSchemaType.Datetime,
    "uuid": qe.PayloadSchemaType.Uuid,
    "text": qe.PayloadSchemaType.Text,
}


class CollectionBusy(StoreError):
    """Another process holds this collection's shard."""


def edge_root(path: str | Path) -> Path:
    return Path(path) / EDGE_DIR


def has_collection(path: str | Path, name: str) -> bool:
    return (edge_root(path) / name / META_FILE).is_file()


class EdgeClient:
    """A QDRANT_PATH folder of qdrant-edge shards, one per collection, opened on first use and
    locked for this process until `close`."""

    def __init__(self, path: str | Path, *, tuning: dict[str, Any] | None = None) -> None:
        self.root = edge_root(path)
        # more qe.EdgeConfig arguments for a new collection (optimizers, quantization_config)
        self.tuning = tuning or {}
        private_folder(Path(path))  # note text inside: the user's alone (kb.core.state)
        private_folder(self.root)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._locks: dict[str, int] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._mutex = threading.RLock()  # one shard object serves every thread of a server
        self._written: set[str] = set()  # collections this process changed: flushed on close
        self._aliases: dict[str, str] = self._load_aliases()
        self.shadowing_aliases = True  # an alias may take the name of an existing collection

    # --- aliases ------------------------------------------------------------------------

    def _load_aliases(self) -> dict[str, str]:
        try:
            found = json.loads((self.root / ALIASES_FILE).read_text("utf-8"))
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def _resolve(self, name: str) -> str:
        return self._aliases.get(name, name)

    def get_aliases(self) -> Any:
        with self._mutex:
            pairs = sorted(self._aliases.items())
        return SimpleNamespace(
            aliases=[SimpleNamespace(alias_name=a, collection_name=c) for a, c in pairs]
        )

    def update_collection_aliases(self, change_aliases_operations: Sequence[Any], **_: Any) -> bool:
        """Qdrant's alias operations (create, delete), all applied at once or none."""
        with self._mutex:
            aliases = dict(self._aliases)
            for op in change_aliases_operations:
                if isinstance(op, models.CreateAliasOperation):
                    target = op.create_alias.collection_name
                    if not (self.root / target / META_FILE).is_file():
                        raise StoreError(f"collection '{target}' does not exist")
                    aliases[op.create_alias.alias_name] = target
                elif isinstance(op, models.DeleteAliasOperation):
                    aliases.pop(op.delete_alias.alias_name, None)
                else:
                    raise StoreError(f"embedded Qdrant (qdrant-edge): unsupported {op!r}")
            target = self.root / ALIASES_FILE
            tmp = target.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(aliases, indent=1))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)  # atomic: every later call sees the old or the new names
            self._aliases = aliases
        return True

    # --- locking and opening ------------------------------------------------------------

    def lock(self, name: str) -> None:
        """Hold collection `name` (an alias: its collection) for this process; CollectionBusy
        when another holds it."""
        with self._mutex:
            self._hold(self._resolve(name))

    def _hold(self, name: str) -> None:
        if name in self._locks:
            return
        fd = os.open(self.root / f"{name}.lock", os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise CollectionBusy(f"collection '{name}' is open in another process") from None
        self._locks[name] = fd

    def _dir(self, name: str) -> Path:
        return self.root / self._resolve(name)

    def _shard(self, name: str) -> qe.EdgeShard:
        with self._mutex:
            name = self._resolve(name)
            shard = self._shards.get(name)
            if shard is None:
                if not self.collection_exists(name):
                    raise StoreError(f"collection '{name}' does not exist")
                self.lock(name)
                shard = qe.EdgeShard.load(str(self._dir(name) / SHARD_DIR))
                self._shards[name] = shard
            return shard

    def _read_meta(self, name: str) -> dict[str, Any]:
        name = self._resolve(name)
        if name not in self._meta:
            self._meta[name] = json.loads((self._dir(name) / META_FILE).read_text("utf-8"))
        return self._meta[name]

    def _write_meta(self, name: str, meta: dict[str, Any]) -> None:
        name = self._resolve(name)
        target = self._dir(name) / META_FILE
        tmp = target.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(meta, indent=1))
        os.replace(tmp, target)  # atomic: a crash leaves the old or the new file
        self._meta[name] = meta

    def close(self) -> None:
        with self._mutex:
            for name, shard in self._shards.items():
                if name in self._written:  # a search-only process (query.py) skips the sync
                    shard.flush()
                shard.close()
            self._written.clear()
            self._shards.clear()
            for fd in self._locks.values():
                os.close(fd)  # releases the flock
            self._locks.clear()

    # --- collections --------------------------------------------------------------------

    def get_collections(self) -> Any:
        names = sorted(p.parent.name for p in self.root.glob(f"*/{META_FILE}"))
        return SimpleNamespace(collections=[SimpleNamespace(name=n) for n in names])

    def collection_exists(self, name: str) -> bool:
        return (self._dir(name) / META_FILE).is_file()

    def create_collection(
        self,
        name: str,
        *,
        vectors_config: dict[str, models.VectorParams],
        sparse_vectors_config: dict[str, models.SparseVectorParams] | None = None,
        metadata: dict[str, Any] | None = None,
        **_: Any,
    ) -> bool:
        with self._mutex:
            if name in self._aliases:
                raise StoreError(f"'{name}' is an alias of collection '{self._aliases[name]}'")
            self._hold(name)
            folder = self.root / name
            if folder.exists():
                raise StoreError(f"collection '{name}' already exists in {self.root}")
            sparse = sparse_vectors_config or {}
            config = qe.EdgeConfig(
                vectors={
                    k: qe.EdgeVectorParams(size=v.size, distance=_distance(v.distance))
                    for k, v in vectors_config.items()
                },
                sparse_vectors={
                    k: qe.EdgeSparseVectorParams(
                        modifier=qe.Modifier.Idf if v.modifier == models.Modifier.IDF else None
                    )
                    for k, v in sparse.items()
                },
                **self.tuning,
            )
            self._shards[name] = qe.EdgeShard.create(str(folder / SHARD_DIR), config)
            self._written.add(name)
            self._write_meta(
                name,
                {
                    "vectors": {
                        k: {"size": v.size, "distance": str(v.distance.value)}
                        for k, v in vectors_config.items()
                    },
                    "sparse_vectors": {
                        k: {"idf": v.modifier == models.Modifier.IDF} for k, v in sparse.items()
                    },
                    "metadata": metadata or {},
                },
            )
            return True

    def get_collection(self, name: str) -> Any:
        meta = self._read_meta(name)
        vectors = {
            k: models.VectorParams(size=v["size"], distance=models.Distance(v["distance"]))
            for k, v in meta["vectors"].items()
        }
        sparse = {
            k: models.SparseVectorParams(modifier=models.Modifier.IDF if v["idf"] else None)
            for k, v in meta["sparse_vectors"].items()
        }
        with self._mutex:
            points = self._shard(name).info().points_count
        params = SimpleNamespace(vectors=vectors, sparse_vectors=sparse)
        return SimpleNamespace(
            config=SimpleNamespace(params=params, metadata=dict(meta["metadata"])),
            points_count=points,
        )

    def update_collection(self, name: str, *, metadata: dict[str, Any], **_: Any) -> bool:
        with self._mutex:
            meta = dict(self._read_meta(name))
            meta["metadata"] = {**meta["metadata"], **metadata}
            self._write_meta(name, meta)
        return True

    def delete_collection(self, name: str) -> bool:
        """Delete the collection `name` itself (never through an alias, as on a server)."""
        with self._mutex:
            folder = self.root / name
            if not (folder / META_FILE).is_file():
                return False
            self._hold(name)
            shard = self._shards.pop(name, None)
            if shard is not None:
                shard.close()
            self._meta.pop(name, None)
            self._written.discard(name)
            # the metadata first: a crash midway leaves no half collection that looks whole
            (folder / META_FILE).unlink()
            shutil.rmtree(folder)
            pointing = [a for a, c in self._aliases.items() if c == name]
            if pointing:  # as a server does: its aliases go with it
                self.update_collection_aliases([
                    models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=a))
                    for a in pointing
                ])  # fmt: skip
            return True

    def create_payload_index(self, name: str, field_name: str, field_schema: Any, **_: Any) -> None:
        kind = field_schema.value if hasattr(field_schema, "value") else str(field_schema)
        self._update(name, qe.UpdateOperation.create_field_index(field_name, _SCHEMAS[kind]))

    def segments(self, name: str) -> tuple[int, int]:
        """(segments, indexed vectors) of a collection's shard: what `optimize` changes."""
        with self._mutex:
            info = self._shard(name).info()
        return info.segments_count, info.indexed_vectors_count

    def optimize(self, name: str) -> bool:
        """Merge segments and build the vector indexes (blocking: up to minutes)."""
        with self._mutex:
            changed = self._shard(name).optimize()
            if changed:
                self._written.add(self._resolve(name))
            return changed

    # --- points -------------------------------------------------------------------------

    def _update(self, name: str, operation: qe.UpdateOperation) -> None:
        with self._mutex:
            self._shard(name).update(operation)
            self._written.add(self._resolve(name))

    def upsert(self, name: str, points: Sequence[models.PointStruct], **_: Any) -> None:
        batch = [qe.Point(_id(p.id), _vector(p.vector), p.payload or {}) for p in points]
        self._update(name, qe.UpdateOperation.upsert_points(batch))

    def delete(self, name: str, points_selector: Any, **_: Any) -> None:
        flt, ids = _selector(points_selector)
        if flt is not None:
            self._update(name, qe.UpdateOperation.delete_points_by_filter(flt))
        else:
            self._update(name, qe.UpdateOperation.delete_points(ids))

    def set_payload(self, name: str, payload: dict[str, Any], points: Any, **_: Any) -> None:
        flt, ids = _selector(points)
        if flt is not None:
            self._update(name, qe.UpdateOperation.set_payload_by_filter(flt, payload))
        else:
            self._update(name, qe.UpdateOperation.set_payload(ids, payload))

    def delete_payload(self, name: str, keys: list[str], points: Any, **_: Any) -> None:
        flt, ids = _selector(points)
        if flt is not None:
            self._update(name, qe.UpdateOperation.delete_payload_by_filter(flt, keys))
        else:
            self._update(name, qe.UpdateOperation.delete_payload(ids, keys))

    def retrieve(
        self, name: str, ids: Sequence[Any], with_payload: Any = True, with_vectors: Any = False
    ) -> list[Any]:
        with self._mutex:
            found = self._shard(name).retrieve(
                [_id(i) for i in ids], with_payload=with_payload, with_vector=with_vectors
            )
        return [_record(r) for r in found]

    def scroll(
        self,
        name: str,
        scroll_filter: models.Filter | None = None,
        limit: int = 10,
        offset: Any = None,
        with_payload: Any = True,
        with_vectors: Any = False,
        order_by: models.OrderBy | None = None,
        **_: Any,
    ) -> tuple[list[Any], Any]:
        request = qe.ScrollRequest(
            offset=_id(offset) if offset is not None else None,
            limit=limit,
            filter=_filter(scroll_filter),
            with_payload=with_payload,
            with_vector=with_vectors,
            order_by=_order_by(order_by),
        )
        with self._mutex:
            records, next_offset = self._shard(name).scroll(request)
        return [_record(r) for r in records], next_offset

    def count(
        self, name: str, count_filter: models.Filter | None = None, exact: bool = True, **_: Any
    ) -> Any:
        with self._mutex:
            n = self._shard(name).count(qe.CountRequest(exact=exact, filter=_filter(count_filter)))
        return SimpleNamespace(count=n)

    def facet(
        self,
        name: str,
        key: str,
        facet_filter: models.Filter | None = None,
        limit: int = 10,
        exact: bool = False,
        **_: Any,
    ) -> Any:
        request = qe.FacetRequest(key, limit=limit, exact=exact, filter=_filter(facet_filter))
        with self._mutex:
            hits = self._shard(name).facet(request).hits
        return SimpleNamespace(hits=[SimpleNamespace(value=h.value, count=h.count) for h in hits])

    def query_points(
        self,
        name: str,
        query: Any = None,
        using: str | None = None,
        prefetch: Sequence[models.Prefetch] | None = None,
        query_filter: models.Filter | None = None,
        limit: int = 10,
        with_payload: Any = True,
        **_: Any,
    ) -> Any:
        request = qe.QueryRequest(
            limit=limit,
            query=_query(query, using),
            prefetches=[_prefetch(p) for p in prefetch or []] or None,
            filter=_filter(query_filter),
            with_payload=with_payload,
            with_vector=False,
        )
        with self._mutex:
            found = self._shard(name).query(request)
        points = [
            SimpleNamespace(id=str(p.id), score=p.score, payload=p.payload or {}) for p in found
        ]
        return SimpleNamespace(points=points)

    def query_points_groups(self, *_: Any, **__: Any) -> Any:
        # kb.store.points groups by note itself for embedded storage (Store._collapsed)
        raise NotImplementedError("qdrant-edge has no grouped query; see Store._collapsed")


# --- translation of qdrant-client models ----------------------------------------------------

RRF_K = 2  # a Qdrant server's reciprocal rank fusion constant, so both engines rank alike


def _distance(distance: models.Distance) -> qe.Distance:
    return {
        models.Distance.COSINE: qe.Distance.Cosine,
        models.Distance.DOT: qe.Distance.Dot,
        models.Distance.EUCLID: qe.Distance.Euclid,
        models.Distance.MANHATTAN: qe.Distance.Manhattan,
    }[distance]


def _id(point_id: Any) -> Any:
    return uuid.UUID(point_id) if isinstance(point_id, str) else point_id


def _record(record: Any) -> Any:
    vector = record.vector
    if isinstance(vector, dict):
        vector = {
            k: models.SparseVector(indices=list(v.indices), values=[float(x) for x in v.values])
            if isinstance(v, qe.SparseVector)
            else v
            for k, v in vector.items()
        }
    return SimpleNamespace(id=str(record.id), payload=record.payload or {}, vector=vector)


def _vector(vector: Any) -> Any:
    if isinstance(vector, dict):
        return {k: _vector(v) for k, v in vector.items()}
    if isinstance(vector, models.SparseVector):
        return qe.SparseVector(list(vector.indices), [float(x) for x in vector.values])
    return list(vector)


def _selector(selector: Any) -> tuple[qe.Filter | None, list[Any]]:
    """(a filter, or None and a list of point ids) from a points selector."""
    if isinstance(selector, models.FilterSelector):
        return _filter(selector.filter), []
    if isinstance(selector, models.Filter):
        return _filter(selector), []
    if isinstance(selector, models.PointIdsList):
        selector = selector.points
    return None, [_id(i) for i in selector]


def _order_by(order: models.OrderBy | None) -> qe.OrderBy | None:
    """Scroll ordered by a payload field with a range index (kb.search.browse)."""
    if order is None:
        return None
    descending = order.direction == models.Direction.DESC
    return qe.OrderBy(order.key, direction=qe.Direction.Desc if descending else qe.Direction.Asc)


def _filter(flt: models.Filter | None) -> qe.Filter | None:
    if flt is None:
        return None
    return qe.Filter(
        must=_conditions(flt.must),
        should=_conditions(flt.should),
        must_not=_conditions(flt.must_not),
    )


def _conditions(conditions: Any) -> list[Any] | None:
    if conditions is None:
        return None
    if not isinstance(conditions, list):
        conditions = [conditions]
    return [_condition(c) for c in conditions]


def _condition(cond: Any) -> Any:
    if isinstance(cond, models.Filter):
        return _filter(cond)
    if isinstance(cond, models.IsEmptyCondition):
        return qe.IsEmptyCondition(cond.is_empty.key)
    if isinstance(cond, models.IsNullCondition):
        return qe.IsNullCondition(cond.is_null.key)
    if isinstance(cond, models.HasIdCondition):
        return qe.HasIdCondition({_id(i) for i in cond.has_id})
    if isinstance(cond, models.FieldCondition):
        if cond.match is not None:
            return qe.FieldCondition(cond.key, match=_match(cond.match))
        if isinstance(cond.range, models.DatetimeRange):
            bounds = {k: _iso(v) for k, v in cond.range.model_dump().items() if v is not None}
            return qe.FieldCondition(cond.key, range=qe.RangeDateTime(**bounds))
        if isinstance(cond.range, models.Range):
            bounds = {k: v for k, v in cond.range.model_dump().items() if v is not None}
            return qe.FieldCondition(cond.key, range=qe.RangeFloat(**bounds))
    raise StoreError(f"embedded Qdrant (qdrant-edge): unsupported filter condition {cond!r}")


def _match(match: Any) -> Any:
    if isinstance(match, models.MatchValue):
        return qe.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return qe.MatchAny(list(match.any))
    if isinstance(match, models.MatchExcept):
        return qe.MatchExcept(list(match.except_))
    raise StoreError(f"embedded Qdrant (qdrant-edge): unsupported match {match!r}")


def _iso(value: Any) -> str:
    """RFC 3339 as Qdrant reads it; a naive datetime is UTC, as a server reads it."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat()
    if isinstance(value, date):
        return f"{value.isoformat()}T00:00:00+00:00"
    return str(value)


def _query(query: Any, using: str | None) -> Any:
    if query is None:
        return None
    if isinstance(query, models.FormulaQuery):
        return qe.Formula(_expression(query.formula))
    if isinstance(
        query, models.FusionQuery
    ):  # alternates: phrasings merged by rank (kb.search.query)
        if query.fusion == models.Fusion.RRF:
            return qe.Fusion.Rrf(k=RRF_K)
        return qe.Fusion.Dbsf()
    if isinstance(query, models.RrfQuery):  # RRF with its constant (and weights) given
        rrf = query.rrf
        return qe.Fusion.Rrf(k=RRF_K if rrf.k is None else rrf.k, weights=rrf.weights)
    if isinstance(query, models.SparseVector):
        return qe.Query.Nearest(_vector(query), using=using)
    if isinstance(query, models.NearestQuery):
        return _query(query.nearest, using)
    return qe.Query.Nearest(list(query), using=using)


def _prefetch(prefetch: models.Prefetch) -> qe.Prefetch:
    nested = prefetch.prefetch
    inner = nested if isinstance(nested, list) else [nested] if nested is not None else []
    return qe.Prefetch(
        limit=prefetch.limit or 10,
        query=_query(prefetch.query, prefetch.using),
        prefetches=[_prefetch(p) for p in inner] or None,
        filter=_filter(prefetch.filter),
    )


def _expression(expr: Any) -> Any:
    if isinstance(expr, str):
        return qe.Expression.Variable(expr)
    if isinstance(expr, (int, float)):
        return qe.Expression.Constant(float(expr))
    if isinstance(expr, models.SumExpression):
        return qe.Expression.Sum([_expression(e) for e in expr.sum])
    if isinstance(expr, models.MultExpression):
        return qe.Expression.Mult([_expression(e) for e in expr.mult])
    if isinstance(expr, models.DivExpression):
        return qe.Expression.Div(
            _expression(expr.div.left),
            _expression(expr.div.right),
            by_zero_default=expr.div.by_zero_default,
        )
    raise StoreError(f"embedded Qdrant (qdrant-edge): unsupported formula part {expr!r}")
