"""The run itself: the pipeline and its stages, the run's state, the LLM client and its limits,
configuration, databases and results.

The ground floor of ``orchestrator``: nothing here reaches up to the floors above it (a test
of the import graph checks every module, annotations too), neither to the
features (memory, clarification, risk estimates, notifications, the demo, eval: ``features/``)
nor to the interfaces (the CLI, the servers, the worker: ``interfaces/``). It defines the
seams instead, and a feature plugs into them from the composition root (``orchestrator.wiring``):

- ``hooks.RunHooks``: optional functions the stages call at their boundaries (notes and
  examples for the prompts, a risk estimate and findings before review, earned auto-approval,
  what was run or rejected); a pipeline given ``RunHooks()`` runs with no feature at all;
- ``state_db.register_store``: a feature's store kept in the state database, migrated by
  ``StateDatabase.setup()`` with the core's own;
- ``stage_context.StageContext``: what a stage may use of the pipeline (the stages never
  import it).
"""
