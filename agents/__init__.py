"""The twelve logical agents of sqlgate.

LLM agents are pure (messages in, one pydantic model out): ``ReasoningAgent`` (IntentAnalyzer,
ClarificationAgent, QueryDecomposer and QueryPlanner in one call), ``SQLGenerator``,
``SelfCorrection`` and ``ResponseSynthesizer``. Deterministic agents do their I/O through the
engine they are given: ``SchemaExplorer``, ``DataExplorer``, ``SQLExecutor``, ``ResultValidator``.
The twelfth, SafetyValidator, is ``safety.SqlValidator``.
"""

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
from agents.schema_explorer import (
    ColumnInfo,
    ForeignKeyInfo,
    SchemaContext,
    SchemaExplorer,
    TableInfo,
)
from agents.self_correction import CorrectedSQL, CorrectionBatch, SelfCorrection
from agents.sql_executor import ExecutionResult, SQLExecutor
from agents.sql_generator import GeneratedSQL, SQLBatch, SQLGenerator

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
