"""Import every module named in a file, in this interpreter; print the ones that fail and exit 1.

Run by ``python -m tests.installs`` with a fresh virtual environment's interpreter, in isolated
mode (``-I``), so only that install's packages can be found. Standard library only.
"""

from __future__ import annotations

import importlib
import sys
import traceback


def main(listing: str) -> int:
    names = [line.strip() for line in open(listing).read().splitlines() if line.strip()]
    failed = 0
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            failed += 1
            last = traceback.extract_tb(exc.__traceback__)[-1]
            print(f"{name}: {type(exc).__name__}: {exc} ({last.filename}:{last.lineno})")
            continue
        if "site-packages" not in (module.__file__ or ""):
            failed += 1
            print(f"{name}: imported from {module.__file__}, not from the installed wheel")
    print(f"{len(names) - failed} of {len(names)} modules imported")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
