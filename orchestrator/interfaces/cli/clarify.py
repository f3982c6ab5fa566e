"""``sqlgate ask``'s clarification loop: answer the model's clarifying questions, then ask again.

When Batch 1 needs clarification, ``ask`` shows each clarifying question with its id and:

- with ``--answer ID=TEXT`` (repeatable): starts the follow-up run at once with those answers;
- on a terminal (no ``--json``): asks for each answer (Enter skips one) and starts the follow-up;
- otherwise: prints how to answer (``--answer``) and exits 3 (needs clarification).

A follow-up is an ordinary one-question run (the budget of a normal question) whose question is
the original plus the answers (``orchestrator.features.clarify``); its result names the run that asked
(``follow_up_of``). A follow-up may itself need clarification: a terminal is asked again, up to
``MAX_ROUNDS`` follow-ups.
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.markup import escape

from orchestrator.core.result import RunResult, RunStatus
from orchestrator.features.clarify import ClarificationError, follow_up_question
from orchestrator.interfaces.cli.common import Spinner, err

if TYPE_CHECKING:
    from orchestrator.core.identity import Identity
    from orchestrator.core.pipeline import Pipeline

__all__ = ["MAX_ROUNDS", "ClarificationError", "clarify", "hint", "how_to_answer"]

#: Follow-ups one ``ask`` starts at most (each is a full run).
MAX_ROUNDS = 3
#: The longest ``ask`` waits for room in a fail-fast rate limit before a follow-up.
MAX_FOLLOW_UP_WAIT_S = 120.0


def how_to_answer(result: RunResult) -> str:
    """The command that answers ``result``'s clarifying questions (placeholders for the answers)."""
    options = " ".join(
        f"--answer {shlex.quote(q.id + '=...')}" for q in result.clarification_questions
    )
    return f"sqlgate ask {shlex.quote(result.question)} {options}"


def _terminal(as_json: bool) -> bool:
    """Whether a person at a terminal can be asked (not with --json, not from a pipe)."""
    return not as_json and sys.stdin.isatty()


def _ask_terminal(result: RunResult) -> dict[str, str]:
    err.print("[bold]Answer the clarifying questions[/] (Enter skips one; skip all to stop here):")
    answers = {}
    for q in result.clarification_questions:
        text = err.input(f"  [cyan]\\[{escape(q.id)}][/] {escape(q.text)}\n  > ").strip()
        if text:
            answers[q.id] = text
    return answers


def _room_for(pipeline: Pipeline) -> None:
    """The analyst asked for the follow-up: wait (say so, bounded) until its worst case fits a
    fail-fast rate limit, rather than have admission control refuse it because the run that
    asked took a slot. Beyond ``MAX_FOLLOW_UP_WAIT_S`` admission refuses it, with the wait."""
    limiter = pipeline.llm.limiter
    if not pipeline.config.admission or getattr(limiter, "mode", "") != "fail_fast":
        return
    wait = limiter.fits(3 + pipeline.config.max_corrections)
    if 0 < wait <= MAX_FOLLOW_UP_WAIT_S:
        err.print(f"[dim]waiting {wait:.0f} s for room in the rate limit before the follow-up[/]")
        time.sleep(wait)


def clarify(
    pipeline: Pipeline,
    result: RunResult,
    answers: dict[str, str],
    *,
    as_json: bool,
    show: Callable[[RunResult], None],
    interactive: bool | None = None,
    role: str | None = None,
    identity: Identity | None = None,
    hint: str | None = None,
) -> RunResult:
    """Carry ``result`` through the clarification loop; return the last run's result.

    ``show`` prints a result that is not the last one (the last is for the caller to show);
    follow-ups are judged under the same ``role`` as the first question, and planned with the
    same ``hint`` (``ask --hint``): the answers add to what the asker said, they do not replace it.

    Raises:
        ClarificationError: ``answers`` do not fit the clarifying questions asked.
    """
    terminal = _terminal(as_json) if interactive is None else interactive
    if answers and result.status != RunStatus.NEEDS_CLARIFICATION:
        err.print("[yellow]the question needed no clarification: --answer was not used[/]")
        return result
    for _ in range(MAX_ROUNDS):
        if result.status != RunStatus.NEEDS_CLARIFICATION:
            return result
        if not answers and terminal:
            show(result)
            answers = _ask_terminal(result)
            if not answers:
                return result
        elif not answers:
            return result
        text = follow_up_question(result.question, result.clarification_questions, answers)
        if not as_json:
            err.print(f"[dim]asking again with the answers, as a follow-up of {result.run_id}[/]")
        _room_for(pipeline)
        with Spinner(enabled=True) as spinner:
            pipeline.progress = spinner
            result = pipeline.run_batch(
                [text],
                follow_up_of=result.run_id,
                role=role,
                identity=identity,
                hints=[hint or ""],
            )[0]
        answers = {}
    return result


def hint(result: RunResult) -> None:
    """After a result that still needs clarification: how to answer it."""
    if result.status == RunStatus.NEEDS_CLARIFICATION and result.clarification_questions:
        err.print(f"Answer with: [cyan]{escape(how_to_answer(result))}[/]")
