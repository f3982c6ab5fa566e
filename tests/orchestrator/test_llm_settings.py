"""What a person can set about the model (timeout, attempts, max_tokens) and how real replies end:
cut at the token cap, fenced, failed (and still counted), refused JSON schema remembered."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from agents import SQLGenerator
from agents.llm_batch import QuestionInput
from orchestrator.core.batching import BatchedCalls
from orchestrator.core.config import Settings, llm_settings_from
from orchestrator.core.errors import ConfigurationError, LLMOutputCut, LLMOutputInvalid, LLMTimeout
from orchestrator.core.json_mode_memory import JsonModeMemory
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.question import QuestionState
from orchestrator.interfaces.cli.main import app
from ratelimit import ManualClock, SlidingWindowLimiter
from tests.scripted_llm.server import ScriptedLLMServer, ScriptedQueue, ScriptedReply

GOOD = json.dumps(
    {"results": [{"question_id": "q1", "sql": "SELECT 1 AS one", "explanation": "constant"}]}
)
MESSAGES = [
    {"role": "system", "content": "x"},
    {"role": "user", "content": "Analyst's question: q"},
]


def _client(server: ScriptedLLMServer, **settings: Any) -> LLMClient:
    clock = ManualClock()
    memory = settings.pop("json_mode_memory", None)
    return LLMClient(
        LLMSettings(model="scripted", base_url=server.base_url, **settings),
        limiter=SlidingWindowLimiter(limit=100, window=60.0, clock=clock, sleep=clock.sleep),
        http_client=httpx2.Client(),
        sleep=clock.sleep,
        json_mode_memory=memory,
    )


@pytest.fixture
def serve() -> Iterator:
    servers = []

    def start(*replies: ScriptedReply, responder: Any = None) -> ScriptedLLMServer:
        server = ScriptedLLMServer(responder or ScriptedQueue(replies))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


# -- the settings ----------------------------------------------------------------------------


def test_the_environment_sets_timeout_attempts_and_max_tokens() -> None:
    llm = Settings.from_env(
        {
            "SQLGATE_LLM_TIMEOUT": "2.5",
            "SQLGATE_LLM_ATTEMPTS": "1",
            "SQLGATE_LLM_MAX_TOKENS": "600, answer=200",
        }
    ).llm

    assert (llm.timeout_s, llm.max_attempts) == (2.5, 1)
    assert llm.max_tokens_for("reasoning") == 600 and llm.max_tokens_for("answer", 3) == 600
    assert Settings.from_env({}).llm.max_tokens_for("sql") is None  # no cap unless one is set


def test_the_command_line_wins_over_the_environment() -> None:
    llm = llm_settings_from(
        {"SQLGATE_LLM_TIMEOUT": "30", "SQLGATE_LLM_MAX_TOKENS": "100"},
        timeout="4",
        max_tokens="sql=50",
    )

    assert llm.timeout_s == 4.0
    assert llm.max_tokens is None and llm.max_tokens_by_agent == {"sql": 50}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SQLGATE_LLM_TIMEOUT", "0"),
        ("SQLGATE_LLM_TIMEOUT", "-3"),
        ("SQLGATE_LLM_TIMEOUT", "nan"),
        ("SQLGATE_LLM_TIMEOUT", "soon"),
        ("SQLGATE_LLM_ATTEMPTS", "0"),
        ("SQLGATE_LLM_ATTEMPTS", "2.5"),
        ("SQLGATE_LLM_MAX_TOKENS", "0"),
        ("SQLGATE_LLM_MAX_TOKENS", "lots"),
        ("SQLGATE_LLM_MAX_TOKENS", "planner=300"),
        ("SQLGATE_LLM_MAX_TOKENS", "sql=300,"),
    ],
)
def test_a_bad_value_is_one_sentence_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_env({variable: value})

    assert caught.value.message.startswith(variable) and "\n" not in caught.value.message


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--llm-timeout", "0"], {}, "--llm-timeout"),
        (["--llm-attempts", "none"], {}, "--llm-attempts"),
        (["--llm-max-tokens", "sql=-1"], {}, "--llm-max-tokens"),
        ([], {"SQLGATE_LLM_TIMEOUT": "forever"}, "SQLGATE_LLM_TIMEOUT"),
    ],
)
def test_ask_and_batch_refuse_a_bad_model_setting_with_exit_2(
    args: list[str], env: dict[str, str], named: str, tmp_path: Path
) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text("How many?\n")
    base = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", **env}
    for command in (
        ["ask", "How many?", "--db", f"sqlite:///{tmp_path}/x.db", "--yes", "--json"],
        ["batch", str(questions), "--db", f"sqlite:///{tmp_path}/x.db", "--out", "o.jsonl"],
    ):
        result = CliRunner().invoke(app, command + args, env=base)

        assert result.exit_code == 2, result.output
        text = result.output.strip()
        assert named in text and "Traceback" not in text
        assert not (tmp_path / "o.jsonl").exists()


# -- what is sent ----------------------------------------------------------------------------


def test_max_tokens_is_sent_per_question_only_when_set(serve) -> None:
    server = serve(ScriptedReply(GOOD), ScriptedReply(GOOD), ScriptedReply(GOOD))

    _client(server).call(SQLGenerator(), MESSAGES)
    _client(server, max_tokens=300).call(SQLGenerator(), MESSAGES, questions=3)
    _client(server, max_tokens=300, max_tokens_by_agent={"sql": 50}).call(
        SQLGenerator(), MESSAGES, questions=2
    )

    assert [r.get("max_tokens") for r in server.requests] == [None, 900, 100]


def test_a_tiny_timeout_ends_in_a_timeout_error_quickly(serve) -> None:
    server = serve(ScriptedReply.slow(GOOD, 3.0), ScriptedReply.slow(GOOD, 3.0))
    llm = _client(server, timeout_s=0.3, max_attempts=2)

    started = time.monotonic()
    with pytest.raises(LLMTimeout) as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert time.monotonic() - started < 2.5  # two 0.3 s tries, the backoff on the fake clock
    assert caught.value.code == "llm_timeout" and caught.value.ends_run
    assert "0.3 s" in caught.value.message and "SQLGATE_LLM_TIMEOUT" in caught.value.message
    assert caught.value.http_requests == 2


# -- how replies end -------------------------------------------------------------------------


def test_a_reply_cut_at_the_token_cap_is_said_so_and_never_sent_back(serve) -> None:
    cut = GOOD[: len(GOOD) // 2]
    server = serve(
        ScriptedReply(cut, finish_reason="length", prompt_tokens=900, completion_tokens=64)
    )
    llm = _client(server, max_tokens=64)

    with pytest.raises(LLMOutputCut) as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert len(server.requests) == 1  # no repair request carrying the cut text
    assert "cut at the 64-token cap" in caught.value.message
    assert "SQLGATE_LLM_MAX_TOKENS" in caught.value.message
    assert (caught.value.prompt_tokens, caught.value.completion_tokens) == (900, 64)


def test_a_cut_repair_is_said_to_be_cut_too(serve) -> None:
    server = serve(
        ScriptedReply.invalid_json("I think the answer is"),
        ScriptedReply('{"results": [', finish_reason="length"),
    )

    with pytest.raises(LLMOutputCut, match="cut by the server's token limit"):
        _client(server).call(SQLGenerator(), MESSAGES)

    assert len(server.requests) == 2


def test_a_whole_reply_that_stopped_at_the_cap_is_still_used(serve) -> None:
    server = serve(ScriptedReply(GOOD, finish_reason="length"))

    output, call = _client(server, max_tokens=500).call(SQLGenerator(), MESSAGES)

    assert output.results[0].sql == "SELECT 1 AS one" and call.http_requests == 1


def test_a_fence_cut_before_its_close_is_unwrapped(serve) -> None:
    server = serve(
        ScriptedReply(f"```json\n{GOOD}\n"), ScriptedReply(f"```json\n{GOOD}\n```\nDone.")
    )
    llm = _client(server)

    for _ in range(2):
        output, call = llm.call(SQLGenerator(), MESSAGES)
        assert output.results[0].sql == "SELECT 1 AS one" and not call.repaired


def test_a_failed_call_carries_the_tokens_the_server_counted(serve) -> None:
    server = serve(
        ScriptedReply("not json", prompt_tokens=1724, completion_tokens=375),
        ScriptedReply("still not json", prompt_tokens=2148, completion_tokens=384),
    )

    with pytest.raises(LLMOutputInvalid) as caught:
        _client(server).call(SQLGenerator(), MESSAGES, index=4)

    error = caught.value
    assert (error.prompt_tokens, error.completion_tokens) == (1724 + 2148, 375 + 384)
    assert error.http_requests == 2 and error.call_index == 4


def test_the_json_mode_fallback_is_remembered_across_clients(serve, tmp_path: Path) -> None:
    refusal = ScriptedReply.bad_request("response_format json_schema is not supported")
    server = serve(refusal, ScriptedReply(GOOD), ScriptedReply(GOOD))
    memory_file = tmp_path / "state" / "json_mode.json"

    _client(server, json_mode_memory=JsonModeMemory(memory_file)).call(SQLGenerator(), MESSAGES)
    # another process, the same endpoint and model: it starts in JSON mode
    _client(server, json_mode_memory=JsonModeMemory(memory_file)).call(SQLGenerator(), MESSAGES)

    formats = [r["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert server.base_url.split("//")[1] in memory_file.read_text()


def test_the_json_mode_memory_is_per_endpoint_and_model_and_ages(tmp_path: Path) -> None:
    now = [1000.0]
    memory = JsonModeMemory(tmp_path / "m.json", max_age_s=60.0, clock=lambda: now[0])
    memory.remember_refusal("http://user:secret@127.0.0.1:8080/v1?key=abc", "small")

    assert memory.refuses_json_schema("http://127.0.0.1:8080/v1/", "small")
    assert not memory.refuses_json_schema("http://127.0.0.1:8080/v1", "large")
    assert not memory.refuses_json_schema("http://127.0.0.1:8081/v1", "small")
    assert "secret" not in memory.path.read_text() and "abc" not in memory.path.read_text()
    now[0] += 61.0
    assert not memory.refuses_json_schema("http://127.0.0.1:8080/v1", "small")


def test_an_unreadable_json_mode_memory_costs_only_the_refused_request(tmp_path: Path) -> None:
    broken = tmp_path / "m.json"
    broken.write_text("{not json")
    assert not JsonModeMemory(broken).refuses_json_schema("http://x/v1", "m")


# -- batches: failed calls counted, fallbacks proportionate -----------------------------------

_SECTION = re.compile(r"### \[(q\d+)\]")


def _ids(request: dict[str, Any]) -> list[str]:
    return _SECTION.findall(request["messages"][1]["content"])  # the questions' message


def _answer(ids: list[str]) -> str:
    return json.dumps(
        {"results": [{"question_id": q, "sql": "SELECT 1", "explanation": "-"} for q in ids]}
    )


def _batch(server: ScriptedLLMServer, n: int, k: int = 10) -> tuple[list[QuestionState], list]:
    llm = _client(server)
    counter = iter(range(1, 1000))
    calls = BatchedCalls(
        llm,
        k=k,
        max_prompt_chars=100_000,
        progress=lambda *a: None,
        next_index=lambda: next(counter),
    )
    qs = [
        QuestionState("run", f"q{i + 1}", f"question {i + 1}", time.perf_counter) for i in range(n)
    ]
    agent = SQLGenerator()
    got = list(
        calls(
            "sql",
            agent,
            qs,
            lambda items: agent.build_messages(items, "t(a)", "", "sqlite"),
            lambda q: QuestionInput(q.qid, q.text, "plan"),
        )
    )
    return qs, got


def _usage(request: dict[str, Any]) -> tuple[int, int]:
    return 100 * len(_ids(request)), 10 * len(_ids(request))


def test_an_invalid_batched_reply_is_asked_again_in_halves_not_question_by_question(serve) -> None:
    # the model manages two questions at a time, never more
    def responder(request: dict[str, Any]) -> ScriptedReply:
        ids = _ids(request)
        text = _answer(ids) if len(ids) <= 2 else "I cannot do that many"
        prompt, completion = _usage(request)
        return ScriptedReply(text, prompt_tokens=prompt, completion_tokens=completion)

    server = serve(responder=responder)
    qs, got = _batch(server, 6)

    assert sorted(q.qid for q, _, _ in got) == [f"q{i}" for i in range(1, 7)]
    # 6 (and its repair), then each half in one request (no repair), and its halves
    assert [len(_ids(r)) for r in server.requests] == [6, 6, 3, 2, 1, 3, 2, 1]
    assert len(server.requests) <= 2 * 6  # never more than each question alone with a repair
    # every question is charged its share: the shares add up to what the server saw
    assert sum(q.http_requests for q in qs) == len(server.requests)
    assert sum(q.tokens.prompt for q in qs) == sum(_usage(r)[0] for r in server.requests)
    assert sum(q.tokens.completion for q in qs) == sum(_usage(r)[1] for r in server.requests)
    failed = [t for t in qs[0].trace if not t.ok]
    assert [(t.agent, t.llm_call) for t in failed] == [("SQLGenerator", 1), ("SQLGenerator", 2)]
    assert failed[0].tokens is not None and failed[0].tokens.prompt > 0


def test_a_model_that_fails_everything_costs_at_most_two_requests_a_question(serve) -> None:
    server = serve(responder=lambda request: ScriptedReply("no"))

    for n in (1, 2, 5, 6, 10):
        before = len(server.requests)
        qs, got = _batch(server, n)
        assert got == [] and all(q.status is not None for q in qs)
        assert len(server.requests) - before <= 2 * n
        assert sum(q.http_requests for q in qs) == len(server.requests) - before


def test_a_reply_that_leaves_some_out_asks_those_alone(serve) -> None:
    def responder(request: dict[str, Any]) -> ScriptedReply:
        ids = _ids(request)
        return ScriptedReply(_answer([q for q in ids if q != "q3"] if len(ids) > 1 else ids))

    server = serve(responder=responder)
    qs, got = _batch(server, 5)

    assert len(got) == 5 and [len(_ids(r)) for r in server.requests] == [5, 1]
    assert sum(q.http_requests for q in qs) == 2


def test_the_metrics_count_the_tokens_of_a_failed_call(serve) -> None:
    from orchestrator.core import metrics

    server = serve(
        ScriptedReply("not json", prompt_tokens=700, completion_tokens=30),
        ScriptedReply("nor this", prompt_tokens=800, completion_tokens=40),
    )
    before = (
        metrics.llm_tokens_total.value(type="input"),
        metrics.llm_tokens_total.value(type="output"),
        metrics.llm_calls_total.value(agent="SQLBatch", result="invalid_model_output"),
    )

    with pytest.raises(LLMOutputInvalid):
        _client(server).call(SQLGenerator(), MESSAGES)

    assert metrics.llm_tokens_total.value(type="input") - before[0] == 1500
    assert metrics.llm_tokens_total.value(type="output") - before[1] == 70
    assert (
        metrics.llm_calls_total.value(agent="SQLBatch", result="invalid_model_output") - before[2]
        == 1
    )


# -- a whole run: what a failed run reports ---------------------------------------------------


def _pipeline(server: ScriptedLLMServer, demo_db: Path, **settings: Any) -> Any:
    from approvals import ApproveAll
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.pipeline import Pipeline, PipelineConfig

    return Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}"),
        _client(server, **settings),
        ApproveAll(),
        config=PipelineConfig(k=10),
    )


def test_a_failed_run_reports_the_tokens_requests_and_trace_of_its_failed_call(
    serve, demo_db: Path
) -> None:
    server = serve(
        ScriptedReply("not json", prompt_tokens=1724, completion_tokens=375),
        ScriptedReply("still not", prompt_tokens=2148, completion_tokens=384),
    )

    result = _pipeline(server, demo_db).ask("How many orders are there?")

    assert result.status.value == "llm_error" and result.error.code == "invalid_model_output"
    assert (result.tokens.prompt, result.tokens.completion) == (1724 + 2148, 375 + 384)
    assert result.http_requests == 2 and result.llm_calls == 1
    assert [(t.agent, t.ok) for t in result.trace] == [
        ("IntentAnalyzer", False),
        ("ClarificationAgent", False),
        ("QueryDecomposer", False),
        ("QueryPlanner", False),
    ]
    assert result.trace[0].tokens.prompt == 1724 + 2148


def test_a_run_cut_at_the_token_cap_says_so_after_one_request(serve, demo_db: Path) -> None:
    server = serve(ScriptedReply('{"results": [{"question_id": "q1", "in', finish_reason="length"))

    result = _pipeline(server, demo_db, max_tokens_by_agent={"reasoning": 12}).ask(
        "How many orders are there?"
    )

    assert result.status.value == "llm_error" and result.error.code == "model_output_cut"
    assert "12-token cap" in result.error.message and "reasoning=N" in result.error.message
    assert len(server.requests) == 1 and server.requests[0]["max_tokens"] == 12
