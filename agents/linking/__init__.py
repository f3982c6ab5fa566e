"""Schema linking: which tables of a large database a question is about.

``terms`` is the one normaliser (Snowball stems, identifiers split at case changes and into the
words of a compound); ``derivation`` joins words one derivational suffix apart and short forms to
long ones; ``synonyms`` the user-extensible word groups; ``vocabulary`` what is learned from the
schema's comments and from notes and reviewed questions; ``values`` the index of the values
stored in label-like columns; ``index`` the per-schema evidence and the ranking it gives.
"""

from agents.linking.derivation import abbreviates, derived_keys, related
from agents.linking.index import EvidenceWeights, SchemaIndex
from agents.linking.synonyms import DEFAULT_SYNONYMS, Synonyms
from agents.linking.terms import identifier_terms, question_words, stem, words
from agents.linking.values import ValueIndex, ValueLimits, ValueMatch, normalize_value
from agents.linking.vocabulary import Usage, learned_expansions

__all__ = [
    "DEFAULT_SYNONYMS",
    "EvidenceWeights",
    "SchemaIndex",
    "Synonyms",
    "Usage",
    "ValueIndex",
    "ValueLimits",
    "ValueMatch",
    "abbreviates",
    "derived_keys",
    "identifier_terms",
    "learned_expansions",
    "normalize_value",
    "question_words",
    "related",
    "stem",
    "words",
]
