"""The run itself: the pipeline and its stages, the run's state, the LLM client and its limits,
configuration, databases and results. Imports nothing from ``orchestrator.interfaces``."""
