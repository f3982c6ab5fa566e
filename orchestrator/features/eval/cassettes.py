"""Model traffic kept as VCR.py cassettes (pytest-recording's format), one per question.

``--record DIR`` writes ``DIR/<question id>.yaml`` through VCR.py (the ``eval`` extra), with
credentials and machine-specific headers filtered out and a fixed host in every URI, exactly as
sqlgate's own test suite records (``VCR_CONFIG``; tests/orchestrator/conftest.py uses it).
``--replay DIR`` answers each question's requests from its cassette with
``orchestrator.core.replay.CassetteTransport``: no network, no API key, no extra. Requests are
matched on method, path and body, so a changed prompt is a miss, reported for that question.

Example:
    >>> stable_request(type("R", (), {"path": "/v1/chat/completions", "uri": "x"})()).uri
    'http://llm.recorded/v1/chat/completions'
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from orchestrator.core.errors import ConfigurationError, ReplayError, ReplayMiss
from orchestrator.core.extras import needing
from orchestrator.core.replay import CassetteTransport, load_cassette

__all__ = [
    "NOISY_REQUEST_HEADERS",
    "NOISY_RESPONSE_HEADERS",
    "RECORDED_HOST",
    "SCRIPTED_HEADER",
    "VCR_CONFIG",
    "CassetteRecorder",
    "CassetteReplay",
    "clean_response",
    "recorded_endpoint",
    "stable_request",
]

#: The host every recorded URI carries: the real one (and its port) is nobody's business.
RECORDED_HOST = "http://llm.recorded"
#: The header sqlgate's scripted test server puts on every reply (tests/scripted_llm).
SCRIPTED_HEADER = "x-sqlgate-scripted-server"

#: Request headers never written to a cassette: credentials, and what differs per machine.
NOISY_REQUEST_HEADERS = [
    "authorization",
    "host",
    "api-key",
    "x-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
    "user-agent",
    "x-stainless-arch",
    "x-stainless-os",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-package-version",
    "x-stainless-lang",
    "x-stainless-async",
    "x-stainless-retry-count",
    "x-stainless-read-timeout",
]
#: Response headers never written: account names, cookies, per-request ids.
NOISY_RESPONSE_HEADERS = frozenset(
    {"set-cookie", "openai-organization", "openai-project", "cf-ray", "x-request-id"}
)


def stable_request(request: Any) -> Any:
    """Record a fixed host: a scripted server's port changes from run to run, and a real
    endpoint's host is nobody's business."""
    request.uri = RECORDED_HOST + request.path
    return request


def clean_response(response: dict[str, Any]) -> dict[str, Any]:
    """Drop the response headers that name an account or differ per request."""
    headers = response.get("headers", {})
    for name in list(headers):
        if name.lower() in NOISY_RESPONSE_HEADERS:
            del headers[name]
    return response


#: VCR.py's settings for sqlgate's cassettes (pytest-recording's ``vcr_config`` fixture too).
VCR_CONFIG: dict[str, Any] = {
    "filter_headers": NOISY_REQUEST_HEADERS,
    "filter_query_parameters": ["api-key", "api_key", "key"],
    "match_on": ["method", "path", "body"],
    "decode_compressed_response": True,
    "before_record_request": stable_request,
    "before_record_response": clean_response,
}


def _vcr() -> Any:
    import vcr

    return vcr


class CassetteRecorder:
    """Records each question's model traffic to ``directory/<id>.yaml`` (replacing it whole)."""

    def __init__(self, directory: Path) -> None:
        self.vcr = needing("sqlgate eval --record", _vcr)
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot create the cassette folder {directory}: {exc}"
            ) from None
        self.scripted = False
        self.miss: str | None = None  # a recording always matches itself

    @contextmanager
    def question(self, case_id: str) -> Iterator[None]:
        """Record what is sent inside the block; the cassette appears only once it is whole."""
        final = self.directory / f"{case_id}.yaml"
        partial = self.directory / f".{case_id}.recording.yaml"
        partial.unlink(missing_ok=True)
        recorder = self.vcr.VCR(**VCR_CONFIG)
        try:
            with recorder.use_cassette(str(partial), record_mode="all") as cassette:
                yield
                self.scripted = self.scripted or any(
                    SCRIPTED_HEADER in {k.lower() for k in r.get("headers", {})}
                    for r in cassette.responses
                )
        except BaseException:  # interrupted: no half recording is left to be replayed
            partial.unlink(missing_ok=True)
            raise
        if partial.exists():
            os.replace(partial, final)
        else:  # no request was made: an empty cassette says so, and replays as such
            final.write_text("interactions: []\nversion: 1\n", encoding="utf-8")


def recorded_endpoint(directory: Path) -> tuple[str, str]:
    """(base URL, model) the cassettes in ``directory`` were recorded with: replay sends the same
    model name (it is in every request body) to the same path. Raises ``ConfigurationError``."""
    if not directory.is_dir():
        raise ConfigurationError(f"no such cassette folder: {directory}")
    for path in sorted(directory.glob("*.yaml")):
        if path.name.startswith("."):
            continue  # a recording under way
        try:
            interactions = load_cassette(path)
        except ReplayError as exc:
            raise ConfigurationError(exc.message) from None
        for interaction in interactions:
            try:
                model = json.loads(interaction.request_body)["model"]
            except (ValueError, KeyError, TypeError):
                continue
            path_part = interaction.uri.split("://", 1)[-1].partition("/")[2]
            base = "/" + path_part.rsplit("/chat/completions", 1)[0].strip("/")
            return RECORDED_HOST + base.rstrip("/"), str(model)
    raise ConfigurationError(f"{directory} holds no recorded model request (*.yaml cassettes)")


class CassetteReplay(httpx2.BaseTransport):
    """An httpx2 transport answering each question from ``directory/<id>.yaml``, never the
    network. ``question(id)`` selects the cassette; afterwards ``miss`` says why the replay did
    not match the recording (a request with no recorded reply, or replies never asked for)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.current: CassetteTransport | None = None
        self.current_id = ""
        self.misses: list[str] = []
        self.miss: str | None = None
        self.scripted = False
        self.client = httpx2.Client(transport=self)

    @contextmanager
    def question(self, case_id: str) -> Iterator[None]:
        path = self.directory / f"{case_id}.yaml"
        self.current_id, self.misses, self.miss = case_id, [], None
        try:
            self.current = CassetteTransport([path]) if path.is_file() else None
        except ReplayError as exc:  # an unreadable cassette is this question's miss
            self.current = None
            self.misses.append(exc.message)
        try:
            yield
        finally:
            current, self.current = self.current, None
            if current is not None:
                self.scripted = self.scripted or any(
                    name.lower() == SCRIPTED_HEADER
                    for i in current.played
                    for name, _ in i.response_headers
                )
                waiting = current.unplayed()
                if waiting and not self.misses:
                    self.misses.append(
                        f"{len(waiting)} recorded repl(y/ies) in {path.name} were never asked for"
                    )
            elif not self.misses:
                self.misses.append(f"no cassette {path.name} in {self.directory}")
            self.miss = self.misses[0] if self.misses else None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.current is None:
            message = f"no recording for question {self.current_id!r}"
            self.misses.append(message)
            raise ReplayMiss(message)
        try:
            return self.current.handle_request(request)
        except ReplayMiss as exc:
            self.misses.append(exc.message)
            raise
