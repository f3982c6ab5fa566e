"""Several questions per LLM call: chunking, matching replies by id, asking the left-out again."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, split_results
from orchestrator.core.errors import LLMError
from orchestrator.core.llm import LLMCall, LLMClient, TokenUsage
from orchestrator.core.question import QuestionState, share
from orchestrator.core.result import RunError, RunStatus

#: ``progress(stage, done, total)``: the stage's name and how many of its questions are done.
Progress = Callable[[str, int, int], None]


class BatchedCalls:
    """Calls an agent for many questions, up to ``k`` per call and within ``max_prompt_chars``.

    Replies are matched to questions by id, never by position. The questions a reply leaves out
    or answers twice are asked again alone; a failed call's questions are asked again in
    halves, down to one question alone. A question that fails alone ends with ``llm_error`` and
    never fails the others. Requests stay within what asking each question alone would cost.
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

        What a reply leaves out is asked again, a failed call's questions in halves (see
        ``_chunk_call``); a question that fails alone ends with ``llm_error``.
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
        *,
        first: bool = True,
    ) -> Iterable[tuple[QuestionState, Any, tuple[LLMCall, int]]]:
        """One call for ``chunk``. A failed call, or a reply that answers none of its questions,
        is asked again in halves; a reply that left some out has them asked again alone.

        Only the chunk's first call may send a repair request; the calls that follow are one
        request each. A chunk of n questions therefore costs at most 2n requests (two for the
        first call, one for each other node of the halving tree, 2n - 1 nodes in all): never more
        than asking each question alone with its repair, and usually far fewer.
        """
        index = self.next_index()
        messages = build([prepared[q.qid] for q in chunk])
        try:
            reply, call = self.llm.call(
                agent, messages, index=index, questions=len(chunk), repair=first
            )
        except LLMError as exc:
            for position, q in enumerate(chunk):
                q.took_part_in_failed(exc, agent, len(chunk), position)
            if exc.ends_run:
                raise  # the endpoint is down or refuses us: asking again per question only waits
            if len(chunk) > 1:
                yield from self._halves(agent, chunk, build, prepared)
                return
            chunk[0].fail_call(exc)
            return
        for position, q in enumerate(chunk):
            q.took_part(call, index, len(chunk), position)
        split = split_results(list(reply.results), [q.qid for q in chunk])
        if len(chunk) == 1 and not split.by_id and len(reply.results) == 1:
            split.by_id[chunk[0].qid] = reply.results[
                0
            ]  # one question, one answer: the id is a formality
            split.missing = []
        unanswered = [q for q in chunk if q.qid not in split.by_id]
        for q in chunk:
            if q.qid in split.by_id:
                yield q, split.by_id[q.qid], (call, index)
        if not unanswered:
            return
        message = "the model's reply did not answer this question"
        for position, q in enumerate(chunk):
            if q in unanswered:
                tokens = TokenUsage(
                    prompt=share(call.tokens.prompt, len(chunk), position),
                    completion=share(call.tokens.completion, len(chunk), position),
                )
                q.trace_failed_call(
                    agent,
                    index,
                    tokens,
                    call.duration_ms,
                    len(chunk),
                    f"invalid_model_output: {message}",
                )
        if len(chunk) == 1:
            chunk[0].finish(
                RunStatus.LLM_ERROR, RunError(code="invalid_model_output", message=message)
            )
        elif len(unanswered) == len(chunk):
            yield from self._halves(agent, chunk, build, prepared)  # as if the call had failed
        else:
            for q in unanswered:  # the reply worked for the others: ask the left-out alone
                yield from self._chunk_call(agent, [q], build, prepared, first=False)

    def _halves(
        self,
        agent: LLMAgent[Any],
        chunk: list[QuestionState],
        build: Callable[[list[QuestionInput]], list[dict[str, str]]],
        prepared: dict[str, QuestionInput],
    ) -> Iterable[tuple[QuestionState, Any, tuple[LLMCall, int]]]:
        middle = (len(chunk) + 1) // 2
        for half in (chunk[:middle], chunk[middle:]):
            yield from self._chunk_call(agent, half, build, prepared, first=False)

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
