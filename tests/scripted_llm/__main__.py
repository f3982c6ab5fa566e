"""Serve the scripted scenarios as a process: ``python -m tests.scripted_llm``.

Prints the ``.../v1`` base URL on its first line of output, then answers until it is stopped
(SIGTERM, SIGINT, or its standard input closing). Used by the install checks, which drive an
installed ``sqlgate`` in another virtual environment against it. Scripted, not a model.
"""

from __future__ import annotations

import signal
import sys
import threading

from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        print(server.base_url, flush=True)
        if "--until-stdin-closes" in sys.argv:
            threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        stop.wait()


if __name__ == "__main__":
    main()
