import safety


def test_all_is_sorted_and_complete():
    assert safety.__all__ == sorted(safety.__all__)
    for name in safety.__all__:
        assert hasattr(safety, name), name


def test_contract_names_are_exported():
    for name in (
        "SqlValidator",
        "ValidatedStatement",
        "ValidationResult",
        "SafetyFinding",
        "SafetyPolicy",
        "dialect_for_url",
        "open_readonly_engine",
        "ReadOnlySettings",
        "is_statement_timeout",
    ):
        assert name in safety.__all__
