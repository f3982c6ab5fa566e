"""Words one derivational suffix apart, and short forms of words: how a question's word can reach
a schema word the stemmer leaves apart.

The Snowball stemmer removes inflections (``names`` -> ``name``) and some derivations, but not
all: ``consumed`` and ``consumption`` stem to ``consum`` and ``consumpt``, ``singer`` stays apart
from ``sing``, ``director`` from ``direct``. ``derived_keys`` gives a stem's key and the keys it
reaches by dropping one derivational suffix of English (agent and doer nouns -er/-or/-ist/-ian,
-ment, -al, -ic, -ship, -ure, the -t/-pt left of -tion, the -i left of -y); two stems are related
when one is a key of the other. The rule is a class, not a word list: any word built the same way
joins its base, and a base shorter than four letters never does (``tour`` and ``tournament``
stay apart).

``abbreviates`` says whether a short identifier word plausibly stands for a question's word:
its first letters (``trans`` for transaction, ``disp`` for disposition, ``cust`` for customer),
or its consonants in order when it has no other vowel than its first letter (``qty`` quantity,
``mgr`` manager).

Example:
    >>> from agents.linking.terms import stem
    >>> related(stem("consumption"), stem("consumed")), related(stem("singer"), stem("sing"))
    (True, True)
    >>> related(stem("tournament"), stem("tour")), related(stem("county"), stem("count"))
    (False, False)
    >>> abbreviates("disp", "disposition"), abbreviates("qty", "quantity"), abbreviates("cat", "contract")
    (True, True, False)
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["abbreviates", "derived_keys", "related"]

#: Stem endings one derivational suffix leaves (on Snowball stems), and the shortest base each
#: may leave behind.
_SUFFIXES: tuple[tuple[str, str, int], ...] = (
    # (ending, what replaces it, shortest base)
    ("ment", "", 4),  # payment, shipment, enrollment
    ("ship", "", 4),  # membership, ownership
    ("ist", "", 4),  # violinist, scientist
    ("ian", "", 4),  # musician, librarian
    ("er", "", 4),  # singer, teacher, computer
    ("er", "e", 4),  # writer -> write, driver -> drive
    ("or", "", 4),  # director, visitor, competitor
    ("ur", "", 4),  # departure, failure (Snowball leaves -ur)
    ("al", "", 5),  # arrival, approval (not sign-al, port-al)
    ("ic", "", 5),  # economic -> econom
    ("it", "", 5),  # competit(ion), composit(ion)
    ("e", "", 5),  # employe(e) -> employ
    ("i", "", 6),  # history -> histori -> histor
    ("pt", "", 4),  # consumpt(ion) -> consum, assumpt(ion) -> assum
    ("uct", "uc", 4),  # product(ion) -> produc, reduct(ion) -> reduc
)


#: English nouns no suffix rule leads back to their verb or adjective (as Snowball stems):
#: "fly" reaches ``flight``, "how long" ``length``, "sell" ``sale``, "die" ``death``.
_IRREGULAR_BASES: dict[str, str] = {
    "flight": "fli",  # fly
    "sale": "sell",
    "death": "die",
    "birth": "born",
    "loss": "lose",
    "choic": "choos",  # choice -> choose
    "height": "high",
    "length": "long",
    "width": "wide",
    "depth": "deep",
    "strength": "strong",
    "weight": "weigh",
    "growth": "grow",
    "speech": "speak",
    "proof": "prove",
    "belief": "believ",
    "heat": "hot",
    "youth": "young",
    "truth": "true",
    "success": "succeed",
    "servic": "serv",  # service -> serve
    "entranc": "enter",  # entrance -> enter
    "receipt": "receiv",  # receipt -> receive
    "descript": "describ",  # description -> describe
    "subscript": "subscrib",  # subscription -> subscribe
    "respons": "respond",  # response -> respond
    "analysi": "analyz",  # analysis -> analyze
}


@lru_cache(maxsize=65536)
def derived_keys(stem: str) -> tuple[str, ...]:
    """The stem and the bases it reaches by dropping one derivational suffix (or, for the
    irregular nouns English has, by its irregular base: ``flight`` -> ``fli``)."""
    keys = [stem]
    irregular = _IRREGULAR_BASES.get(stem)
    if irregular and irregular != stem:
        keys.append(irregular)
    for ending, replacement, shortest in _SUFFIXES:
        if stem.endswith(ending):
            base = stem[: len(stem) - len(ending)] + replacement
            if len(base) >= shortest and base not in keys:
                keys.append(base)
    return tuple(keys)


def related(a: str, b: str) -> bool:
    """True when one stem is the other, or the other one derivational suffix shorter."""
    return a == b or a in derived_keys(b) or b in derived_keys(a)


_VOWELS = frozenset("aeiou")


def abbreviates(short: str, word: str) -> bool:
    """True when ``short`` plausibly stands for ``word`` (both lower case, unstemmed)."""
    if len(short) < 3 or len(word) < len(short) + 2 or short[0] != word[0]:
        return False
    if word.startswith(short):
        return True
    if any(ch in _VOWELS for ch in short[1:]) or not short.isalpha():
        return False
    position = 0
    for ch in short:
        position = word.find(ch, position) + 1
        if position == 0:
            return False
    return True
