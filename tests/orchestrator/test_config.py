"""Configuration from the environment: clear errors, sensible defaults, secrets kept secret."""

from __future__ import annotations

import pytest

from orchestrator.core.config import Settings, parse_rate
from orchestrator.core.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5/60", (5, 60.0)),
        ("500/min", (500, 60.0)),
        ("10/2.5s", (10, 2.5)),
        ("100/h", (100, 3600.0)),
    ],
)
def test_rates(text: str, expected: tuple[int, float]) -> None:
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["", "five/60", "5/", "0/60", "5/60parsecs"])
def test_bad_rates_say_what_is_expected(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_rate(text)


def test_defaults_follow_the_seed_design() -> None:
    settings = Settings.from_env({})
    assert (settings.rate_limit, settings.rate_window_s) == (5, 60.0)
    assert settings.llm.api_key is None and settings.pipeline.max_corrections == 2


def test_the_key_never_shows_in_a_dump() -> None:
    settings = Settings.from_env({"OPENAI_API_KEY": "sk-live-abcdefghijklmnop"})
    assert "sk-live" not in settings.model_dump_json()
    assert "sk-live" not in repr(settings)


def test_missing_credentials_point_to_the_demo() -> None:
    with pytest.raises(ConfigurationError, match="sqlgate demo"):
        Settings.from_env({}).require_credentials()
    Settings.from_env(
        {"OPENAI_BASE_URL": "http://localhost:11434/v1"}
    ).require_credentials()  # a local server


def test_approval_deadline_and_quorum_from_the_environment() -> None:
    pipeline = Settings.from_env(
        {"SQLGATE_APPROVAL_TTL": "60", "SQLGATE_APPROVAL_QUORUM": "2"}
    ).pipeline
    assert (pipeline.approval_ttl_s, pipeline.approval_quorum) == (60.0, 2)
    for bad in (
        {"SQLGATE_APPROVAL_TTL": "-1"},
        {"SQLGATE_APPROVAL_QUORUM": "many"},
        {"SQLGATE_TOKEN_LIMIT": "lots"},
    ):
        with pytest.raises(ConfigurationError):
            Settings.from_env(bad)
