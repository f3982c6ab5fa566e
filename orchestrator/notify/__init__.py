"""Notifications: signed webhooks and e-mail when a batch waits, is decided or expires, and
when a run finishes. They link to the batch and never carry rows (see ``messages``)."""

from orchestrator.notify.channels import DeliveryFailed, EmailChannel, WebhookChannel
from orchestrator.notify.messages import EVENT_TYPES, message
from orchestrator.notify.notifier import NotificationSettings, Notifier, RetryPolicy
from orchestrator.notify.outbox import DeliveryRecord, NotificationStore
from orchestrator.notify.signing import sign, verify

__all__ = [
    "DeliveryFailed",
    "DeliveryRecord",
    "EVENT_TYPES",
    "EmailChannel",
    "NotificationSettings",
    "NotificationStore",
    "Notifier",
    "RetryPolicy",
    "WebhookChannel",
    "message",
    "sign",
    "verify",
]
