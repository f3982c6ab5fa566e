"""The server package's public surface, and its error tree's codes and statuses."""

from __future__ import annotations

from orchestrator.interfaces import server
from orchestrator.interfaces.server import errors


def test_all_is_sorted_and_importable() -> None:
    assert server.__all__ == sorted(server.__all__)
    assert len(set(server.__all__)) == len(server.__all__)
    for name in server.__all__:
        assert hasattr(server, name), name


def test_every_error_has_a_code_and_an_http_status() -> None:
    tree = [
        errors.ServerError,
        errors.InvalidLastEventId,
        errors.Unauthenticated,
        errors.TokenExpired,
        errors.Forbidden,
        errors.CallNotFound,
        errors.PayloadTooLarge,
        errors.TokenConfigError,
    ]
    assert [(e.code, e.status) for e in tree] == [
        ("server_error", 500),
        ("invalid_last_event_id", 400),
        ("unauthenticated", 401),
        ("token_expired", 401),
        ("forbidden", 403),
        ("call_not_found", 404),
        ("payload_too_large", 413),
        ("token_config_error", 500),
    ]
    for error in tree:
        assert error.__name__ in errors.__doc__ and error.code in errors.__doc__


def test_the_examples_in_the_docstrings_run() -> None:
    import doctest

    from orchestrator.interfaces.server import auth, events, security, sql_view

    for module in (auth, events, security, sql_view):
        failed, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert tried > 0 and failed == 0, module.__name__


def test_routes_raise_and_one_mapping_answers() -> None:
    """No route module builds an error response itself: errors are raised and mapped once."""
    from pathlib import Path

    package = Path(server.__file__).parent
    routes = sorted(package.glob("routes_*.py"))
    assert len(routes) >= 5
    for module in routes:
        text = module.read_text()
        assert "JSONResponse" not in text and "error_response" not in text, module.name
