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
    "route_words",
    "time_words",
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


#: English verb forms no suffix rule reaches, to their base (the stemmer leaves them alone):
#: "who flew" and "units sold" meet ``fly`` and ``sell`` on both sides.
IRREGULAR_VERBS = {
    "flew": "fly",
    "flown": "fly",
    "bought": "buy",
    "sold": "sell",
    "won": "win",
    "lost": "lose",
    "taught": "teach",
    "wrote": "write",
    "written": "write",
    "spoke": "speak",
    "spoken": "speak",
    "drove": "drive",
    "driven": "drive",
    "chose": "choose",
    "chosen": "choose",
    "grew": "grow",
    "grown": "grow",
    "built": "build",
    "held": "hold",
    "sent": "send",
    "spent": "spend",
    "sang": "sing",
    "sung": "sing",
    "drew": "draw",
    "drawn": "draw",
    "stole": "steal",
    "stolen": "steal",
    "rode": "ride",
    "ridden": "ride",
    "ate": "eat",
    "eaten": "eat",
    "fought": "fight",
    "caught": "catch",
    "brought": "bring",
    "thought": "think",
    "took": "take",
    "taken": "take",
    "made": "make",
    "began": "begin",
    "begun": "begin",
    "led": "lead",
    "met": "meet",
    "kept": "keep",
    "lent": "lend",
    "wore": "wear",
    "worn": "wear",
    "broke": "break",
    "broken": "break",
    "threw": "throw",
    "thrown": "throw",
    "shot": "shoot",
    "struck": "strike",
    "swam": "swim",
    "swum": "swim",
}


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Snowball English stem of a lower-case ``word``: ``names`` and ``name`` give ``name``,
    ``people`` and ``person`` give ``person``, ``flew`` and ``fly`` give ``fli``."""
    word = IRREGULAR_PLURALS.get(word, word)
    return _english_stemmer()(IRREGULAR_VERBS.get(word, word))


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


_WEEKDAYS = frozenset(
    f"{d}{s}"
    for d in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    for s in ("", "s")
)
#: Month names that are never another English word ("may" and "march" count only beside a
#: number: "on may 5", "march 2010").
_MONTHS = frozenset(
    "january february april june july august september october november december".split()
)
_AMBIGUOUS_MONTHS = frozenset({"may", "march"})
_RELATIVE_DAYS = frozenset({"today", "tomorrow", "yesterday", "tonight", "weekday", "weekend"})
_ORDINAL_ENDINGS = frozenset({"st", "nd", "rd", "th"})
_PERIODS = frozenset({"morning", "afternoon", "evening", "night", "noon", "midnight"})


def time_words(question: str) -> list[str]:
    """The date and time words a question implies without saying them: a weekday or
    "tomorrow" implies a ``day`` (and a ``date``), a month name a ``month``, a year (1900 to
    2099) a ``year``, two or three small numbers in a row ("on 6 5", "7 25 1991") a month and a
    day, "in the morning" a ``time``. Empty when the question names no time.

    Example:
        >>> time_words("flights from denver on 6 5")
        ['date', 'day', 'month']
        >>> time_words("who won in 2010")
        ['date', 'year']
    """
    found: set[str] = set()
    tokens: list[str] = []
    for token in words(question):  # "28th" is read as 28
        if not (token in _ORDINAL_ENDINGS and tokens and tokens[-1].isdigit()):
            tokens.append(token)
    for i, token in enumerate(tokens):
        near_number = any(0 <= j < len(tokens) and tokens[j].isdigit() for j in (i - 1, i + 1))
        if token in _WEEKDAYS or token in _RELATIVE_DAYS:
            found.update(("date", "day"))
        elif token in _MONTHS or (token in _AMBIGUOUS_MONTHS and near_number):
            found.update(("date", "month"))
        elif token in _PERIODS:
            found.update(("time",))
        elif token.isdigit():
            number = int(token)
            if len(token) == 4 and 1900 <= number <= 2099:
                found.update(("date", "year"))
            elif (
                i + 1 < len(tokens)
                and tokens[i + 1].isdigit()
                and 1 <= number <= 12
                and 1 <= int(tokens[i + 1]) <= 31
            ):
                found.update(("date", "day", "month"))
            elif 1 <= number <= 31 and (
                tokens[i - 1 : i] == ["on"] or tokens[max(i - 2, 0) : i] == ["on", "the"]
            ):  # "on the 28", "on 27": a day of the month
                found.update(("date", "day"))
    return sorted(found)


#: The identifier words a route's two ends are stored under ("from_airport", "dest_city").
ROUTE_WORDS = ("from", "to", "source", "src", "origin", "destination", "dest", "dst")
_ROUTE = re.compile(r"\bfrom\s+(?!\d)\S.*?\bto\s+(?!\d)\S|\bbetween\s+(?!\d)\S.*?\band\s+(?!\d)\S")


def route_words(question: str) -> list[str]:
    """The identifier words a question asking about a route implies ("from denver to boston",
    "between boston and atlanta": where something goes from and to), or none.

    Example:
        >>> route_words("flights from denver to boston")[:3]
        ['from', 'to', 'source']
        >>> route_words("students from 10 to 20"), route_words("list the names from each city")
        ([], [])
    """
    return list(ROUTE_WORDS) if _ROUTE.search(question.lower()) else []
