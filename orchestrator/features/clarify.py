"""The clarification loop: the analyst's answers to Batch 1's clarifying questions, and the
follow-up question they make.

When Batch 1 cannot resolve a question it ends ``needs_clarification`` with clarifying questions,
each with an id. The analyst answers some or all of them (``sqlgate ask --answer ID=TEXT``, the
analyst page, ``POST /runs/{id}/clarify``) and a follow-up run starts: a normal one-question run
(so the budget of a normal question) whose question is the original one plus the answers, so
Batch 1 and the SQL writer both read them. The follow-up keeps the id of the run that asked
(``follow_up_of``).

Example:
    >>> from orchestrator.core.result import ClarifyingQuestionOut as Q
    >>> asked = [Q(id="metric", text="Best by which measure?"), Q(id="entity", text="Of what?")]
    >>> print(follow_up_question("Show me the best ones.", asked, {"metric": "revenue"}))
    Show me the best ones.
    <BLANKLINE>
    The analyst's answers to the clarifying questions:
    - [metric] Best by which measure? Answer: revenue
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from orchestrator.core.errors import SqlgateError
from orchestrator.core.hooks import RunHooks
from orchestrator.core.result import ClarifyingQuestionOut

__all__ = [
    "ANSWERS_HEADER",
    "MAX_ANSWER_CHARS",
    "ClarificationError",
    "answered_context",
    "clarify_hooks",
    "follow_up_question",
    "parse_answers",
]

#: The line that starts the answers in a follow-up question (Batch 1 recognises it).
ANSWERS_HEADER = "The analyst's answers to the clarifying questions:"
#: An answer longer than this is refused (a clarification is a phrase, not a document).
MAX_ANSWER_CHARS = 500


class ClarificationError(SqlgateError):
    """Answers that do not fit the clarifying questions asked (unknown id, none given, too long)."""

    code = "invalid_clarification"


def parse_answers(options: Iterable[str]) -> dict[str, str]:
    """``["metric=revenue", "entity=products"]`` -> ``{"metric": "revenue", ...}``.

    Raises:
        ClarificationError: an option without ``=``, an empty id or answer, an id given twice.
    """
    answers: dict[str, str] = {}
    for option in options:
        qid, sep, text = option.partition("=")
        qid, text = qid.strip(), text.strip()
        if not sep or not qid or not text:
            raise ClarificationError(
                f"--answer {option!r} is not ID=TEXT (e.g. --answer metric=revenue)"
            )
        if qid in answers:
            raise ClarificationError(f"--answer gives {qid!r} twice")
        answers[qid] = text
    return answers


def follow_up_question(
    original: str, asked: Sequence[ClarifyingQuestionOut], answers: Mapping[str, str]
) -> str:
    """The follow-up question: the original one, then each answered clarifying question and its
    answer, in the order they were asked. Unanswered questions are left out.

    Raises:
        ClarificationError: no answer, an answer to a question that was not asked, an answer
            over ``MAX_ANSWER_CHARS``.
    """
    known = {q.id: q for q in asked}
    unknown = sorted(set(answers) - set(known))
    if unknown:
        raise ClarificationError(
            f"no clarifying question has the id {', '.join(map(repr, unknown))}; "
            f"the ids asked are {', '.join(map(repr, known)) or 'none'}"
        )
    given = {qid: " ".join(str(text).split()) for qid, text in answers.items()}
    given = {qid: text for qid, text in given.items() if text}
    if not given:
        raise ClarificationError("answer at least one clarifying question")
    for qid, text in given.items():
        if len(text) > MAX_ANSWER_CHARS:
            raise ClarificationError(
                f"the answer to {qid!r} has {len(text)} characters; the limit is {MAX_ANSWER_CHARS}"
            )
    lines = [original.strip(), "", ANSWERS_HEADER]
    lines += [f"- [{q.id}] {q.text} Answer: {given[q.id]}" for q in asked if q.id in given]
    return "\n".join(lines)


def answered_context(question: str) -> str:
    """What Batch 1 is told about a follow-up question (empty for any other question, so the
    prompt of an ordinary question is unchanged)."""
    if ANSWERS_HEADER not in question:
        return ""
    return (
        "This question carries the analyst's answers to clarifying questions asked earlier: "
        "take them as settled and resolve the question under them."
    )


def clarify_hooks() -> RunHooks:
    """The run's ``answered`` hook: Batch 1 takes a follow-up's answers as settled."""
    return RunHooks(answered=answered_context)
