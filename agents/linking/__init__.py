"""Schema linking: which tables of a large database a question is about.

``terms`` is the one normaliser (Snowball stems, identifiers split at case changes and into the
words of a compound); ``synonyms`` the user-extensible word groups; ``index`` the per-schema
evidence and the ranking it gives.
"""

from agents.linking.index import EvidenceWeights, SchemaIndex
from agents.linking.synonyms import DEFAULT_SYNONYMS, Synonyms
from agents.linking.terms import identifier_terms, question_words, stem, words

__all__ = [
    "DEFAULT_SYNONYMS",
    "EvidenceWeights",
    "SchemaIndex",
    "Synonyms",
    "identifier_terms",
    "question_words",
    "stem",
    "words",
]
