"""Helpers of the server tests: wait for a run or a batch, read Server-Sent Events."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx


def wait_until(
    check: Callable[[], Any], *, timeout: float = 30.0, every: float = 0.05, what: str = "it"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


def wait_for_run(
    client: httpx.Client, run_id: str, statuses: tuple[str, ...], timeout: float = 30.0
) -> dict:
    def check() -> dict | None:
        run = client.get(f"/runs/{run_id}").json()
        return run if run["status"] in statuses else None

    return wait_until(check, timeout=timeout, what=f"run {run_id} to be {statuses}")


def pending_batch(client: httpx.Client, run_id: str, timeout: float = 30.0) -> dict:
    """The full record of the run's pending batch, once it is open."""

    def check() -> dict | None:
        summaries = client.get("/approvals", params={"run_id": run_id}).json()
        return summaries[0] if summaries else None

    summary = wait_until(check, timeout=timeout, what=f"a pending batch of {run_id}")
    return client.get(f"/approvals/{summary['batch_id']}").json()


@dataclass
class Sse:
    id: str | None
    event: str
    data: dict[str, Any]


def sse_events(response: httpx.Response) -> Iterator[Sse | None]:
    """Events of a text/event-stream response; None for each comment (keepalive) block."""
    event_id, event, data, comment = None, "message", [], False
    for line in response.iter_lines():
        if line == "":
            if data:
                yield Sse(event_id, event, json.loads("\n".join(data)))
            elif comment:
                yield None
            event_id, event, data, comment = None, "message", [], False
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "":
            comment = True
        elif field == "id":
            event_id = value
        elif field == "event":
            event = value
        elif field == "data":
            data.append(value)


def read_events(
    client: httpx.Client,
    until: Callable[[list[Sse]], bool],
    *,
    last_event_id: str | None = None,
    timeout: float = 30.0,
) -> list[Sse]:
    """Follow /events until ``until(events so far)`` is true, then disconnect."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    got: list[Sse] = []
    deadline = time.monotonic() + timeout
    with client.stream("GET", "/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        for entry in sse_events(response):
            if entry is not None:
                got.append(entry)
            if until(got):
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out following /events; got {[e.event for e in got]}")
    raise AssertionError("the event stream ended")


def finished(run_ids: set[str]) -> Callable[[list[Sse]], bool]:
    return lambda events: run_ids <= {e.data["run_id"] for e in events if e.event == "run_finished"}
