"""What checking a bearer JWT of the identity provider costs each request.

Run: .venv/bin/python benchmarks/oidc_verify.py [--repeat N]

A local OpenID provider (``tests/auth/oidc_provider.py``, real HTTP on 127.0.0.1) issues RS256
tokens; this prints, in microseconds (median and 95th percentile over ``--repeat`` requests,
default 2,000):

- verifying a token with the keys cached (``OidcVerifier.verify``: signature, issuer, audience,
  times), which is what every request pays;
- the same plus the claims -> role mapping (``IdentityProvider.principal``);
- a static token looked up in the registry, for comparison;
- the first verification of a fresh verifier (discovery + JWKS over HTTP), paid once per
  process and once per key rotation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.interfaces.auth import OidcSettings, OidcVerifier  # noqa: E402
from orchestrator.interfaces.server.auth import TokenRegistry  # noqa: E402
from orchestrator.interfaces.server.identity import IdentityProvider  # noqa: E402
from tests.auth.oidc_provider import LocalOidcProvider, User  # noqa: E402


def _timed(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    with LocalOidcProvider(audience="sqlgate") as idp:
        idp.users["ann"] = User("u-ann", "ann@example.com", ["analysts"])
        token = idp.password_token("ann")
        settings = OidcSettings.model_validate(
            {
                "issuer": idp.issuer,
                "audience": "sqlgate",
                "roles": [{"claim": "groups", "value": "analysts", "role": "analyst"}],
            }
        )
        provider = IdentityProvider(settings)
        provider.verifier.verify(token)  # keys fetched once
        registry = TokenRegistry.from_json('[{"token": "t", "actor": "a", "role": "analyst"}]')
        rows = [
            ("verify (keys cached)", _timed(lambda: provider.verifier.verify(token), args.repeat)),
            ("verify + claims -> role", _timed(lambda: provider.principal(token), args.repeat)),
            ("static token lookup", _timed(lambda: registry.authenticate("Bearer t"), args.repeat)),
            (
                "first verify (discovery + JWKS)",
                _timed(
                    lambda: OidcVerifier(idp.issuer, "sqlgate").verify(token),
                    max(1, args.repeat // 20),
                ),
            ),
        ]
    print(f"{'what':34} {'median us':>10} {'p95 us':>10}")
    for name, (median, p95) in rows:
        print(f"{name:34} {median:10.1f} {p95:10.1f}")


if __name__ == "__main__":
    main()
