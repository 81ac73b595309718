"""qdrant-client's request models as qdrant-edge's objects, and qdrant-edge's records back as
kb.store.engine's, for the embedded engine (kb.store.edge).

The Store speaks qdrant-client's models to both engines (kb.store.engine); a server takes them
as they are, Qdrant's engine in-process takes its own Python classes. Only what the Store sends
is translated (filters, prefetches, the fusion formula, points); anything else is refused with a
StoreError naming it, never silently changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime

import qdrant_edge as qe

from kb.core.errors import StoreError
from kb.store.engine import Fields, Record, StoredVector
from kb.store.models import models

RRF_K = 2  # a Qdrant server's reciprocal rank fusion constant, so both engines rank alike
ENGINE = "embedded Qdrant (qdrant-edge)"
# what a query or prefetch scores by; qdrant-edge's stubs type Fusion's variants apart from it
EdgeQuery = qe.Query | qe.Formula | qe.Fusion.Rrf | qe.Fusion.Dbsf

SCHEMAS = {
    models.PayloadSchemaType.KEYWORD: qe.PayloadSchemaType.Keyword,
    models.PayloadSchemaType.INTEGER: qe.PayloadSchemaType.Integer,
    models.PayloadSchemaType.FLOAT: qe.PayloadSchemaType.Float,
    models.PayloadSchemaType.BOOL: qe.PayloadSchemaType.Bool,
    models.PayloadSchemaType.DATETIME: qe.PayloadSchemaType.Datetime,
    models.PayloadSchemaType.UUID: qe.PayloadSchemaType.Uuid,
    models.PayloadSchemaType.TEXT: qe.PayloadSchemaType.Text,
}
DISTANCES = {
    models.Distance.COSINE: qe.Distance.Cosine,
    models.Distance.DOT: qe.Distance.Dot,
    models.Distance.EUCLID: qe.Distance.Euclid,
    models.Distance.MANHATTAN: qe.Distance.Manhattan,
}


def point_id(point: models.ExtendedPointId) -> uuid.UUID | int:
    """Qdrant's point ids are UUIDs (ours: kb.core.schema.point_id) or unsigned integers."""
    return uuid.UUID(point) if isinstance(point, str) else point


def fields(selected: Fields | models.WithPayloadInterface | None) -> bool | list[str]:
    """Which payload fields (or vectors) to return: all (True), none, or these."""
    if selected is None or isinstance(selected, bool):
        return bool(selected)
    if isinstance(selected, models.PayloadSelectorInclude):
        return list(selected.include)
    if isinstance(selected, models.PayloadSelectorExclude):
        raise StoreError(f"{ENGINE}: unsupported payload selector {selected!r}")
    return list(selected)


def point(p: models.PointStruct) -> qe.Point:
    if not isinstance(p.vector, dict):
        raise StoreError(f"{ENGINE}: a point needs named vectors, got {type(p.vector).__name__}")
    vectors: dict[str, qe.NamedVector] = {k: _vector(v) for k, v in p.vector.items()}
    return qe.Point(point_id(p.id), vectors, p.payload or {})


def _vector(vector: models.Vector) -> qe.NamedVector:
    if isinstance(vector, models.SparseVector):
        return qe.SparseVector(list(vector.indices), [float(x) for x in vector.values])
    return dense(vector)


def dense(vector: object) -> list[float]:
    """A dense vector as a list of floats; StoreError for anything else (multivectors,
    documents for server-side inference: none of ours)."""
    if isinstance(vector, list) and all(isinstance(x, int | float) for x in vector):
        return [float(x) for x in vector]
    raise StoreError(f"{ENGINE}: unsupported vector {type(vector).__name__}")


def order_by(order: models.OrderBy | None) -> qe.OrderBy | None:
    """Scroll ordered by a payload field with a range index (kb.search.browse)."""
    if order is None:
        return None
    descending = order.direction == models.Direction.DESC
    return qe.OrderBy(order.key, direction=qe.Direction.Desc if descending else qe.Direction.Asc)


def where(flt: models.Filter | None) -> qe.Filter | None:
    if flt is None:
        return None
    return qe.Filter(
        must=_conditions(flt.must),
        should=_conditions(flt.should),
        must_not=_conditions(flt.must_not),
    )


def must(flt: models.Filter) -> qe.Filter:
    """A filter that is there (a write's selection of points)."""
    translated = where(flt)
    assert translated is not None
    return translated


def _conditions(
    conditions: list[models.Condition] | models.Condition | None,
) -> list[qe.ConditionType] | None:
    if conditions is None:
        return None
    if not isinstance(conditions, list):
        conditions = [conditions]
    return [_condition(c) for c in conditions]


def _condition(cond: models.Condition) -> qe.ConditionType:
    if isinstance(cond, models.Filter):
        return qe.Filter(
            must=_conditions(cond.must),
            should=_conditions(cond.should),
            must_not=_conditions(cond.must_not),
        )
    if isinstance(cond, models.IsEmptyCondition):
        return qe.IsEmptyCondition(cond.is_empty.key)
    if isinstance(cond, models.IsNullCondition):
        return qe.IsNullCondition(cond.is_null.key)
    if isinstance(cond, models.HasIdCondition):
        return qe.HasIdCondition({point_id(i) for i in cond.has_id})
    if isinstance(cond, models.FieldCondition):
        if cond.match is not None:
            return qe.FieldCondition(cond.key, match=_match(cond.match))
        span = cond.range
        if isinstance(span, models.DatetimeRange):
            moment = qe.RangeDateTime(
                gte=_iso(span.gte), gt=_iso(span.gt), lte=_iso(span.lte), lt=_iso(span.lt)
            )
            return qe.FieldCondition(cond.key, range=moment)
        if isinstance(span, models.Range):
            number = qe.RangeFloat(gte=span.gte, gt=span.gt, lte=span.lte, lt=span.lt)
            return qe.FieldCondition(cond.key, range=number)
    raise StoreError(f"{ENGINE}: unsupported filter condition {cond!r}")


def _match(match: models.Match) -> qe.MatchType:
    if isinstance(match, models.MatchValue):
        return qe.MatchValue(match.value)
    if isinstance(match, models.MatchAny):
        return qe.MatchAny(match.any)
    if isinstance(match, models.MatchExcept):
        return qe.MatchExcept(match.except_)
    raise StoreError(f"{ENGINE}: unsupported match {match!r}")


def _iso(value: datetime | date | None) -> str | None:
    """RFC 3339 as Qdrant reads it; a naive datetime is UTC, as a server reads it."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat()
    return f"{value.isoformat()}T00:00:00+00:00"


def query(found: models.QueryInterface | None, using: str | None) -> EdgeQuery | None:
    if found is None:
        return None
    if isinstance(found, models.FormulaQuery):
        return qe.Formula(_expression(found.formula))
    if isinstance(found, models.FusionQuery):  # alternates: phrasings merged by rank
        if found.fusion == models.Fusion.RRF:
            return qe.Fusion.Rrf(k=RRF_K)
        return qe.Fusion.Dbsf()
    if isinstance(found, models.RrfQuery):  # RRF with its constant (and weights) given
        rrf = found.rrf
        return qe.Fusion.Rrf(k=RRF_K if rrf.k is None else rrf.k, weights=rrf.weights)
    if isinstance(found, models.NearestQuery):
        return query(found.nearest, using)
    if isinstance(found, models.SparseVector):
        return qe.Query.Nearest(_vector(found), using=using)
    return qe.Query.Nearest(dense(found), using=using)


def prefetches(found: list[models.Prefetch] | models.Prefetch | None) -> list[qe.Prefetch] | None:
    listed = found if isinstance(found, list) else [] if found is None else [found]
    return [
        qe.Prefetch(
            limit=p.limit or 10,
            query=_scoring(query(p.query, p.using)),
            prefetches=prefetches(p.prefetch),
            filter=where(p.filter),
        )
        for p in listed
    ] or None


def _scoring(found: EdgeQuery | None) -> qe.ScoringQueryType | None:
    # qdrant-edge accepts Fusion.Rrf and Fusion.Dbsf wherever its stubs say Fusion
    return found  # type: ignore[return-value]


def request(
    found: models.QueryRequest | models.QueryGroupsRequest, limit: int, payload: Fields
) -> qe.QueryRequest:
    """The ranked query of a request (a grouped one's groups are kept by kb.store.edge)."""
    return qe.QueryRequest(
        limit=limit,
        query=_scoring(query(found.query, found.using)),
        prefetches=prefetches(found.prefetch),
        filter=where(found.filter),
        with_payload=fields(payload),
        with_vector=False,
    )


def _expression(expr: models.Expression) -> qe.Expression:
    if isinstance(expr, str):
        return qe.Expression.Variable(expr)
    if isinstance(expr, int | float):
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
    if isinstance(expr, models.FieldCondition):  # 1 where it holds, else 0
        return qe.Expression.Condition(_condition(expr))
    raise StoreError(f"{ENGINE}: unsupported formula part {expr!r}")


def ids(points: Sequence[str]) -> list[qe.PointId]:
    return [point_id(p) for p in points]


def record(found: qe.Record) -> Record:
    """A stored point as the engines return it (kb.store.engine.Record)."""
    vectors: dict[str, StoredVector] = {}
    if isinstance(found.vector, dict):
        for key, vector in found.vector.items():
            if isinstance(vector, qe.SparseVector):
                values = [float(x) for x in vector.values]
                vectors[key] = models.SparseVector(indices=list(vector.indices), values=values)
            else:
                vectors[key] = dense(vector)
    return Record(str(found.id), found.payload or {}, vectors)
