import ratelimit


def test_all_is_sorted_and_complete():
    assert ratelimit.__all__ == sorted(ratelimit.__all__)
    # ("@py_builtins" and "@pytest_ar": pytest's assertion rewriting, which marks every module of
    # a distribution with a pytest11 entry point, as sqlgate's eval plugin is)
    public = {name for name in dir(ratelimit) if not name.startswith(("_", "@"))}
    exported_modules = {"backends", "clock", "errors", "feedback", "limiter", "line", "rules"}
    assert public - exported_modules == set(ratelimit.__all__)


def test_every_export_resolves():
    for name in ratelimit.__all__:
        assert getattr(ratelimit, name) is not None
