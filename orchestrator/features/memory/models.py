"""What memory holds: reviewed examples (positive or negative), business notes, revocations."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BusinessNote", "ExampleStatus", "MemoryExample", "Revocation", "ScoredExample"]

#: approved / edited by a reviewer at the gate, seeded by ``sqlgate memory add``, rejected.
ExampleStatus = Literal["approved", "edited", "seeded", "rejected"]


class MemoryExample(BaseModel):
    """One reviewed (question, SQL) pair; a negative carries the reviewer's reason."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="The example's number in the state database")
    database: str = Field(description="The target database (URL without its password)")
    dialect: str = Field(description="SQL dialect of the statement")
    question: str = Field(description="The question as the analyst asked it")
    clarifications: list[str] = Field(
        default_factory=list, description="Answers or assumptions that completed the question"
    )
    sql: str = Field(description="The SQL that ran (or, for a negative, that was rejected)")
    kind: Literal["positive", "negative"] = Field(description="positive: ran; negative: rejected")
    status: ExampleStatus = Field(description="How the statement was reviewed")
    template_id: str = Field(description="Template fingerprint (literals replaced)")
    template_text: str = Field(description="The normalised template the id hashes")
    schema_fp: str = Field(description="Fingerprint of the database schema at the time")
    policy_fp: str = Field(description="Fingerprint of the safety policy it was validated under")
    tables: list[str] = Field(default_factory=list, description="Tables the statement reads")
    columns: list[str] | None = Field(
        default=None, description="table.column names it reads; None when not resolvable"
    )
    reviewers: list[str] = Field(
        default_factory=list, description="Who approved, edited or added it"
    )
    reason: str | None = Field(default=None, description="Why it was rejected (negatives)")
    call_id: str | None = Field(default=None, description="The approval item it came from")
    batch_id: str | None = Field(
        default=None,
        description="The approval batch it was decided in: one review event, however many "
        "statements or votes it had",
    )
    hint: str = Field(
        default="",
        description="What the asker added to the question (--hint, MCP evidence); empty: none",
    )
    created_at: datetime = Field(description="When it was recorded (UTC)")


class ScoredExample(BaseModel):
    """An example found for a question, with the retriever's relevance (higher is closer)."""

    model_config = ConfigDict(frozen=True)

    example: MemoryExample = Field(description="The example")
    relevance: float = Field(description="Retriever relevance, higher is more similar")


class BusinessNote(BaseModel):
    """A definition in the business's words ("revenue means ..."), fed to Batch 1."""

    model_config = ConfigDict(frozen=True)

    id: int = Field(description="The note's number in the state database")
    database: str = Field(description="The target database it applies to ('*' for every one)")
    text: str = Field(description="The note")
    tables: list[str] = Field(default_factory=list, description="Tables it concerns")
    author: str = Field(description="Who wrote it")
    created_at: datetime = Field(description="When it was written (UTC)")


class Revocation(BaseModel):
    """A template a reviewer took back: approvals before ``revoked_at`` no longer earn ``auto``."""

    model_config = ConfigDict(frozen=True)

    database: str = Field(description="The target database ('*' for every one)")
    template_id: str = Field(description="The revoked template")
    actor: str = Field(description="Who revoked it")
    reason: str | None = Field(default=None, description="Why")
    revoked_at: datetime = Field(description="When (UTC)")
