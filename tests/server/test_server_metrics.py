"""``GET /metrics``: admins only; scraped before and after a run that pauses, is decided and
finishes, and parsed with the Prometheus client's own parser."""

from __future__ import annotations

import pytest

from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run, wait_until

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client not installed")


def scrape(live: Running) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` as {(name, sorted labels): value}."""
    with live.client("root") as root:
        response = root.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def total(samples: dict, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def test_only_an_admin_reads_the_metrics(live: Running) -> None:
    with live.client() as nobody, live.client("alice") as alice, live.client("rita") as rita:
        assert nobody.get("/metrics").status_code == 401
        assert alice.get("/metrics").status_code == 403
        assert rita.get("/metrics").status_code == 403


def test_a_run_paused_decided_and_finished_shows_in_the_metrics(live: Running) -> None:
    before = scrape(live)
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        wait_for_run(alice, run_id, ("awaiting_approval",))
        batch = pending_batch(rita, run_id)
        paused = scrape(live)
        decisions = {call_id: "approve" for call_id in batch["pending_ids"]}
        decided = rita.post(
            f"/approvals/{batch['batch_id']}/decision", json={"decisions": decisions}
        )
        assert decided.status_code == 200, decided.text
        run = wait_for_run(alice, run_id, ("finished",))
    assert run["results"][0]["status"] == "answered"

    def settled() -> dict | None:
        now = scrape(live)
        latency = "sqlgate_approval_latency_seconds_count"
        return now if total(now, latency) > total(before, latency) else None

    after = wait_until(settled, what="the decision in the approval latency histogram")

    assert total(paused, "sqlgate_approval_batches_pending") == 1
    assert total(after, "sqlgate_approval_batches_pending") == 0
    assert total(paused, "sqlgate_runs_total", outcome="paused") == (
        total(before, "sqlgate_runs_total", outcome="paused") + 1
    )
    assert total(after, "sqlgate_runs_total", outcome="finished") == (
        total(before, "sqlgate_runs_total", outcome="finished") + 1
    )
    assert total(after, "sqlgate_questions_total", status="answered") == (
        total(before, "sqlgate_questions_total", status="answered") + 1
    )
    calls = total(after, "sqlgate_llm_calls_total", result="ok") - total(
        before, "sqlgate_llm_calls_total", result="ok"
    )
    assert calls == 3  # plan, SQL, answer
    for kind in ("input", "output"):
        assert total(after, "sqlgate_llm_tokens_total", type=kind) > total(
            before, "sqlgate_llm_tokens_total", type=kind
        )
    latency = "sqlgate_approval_latency_seconds"
    assert total(after, f"{latency}_count", outcome="decided") == (
        total(before, f"{latency}_count", outcome="decided") + 1
    )
    # every bucket from 1 hour up holds the decision: the reviewer here answered at once
    assert total(after, f"{latency}_bucket", outcome="decided", le="3600") == total(
        after, f"{latency}_count", outcome="decided"
    )
    assert "sqlgate_limiter_waits_total" in {name for name, _ in after}


def test_a_decision_made_outside_the_server_wakes_its_hub(
    demo_db, state_url, scripted_model
) -> None:
    """The hub polls once an hour here: only the decision's own signal can resume the run."""
    from approvals import ApproveAll, SqlApprovalStore, decide_batch
    from orchestrator.interfaces.server import create_app
    from safety import SqlValidator
    from tests.server.conftest import make_config, start_server, stop_server

    app = create_app(make_config(demo_db, state_url, scripted_model, poll_interval=3600.0))
    server, thread, base_url = start_server(app)
    live = Running(base_url, app, state_url)
    try:
        with live.client("alice") as alice, live.client("rita") as rita:
            run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
            wait_for_run(alice, run_id, ("awaiting_approval",))
            batch = pending_batch(rita, run_id)
            elsewhere = SqlApprovalStore(state_url)  # as `sqlgate approvals decide` opens it
            outcome = decide_batch(
                elsewhere,
                batch["batch_id"],
                ApproveAll(),
                SqlValidator("sqlite").validate,
                actor="rita",
            )
            elsewhere.close()
            assert outcome.status == "resolved"
            run = wait_for_run(alice, run_id, ("finished",), timeout=30)
        assert run["results"][0]["status"] == "answered"
    finally:
        stop_server(server, thread)
