"""Errors of the HTTP service. Each has a stable ``code`` and the HTTP status it is answered with.

    SqlgateError                    (orchestrator.core.errors)
     └── ServerError                server_error           500
          ├── InvalidLastEventId    invalid_last_event_id  400  (Last-Event-ID is not ``A-R``)
          ├── Unauthenticated       unauthenticated        401  (no token, unknown token)
          │    └── TokenExpired     token_expired          401  (the token's expires has passed)
          ├── Forbidden             forbidden              403  (the token's role may not do this)
          ├── CallNotFound          call_not_found         404  (no such call_id in the batch)
          ├── NotClarifiable        not_clarifiable        409  (no question of the run awaits answers)
          ├── InvalidClarification  invalid_clarification  422  (answers that fit no question asked)
          ├── QuestionTooLong       question_too_long      422  (over the pipeline's length limit)
          ├── MemoryItemNotFound    memory_not_found       404  (no such example, note or template)
          ├── PayloadTooLarge       payload_too_large      413  (the body is over the size limit)
          ├── TokenConfigError      token_config_error     500  (the token file or SQLGATE_TOKENS is malformed)
          ├── NoIdentityProvider    not_found              404  (protected-resource metadata, static tokens only)
          ├── SignInUnavailable     sign_in_unavailable    404  (no [web] sign-in configured)
          ├── SignInFailed          sign_in_failed         400  (an unknown, used or refused sign-in)
          └── ProviderDown          identity_provider_unavailable  503  (the provider cannot be read)

The orchestrator's own errors keep their codes too: ``orchestrator.core.errors.RunNotFound`` (no such
run, or not the caller's) is answered 404 ``run_not_found``. Errors of the approvals package keep
their own codes; ``orchestrator.interfaces.server.error_handlers``
maps them to 404 (``batch_not_found``), 409 (``decision_conflict``, ``batch_expired``,
``duplicate_vote``, ``idempotency_conflict``) and 422 (every ``DecisionError`` code).
"""

from __future__ import annotations

from orchestrator.core.errors import SqlgateError


class ServerError(SqlgateError):
    code = "server_error"
    status = 500


class InvalidLastEventId(ServerError):
    code = "invalid_last_event_id"
    status = 400


class Unauthenticated(ServerError):
    code = "unauthenticated"
    status = 401


class TokenExpired(Unauthenticated):
    code = "token_expired"
    status = 401


class Forbidden(ServerError):
    code = "forbidden"
    status = 403


class CallNotFound(ServerError):
    code = "call_not_found"
    status = 404


class NotClarifiable(ServerError):
    code = "not_clarifiable"
    status = 409


class InvalidClarification(ServerError):
    code = "invalid_clarification"
    status = 422


class QuestionTooLong(ServerError):
    """A question over the pipeline's ``max_question_chars``: refused before a run is created."""

    code = "question_too_long"
    status = 422


class MemoryItemNotFound(ServerError):
    code = "memory_not_found"
    status = 404


class PayloadTooLarge(ServerError):
    """Answered by ``security.BodySizeLimit`` itself, before the app sees the request."""

    code = "payload_too_large"
    status = 413


class TokenConfigError(ServerError):
    code = "token_config_error"
    status = 500


class NoIdentityProvider(ServerError):
    code = "not_found"
    status = 404


class SignInUnavailable(ServerError):
    code = "sign_in_unavailable"
    status = 404


class SignInFailed(ServerError):
    code = "sign_in_failed"
    status = 400


class ProviderDown(ServerError):
    code = "identity_provider_unavailable"
    status = 503
