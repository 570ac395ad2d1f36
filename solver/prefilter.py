"""Literals every match of a regular expression holds, so that a long log's lines are searched only by the patterns
that could match them.

The log readers try some three hundred patterns on every line; most lines hold none of what most of them look for.
``required_literals`` reads a pattern's parsed form (the ``re`` module's own parser) and returns strings one of which
is in every match: a run of plain characters that every match must pass through (the product of adjacent small
alternations, ``/(?:TP|PP)`` -> ``/TP``, ``/PP``), or, for an alternation, one such from each branch. ``Guarded`` puts
that test, a substring search, before the pattern's: a text without any of them cannot match, so the answer is the
pattern's own, only sooner (the prefilter of RE2 and Hyperscan, here on Python's parse tree). Where no literal is
certain (an optional part, a scoped flag, a class of characters) the pattern is searched as before.

Under IGNORECASE the literals are lower-case ASCII or caseless characters (CJK, punctuation) and are looked for in the
text folded as ``fold_case`` folds it (``re``'s IGNORECASE matches ASCII letters to four non-ASCII ones as well;
``fold_case`` maps them or gives up).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

try:  # Python >= 3.11
    from re import _constants as _sre, _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

_REPEATS = tuple(op for op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)) if op)
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)
_MAX_EXACT = 64  # the most strings an exact set is expanded to (a product of alternatives grows fast)

Literals = frozenset[str]


def fold_case(text: str) -> str | None:
    """``text`` as the ASCII literals of an IGNORECASE pattern see it (``None``: search it whatever it holds). re's
    IGNORECASE also matches "ı" (dotless i) and "İ" to "i", "ſ" to "s" and the Kelvin sign to "k" (the re module's
    documentation: the four non-ASCII letters that match ASCII ones); casefold() maps "ſ" and the Kelvin sign itself,
    "ı" is mapped here, and a text with "İ", which casefolds to two characters, is searched whatever it holds.

    >>> fold_case("TFLOPs per GPU"), fold_case("ıd"), fold_case("İ")
    ('tflops per gpu', 'id', None)
    """
    if text.isascii():  # (where casefold() is lower())
        return text.lower()
    return None if "\u0130" in text else text.casefold().replace("\u0131", "i")


def _better(a: Literals | None, b: Literals | None) -> Literals | None:
    """The more selective of two requirements: the longer shortest literal, then fewer of them."""
    if a is None or b is None:
        return a if b is None else b
    return max(a, b, key=lambda literals: (min(map(len, literals)), -len(literals)))


def _joined(a: Literals | None, b: Literals | None) -> Literals | None:
    """Every string of ``a`` followed by every one of ``b``, while there are few."""
    if a is None or b is None or len(a) * len(b) > _MAX_EXACT:
        return None
    return frozenset(x + y for x in a for y in b)


# characters without case (CJK ideographs, punctuation, symbols): IGNORECASE matches them to themselves only, and
# casefold() keeps them
_CASELESS = frozenset({"Lo", "Nd", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs"})


def _char(code: int, folded: bool) -> str | None:
    """A literal character as the text holds it (under IGNORECASE: ASCII lower-cased, a caseless one as it is;
    ``None``: not usable)."""
    char = chr(code)
    if folded and code >= 128:
        return char if unicodedata.category(char) in _CASELESS and char.casefold() == char else None
    return char.lower() if folded else char


def _node(op: Any, av: Any, folded: bool) -> tuple[Literals | None, Literals | None]:
    """(exact, required) of one parsed item: every string it can match, where those are a few plain strings; and
    strings one of which each of its matches holds."""
    if op is _sre.LITERAL:
        char = _char(av, folded)
        return (None, None) if char is None else (frozenset({char}),) * 2
    if op is _sre.IN:  # a class of listed characters only ("[-_ ]")
        chars = [_char(code, folded) if kind is _sre.LITERAL else None for kind, code in av]
        return (frozenset(chars),) * 2 if chars and None not in chars else (None, None)
    if op is _sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        return (None, None) if add_flags or del_flags else _sequence(sub, folded)
    if op in _REPEATS:
        low, high, sub = av
        if low < 1:
            return None, None
        exact, required = _sequence(sub, folded)
        product: Literals | None = frozenset({""})
        for _ in range(low):
            product = _joined(product, exact)
        if product is None:
            return None, required
        return (product if high == low else None), _better(product, required)
    if _ATOMIC is not None and op is _ATOMIC:
        return _sequence(av, folded)
    if op is _sre.BRANCH:
        parts = [_sequence(sub, folded) for sub in av[1]]
        exacts = [exact for exact, _ in parts]
        requireds = [_better(exact, required) for exact, required in parts]
        exact = frozenset().union(*exacts) if None not in exacts else None
        return (exact if exact is not None and len(exact) <= _MAX_EXACT else None), \
            (None if None in requireds else frozenset().union(*requireds))
    return None, None  # ".", a class of characters, an anchor, a look-around, a back-reference: nothing certain


def _sequence(items: Any, folded: bool) -> tuple[Literals | None, Literals | None]:
    """(exact, required) of a sequence: adjacent exact items joined into their product while it stays small; each
    product and each item's own requirement a candidate, the most selective kept."""
    best: Literals | None = None
    run: Literals | None = frozenset({""})  # the product of the exact items since the last break
    whole: Literals | None = frozenset({""})  # the product of all of them, while every one is exact
    for op, av in items:
        exact, required = _node(op, av, folded)
        best = _better(best, required)
        joined = _joined(run, exact)
        if joined is None:
            if run is not None and "" not in run:
                best = _better(best, run)
            joined = exact
        run = joined
        whole = _joined(whole, exact)
    if run is not None and "" not in run:
        best = _better(best, run)
    if whole is not None and "" in whole:
        whole = None  # (an item that may match nothing: no certain literal)
    if best is not None and "" in best:
        best = None
    return whole, best


def required_literals(pattern: re.Pattern[str]) -> Literals | None:
    """Strings one of which every match of ``pattern`` holds (lower case under IGNORECASE), or ``None``.

    >>> sorted(required_literals(re.compile(r"\\busing world size:\\s*(\\d+)")))
    ['using world size:']
    >>> sorted(required_literals(re.compile(r"(?:throughput per GPU|TFLOP/s/GPU)\\s*[:=]", re.I)))
    ['tflop/s/gpu', 'throughput per gpu']
    >>> sorted(required_literals(re.compile(r"(?:TP|PP)(?:/(?:TP|PP))+\\n", re.I)))  # a product of alternatives
    ['/pp', '/tp']
    >>> sorted(required_literals(re.compile(r"^\\s*:?-{2,}:?\\s*\\|"))), required_literals(re.compile(r"(?:abc)?\\d+"))
    (['--'], None)
    """
    if not isinstance(pattern.pattern, str) or pattern.flags & re.LOCALE:
        return None
    return _sequence(_sre_parse.parse(pattern.pattern, pattern.flags), bool(pattern.flags & re.IGNORECASE))[1]


# the last text folded and its folding (a line is tried by many patterns in a row), replaced as one tuple
_last: list[tuple[Any, str | None]] = [(None, None)]


def _fold_cached(text: str) -> str | None:
    last = _last[0]
    if last[0] is not text:
        last = (text, fold_case(text))
        _last[0] = last
    return last[1]


def _may_match(literals: Literals | None, folded: bool) -> Callable[[str], bool] | None:
    """The test a text passes where it may hold a match (``None``: every text may)."""
    if literals is None:
        return None
    if len(literals) == 1:
        (literal,) = literals
        if folded:
            return lambda text: (hay := _fold_cached(text)) is None or literal in hay
        return lambda text: literal in text
    ordered = tuple(sorted(literals, key=len, reverse=True))
    if folded:
        def may_folded(text: str) -> bool:
            hay = _fold_cached(text)
            if hay is None:
                return True
            for literal in ordered:
                if literal in hay:
                    return True
            return False
        return may_folded

    def may(text: str) -> bool:
        for literal in ordered:
            if literal in text:
                return True
        return False
    return may


_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class Guarded:
    """A compiled pattern that answers "no match" at once for a text without any of its ``required_literals``, and
    otherwise as the pattern does. Everything else (``pattern``, ``flags``, ``groups``) is the pattern's; ``raw`` is
    the pattern itself (what a match's ``.re`` is). The literals are found at the first search (parsing some three
    hundred patterns at import would slow every command that never reads a log).

    >>> g = Guarded(re.compile(r"loss scale:\\s*(\\d+)", re.I))
    >>> g.search("| Loss Scale: 1024 |").group(1), g.search("lm loss: 2.1"), g.sub("#", "no scale here")
    ('1024', None, 'no scale here')
    """

    def __init__(self, pattern: re.Pattern[str]):
        self.raw = pattern

    @property
    def literals(self) -> Literals | None:
        if "_literals" not in self.__dict__:
            self._arm()
        return self.__dict__["_literals"]

    def _arm(self) -> None:
        """The literals, and the guarded methods as this instance's own (the class's, ``_arming``, only arm it)."""
        pattern = self.raw
        self._literals = required_literals(pattern)
        may = _may_match(self._literals, bool(pattern.flags & re.IGNORECASE))
        if may is None:  # the pattern's own methods, nothing in front
            for name in _METHODS:
                setattr(self, name, getattr(pattern, name))
            return
        search, match, fullmatch, finditer = pattern.search, pattern.match, pattern.fullmatch, pattern.finditer
        findall, sub, subn, split = pattern.findall, pattern.sub, pattern.subn, pattern.split
        self.may_match = may
        self.search = lambda text, *a: search(text, *a) if may(text) else None
        self.match = lambda text, *a: match(text, *a) if may(text) else None
        self.fullmatch = lambda text, *a: fullmatch(text, *a) if may(text) else None
        self.finditer = lambda text, *a: finditer(text, *a) if may(text) else iter(())
        self.findall = lambda text, *a: findall(text, *a) if may(text) else []
        self.sub = lambda repl, text, count=0: sub(repl, text, count) if may(text) else text
        self.subn = lambda repl, text, count=0: subn(repl, text, count) if may(text) else (text, 0)
        self.split = lambda text, maxsplit=0: split(text, maxsplit) if may(text) else [text]

    def __getattr__(self, name: str) -> Any:  # (what the instance does not hold: pattern, flags, groups, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.raw, name)

    def __repr__(self) -> str:
        return f"Guarded({self.raw!r})"


def _arming(name: str) -> Callable[..., Any]:
    """The class's ``name`` method: arm the instance, whose own ``name`` then answers this call and every later one."""
    def method(self: Guarded, *args: Any, **kwargs: Any) -> Any:
        self._arm()
        return getattr(self, name)(*args, **kwargs)
    method.__name__ = name
    return method


for _name in _METHODS:
    setattr(Guarded, _name, _arming(_name))


def guard_patterns(namespace: dict[str, Any]) -> None:
    """Every compiled pattern among a module's names replaced by its ``Guarded`` self."""
    for name, value in list(namespace.items()):
        if isinstance(value, re.Pattern):
            namespace[name] = Guarded(value)
