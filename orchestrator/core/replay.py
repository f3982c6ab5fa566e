"""Serve LLM HTTP responses from recorded VCR.py cassettes, with no network at all.

``CassetteTransport`` is an ``httpx2`` transport: hand it to the openai client and every request
is answered from the cassettes (the YAML that pytest-recording / VCR.py write), or refused with
:class:`ReplayMiss`. Each recorded interaction plays at most once, in recorded order among
equals, so a run that asks twice needs two recordings. JSON bodies match after canonicalising
(key order is irrelevant, any content difference is a miss); host and port are ignored by
default because a scripted server's port changes from one recording to the next.

Example::

    transport = CassetteTransport(["cassettes/simple_question.yaml"])
    client = openai.OpenAI(base_url="http://replay.invalid/v1", api_key="replay",
                           max_retries=0, http_client=httpx2.Client(transport=transport))
    ...
    transport.assert_all_played()
"""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import yaml

from .errors import ReplayError, ReplayMiss

__all__ = [
    "CassetteTransport",
    "RecordedInteraction",
    "ReplayError",
    "ReplayMiss",
    "load_cassette",
]

DEFAULT_MATCH_ON = ("method", "path", "body")


@dataclass(frozen=True)
class RecordedInteraction:
    """One request/response pair from a cassette, bodies as bytes."""

    cassette: Path
    index: int
    method: str
    uri: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int
    reason: str | None
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes

    @property
    def label(self) -> str:
        return f"{self.cassette.name}#{self.index}"


class _CassetteLoader(yaml.SafeLoader):
    """Safe YAML plus the few harmless Python tags VCR.py cassettes may contain."""


def _scalar(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return loader.construct_scalar(node)


def _tuple(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.SequenceNode)
    return tuple(loader.construct_sequence(node))


_CassetteLoader.add_constructor("tag:yaml.org,2002:python/str", _scalar)
_CassetteLoader.add_constructor("tag:yaml.org,2002:python/unicode", _scalar)
_CassetteLoader.add_constructor("tag:yaml.org,2002:python/tuple", _tuple)


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"unexpected body of type {type(value).__name__}")


def _first(value: Any) -> str:
    return str(value[0]) if isinstance(value, (list, tuple)) else str(value)


def load_cassette(path: str | Path) -> list[RecordedInteraction]:
    """Read every interaction of one VCR.py YAML cassette."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_CassetteLoader)
    except FileNotFoundError as exc:
        raise ReplayError(f"cassette not found: {path}") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ReplayError(f"cannot read cassette {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise ReplayError(f"{path} is not a VCR.py cassette (no 'interactions' list)")
    interactions = []
    for index, item in enumerate(data["interactions"]):
        try:
            request, response = item["request"], item["response"]
            if "status_code" in response:  # the layout older VCR.py versions wrote for httpx
                status, reason, body = response["status_code"], None, response.get("content")
            else:
                status, reason, body = (
                    response["status"]["code"],
                    response["status"].get("message"),
                    response["body"]["string"],
                )
            headers = response.get("headers") or {}
            interactions.append(
                RecordedInteraction(
                    cassette=path,
                    index=index,
                    method=str(request["method"]).upper(),
                    uri=str(request["uri"]),
                    request_headers={
                        str(k).lower(): _first(v) for k, v in (request.get("headers") or {}).items()
                    },
                    request_body=_as_bytes(request.get("body")),
                    status=int(status),
                    reason=reason or None,
                    response_headers=tuple(
                        (str(name), str(value))
                        for name, values in headers.items()
                        for value in (values if isinstance(values, (list, tuple)) else [values])
                    ),
                    response_body=_as_bytes(body),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplayError(
                f"{path}: interaction {index} is malformed ({type(exc).__name__}: {exc})"
            ) from exc
    return interactions


def _decoded(body: bytes, content_encoding: str | None) -> bytes:
    encoding = (content_encoding or "").strip().lower()
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, zlib.error):
        pass
    return body


def canonical_body(body: bytes, content_encoding: str | None = None) -> bytes:
    """The body as compared: JSON re-dumped with sorted keys, anything else byte for byte."""
    body = _decoded(body, content_encoding)
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


@dataclass(frozen=True)
class _RequestView:
    method: str
    scheme: str
    host: str
    port: int | None
    path: str
    query: tuple[tuple[str, str], ...]
    body: bytes

    @classmethod
    def of(cls, method: str, uri: str, body: bytes, content_encoding: str | None) -> _RequestView:
        parts = urlsplit(uri)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        return cls(
            method=method.upper(),
            scheme=parts.scheme,
            host=parts.hostname or "",
            port=port,
            path=parts.path or "/",
            query=tuple(sorted(parse_qsl(parts.query, keep_blank_values=True))),
            body=canonical_body(body, content_encoding),
        )

    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.body).hexdigest()[:12]} ({len(self.body)} bytes)"


MATCHERS: dict[str, Callable[[_RequestView, _RequestView], bool]] = {
    name: (lambda field: lambda a, b: getattr(a, field) == getattr(b, field))(name)
    for name in ("method", "scheme", "host", "port", "path", "query", "body")
}


def _first_difference(a: bytes, b: bytes) -> int:
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return min(len(a), len(b))


class CassetteTransport(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """An httpx2 transport that answers from recorded cassettes and never opens a socket.

    ``played`` lists the interactions served, in order; ``unplayed()`` the ones still waiting.
    Safe to share between threads.
    """

    def __init__(
        self,
        cassette_paths: str | Path | Iterable[str | Path],
        match_on: Sequence[str] = DEFAULT_MATCH_ON,
    ) -> None:
        if isinstance(cassette_paths, (str, Path)):
            cassette_paths = [cassette_paths]
        self.cassette_paths = tuple(Path(p) for p in cassette_paths)
        unknown = [name for name in match_on if name not in MATCHERS]
        if unknown:
            raise ValueError(f"unknown match_on names {unknown}; known: {sorted(MATCHERS)}")
        self.match_on = tuple(match_on)
        self.interactions = [item for path in self.cassette_paths for item in load_cassette(path)]
        self._views = [
            _RequestView.of(
                i.method, i.uri, i.request_body, i.request_headers.get("content-encoding")
            )
            for i in self.interactions
        ]
        self._played_flags = [False] * len(self.interactions)
        self.played: list[RecordedInteraction] = []
        self._lock = threading.Lock()

    def unplayed(self) -> list[RecordedInteraction]:
        with self._lock:
            return [
                i
                for i, done in zip(self.interactions, self._played_flags, strict=False)
                if not done
            ]

    def assert_all_played(self) -> None:
        """Raise :class:`ReplayError` naming every recorded interaction that was never requested."""
        waiting = self.unplayed()
        if waiting:
            listed = ", ".join(f"{i.label} {i.method} {urlsplit(i.uri).path}" for i in waiting)
            raise ReplayError(f"{len(waiting)} recorded interaction(s) were never played: {listed}")

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        view = _RequestView.of(
            request.method,
            str(request.url),
            request.read(),
            request.headers.get("content-encoding"),
        )
        with self._lock:
            index = self._find(view, played=False)
            if index is None:
                raise ReplayMiss(self._miss_message(view))
            self._played_flags[index] = True
            interaction = self.interactions[index]
            self.played.append(interaction)
        return self._response(interaction, request)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        return self.handle_request(request)

    async def aclose(self) -> None:
        self.close()

    def _matches(self, view: _RequestView, recorded: _RequestView, match_on: Sequence[str]) -> bool:
        return all(MATCHERS[name](view, recorded) for name in match_on)

    def _find(
        self, view: _RequestView, *, played: bool, match_on: Sequence[str] | None = None
    ) -> int | None:
        for index, recorded in enumerate(self._views):
            if self._played_flags[index] == played and self._matches(
                view, recorded, match_on or self.match_on
            ):
                return index
        return None

    def _miss_message(self, view: _RequestView) -> str:
        searched = ", ".join(str(p) for p in self.cassette_paths) or "(none)"
        lines = [
            f"no recorded interaction matches {view.method} {view.path} body {view.digest()} "
            f"(matching on {', '.join(self.match_on)}; cassettes searched: {searched})"
        ]
        again = self._find(view, played=True)
        if again is not None:
            lines.append(
                f"it matches {self.interactions[again].label}, which was already played "
                "(each recorded interaction plays at most once)"
            )
        elif "body" in self.match_on:
            loose = [name for name in self.match_on if name != "body"]
            near = self._find(view, played=False, match_on=loose or ("method",))
            if near is not None:
                recorded = self._views[near].body
                at = _first_difference(view.body, recorded)
                lines.append(
                    f"nearest unplayed: {self.interactions[near].label} differs in the body from byte {at}: "
                    f"request {view.body[at : at + 60]!r} vs recorded {recorded[at : at + 60]!r}"
                )
        return "; ".join(lines)

    def _response(
        self, interaction: RecordedInteraction, request: httpx2.Request
    ) -> httpx2.Response:
        # The body is served as recorded (still compressed if it was); httpx2 decodes it as usual.
        # content-length is recomputed so a hand-edited body still replays.
        headers = [
            (name, value)
            for name, value in interaction.response_headers
            if name.lower() not in ("content-length", "transfer-encoding")
        ]
        headers.append(("content-length", str(len(interaction.response_body))))
        extensions = (
            {"reason_phrase": interaction.reason.encode("ascii")} if interaction.reason else None
        )
        return httpx2.Response(
            interaction.status,
            headers=headers,
            stream=httpx2.ByteStream(interaction.response_body),
            extensions=extensions,
            request=request,
        )
