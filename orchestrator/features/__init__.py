"""What a run can be given or shown beside its answer: memory, clarification, risk estimates,
notifications, the demo, charts and terminal rendering. Imports nothing from
``orchestrator.interfaces``."""
