"""The one seam to the model: an OpenAI-compatible client, the limiter before every request, retries.

Nothing else in sqlgate imports ``openai``. The SDK is built with ``max_retries=0`` so that tenacity
alone retries, and every HTTP attempt (retries, the JSON-mode fallback and the repair request
included) first passes the shared rate limiter.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, Field, SecretStr
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from agents.llm_agent import AgentOutputError, LLMAgent, json_schema
from orchestrator.core import telemetry
from orchestrator.core.errors import (
    LLMError,
    LLMOutputCut,
    LLMOutputInvalid,
    LLMRequestRejected,
    LLMTimeout,
    LLMUnavailable,
)

if TYPE_CHECKING:
    import openai

    from orchestrator.core.json_mode_memory import JsonModeMemory

#: Real model requests are allowed unless a test suite turns this off (tests replay cassettes).
ALLOW_MODEL_REQUESTS = True


def transient_errors() -> tuple[type[Exception], ...]:
    """The SDK's errors worth retrying. ``openai`` is imported here, on the first client, not
    when the module is: a command that never calls the model does not pay for the SDK."""
    import openai

    return (
        openai.APIConnectionError,
        openai.APITimeoutError,
        openai.RateLimitError,
        openai.InternalServerError,
    )


class LLMSettings(BaseModel):
    """How the model is asked: endpoint, model, and what one request may take.

    ``timeout_s`` bounds each HTTP request (``SQLGATE_LLM_TIMEOUT``), ``max_attempts`` the tries
    of one request on transient errors (``SQLGATE_LLM_ATTEMPTS``). ``max_tokens`` caps the reply
    per question of a call (``SQLGATE_LLM_MAX_TOKENS``; a batched call of three questions asks
    for three times as many); ``max_tokens_by_agent`` overrides it per agent setting name
    (``reasoning``, ``sql``, ``correction``, ``answer``). None sends no cap: the server's own.
    """

    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = 60.0
    max_attempts: int = 4
    max_backoff_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int | None = None
    max_tokens_by_agent: dict[str, int] = Field(default_factory=dict)

    def max_tokens_for(self, setting: str, questions: int = 1) -> int | None:
        """The ``max_tokens`` to send for a call of agent ``setting`` carrying ``questions``.

        Example:
            >>> LLMSettings(max_tokens=300, max_tokens_by_agent={"sql": 200}).max_tokens_for("sql", 2)
            400
        """
        cap = self.max_tokens_by_agent.get(setting, self.max_tokens)
        return None if cap is None else cap * max(1, questions)


class TokenUsage(BaseModel):
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt=self.prompt + other.prompt, completion=self.completion + other.completion
        )


class LLMCall(BaseModel):
    """What one logical call cost: its index in the run, tokens, HTTP requests and time."""

    index: int
    schema_name: str
    tokens: TokenUsage
    http_requests: int
    repaired: bool
    duration_ms: float


#: Completion tokens assumed before a reply says how many were used.
COMPLETION_ESTIMATE = 800


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int | None = None) -> int:
    """A request's tokens before it is sent: about four characters a token, plus the reply (at
    most ``max_tokens`` when a cap is sent)."""
    reply = COMPLETION_ESTIMATE if max_tokens is None else min(max_tokens, COMPLETION_ESTIMATE)
    return sum(len(m.get("content") or "") for m in messages) // 4 + reply


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``retry-after``), if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            continue  # an HTTP-date; fall back to our own backoff
    return None


class _Requests:
    """What one logical call cost so far: HTTP requests (retries and the repair included) and
    the tokens the server reported for the replies it sent, valid or not."""

    __slots__ = ("count", "tokens")

    def __init__(self) -> None:
        self.count = 0
        self.tokens = TokenUsage()


class _Reply:
    """One chat completion's content, and whether the token cap cut it."""

    __slots__ = ("content", "cut")

    def __init__(self, content: str | None, cut: bool) -> None:
        self.content, self.cut = content, cut


class LLMClient:
    """Calls the model for an agent and returns its parsed output model.

    ``limiter`` is a ``ratelimit.SlidingWindowLimiter`` (requests, and tokens when configured),
    acquired before every HTTP attempt; ``sleep`` is what tenacity waits with (inject a virtual
    clock's sleep in tests and replays). ``json_mode_memory`` (a ``JsonModeMemory``), when given,
    remembers across processes that the endpoint refuses json_schema, so later processes start
    in JSON mode instead of learning it again with a refused request.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        limiter: Any,
        http_client: Any | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.perf_counter,
        json_mode_memory: JsonModeMemory | None = None,
    ) -> None:
        if not ALLOW_MODEL_REQUESTS and http_client is None:
            raise RuntimeError(
                "model requests are disabled in tests: replay a cassette (pytest -m vcr) or record "
                "with --record-mode=once against the scripted server"
            )
        self.settings = settings
        self.limiter = limiter
        self._sleep = sleep
        self._clock = clock
        import openai

        self._transient = transient_errors()
        self._client = openai.OpenAI(
            api_key=settings.api_key.get_secret_value() if settings.api_key else "not-needed",
            base_url=settings.base_url,
            max_retries=0,
            timeout=settings.timeout_s,
            http_client=http_client,
        )
        self._json_mode_memory = json_mode_memory
        self._json_schema_supported = not (
            json_mode_memory is not None
            and json_mode_memory.refuses_json_schema(str(self._client.base_url), settings.model)
        )
        self._lock = threading.Lock()
        self.calls = 0  # logical calls over the client's life, every run together
        self.http_requests = 0
        #: Told, before each retry's wait, what failed and how long the wait is (a live line).
        self.on_retry: Callable[[str], object] | None = None

    def call(
        self,
        agent: LLMAgent[Any],
        messages: list[dict[str, str]],
        *,
        index: int = 0,
        questions: int = 1,
        repair: bool = True,
    ) -> tuple[Any, LLMCall]:
        """One logical call: request, parse, and (unless ``repair`` is False) at most one repair
        request on an invalid reply; never one for a reply the token cap cut.

        ``index`` is the call's number within its run (the caller's count: one client serves
        many runs at once, each counting its own calls); ``questions`` how many questions the
        messages carry (the token cap is per question). A failed call raises an ``LLMError``
        that carries what it cost: requests and the tokens of every reply the server sent.
        """
        with self._lock:
            self.calls += 1
        started = self._clock()
        requests = _Requests()
        with telemetry.llm_call(self.settings.model, agent.schema_name) as span:
            try:
                output, call = self._call(
                    agent, messages, started, requests, index, questions, repair
                )
            except LLMError as exc:
                exc.call_index = index
                exc.http_requests = requests.count
                exc.prompt_tokens = requests.tokens.prompt
                exc.completion_tokens = requests.tokens.completion
                exc.duration_ms = (self._clock() - started) * 1000.0
                telemetry.llm_call_ended(
                    span,
                    agent.schema_name,
                    requests.count,
                    input_tokens=requests.tokens.prompt,
                    output_tokens=requests.tokens.completion,
                    error=exc.code,
                )
                raise
            telemetry.llm_call_ended(
                span,
                agent.schema_name,
                requests.count,
                input_tokens=call.tokens.prompt,
                output_tokens=call.tokens.completion,
                repaired=call.repaired,
            )
            return output, call

    def _call(
        self,
        agent: LLMAgent[Any],
        messages: list[dict[str, str]],
        started: float,
        requests: _Requests,
        index: int,
        questions: int,
        repair: bool,
    ) -> tuple[Any, LLMCall]:
        max_tokens = self.settings.max_tokens_for(agent.setting, questions)
        reply = self._complete(agent, messages, requests, max_tokens)
        repaired = False
        try:
            output = agent.parse(reply.content)
        except AgentOutputError as first:
            if reply.cut:
                raise _cut(agent, max_tokens) from first  # a repair would be cut the same way
            if not repair:
                raise LLMOutputInvalid(
                    f"the model returned an invalid {agent.schema_name}: {first.detail}"
                ) from first
            repaired = True
            again = messages + [
                {"role": "assistant", "content": reply.content or ""},
                {
                    "role": "user",
                    "content": f"That reply is not valid: {first.detail}. "
                    "Reply again with only the corrected JSON object.",
                },
            ]
            reply = self._complete(agent, again, requests, max_tokens)
            try:
                output = agent.parse(reply.content)
            except AgentOutputError as second:
                if reply.cut:
                    raise _cut(agent, max_tokens) from second
                raise LLMOutputInvalid(
                    f"the model returned an invalid {agent.schema_name} twice: {second.detail}"
                ) from second
        call = LLMCall(
            index=index,
            schema_name=agent.schema_name,
            tokens=requests.tokens,
            http_requests=requests.count,
            repaired=repaired,
            duration_ms=(self._clock() - started) * 1000.0,
        )
        return output, call

    # -- one request, with retries -------------------------------------------------------------

    def _complete(
        self,
        agent: LLMAgent[Any],
        messages: list[dict[str, str]],
        requests: _Requests,
        max_tokens: int | None,
    ) -> _Reply:
        import openai

        try:
            return self._retrying(agent, messages, requests, max_tokens)
        except openai.BadRequestError as exc:
            if self._json_schema_supported and _mentions_response_format(exc):
                # The server has no json_schema support: fall back to JSON mode for good, and
                # let later processes know.
                self._json_schema_supported = False
                if self._json_mode_memory is not None:
                    self._json_mode_memory.remember_refusal(
                        str(self._client.base_url), self.settings.model
                    )
                return self._complete(agent, messages, requests, max_tokens)
            raise LLMRequestRejected(_describe(exc)) from exc

    def _retrying(
        self,
        agent: LLMAgent[Any],
        messages: list[dict[str, str]],
        requests: _Requests,
        max_tokens: int | None,
    ) -> _Reply:
        import openai

        transient = self._transient
        attempts = self.settings.max_attempts
        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, transient)),
            stop=stop_after_attempt(attempts),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=self._tell_retry,
            reraise=True,
        )
        try:
            return retrying(self._attempt, agent, messages, requests, max_tokens)
        except openai.APITimeoutError as exc:
            tries = "on its one try" if attempts == 1 else f"on each of {attempts} tries"
            raise LLMTimeout(
                f"the model endpoint did not answer within {self.settings.timeout_s:g} s "
                f"(SQLGATE_LLM_TIMEOUT) {tries}"
            ) from exc
        except transient as exc:
            raise LLMUnavailable(
                f"the model endpoint failed {_times(attempts)}: {_describe(exc)}"
            ) from exc
        except openai.BadRequestError:
            raise
        except openai.APIStatusError as exc:
            rejected = LLMRequestRejected(_describe(exc))
            # a wrong key, no access, an unknown model: every later request would be refused too
            rejected.ends_run = exc.status_code in (401, 403, 404)
            raise rejected from exc
        except openai.APIError as exc:
            raise LLMUnavailable(_describe(exc)) from exc

    def _tell_retry(self, state: RetryCallState) -> None:
        if self.on_retry is None:
            return
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        self.on_retry(
            f"model request failed ({_describe(exc) if exc else 'unknown error'}); "
            f"attempt {state.attempt_number + 1} of {self.settings.max_attempts} in {delay:.1f} s"
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_seconds(exc) if exc else None
        if asked is not None:
            return min(asked, self.settings.max_backoff_s)
        return wait_exponential_jitter(initial=1.0, max=self.settings.max_backoff_s)(state)

    def _attempt(
        self,
        agent: LLMAgent[Any],
        messages: list[dict[str, str]],
        requests: _Requests,
        max_tokens: int | None,
    ) -> _Reply:
        import openai

        grant = self.limiter.acquire(tokens=estimate_tokens(messages, max_tokens))
        if getattr(grant, "waited", 0.0) > 0:
            telemetry.limiter_waited(grant.waited)
        # No cap unless one is set: the server's own limit is the honest default, and a guessed
        # cap would cut long replies on large schemas.
        cap: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
        try:
            # The agents' messages are plain role/content dicts and the response format a dict
            # built from the output model: both are what the SDK's TypedDicts describe.
            completion = self._client.chat.completions.create(
                model=self.settings.model,
                messages=cast(Any, messages),
                temperature=self.settings.temperature,
                response_format=cast(Any, self._response_format(agent)),
                **cap,
            )
        except openai.APIConnectionError as exc:
            if never_sent(exc):
                self._give_back(grant)  # nothing reached the endpoint: nothing was spent there
                raise
            self._count(requests)
            raise
        except openai.RateLimitError as exc:
            self._count(requests)
            # Everyone sharing the limiter backs off for as long as the provider asked, not just us.
            self.limiter.pause_from_headers(exc.response.headers)
            raise
        except Exception:
            self._count(requests)
            raise
        self._count(requests)
        usage = completion.usage
        tokens = TokenUsage(
            prompt=getattr(usage, "prompt_tokens", 0) or 0,
            completion=getattr(usage, "completion_tokens", 0) or 0,
        )
        requests.tokens = requests.tokens + tokens
        if tokens.total:
            self.limiter.correct(grant, tokens.total)  # the estimate, replaced by what was used
        choice = completion.choices[0] if completion.choices else None
        finish_reason = choice.finish_reason if choice is not None else None
        telemetry.llm_response(completion.model, finish_reason)
        return _Reply(
            choice.message.content if choice is not None else None, finish_reason == "length"
        )

    def _count(self, requests: _Requests) -> None:
        """One HTTP request reached the endpoint (or may have: it was sent)."""
        requests.count += 1
        with self._lock:
            self.http_requests += 1

    def _give_back(self, grant: Any) -> None:
        try:
            self.limiter.refund(grant)
        except Exception:  # a shared limiter that is down keeps the slot: it only costs a wait
            pass

    def _response_format(self, agent: LLMAgent[Any]) -> dict[str, Any]:
        if not self._json_schema_supported:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": agent.schema_name,
                "schema": json_schema(agent.output_model),
                "strict": False,
            },
        }


def _cut(agent: LLMAgent[Any], max_tokens: int | None) -> LLMOutputCut:
    """The sentence for a reply that stopped at its token cap before it was whole."""
    if max_tokens is not None:
        return LLMOutputCut(
            f"the model's {agent.schema_name} reply was cut at the {max_tokens}-token cap before "
            f"it was complete; raise SQLGATE_LLM_MAX_TOKENS ({agent.setting}=N) or ask fewer "
            "questions per call"
        )
    return LLMOutputCut(
        f"the model's {agent.schema_name} reply was cut by the server's token limit before it "
        "was complete; set a larger SQLGATE_LLM_MAX_TOKENS or a larger context on the server"
    )


def _times(attempts: int) -> str:
    return "once" if attempts == 1 else f"{attempts} times"


#: What the HTTP clients raise when the connection itself failed (refused, no route, DNS, TLS):
#: the request was never sent.
_CONNECT_FAILURES = frozenset({"ConnectError", "ConnectTimeout"})


def never_sent(exc: BaseException) -> bool:
    """True when ``exc`` says the request never reached the endpoint (the connection failed).

    Example:
        >>> never_sent(ValueError("bad"))
        False
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _CONNECT_FAILURES:
            return True
        current = current.__cause__ or current.__context__
    return False


def _mentions_response_format(exc: openai.BadRequestError) -> bool:
    text = str(exc).lower()
    return "response_format" in text or "json_schema" in text


_SECRET = re.compile(r"(sk-[A-Za-z0-9_\-*.]{4,}|Bearer\s+\S+)")


def redact(text: str) -> str:
    """Remove anything that looks like an API key before a message reaches a log or a result."""
    return _SECRET.sub("[REDACTED]", text)


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    message = redact(" ".join(str(message).split())[:300])
    return f"HTTP {status}: {message}" if status else message
