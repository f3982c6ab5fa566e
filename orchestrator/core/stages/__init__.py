"""The pipeline's stages, one module per step of the design's table, each a plain function.

Every stage is ``stage(p, ctx, questions)``: ``p`` is what the stage may use of the pipeline
(``orchestrator.core.stage_context``: the database, the LLM client, the configuration, the
features' hooks), never the pipeline itself; a stage writes only to the run's context and its
questions. The order is the pipeline's (``run_advance``):

    reasoning (Batch 1) -> exploration -> generation (Batch 2) -> approval cycles
    (validation, ONE review, execution, correction = Batch 3) -> synthesis (Batch 4)
"""

from orchestrator.core.stages.approval import approve_and_execute
from orchestrator.core.stages.exploration import explore
from orchestrator.core.stages.generation import generate
from orchestrator.core.stages.reasoning import admit, check_input, reason
from orchestrator.core.stages.synthesis import synthesize

__all__ = [
    "admit",
    "approve_and_execute",
    "check_input",
    "explore",
    "generate",
    "reason",
    "synthesize",
]
