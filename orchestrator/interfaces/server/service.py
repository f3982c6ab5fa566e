"""What every route shares: the tokens, the stores, the run service and the event hub.

One ``Service`` per app (``app.state.service``), built from a ``ServerConfig`` when the app is
created and closed when it stops. Routes reach it through ``orchestrator.interfaces.server.dependencies``.
"""

from __future__ import annotations

from approvals import ApprovalGate, BatchRecord, ExpirySweeper, SqlApprovalStore
from approvals.models import highest_risk
from orchestrator.core import metrics, telemetry
from orchestrator.core.runs import RunStore
from orchestrator.core.server_state import ServerState
from orchestrator.features.memory import memory_for
from orchestrator.features.notify.notifier import Notifier
from orchestrator.features.notify.outbox import NotificationStore
from orchestrator.features.risk import assessor_for
from orchestrator.interfaces.server.config import ServerConfig
from orchestrator.interfaces.server.events import EventHub, EventSource, ServerEvent
from orchestrator.interfaces.server.identity import Authenticator
from orchestrator.interfaces.server.runner import RunService, shared_pipeline
from orchestrator.interfaces.server.web_sessions import WebSessions
from orchestrator.interfaces.tasks import broker_url, enqueue
from safety import SqlValidator


class Service:
    """Everything the handlers share: tokens, stores, the run service and the event hub."""

    def __init__(self, config: ServerConfig) -> None:
        from orchestrator.core.database import TargetDatabase
        from orchestrator.wiring import state_database

        telemetry.enabled()  # traces asked for but not installed: refused at start, not per run
        self.config = config
        self.tokens = Authenticator(config.tokens, config.identity)
        if config.identity is not None:
            config.identity.check_policy_sections(config.policy.roles)
        self.state_db = state_database(config.state_url)
        self.state_db.setup()
        self.web_sessions = WebSessions(self.state_db.engine)
        self.approvals: SqlApprovalStore = self.state_db.approvals
        self.run_store: RunStore = self.state_db.runs
        self.state: ServerState = self.state_db.server
        self.database = TargetDatabase(
            config.database_url,
            policy=config.policy,
            statement_timeout_s=config.statement_timeout_s,
        )
        limiter = config.limiter
        if limiter is None:
            from orchestrator.core.config import Settings
            from orchestrator.core.limits import build_limiter

            limiter = build_limiter(Settings(), mode="wait")
        self.hub = EventHub(
            EventSource(self.approvals, self.state),
            poll_interval=config.poll_interval,
            sweeper=ExpirySweeper(self.approvals),
            sweep_interval=config.sweep_interval,
        )
        self.memory = memory_for(self.state_db, self.database)  # None: SQLGATE_MEMORY=off
        pipeline = shared_pipeline(
            self.database,
            config.llm,
            limiter,
            self.approvals,
            self.run_store,
            config=config.pipeline,
            http_client=config.http_client,
            memory=self.memory,
            asker=self.state.owner_of,  # who asked a run authored its SQL
        )
        self.runs = RunService(
            self.state,
            self.approvals,
            self.run_store,
            pipeline,
            workers=config.workers,
            notify=self.hub.poke,
            dispatch=enqueue if broker_url() else None,
        )
        self.hub.listeners.append(self.runs.on_event)
        self.hub.listeners.append(self._time_decision)
        # A decision made anywhere (this process; any process on PostgreSQL) is read at once.
        self._stop_waking = self.approvals.on_decisions(lambda _reason: self.hub.poke())
        self.notifier = Notifier(
            self.state_db.store(NotificationStore),
            config.notifications.channels(),
            base_url=config.notifications.base_url,
            retry=config.notifications.retry,
            batch_risk=self._batch_risk,
            asker=self.state.owner_of,
        )
        self.hub.listeners.append(self.notifier.on_event)
        self.runs.start_recovery()

    def close(self) -> None:
        self._stop_waking()
        self.notifier.close()
        self.runs.close()
        self.database.dispose()
        self.approvals.close()

    def _time_decision(self, event: ServerEvent) -> None:
        """``EventHub`` listener: how long a decided or expired batch waited, into the
        approval latency histogram (every decision in the store, wherever it was made)."""
        if event.type not in ("approval_decided", "approval_expired") or not event.batch_id:
            return
        record = self.approvals.get_batch(event.batch_id)
        if record.outcome is not None and record.outcome.decided_at is not None:
            waited = record.outcome.decided_at - record.batch.created_at
            outcome = "expired" if event.type == "approval_expired" else "decided"
            metrics.approval_latency_seconds.observe(waited.total_seconds(), outcome=outcome)

    def gauges(self) -> list[metrics.GaugeSamples]:
        """What ``/metrics`` reads when scraped."""
        pending = self.approvals.count_batches("pending")
        return [
            (
                "sqlgate_approval_batches_pending",
                "Approval batches waiting for a decision in the approvals store.",
                [({}, float(pending))],
            )
        ]

    def _batch_risk(self, batch_id: str) -> str | None:
        return highest_risk(self.approvals.get_batch(batch_id).batch.pending)

    def edit_validator(self, record: BatchRecord) -> SqlValidator:
        """The validator a reviewer's edit of ``record`` is checked with: the batch's dialect and
        the policy the batch was created under, against the database's real schema. The
        decision route and the live edit check both use this one."""
        return self.database.validator_for(record.batch.context)

    def gate_for(self, record: BatchRecord, actor: str) -> ApprovalGate:
        """A gate that validates edits with ``edit_validator(record)``."""
        from orchestrator.core.database import policy_of
        from orchestrator.features.risk import risk_approval

        policy = policy_of(record.batch.context, self.database.policy)
        return ApprovalGate(
            reviewer=None,
            validate=self.edit_validator(record).validate,
            store=self.approvals,
            run_id=record.batch.run_id,
            actor=actor,
            # an edit is assessed like the statement it replaces, and may need more reviewers
            assess=assessor_for(self.database, policy),
            risk_approval=risk_approval(policy),
        )
