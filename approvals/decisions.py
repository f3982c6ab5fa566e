"""Checking a reviewer's decision against a batch, and turning it into resolutions.

A decision must cover exactly the pending set of the batch: every pending call_id once, and
nothing else. Every problem is collected and reported together in one ``DecisionError``;
nothing of a refused decision is accepted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from .errors import DecisionError, DecisionProblem
from .models import (
    ApprovalBatch,
    ApprovalItem,
    Approve,
    Edit,
    ItemCategory,
    Reject,
    Resolution,
    findings_of,
    parse_decision,
    sql_hash,
)
from .store import CallLocation

DecisionPairs = list[tuple[str, Approve | Reject | Edit]]


class ValidationLike(Protocol):
    """What the gate needs of a validator's result (``safety.ValidationResult`` fits)."""

    @property
    def ok(self) -> bool: ...

    @property
    def sql(self) -> str | None: ...

    @property
    def findings(self) -> Any: ...

    @property
    def refusal(self) -> Any: ...


Validate = Callable[[str], ValidationLike]


def refusal_text(result: ValidationLike) -> str:
    """``code: message`` of the validator's blocking finding, or a generic text."""
    refusal = getattr(result, "refusal", None)
    if refusal is None:
        return "refused by the validator"
    code = getattr(refusal, "code", None) or (
        refusal.get("code") if isinstance(refusal, dict) else None
    )
    message = getattr(refusal, "message", None) or (
        refusal.get("message") if isinstance(refusal, dict) else None
    )
    return f"{code}: {message}" if code and message else str(message or code or refusal)


def normalise_decisions(decisions: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> DecisionPairs:
    """(call_id, decision) pairs in the reviewer's order; duplicates are kept so they can be refused."""
    raw = list(decisions.items()) if isinstance(decisions, Mapping) else list(decisions)
    pairs: DecisionPairs = []
    problems: list[DecisionProblem] = []
    for entry in raw:
        try:
            call_id, value = entry
        except (TypeError, ValueError):
            problems.append(
                DecisionProblem(
                    "invalid_decision", "?", f"not a (call_id, decision) pair: {entry!r}"
                )
            )
            continue
        if not isinstance(call_id, str):
            problems.append(
                DecisionProblem("invalid_decision", repr(call_id), "call_id must be a string")
            )
            continue
        try:
            pairs.append((call_id, parse_decision(value)))
        except (ValidationError, ValueError) as exc:
            first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            problems.append(
                DecisionProblem("invalid_decision", call_id, f"not a valid decision: {first}")
            )
    if problems:
        raise DecisionError(problems)
    return pairs


class _JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers the keys it held more than once."""

    duplicates: list[str]


def _keep_duplicates(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj and key not in obj.duplicates:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _nested_duplicates(value: Any, call_id: str, path: str) -> list[DecisionProblem]:
    problems: list[DecisionProblem] = []
    if isinstance(value, _JsonObject):
        problems += [
            DecisionProblem(
                "duplicate_call_id", call_id, f"key {key!r} appears more than once in {path}"
            )
            for key in value.duplicates
        ]
        for key, inner in value.items():
            problems += _nested_duplicates(inner, call_id, f"{path}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            problems += _nested_duplicates(inner, call_id, f"{path}[{index}]")
    return problems


_JSON_KINDS = ((type(None), "null"), (bool, "a boolean"), (int | float, "a number"))


def _json_kind(value: Any) -> str:
    for kind, name in _JSON_KINDS:
        if isinstance(value, kind):
            return name
    return "a list" if isinstance(value, list) else "a string"


#: The largest decision file read: thousands of decisions with edited SQL fit many times over.
MAX_DECISION_FILE_BYTES = 16 * 1024 * 1024


def parse_decision_file(content: str | bytes) -> dict[str, Any]:
    """The decisions written in a file: one JSON object ``{call_id: decision}``.

    A file is refused as a whole (``DecisionError``, nothing accepted) when it is not JSON or
    its top level is not an object (``invalid_decision_file``), or when any object in it holds
    a key twice (``duplicate_call_id``; every duplicate is listed). A plain ``json.loads``
    would keep the last of two decisions for one call_id, silently. The decisions themselves
    are checked later, against the batch, like decisions from any other source.

    Example:
        >>> parse_decision_file('{"call_1": "approve"}')
        {'call_1': 'approve'}
        >>> try:
        ...     parse_decision_file('{"call_1": "approve", "call_1": {"action": "reject"}}')
        ... except DecisionError as exc:
        ...     exc.code, exc.call_ids
        ('duplicate_call_id', ('call_1',))
        >>> try:
        ...     parse_decision_file("null")
        ... except DecisionError as exc:
        ...     exc.code
        'invalid_decision_file'
    """
    if len(content) > MAX_DECISION_FILE_BYTES:
        raise DecisionError.single(
            "invalid_decision_file",
            "?",
            f"the file is larger than {MAX_DECISION_FILE_BYTES // (1024 * 1024)} MiB "
            "(a decision names each pending call_id once)",
        )
    try:
        decoded = json.loads(content, object_pairs_hook=_keep_duplicates)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise DecisionError.single(
            "invalid_decision_file", "?", f"not a JSON document: {exc}"
        ) from exc
    if not isinstance(decoded, _JsonObject):
        raise DecisionError.single(
            "invalid_decision_file",
            "?",
            f"the file holds {_json_kind(decoded)}, not an object of {{call_id: decision}}",
        )
    problems = [
        DecisionProblem("duplicate_call_id", call_id, "decided more than once in the file")
        for call_id in decoded.duplicates
    ]
    for call_id, value in decoded.items():
        problems += _nested_duplicates(value, call_id, f"the decision of {call_id}")
    if problems:
        raise DecisionError(problems)
    return _plain(decoded)


def _plain(value: Any) -> Any:
    """The same JSON value with every object a plain ``dict``."""
    if isinstance(value, dict):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_plain(inner) for inner in value]
    return value


def decision_digest(pairs: DecisionPairs) -> str:
    """sha256 of the decision in a canonical form: equal decisions, equal digests."""
    canonical = sorted(
        json.dumps([cid, d.model_dump(mode="json")], sort_keys=True) for cid, d in pairs
    )
    return hashlib.sha256("\n".join(canonical).encode("utf-8")).hexdigest()


def _coverage_problems(
    batch: ApprovalBatch,
    pairs: DecisionPairs,
    locate: Callable[[Sequence[str]], Mapping[str, CallLocation]],
) -> list[DecisionProblem]:
    problems: list[DecisionProblem] = []
    pending = set(batch.pending_ids)
    seen: set[str] = set()
    # Ids of no category of this batch are looked up all at once (a file of thousands of
    # unknown ids is one query, not one each).
    foreign = [c for c, _ in pairs if c not in pending and c not in batch.categories]
    located = locate(foreign) if foreign else {}
    for call_id, _ in pairs:
        if call_id in seen:
            problems.append(DecisionProblem("duplicate_call_id", call_id, "decided more than once"))
            continue
        seen.add(call_id)
        if call_id in pending:
            continue
        category = batch.categories.get(call_id)
        if category is ItemCategory.DENIED:
            problems.append(
                DecisionProblem(
                    "not_pending_call_id", call_id, "denied by the validator, not approvable"
                )
            )
        elif category is ItemCategory.AUTO_APPROVED:
            problems.append(
                DecisionProblem(
                    "not_pending_call_id", call_id, "auto-approved by policy, not pending"
                )
            )
        else:
            where = located.get(call_id)
            if where is not None and where.run_id == batch.run_id:
                problems.append(
                    DecisionProblem(
                        "stale_call_id",
                        call_id,
                        f"belongs to cycle {where.cycle} ({where.batch_id}), not to cycle {batch.cycle}",
                    )
                )
            else:
                problems.append(
                    DecisionProblem("unknown_call_id", call_id, f"not an item of {batch.batch_id}")
                )
    for call_id in batch.pending_ids:
        if call_id not in seen:
            problems.append(DecisionProblem("missing_call_id", call_id, "pending but not decided"))
    return problems


def _resolve_one(
    item: ApprovalItem, decision: Approve | Reject | Edit, validate: Validate
) -> Resolution | DecisionProblem:
    base = {"call_id": item.call_id, "question_id": item.question_id}
    if isinstance(decision, Approve):
        # an item a reviewer's edit re-opened stays an edit: its SQL is the editor's
        return Resolution(
            **base,
            status="edited" if item.edited_from is not None else "approved",
            sql=item.sql,
            sql_hash=item.sql_hash,
            findings=item.findings,
            edited_from=item.edited_from,
            risk=item.risk,
        )
    if isinstance(decision, Reject):
        return Resolution(**base, status="rejected", reason=decision.reason, findings=item.findings)
    result = validate(decision.sql)
    if not result.ok or not result.sql:
        return DecisionProblem(
            "invalid_edit", item.call_id, f"edited SQL refused: {refusal_text(result)}"
        )
    return Resolution(
        **base,
        status="edited",
        sql=result.sql,
        sql_hash=sql_hash(result.sql),
        findings=findings_of(result.findings),
        edited_from=item.sql,
    )


def settled_resolution(batch: ApprovalBatch, item: ApprovalItem) -> Resolution:
    """The resolution of an item the gate settled without a reviewer (denied or auto-approved)."""
    category = batch.categories[item.call_id]
    base = {"call_id": item.call_id, "question_id": item.question_id, "findings": item.findings}
    note = batch.notes.get(item.call_id)
    if category is ItemCategory.DENIED:
        return Resolution(**base, status="denied", reason=note or "refused by the validator")
    if category is ItemCategory.AUTO_APPROVED:
        return Resolution(
            **base,
            status="auto_approved",
            sql=item.sql,
            sql_hash=item.sql_hash,
            reason=note,
            risk=item.risk,
        )
    raise ValueError(f"{item.call_id} needs a reviewer's decision")


def resolve_decisions(
    batch: ApprovalBatch,
    pairs: DecisionPairs,
    validate: Validate,
    locate: Callable[[Sequence[str]], Mapping[str, CallLocation]] = lambda _: {},
) -> dict[str, Resolution]:
    """A resolution per item of ``batch`` (batch order), or ``DecisionError`` with every problem.

    Coverage is checked first (duplicate, unknown, stale, not pending, missing ids); then every
    edit is validated, and the validator's rewritten SQL is what the resolution carries.
    """
    problems = _coverage_problems(batch, pairs, locate)
    if problems:
        raise DecisionError(problems)
    decided = dict(pairs)
    resolutions: dict[str, Resolution] = {}
    for item in batch.items:
        if item.call_id in decided:
            outcome = _resolve_one(item, decided[item.call_id], validate)
            if isinstance(outcome, DecisionProblem):
                problems.append(outcome)
                continue
            resolutions[item.call_id] = outcome
        else:
            resolutions[item.call_id] = settled_resolution(batch, item)
    if problems:
        raise DecisionError(problems)
    return resolutions


def combine_votes(
    batch: ApprovalBatch, votes: list[tuple[str, dict[str, Resolution]]]
) -> dict[str, Resolution]:
    """The batch's resolutions once a quorum of reviewers voted.

    Policy, per item: any rejection vetoes it (reasons of every rejecting reviewer, prefixed
    with their identity); it is approved when every vote approved it, or edited when every
    vote made the same edit; any other disagreement rejects it, saying so.
    """
    if len(votes) == 1:
        return votes[0][1]
    combined: dict[str, Resolution] = {}
    for item in batch.items:
        if batch.categories[item.call_id] is not ItemCategory.NEEDS_APPROVAL:
            combined[item.call_id] = settled_resolution(batch, item)
            continue
        said = [(actor, resolutions[item.call_id]) for actor, resolutions in votes]
        rejections = [f"{actor}: {r.reason}" for actor, r in said if r.status == "rejected"]
        first = said[0][1]
        if rejections:
            combined[item.call_id] = first.model_copy(
                update={
                    "status": "rejected",
                    "sql": None,
                    "sql_hash": None,
                    "edited_from": None,
                    "reason": "; ".join(rejections),
                }
            )
        elif len({(r.status, r.sql_hash) for _, r in said}) == 1:
            combined[item.call_id] = first
        else:
            views = ", ".join(f"{actor}: {r.status}" for actor, r in said)
            combined[item.call_id] = first.model_copy(
                update={
                    "status": "rejected",
                    "sql": None,
                    "sql_hash": None,
                    "edited_from": None,
                    "reason": f"reviewers disagreed ({views})",
                }
            )
    return combined
