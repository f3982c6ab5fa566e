"""Several questions per LLM call: chunking, matching replies by id, retrying the left-out alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, split_results
from orchestrator.core.errors import LLMError
from orchestrator.core.llm import LLMCall, LLMClient
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunError, RunStatus

#: ``progress(stage, done, total)``: the stage's name and how many of its questions are done.
Progress = Callable[[str, int, int], None]


class BatchedCalls:
    """Calls an agent for many questions, up to ``k`` per call and within ``max_prompt_chars``.

    Replies are matched to questions by id, never by position. A question the reply leaves out or
    answers twice, or that a failed call carried, is retried alone; a question that fails alone
    ends with ``llm_error`` and never fails the others.
    """

    def __init__(
        self,
        llm: LLMClient,
        *,
        k: int,
        max_prompt_chars: int,
        progress: Progress,
        next_index: Callable[[], int],
    ) -> None:
        self.llm = llm
        self.k = k
        self.max_prompt_chars = max_prompt_chars
        self.progress = progress
        self.next_index = next_index  # the run's own count of its LLM calls

    def __call__(
        self,
        stage: str,
        agent: LLMAgent[Any],
        qs: list[QuestionState],
        build: Callable[[list[QuestionInput]], list[dict[str, str]]],
        inputs: Callable[[QuestionState], QuestionInput],
    ) -> Iterable[tuple[QuestionState, Any, tuple[LLMCall, int]]]:
        """Call ``agent`` for ``qs`` in chunks; yield each question with its part of a reply.

        A question the reply leaves out, answers twice or that a failed call carried is retried
        alone; a question that fails alone ends with ``llm_error`` and never fails the others.
        """
        prepared = {q.qid: inputs(q) for q in qs}
        done = 0
        self.progress(stage, 0, len(qs))
        for chunk in self._chunks(qs, prepared):
            yield from self._chunk_call(agent, chunk, build, prepared)
            done += len(chunk)
            self.progress(stage, done, len(qs))

    def _chunk_call(
        self,
        agent: LLMAgent[Any],
        chunk: list[QuestionState],
        build: Callable[[list[QuestionInput]], list[dict[str, str]]],
        prepared: dict[str, QuestionInput],
    ) -> Iterable[tuple[QuestionState, Any, tuple[LLMCall, int]]]:
        index = self.next_index()
        try:
            reply, call = self.llm.call(agent, build([prepared[q.qid] for q in chunk]), index=index)
        except LLMError as exc:
            for q in chunk:
                q.took_part_in_failed(exc)
            if exc.ends_run:
                raise  # the endpoint is down or refuses us: asking again per question only waits
            if len(chunk) > 1:
                for q in chunk:
                    yield from self._chunk_call(agent, [q], build, prepared)
                return
            chunk[0].fail_call(exc)
            return
        for q in chunk:
            q.took_part(call, index, len(chunk))
        split = split_results(list(reply.results), [q.qid for q in chunk])
        if len(chunk) == 1 and not split.by_id and len(reply.results) == 1:
            split.by_id[chunk[0].qid] = reply.results[
                0
            ]  # one question, one answer: the id is a formality
            split.missing = []
        for q in chunk:
            if q.qid in split.by_id:
                yield q, split.by_id[q.qid], (call, index)
            elif len(chunk) > 1:
                yield from self._chunk_call(agent, [q], build, prepared)
            else:
                q.finish(
                    RunStatus.LLM_ERROR,
                    RunError(
                        code="invalid_model_output",
                        message="the model's reply did not answer this question",
                    ),
                )

    def _chunks(
        self, qs: list[QuestionState], prepared: dict[str, QuestionInput]
    ) -> Iterable[list[QuestionState]]:
        """Up to ``k`` questions per call, fewer when their contexts would make the prompt too big."""
        chunk: list[QuestionState] = []
        size = 0
        for q in qs:
            item = prepared[q.qid]
            cost = len(item.question) + len(item.context) + 40
            if chunk and (len(chunk) >= self.k or size + cost > self.max_prompt_chars):
                yield chunk
                chunk, size = [], 0
            chunk.append(q)
            size += cost
        if chunk:
            yield chunk
