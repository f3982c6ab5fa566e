"""A long run followed without ever holding a request past a client's patience.

The model is slow (each reply waits a third of the run's length), so a run of ``LONG_RUN_S``
seconds is: planning, the approval gate (a reviewer decides at once), the answer. The agent
asks, then calls ``wait_for_run`` until the run ends. Every request must end within a third of
the run's length, and a waiting call that lasts past the heartbeat gets progress notifications.

Set ``SQLGATE_TEST_LONG_RUN_S=90`` for the full-length run (the production bounds then apply
unchanged: ask back within 6 s, waits of at most 25 s, every request under 30 s, a heartbeat
every 5 s); by default the run lasts 6 s and the bounds are scaled to it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio

from orchestrator.features.demo import TOP_CATEGORIES
from orchestrator.interfaces.mcp.tools import MAX_WAIT_S
from tests.mcp.drivers import python_http
from tests.mcp.model_server import CassetteModelServer
from tests.mcp.test_mcp_http import decide_as, mcp_config, serving

LONG_RUN_S = float(os.environ.get("SQLGATE_TEST_LONG_RUN_S", "6"))
#: The model requests of the run (plan, SQL, answer): each takes a third of the run.
MODEL_REQUESTS = 3


def test_a_long_run_is_followed_with_short_requests_and_progress(
    demo_db: Path,
    state_url: str,
    tmp_path: Path,
    model: CassetteModelServer,
    allow_local_model: None,
) -> None:
    scale = LONG_RUN_S / 90
    bound_s = 30 * scale  # 30 s for a 90 s run
    wait_s = min(MAX_WAIT_S, 25 * scale)
    heartbeat_s = 5 * scale
    model.delay_s = 0.0 if model.recording else LONG_RUN_S / MODEL_REQUESTS
    config = mcp_config(demo_db, state_url, model, ask_wait_s=6 * scale, heartbeat_s=heartbeat_s)
    requests: list[dict[str, Any]] = []

    async def follow(url: str) -> dict[str, Any]:
        async with python_http(url, "tok-alice") as alice:
            started = time.monotonic()
            asked = await alice.call("ask", {"question": TOP_CATEGORIES})
            requests.append({"tool": "ask", **asked})
            run_id = asked["structuredContent"]["run_id"]
            decided = False
            while True:
                waited = await alice.call("wait_for_run", {"run_id": run_id, "timeout_s": wait_s})
                requests.append({"tool": "wait_for_run", **waited})
                if not waited["isError"]:
                    return {
                        "report": waited["structuredContent"],
                        "took": time.monotonic() - started,
                    }
                error = waited["structuredContent"]["error"]
                assert error["code"] in ("still_running", "awaiting_approval"), error
                if error["code"] == "awaiting_approval" and not decided:
                    batch_id = error["review"]["batch_id"]
                    await anyio.to_thread.run_sync(decide_as, state_url, batch_id, "rita")
                    decided = True

    with serving(config) as url:
        got = anyio.run(follow, url)

    report = got["report"]
    assert report["status"] == "finished"
    assert report["questions"][0]["status"] == "answered"
    assert got["took"] >= LONG_RUN_S * 0.9 or model.recording  # it was a long run
    assert requests[0]["elapsed_s"] < 6 * scale + 2  # ask back within seconds
    assert requests[0]["structuredContent"]["status"] in ("queued", "running") or model.recording
    for request in requests:
        assert request["elapsed_s"] < bound_s + 1, (request["tool"], request["elapsed_s"])
    # a call that waited through a slow stage was told the run is alive
    long_waits = [r for r in requests if r["elapsed_s"] > 2 * heartbeat_s + 0.5]
    assert long_waits or model.recording
    for waited in long_waits:
        assert any((p["message"] or "").startswith("still") for p in waited["progress"]), waited
