"""Notifications: signed webhooks and e-mail when a batch waits, is decided or expires, and
when a run finishes. They link to the batch and never carry rows (see ``messages``)."""

from orchestrator.features.notify.channels import DeliveryFailed, EmailChannel, WebhookChannel
from orchestrator.features.notify.messages import EVENT_TYPES, message
from orchestrator.features.notify.notifier import NotificationSettings, Notifier, RetryPolicy
from orchestrator.features.notify.outbox import DeliveryRecord, NotificationStore
from orchestrator.features.notify.signing import sign, verify

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
