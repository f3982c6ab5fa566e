"""What a run can be given or shown beside its answer: memory, clarification, risk estimates,
notifications, the demo, eval, charts and terminal rendering.

The middle floor of ``orchestrator``: features import the core (``orchestrator.core``) and each
other, never the interfaces (``orchestrator.interfaces``) nor the composition root
(``orchestrator.wiring``); the core never imports them. A feature plugs in by returning its
``RunHooks`` (``orchestrator.core.hooks``: ``clarify_hooks()``, ``risk_hooks()``,
``memory.hooks.memory_hooks(memory)``) and, when it keeps tables, by a store registered with the
state database; ``orchestrator.wiring`` adds each to every pipeline and state database the
entry points build (one line per feature). The README's "Adding a feature" walks through one.
"""
