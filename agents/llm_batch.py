"""How LLM agents put several questions in one call, and find each question's part of the reply.

Every LLM agent takes a list of ``QuestionInput`` (an id and the question's own context), writes
one prompt with a ``### [id]`` section per question, and answers with ``{"results": [...]}``,
one entry per question carrying its ``question_id``. Replies are matched by id, never by
position; ``split_results`` says which ids are missing, duplicated or invented so the
orchestrator can retry those questions alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

ItemT = TypeVar("ItemT", bound=BaseModel)

SECTION = "### [{id}] Question: {question}"


@dataclass(frozen=True)
class QuestionInput:
    """One question's part of a batched prompt: its id, text, and the agent-specific context."""

    id: str
    question: str
    context: str = ""


def sections(items: list[QuestionInput]) -> str:
    """The per-question part of a prompt: a header line per question, then its context."""
    parts = []
    for item in items:
        header = SECTION.format(id=item.id, question=" ".join(item.question.split()))
        parts.append(f"{header}\n{item.context}".rstrip())
    return "\n\n".join(parts)


@dataclass
class SplitResults(Generic[ItemT]):
    """A batched reply sorted out by question id."""

    by_id: dict[str, ItemT] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)


def split_results(results: list[Any], expected: list[str]) -> SplitResults[Any]:
    """Match reply entries to the expected ids. A duplicated id counts as unanswered."""
    wanted = set(expected)
    out: SplitResults[Any] = SplitResults()
    seen: dict[str, int] = {}
    for entry in results:
        qid = str(getattr(entry, "question_id", "")).strip()
        seen[qid] = seen.get(qid, 0) + 1
        if qid not in wanted:
            out.invented.append(qid)
        elif seen[qid] == 1:
            out.by_id[qid] = entry
    out.duplicated = sorted(q for q, n in seen.items() if n > 1 and q in wanted)
    for qid in out.duplicated:
        out.by_id.pop(qid, None)  # two answers for one question: trust neither
    out.missing = [q for q in expected if q not in out.by_id]
    return out
