"""Reviewer strategies: ``reviewer(batch) -> {call_id: decision}``, called once per cycle.

``ApproveAll`` (for ``--yes``), ``RejectAll(reason)``, and ``MappingReviewer`` for scripts,
whose decisions come from a dict or a JSON file. ``TerminalReviewer`` lives in
``approvals.terminal``.

Example:
    >>> from approvals.models import ApprovalBatch, ApprovalItem, ItemCategory
    >>> from datetime import datetime, UTC
    >>> item = ApprovalItem.new(question_id="q1", question="?", sql="SELECT 1")
    >>> batch = ApprovalBatch(batch_id="batch_1", run_id="run_1", cycle=1, created_at=datetime.now(UTC),
    ...                       items=[item], categories={item.call_id: ItemCategory.NEEDS_APPROVAL})
    >>> MappingReviewer({"q1": {"action": "reject", "reason": "not now"}})(batch)[item.call_id]
    Reject(action='reject', reason='not now')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .decisions import parse_decision_file
from .errors import DecisionError, DecisionProblem
from .models import ApprovalBatch, Approve, Edit, Reject, parse_decision


@dataclass(frozen=True)
class ApproveAll:
    """Approve every pending item as shown (the command line's ``--yes``)."""

    def __call__(self, batch: ApprovalBatch) -> dict[str, Approve]:
        return {call_id: Approve() for call_id in batch.pending_ids}


@dataclass(frozen=True)
class RejectAll:
    """Reject every pending item with one reason."""

    reason: str = "rejected by the reviewer"

    def __call__(self, batch: ApprovalBatch) -> dict[str, Reject]:
        return {call_id: Reject(reason=self.reason) for call_id in batch.pending_ids}


class MappingReviewer:
    """Decisions given in advance, keyed by call_id or by question_id.

    A call_id key decides that item; a question_id key decides every pending item of that
    question; ``default`` (e.g. ``"approve"``) decides the rest. Keys that match nothing are
    passed through as call_ids, so the gate refuses them as unknown or stale rather than
    silently ignoring them. A pending item nobody decided is left out, and the gate refuses the
    decision as missing it.
    """

    def __init__(self, decisions: Mapping[str, Any], default: Any = None) -> None:
        problems: list[DecisionProblem] = []

        def parse(key: str, value: Any) -> Approve | Reject | Edit | None:
            try:
                return parse_decision(value)
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                problems.append(
                    DecisionProblem("invalid_decision", key, f"not a valid decision: {exc}")
                )
                return None

        parsed = {key: parse(key, value) for key, value in decisions.items()}
        self.default = parse("default", default) if default is not None else None
        if problems:
            raise DecisionError(problems)
        self.decisions = {key: d for key, d in parsed.items() if d is not None}

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> MappingReviewer:
        """Read ``{"decisions": {key: decision}, "default": …}`` or a plain ``{key: decision}``
        from a file path, or from JSON text (a string starting with ``{``).

        The JSON is read by ``parse_decision_file``: a key repeated in any object is refused with
        ``duplicate_call_id`` instead of the last one silently winning, and anything but an
        object (``null``, a number, a list) with ``invalid_decision_file``.
        """
        source = path_or_text
        if isinstance(source, Path) or not source.lstrip().startswith("{"):
            source = Path(source).read_text(encoding="utf-8")
        data = parse_decision_file(source)
        if "decisions" in data and isinstance(data["decisions"], dict):
            return cls(data["decisions"], default=data.get("default"))
        return cls(data)

    def __call__(self, batch: ApprovalBatch) -> dict[str, Approve | Reject | Edit]:
        chosen: dict[str, Approve | Reject | Edit] = {}
        used: set[str] = set()
        for item in batch.pending:
            for key in (item.call_id, item.question_id):
                if key in self.decisions:
                    chosen[item.call_id] = self.decisions[key]
                    used.add(key)
                    break
            else:
                if self.default is not None:
                    chosen[item.call_id] = self.default
        question_ids = {i.question_id for i in batch.items}
        for key, decision in self.decisions.items():
            if key not in used and key not in question_ids:
                chosen.setdefault(key, decision)
        return chosen
