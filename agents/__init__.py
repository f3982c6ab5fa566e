"""The twelve logical agents of sqlgate.

LLM agents are pure (messages in, one pydantic model out): ``ReasoningAgent`` (IntentAnalyzer,
ClarificationAgent, QueryDecomposer and QueryPlanner in one call), ``SQLGenerator``,
``SelfCorrection`` and ``ResponseSynthesizer``. Deterministic agents do their I/O through the
engine they are given: ``SchemaExplorer``, ``DataExplorer``, ``SQLExecutor``, ``ResultValidator``.
The twelfth, SafetyValidator, is ``safety.SqlValidator``.

Floor: a library below ``orchestrator``, above ``safety``: it may import ``safety`` (and
``sqlgate_exports``), never ``orchestrator``, which owns the LLM client and drives the agents.
"""

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from agents.catalogue import (
        DEFAULT_MAX_TABLES,
        LARGE_SCHEMA_TABLES,
        Catalogue,
        batch_catalogue,
        build_catalogue,
        compact_catalogue,
        rank_tables,
    )
    from agents.data_explorer import DataContext, DataExplorer
    from agents.descriptions import Descriptions, load_descriptions
    from agents.errors import (
        AgentError,
        AgentOutputError,
        DescriptionsError,
        ExecutionError,
        SchemaInspectionError,
    )
    from agents.linking import SchemaIndex, Synonyms
    from agents.llm_agent import LLMAgent
    from agents.llm_batch import QuestionInput, SplitResults, split_results
    from agents.reasoning import (
        Clarification,
        ClarifyingQuestion,
        Decomposition,
        Intent,
        IntentAnalysis,
        PlannedFilter,
        PlannedJoin,
        QueryPlan,
        ReasoningAgent,
        ReasoningBatch,
        ReasoningOutput,
    )
    from agents.response_synthesizer import AnswerBatch, ResponseSynthesizer, SynthesizedAnswer
    from agents.result_validator import ResultValidator
    from agents.schema_explorer import SchemaExplorer
    from agents.schema_models import ColumnInfo, ForeignKeyInfo, SchemaContext, TableInfo
    from agents.self_correction import CorrectedSQL, CorrectionBatch, SelfCorrection
    from agents.sql_executor import ExecutionResult, SQLExecutor
    from agents.sql_generator import GeneratedSQL, SQLBatch, SQLGenerator

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "AgentError": "agents.errors",
    "AgentOutputError": "agents.errors",
    "AnswerBatch": "agents.response_synthesizer",
    "Catalogue": "agents.catalogue",
    "Clarification": "agents.reasoning",
    "ClarifyingQuestion": "agents.reasoning",
    "ColumnInfo": "agents.schema_models",
    "CorrectedSQL": "agents.self_correction",
    "CorrectionBatch": "agents.self_correction",
    "DEFAULT_MAX_TABLES": "agents.catalogue",
    "DataContext": "agents.data_explorer",
    "DataExplorer": "agents.data_explorer",
    "Decomposition": "agents.reasoning",
    "Descriptions": "agents.descriptions",
    "DescriptionsError": "agents.errors",
    "ExecutionError": "agents.errors",
    "ExecutionResult": "agents.sql_executor",
    "ForeignKeyInfo": "agents.schema_models",
    "GeneratedSQL": "agents.sql_generator",
    "Intent": "agents.reasoning",
    "IntentAnalysis": "agents.reasoning",
    "LARGE_SCHEMA_TABLES": "agents.catalogue",
    "LLMAgent": "agents.llm_agent",
    "PlannedFilter": "agents.reasoning",
    "PlannedJoin": "agents.reasoning",
    "QueryPlan": "agents.reasoning",
    "QuestionInput": "agents.llm_batch",
    "ReasoningAgent": "agents.reasoning",
    "ReasoningBatch": "agents.reasoning",
    "ReasoningOutput": "agents.reasoning",
    "ResponseSynthesizer": "agents.response_synthesizer",
    "ResultValidator": "agents.result_validator",
    "SQLBatch": "agents.sql_generator",
    "SQLExecutor": "agents.sql_executor",
    "SQLGenerator": "agents.sql_generator",
    "SchemaContext": "agents.schema_models",
    "SchemaExplorer": "agents.schema_explorer",
    "SchemaIndex": "agents.linking",
    "SchemaInspectionError": "agents.errors",
    "SelfCorrection": "agents.self_correction",
    "SplitResults": "agents.llm_batch",
    "Synonyms": "agents.linking",
    "SynthesizedAnswer": "agents.response_synthesizer",
    "TableInfo": "agents.schema_models",
    "batch_catalogue": "agents.catalogue",
    "build_catalogue": "agents.catalogue",
    "compact_catalogue": "agents.catalogue",
    "load_descriptions": "agents.descriptions",
    "rank_tables": "agents.catalogue",
    "split_results": "agents.llm_batch",
}

#: The logical agents, in pipeline order, as they appear in a run's trace.
AGENT_NAMES = (
    "IntentAnalyzer",
    "ClarificationAgent",
    "QueryDecomposer",
    "QueryPlanner",
    "SchemaExplorer",
    "DataExplorer",
    "SQLGenerator",
    "SafetyValidator",
    "SQLExecutor",
    "SelfCorrection",
    "ResultValidator",
    "ResponseSynthesizer",
)

__all__ = [
    "AGENT_NAMES",
    "AgentError",
    "AgentOutputError",
    "AnswerBatch",
    "Catalogue",
    "Clarification",
    "ClarifyingQuestion",
    "ColumnInfo",
    "CorrectedSQL",
    "CorrectionBatch",
    "DEFAULT_MAX_TABLES",
    "DataContext",
    "DataExplorer",
    "Decomposition",
    "Descriptions",
    "DescriptionsError",
    "ExecutionError",
    "ExecutionResult",
    "ForeignKeyInfo",
    "GeneratedSQL",
    "Intent",
    "IntentAnalysis",
    "LARGE_SCHEMA_TABLES",
    "LLMAgent",
    "PlannedFilter",
    "PlannedJoin",
    "QueryPlan",
    "QuestionInput",
    "ReasoningAgent",
    "ReasoningBatch",
    "ReasoningOutput",
    "ResponseSynthesizer",
    "ResultValidator",
    "SQLBatch",
    "SQLExecutor",
    "SQLGenerator",
    "SchemaContext",
    "SchemaExplorer",
    "SchemaIndex",
    "SchemaInspectionError",
    "SelfCorrection",
    "SplitResults",
    "Synonyms",
    "SynthesizedAnswer",
    "TableInfo",
    "batch_catalogue",
    "build_catalogue",
    "compact_catalogue",
    "load_descriptions",
    "rank_tables",
    "split_results",
]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
