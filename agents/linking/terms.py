"""One normaliser for questions and schema identifiers, so both sides meet on the same terms.

A term is a word lower-cased and reduced by the Snowball English stemmer (``names`` and
``name`` both give ``name``; ``countries`` and ``country`` both give ``countri``). Identifiers
are first split at underscores, digits and case changes (``CountryCode``, ``HTMLParser``), and a
long run of letters is also split into the dictionary words it is made of (``hiveinspection``
-> hive, inspection), keeping the whole run as a term too.

Example:
    >>> identifier_terms("cometOrbits")
    ['comet', 'orbit']
    >>> identifier_terms("hiveinspection")
    ['hiveinspect', 'hive', 'inspect']
    >>> question_words("Show the names of all comets")
    ['name', 'comet']
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from functools import cache, lru_cache

__all__ = [
    "STOPWORDS",
    "compound_parts",
    "identifier_terms",
    "question_words",
    "stem",
    "words",
]

#: Words a question says that name no table or column: function words and request verbs.
STOPWORDS = frozenset(
    """
a about above after again all also am an and any are as at be been before being below between both
but by can could did do does doing done each either every few for from get give given had has have
having he her here hers him his how i if in into is it its itself just me more most much must my
neither no nor not of off on once only or other our ours out over own per please same she should
show so some such than that the their theirs them then there these they this those through to too
under until up us very was we were what whatever when where whether which while who whom whose why
will with within without would yes you your yours list find return display tell many
""".split()
)

#: A run of letters at least this long may be a compound of dictionary words.
COMPOUND_MIN_CHARS = 6
#: Parts shorter than this are not kept as terms of their own (``pet_id`` -> pet, not ``id``).
PART_MIN_CHARS = 3

_WORD = re.compile(r"[a-z]+|[0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


@cache
def _english_stemmer() -> Callable[[str], str]:
    # Imported on first use: the package loads all its 30-odd languages (about 90 ms), a cost
    # only processes that rank a large schema should pay.
    import snowballstemmer

    english = snowballstemmer.stemmer("english")
    lock = threading.Lock()  # a stemmer object keeps per-word state while it works

    def stem_word(word: str) -> str:
        with lock:
            return str(english.stemWord(word))

    return stem_word


#: English plurals no suffix rule reaches, to their singular (the stemmer leaves them alone).
IRREGULAR_PLURALS = {
    "people": "person",
    "men": "man",
    "women": "woman",
    "children": "child",
    "mice": "mouse",
    "geese": "goose",
    "feet": "foot",
    "teeth": "tooth",
}


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a lower-case ``word``: ``names`` and ``name`` give ``name``,
    ``people`` and ``person`` give ``person``."""
    return _english_stemmer()(IRREGULAR_PLURALS.get(word, word))


def words(text: str) -> list[str]:
    """Lower-case words and numbers, split at case changes too: ``hiveInspection_no`` -> hive, inspection, no."""
    return _WORD.findall(_CAMEL.sub(" ", text).lower())


@cache
def _segmenter() -> object:
    # Imported on first use only: loading the word list costs about 70 ms and 16 MB, paid only
    # by processes that rank a large schema.
    import wordninja

    return wordninja


@lru_cache(maxsize=65536)
def compound_parts(word: str) -> tuple[str, ...]:
    """The dictionary words a run of letters is made of, or ``()`` when it is one word.

    Example:
        >>> compound_parts("hiveinspection")
        ('hive', 'inspection')
        >>> compound_parts("telescope")
        ()
        >>> compound_parts("obsdate")  # ob, s, date: not a split to trust
        ()
    """
    if len(word) < COMPOUND_MIN_CHARS or not word.isalpha():
        return ()
    parts = tuple(_segmenter().split(word))  # type: ignore[attr-defined]
    short = [p for p in parts if len(p) < PART_MIN_CHARS]
    # a one-letter part or several short ones mean the word list does not know this word
    # (``obsdate`` -> ob, s, date): better no split than a wrong one
    if len(parts) < 2 or any(len(p) < 2 for p in parts) or len(short) > 1:
        return ()
    return tuple(p for p in parts if len(p) >= PART_MIN_CHARS)


@lru_cache(maxsize=65536)
def identifier_terms(identifier: str) -> list[str]:
    """The terms of a table or column name, a comment or a value: its words stemmed, compounds split."""
    out: list[str] = []
    for word in words(identifier):
        if word.isdigit():
            continue
        out.append(stem(word))
        out.extend(stem(part) for part in compound_parts(word))
    return out


def question_words(question: str) -> list[str]:
    """The stemmed content words of a question, in order, stopwords and numbers left out."""
    return [stem(w) for w in words(question) if not w.isdigit() and w not in STOPWORDS]
