"""Errors raised by the approval gate.

Every error carries a stable, machine-readable ``code``::

    ApprovalError                   code="approval_error"
     ├── DecisionError              code= unknown_call_id | missing_call_id | duplicate_call_id
     │                                    | stale_call_id | not_pending_call_id
     │                                    | invalid_decision | invalid_edit
     │                                    | invalid_decision_file (not JSON, or not an object)
     ├── ApprovalCancelled          code="approval_cancelled"   (Ctrl-C / end of input at the prompt)
     ├── AuthorMayNotDecide         code="author_may_not_decide" (four_eyes: the SQL is theirs)
     ├── NotRunnable                code="not_runnable"         (the item was not approved)
     │    ├── SqlHashMismatch       code="sql_hash_mismatch"    (the approved text changed)
     │    ├── AlreadyExecuted       code="already_executed"     (the ledger has it: never twice)
     │    └── ExecutionInDoubt      code="execution_in_doubt"   (started, outcome unknown: not re-run)
     └── StoreError                 code="store_error"
          ├── BatchNotFound         code="batch_not_found"
          ├── DecisionConflict      code="decision_conflict"    (another submission won)
          │    ├── BatchExpired     code="batch_expired"        (the deadline passed first)
          │    └── DuplicateVote    code="duplicate_vote"       (this reviewer already voted)
          ├── IdempotencyConflict   code="idempotency_conflict" (same key: different decision
          │                                                      or another reviewer)
          └── SchemaVersionError    code="schema_version_newer" (the store is newer than this code)

A refused decision (``DecisionError``) leaves the stored state unchanged and runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


class ApprovalError(Exception):
    """Base class of every error raised by ``approvals``."""

    code = "approval_error"


@dataclass(frozen=True)
class DecisionProblem:
    """One reason a decision was refused, attached to the call_id it concerns."""

    code: str
    call_id: str
    message: str


#: Problems a refused decision's message names; the others are counted (all are in ``problems``).
_PROBLEMS_SHOWN = 5


def _bounded(text: str, most: int) -> str:
    """``text`` cut to ``most`` characters (a refused value may be megabytes long)."""
    return text if len(text) <= most else f"{text[: most - 1]}… ({len(text):,} characters)"


class DecisionError(ApprovalError):
    """A decision was refused as a whole; nothing of it was accepted.

    ``code`` is the code of the first problem; ``problems`` lists every problem found, so a
    reviewer can fix them all at once.
    """

    code = "invalid_decision"

    def __init__(self, problems: list[DecisionProblem] | tuple[DecisionProblem, ...]) -> None:
        if not problems:
            raise ValueError("DecisionError needs at least one problem")
        self.problems = tuple(problems)
        self.code = self.problems[0].code
        self.call_ids = tuple(p.call_id for p in self.problems)
        shown = self.problems[:_PROBLEMS_SHOWN]
        lines = "; ".join(
            f"{_bounded(p.call_id, 80)}: {_bounded(p.message, 240)} [{p.code}]" for p in shown
        )
        left = len(self.problems) - len(shown)
        if left:
            codes = sorted({p.code for p in self.problems[len(shown) :]})
            lines += f"; and {left} more ({', '.join(codes)})"
        super().__init__(f"decision refused, nothing was accepted: {lines}")

    @classmethod
    def single(cls, code: str, call_id: str, message: str) -> DecisionError:
        return cls([DecisionProblem(code=code, call_id=call_id, message=message)])


class ApprovalCancelled(ApprovalError):
    """The reviewer cancelled the prompt; the batch stays pending and nothing runs."""

    code = "approval_cancelled"


class AuthorMayNotDecide(ApprovalError):
    """Under ``[approvals] four_eyes``, the author of a batch's SQL (who asked for it, submitted
    it, or edited it) may not decide it; the batch stays pending for another reviewer."""

    code = "author_may_not_decide"

    def __init__(self, batch_id: str, actor: str) -> None:
        self.batch_id = batch_id
        self.actor = actor
        super().__init__(
            f"{actor} wrote or asked for the SQL of {batch_id}, and the policy's four_eyes rule "
            "wants another reviewer to decide it"
        )


class NotRunnable(ApprovalError):
    """``runnable(call_id)`` was asked for an item that may not run."""

    code = "not_runnable"

    def __init__(self, call_id: str, message: str) -> None:
        self.call_id = call_id
        super().__init__(f"{call_id}: {message}")


class SqlHashMismatch(NotRunnable):
    """The SQL about to run is not byte-for-byte the SQL that was approved."""

    code = "sql_hash_mismatch"


class AlreadyExecuted(NotRunnable):
    """The execution ledger already holds this call_id: it ran (or is running) once."""

    code = "already_executed"


class ExecutionInDoubt(NotRunnable):
    """The statement was started but its end was never recorded (a crash): it is not re-run."""

    code = "execution_in_doubt"


class StoreError(ApprovalError):
    """The approval store refused or failed an operation."""

    code = "store_error"


class BatchNotFound(StoreError):
    code = "batch_not_found"

    def __init__(self, batch_id: str) -> None:
        self.batch_id = batch_id
        super().__init__(f"no approval batch {batch_id!r}")


class DecisionConflict(StoreError):
    """The batch is no longer pending at the version the submission read: another one won."""

    code = "decision_conflict"

    def __init__(self, batch_id: str, message: str) -> None:
        self.batch_id = batch_id
        super().__init__(f"{batch_id}: {message}")


class BatchExpired(DecisionConflict):
    """The batch's deadline passed; its expiry action was applied instead of the decision."""

    code = "batch_expired"


class DuplicateVote(DecisionConflict):
    """The same reviewer voted on this batch already; a quorum needs distinct reviewers."""

    code = "duplicate_vote"


class IdempotencyConflict(StoreError):
    """The idempotency key was already used on this batch, for a different decision or by
    another reviewer (keys are scoped to the batch and the reviewer)."""

    code = "idempotency_conflict"

    def __init__(
        self, batch_id: str, idempotency_key: str, *, reason: str = "used for a different decision"
    ) -> None:
        self.batch_id = batch_id
        self.idempotency_key = idempotency_key
        self.reason = reason
        super().__init__(f"{batch_id}: idempotency key {idempotency_key!r} was already {reason}")


class SchemaVersionError(StoreError):
    """The store's schema is newer than this code understands; refuse rather than corrupt it."""

    code = "schema_version_newer"
