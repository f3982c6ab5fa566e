"""What a notification says: a small JSON document with a Slack-compatible ``text``.

A message names the event, the run and the batch, who asked (``asked_by``) and who decided
(``decided_by``: with an identity provider, their name, subject and issuer), counts the
statements, gives the highest risk and links to the batch on the reviewer page (or the run on
the analyst page). It never carries result rows, SQL or the question's text: a chat channel is
not where data goes, and the link needs a token to open.

Event types: ``batch_created`` (a batch waits for reviewers), ``batch_decided``,
``batch_expired``, ``run_finished``.

Example:
    >>> m = message("batch_created", run_id="run_1", batch_id="batch_9", at="2026-01-01T00:00:00+00:00",
    ...             statements=2, risk="high", base_url="https://sqlgate.example")
    >>> m["text"]
    '2 statements wait for approval (risk: high): https://sqlgate.example/reviewer#batch=batch_9'
"""

from __future__ import annotations

from typing import Any

__all__ = ["EVENT_TYPES", "message"]

EVENT_TYPES = ("batch_created", "batch_decided", "batch_expired", "run_finished")


def message(
    event: str,
    *,
    run_id: str,
    batch_id: str | None,
    at: str,
    base_url: str,
    statements: int = 0,
    risk: str | None = None,
    decided_by: str | None = None,
    statuses: list[str] | None = None,
    action: str | None = None,
    asked_by: str | None = None,
) -> dict[str, Any]:
    """The JSON body of one notification (see the module's docstring for what it leaves out)."""
    base = base_url.rstrip("/")
    link = f"{base}/reviewer#batch={batch_id}" if batch_id else f"{base}/analyst#run={run_id}"
    plural = "statement" if statements == 1 else "statements"
    if event == "batch_created":
        text = f"{statements} {plural} wait for approval" + (f" (risk: {risk})" if risk else "")
    elif event == "batch_decided":
        text = f"batch decided by {decided_by or 'a reviewer'}"
    elif event == "batch_expired":
        text = f"batch expired before a decision ({action or 'reject'} applied)"
    else:
        link = f"{base}/analyst#run={run_id}"
        counts: dict[str, int] = {}
        for status in statuses or []:
            counts[status] = counts.get(status, 0) + 1
        text = "run finished: " + (
            ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results"
        )
    return {
        "event": event,
        "text": f"{text}: {link}",
        "link": link,
        "run_id": run_id,
        "batch_id": batch_id,
        "statements": statements,
        "risk": risk,
        "decided_by": decided_by,
        "asked_by": asked_by,
        "statuses": statuses,
        "at": at,
    }
