"""RE2 patterns rewritten as Python ``re`` patterns with the same full-match semantics.

RegexFullMatch's spec names RE2 syntax (https://github.com/google/re2/wiki/Syntax). Python's
``re`` reads many RE2 patterns differently (``\\d`` is Unicode there, ASCII in RE2; ``$`` also
matches before a final newline; ``a{,2}`` is a repetition, a literal in RE2) and lacks some
(``\\pL``, ``\\Q...\\E``, ``\\x{e9}``, octal ``\\12``). :func:`re2_to_python` walks the pattern
one token at a time, as RE2's parser (re2/parse.cc) does, and writes each construct as an
explicit Python equivalent: every character class becomes a list of code-point ranges, every
anchor and ``.`` the Python construct with RE2's meaning, so no Python flag (IGNORECASE,
MULTILINE, DOTALL, ASCII) is ever left to decide a match. Constructs RE2 rejects raise
ValueError, as RE2 does; so do the two the reference cannot express (see
:func:`re2_to_python`).
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass

_MAX = 0x10FFFF
Ranges = list[tuple[int, int]]
"""A set of code points as sorted, disjoint, non-adjacent inclusive ranges."""


def _union(*parts: Ranges) -> Ranges:
    """The union of range lists, normalised (sorted, overlapping and adjacent ranges merged)."""
    out: Ranges = []
    for lo, hi in sorted(r for part in parts for r in part):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _negate(ranges: Ranges) -> Ranges:
    """The complement of ``ranges`` in [0, 0x10FFFF] (RE2 negates over all code points)."""
    out, nxt = [], 0
    for lo, hi in _union(ranges):
        if nxt < lo:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    return out + ([(nxt, _MAX)] if nxt <= _MAX else [])


def _ascii(spec: str) -> Ranges:
    """Ranges from a compact ASCII spec: "0-9A-Z_" -> [(48, 57), (65, 90), (95, 95)]."""
    out: Ranges = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.append((ord(spec[i]), ord(spec[i + 2])))
            i += 3
        else:
            out.append((ord(spec[i]), ord(spec[i])))
            i += 1
    return _union(out)


_PERL = {"d": _ascii("0-9"), "s": _ascii("\t\n\f\r "), "w": _ascii("0-9A-Za-z_")}
"""RE2's Perl classes, ASCII only (\\s has no \\v); \\D, \\S, \\W are their complements."""
_POSIX = {name: _ascii(spec) for name, spec in {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\x00-\x7f", "blank": "\t ",
    "cntrl": "\x00-\x1f\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@[-`{-~", "space": "\t-\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}.items()}
"""RE2's POSIX classes [[:name:]] (its posix_groups table, ASCII only)."""
_NAME_CATEGORIES = {"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Nd", "Pc"}
"""The general categories RE2 allows in a capture-group name (IsValidCaptureName)."""
_WORD = "[0-9A-Za-z_]"
_BOUNDARY = {  # RE2's \b and \B look at ASCII word characters only
    "b": f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))",
    "B": f"(?:(?<={_WORD})(?={_WORD})|(?<!{_WORD})(?!{_WORD}))",
}


@functools.cache
def _categories() -> dict[str, Ranges]:
    """RE2's Unicode general-category groups from Python's unicodedata: the two-letter
    categories, the one-letter unions (C is Cc|Cf|Co|Cs: unassigned code points, Cn, are in
    no RE2 group) and Any. Built once, on first use (about half a second)."""
    runs: dict[str, Ranges] = {}
    cats = (unicodedata.category(chr(cp)) for cp in range(_MAX + 1))
    cp = 0
    for cat, group in itertools.groupby(cats):
        n = sum(1 for _ in group)
        runs.setdefault(cat, []).append((cp, cp + n - 1))
        cp += n
    runs.pop("Cn", None)
    for letter in "CLMNPSZ":
        runs[letter] = _union(*(r for name, r in runs.items() if name[0] == letter))
    runs["Any"] = [(0, _MAX)]
    return runs


_LATER_FOLDS = {0x1FD3: 0x0390, 0x1FE3: 0x03B0, 0xFB05: 0xFB06}
"""The status S entries CaseFolding.txt gained in Unicode 15.1 ('ΐ' U+1FD3 and U+0390, 'ΰ'
U+1FE3 and U+03B0, 'ﬅ' and 'ﬆ'): RE2 folds them together; Python 3.11's tables (14.0) and
str.casefold() (full folding, in any version) do not."""


@functools.cache
def _orbits() -> dict[int, tuple[int, ...]]:
    """code point -> the code points equal to it under RE2's case folding (its orbit), for
    every code point with an orbit of more than one.

    RE2 folds with Unicode's simple case folding, CaseFolding.txt statuses C and S. Python's
    str.casefold() is the full folding (C and F); where that is one character it is the C
    mapping, and where it is longer, str.lower() is one character exactly for the S entries
    (U+1E9E and the Greek capitals with prosgegrammeni; checked over Unicode 14). So 'ß' and
    'ẞ' are one orbit, 'k', 'K' and the Kelvin sign another; 'ı' and 'İ' (statuses T and F
    only) fold to nothing but themselves. Plus :data:`_LATER_FOLDS`. Checked against
    onnxruntime 1.32's RE2: (?i) on each of the 2927 code points with a case mapping matches
    the same set. Built once, on first (?i) use (about a second)."""
    parent: dict[int, int] = {}

    def root(cp: int) -> int:
        while parent.get(cp, cp) != cp:
            cp = parent[cp]
        return cp

    def simple_fold(cp: int) -> int:
        ch = chr(cp)
        folded = ch.casefold()
        if len(folded) != 1:
            folded = ch.lower() if len(ch.lower()) == 1 else ch
        return _LATER_FOLDS.get(cp, ord(folded))
    for cp in range(_MAX + 1):
        folded = simple_fold(cp)
        if folded != cp:
            a, b = root(cp), root(folded)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[int, list[int]] = {}
    for cp in parent:
        members.setdefault(root(cp), [root(cp)]).append(cp)
    return {cp: tuple(sorted(set(orbit))) for orbit in members.values() for cp in orbit}


def _fold(ranges: Ranges) -> Ranges:
    """``ranges`` with the orbit of every member added (RE2's AddRangeFlags under (?i))."""
    starts = [lo for lo, _ in ranges]

    def inside(cp: int) -> bool:
        k = bisect_right(starts, cp) - 1
        return k >= 0 and cp <= ranges[k][1]
    return _union(ranges, [(o, o) for cp, orbit in _orbits().items() if inside(cp)
                           for o in orbit])


def _esc(cp: int) -> str:
    """Code point ``cp`` as a Python re escape valid inside and outside brackets."""
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _class_source(ranges: Ranges) -> str:
    """A Python bracket expression matching exactly ``ranges`` (an empty set matches
    nothing: the negation of everything)."""
    if not ranges:
        return f"[^\\x00-{_esc(_MAX)}]"
    return "[" + "".join(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}"
                         for lo, hi in ranges) + "]"


@dataclass
class _Group:
    """An open group: the flags to restore at its ')' and the largest nested repetition
    product inside it (RE2 refuses products over 1000)."""
    flags: frozenset[str]
    start: int
    weight: int = 1


class _Translator:
    """One pass over an RE2 pattern (see :func:`re2_to_python`)."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.flags: frozenset[str] = frozenset()
        self.groups: list[_Group] = [_Group(frozenset(), 0)]
        self.last: int | None = None  # index in out where the last atom starts
        self.last_weight = 1
        self.last_repeated = False  # the last atom already has a repetition operator
        self.just_repeated = False  # the previous token was a repetition operator

    def fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at offset {self.i} of {self.p!r} is not RE2 syntax")

    # ----------------------------------------------------------------------- the main loop

    def run(self) -> str:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            repeated = False
            if c == "(":
                self.open_group()
            elif c == ")":
                self.close_group()
            elif c == "|":
                self.i += 1
                self.out.append("|")
                self.last = None
            elif c in "*+?" or c == "{" and self.repeat_at(self.i) is not None:
                self.repeat()
                repeated = True
            elif c == "[":
                self.atom(_class_source(self.bracket()))
            elif c == "\\":
                self.escape()
            elif c in ".^$":
                self.i += 1
                self.special(c)
            else:
                self.i += 1
                self.atom(self.source_of(c))
            self.just_repeated = repeated
        if len(self.groups) > 1:
            raise self.fail("missing ')'")
        return "".join(self.out)

    def atom(self, source: str, weight: int = 1) -> None:
        """Append one Python atom (a character, a bracket or a group)."""
        self.last = len(self.out)
        self.last_weight = weight
        self.last_repeated = False
        self.out.append(source)
        self.groups[-1].weight = max(self.groups[-1].weight, weight)

    def source_of(self, ch: str) -> str:
        """A literal character, its whole case orbit under (?i)."""
        orbit = _orbits().get(ord(ch), ()) if "i" in self.flags else ()
        return _class_source(_union([(o, o) for o in orbit])) if orbit else _esc(ord(ch))

    def special(self, c: str) -> None:
        """'.', '^' and '$' with RE2's meanings: without (?s) '.' is anything but \\n;
        without (?m) '^' and '$' are the start and end of the text only (Python's '$' would
        also match before a final newline); with it, line anchors, as Python's MULTILINE."""
        if c == ".":
            self.atom("(?s:.)" if "s" in self.flags else "[^\\n]")
        elif "m" in self.flags:
            self.atom("(?:(?m:^))" if c == "^" else "(?:(?m:$))")
        else:
            self.atom("(?:\\A)" if c == "^" else "(?:\\Z)")

    # --------------------------------------------------------------------------- groups

    def open_group(self) -> None:
        p, start = self.p, self.i
        self.i += 1
        if not p.startswith("?", self.i):
            self.push_group()
            return
        self.i += 1
        for prefix, what in (("P=", "backreference (?P=name)"), ("P>", "recursion (?P>name)"),
                             ("=", "lookahead (?=...)"), ("!", "negative lookahead (?!...)"),
                             ("<=", "lookbehind (?<=...)"), ("<!", "negative lookbehind (?<!...)"),
                             (">", "atomic group (?>...)"), ("#", "comment (?#...)"),
                             ("(", "conditional (?(...)...)"), ("|", "branch reset (?|...)")):
            if p.startswith(prefix, self.i):
                self.i = start
                raise self.fail(what)
        if p.startswith("P<", self.i) or p.startswith("<", self.i):
            self.i += 2 if p[self.i] == "P" else 1
            end = p.find(">", self.i)
            name = p[self.i:end] if end >= 0 else ""
            if not name or any(ch != "_" and unicodedata.category(ch) not in _NAME_CATEGORIES
                               for ch in name):
                self.i = start
                raise self.fail(f"capture group name {p[start:end + 1 if end >= 0 else None]!r}")
            self.i = end + 1
            self.push_group()
            return
        self.flag_group(start)

    def flag_group(self, start: int) -> None:
        """(?flags) sets i, m, s, U (after '-': clears) until the enclosing group's ')';
        (?flags:re) for ``re`` only. (?U) swaps greedy and lazy repetition, which never changes
        whether a full match exists, so it is parsed and dropped."""
        p = self.p
        flags, negated, saw = set(self.flags), False, False
        while True:
            c = p[self.i] if self.i < len(p) else ""
            self.i += 1
            if c in ("i", "m", "s", "U"):
                (flags.discard if negated else flags.add)(c)
                saw = True
            elif c == "-" and not negated:
                negated, saw = True, False
            elif c in (":", ")") and (saw or not negated):
                break
            else:
                snippet, self.i = p[start:self.i], start
                raise self.fail(f"flag group {snippet!r}")
        if c == ")":
            self.flags = frozenset(flags)
        else:
            self.push_group()
            self.flags = frozenset(flags)

    def push_group(self) -> None:
        self.groups.append(_Group(self.flags, len(self.out)))
        self.out.append("(?:")
        self.last = None

    def close_group(self) -> None:
        if len(self.groups) == 1:
            raise self.fail("unmatched ')'")
        self.i += 1
        group = self.groups.pop()
        self.flags = group.flags
        self.out.append(")")
        self.groups[-1].weight = max(self.groups[-1].weight, group.weight)
        self.last, self.last_weight, self.last_repeated = group.start, group.weight, False

    # ----------------------------------------------------------------------- repetition

    def repeat_at(self, i: int) -> tuple[int, int, int] | None:
        """(lo, hi, end) when p[i:] starts RE2's {n}, {n,} or {n,m} (hi -1: no bound; no
        leading zeros); None when the '{' is a literal, as in {,n}, {x} or {01}."""
        p = self.p

        def integer(j: int) -> tuple[int, int] | None:
            k = j
            while k < len(p) and p[k].isascii() and p[k].isdigit():
                k += 1
            if k == j or (k - j > 1 and p[j] == "0") or k - j > 9:
                return None
            return int(p[j:k]), k
        first = integer(i + 1)
        if first is None:
            return None
        lo, j = first
        hi = lo
        if j < len(p) and p[j] == ",":
            if j + 1 < len(p) and p[j + 1] == "}":
                hi, j = -1, j + 1
            else:
                second = integer(j + 1)
                if second is None:
                    return None
                hi, j = second
        return (lo, hi, j + 1) if j < len(p) and p[j] == "}" else None

    def repeat(self) -> None:
        """*, +, ?, {n}, {n,}, {n,m}, each with an optional lazy '?'. RE2 refuses a missing
        argument, stacked operators (a**, and a++ -- possessive in Python 3.11), counts over
        1000 and nested counts whose product is over 1000."""
        p, start = self.p, self.i
        counts = self.repeat_at(self.i) if p[self.i] == "{" else None
        self.i = counts[2] if counts else self.i + 1
        op = p[start:self.i]
        if p.startswith("?", self.i):
            self.i += 1
            op += "?"
        if self.last is None:
            raise self.fail(f"missing argument to repetition operator {op}")
        if self.just_repeated:
            raise self.fail(f"stacked repetition operator {op}")
        if counts:
            lo, hi, _ = counts
            if lo > 1000 or hi > 1000 or -1 < hi < lo:
                raise self.fail(f"repetition size {p[start:self.i]}")
            factor = hi if hi > 0 else lo
            self.last_weight *= max(factor, 1)
            if self.last_weight > 1000:
                raise self.fail(f"repetition size {p[start:self.i]} (nested counts over 1000)")
            self.groups[-1].weight = max(self.groups[-1].weight, self.last_weight)
        if self.last_repeated:  # a(?i)* repeats a*: Python needs the group written
            self.out[self.last:] = ["(?:" + "".join(self.out[self.last:]) + ")"]
        self.out.append(op)
        self.last_repeated = True

    # -------------------------------------------------------------------------- escapes

    def escape(self) -> None:
        """A backslash outside brackets."""
        p, start = self.p, self.i
        c = p[self.i + 1] if self.i + 1 < len(p) else ""
        if c in ("A", "z"):
            self.i += 2
            self.atom("(?:\\A)" if c == "A" else "(?:\\Z)")
        elif c in ("b", "B"):
            self.i += 2
            self.atom(_BOUNDARY[c])
        elif c == "C":  # any byte: one character here (see re2_to_python)
            self.i += 2
            self.atom("(?s:.)")
        elif c == "Q":  # literal text up to \E or the end
            end = p.find("\\E", self.i + 2)
            end = len(p) if end < 0 else end
            for ch in p[self.i + 2:end]:
                self.atom(self.source_of(ch))
            self.i = min(end + 2, len(p))
        elif c in ("p", "P", "d", "D", "s", "S", "w", "W"):
            self.atom(_class_source(self.class_escape()))
        else:
            self.i = start
            self.atom(self.source_of(chr(self.char_escape())))

    def char_escape(self) -> int:
        """The code point of a one-character escape at p[i] == '\\' (RE2's ParseEscape):
        octal \\0, \\0oo and \\[1-7]o[o] (a lone \\1-\\9 would be a backreference), \\xHH,
        \\x{H...}, \\a \\f \\n \\r \\t \\v, and any ASCII punctuation."""
        p, start = self.p, self.i
        if self.i + 1 >= len(p):
            raise self.fail("trailing backslash")
        c = p[self.i + 1]
        self.i += 2
        if c == "0" or "1" <= c <= "7" and p[self.i:self.i + 1] in tuple("01234567"):
            j = self.i
            while j < len(p) and j < start + 4 and p[j] in "01234567":
                j += 1
            self.i = j
            return int(p[start + 1:j], 8)
        if c == "x":
            if p.startswith("{", self.i):
                end = p.find("}", self.i)
                digits = p[self.i + 1:end] if end >= 0 else ""
                if digits and all(d in "0123456789abcdefABCDEF" for d in digits) \
                        and int(digits, 16) <= _MAX:
                    self.i = end + 1
                    return int(digits, 16)
            elif all(d in "0123456789abcdefABCDEF" for d in p[self.i:self.i + 2]) \
                    and len(p[self.i:self.i + 2]) == 2:
                self.i += 2
                return int(p[self.i - 2:self.i], 16)
            self.i = start
            raise self.fail(f"hex escape {p[start:start + 4]!r}")
        simple = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
        if c in simple:
            return simple[c]
        if c.isascii() and not c.isalnum():
            return ord(c)
        self.i = start
        what = {"g": "backreference \\g<...>", "k": "backreference \\k<...>",
                "Z": "\\Z (RE2 writes end of text \\z)"}.get(c, f"escape \\{c}")
        if c.isdigit():
            what = f"backreference \\{c}"
        raise self.fail(what)

    def class_escape(self) -> Ranges:
        """\\d \\D \\s \\S \\w \\W (ASCII) or \\pX, \\p{Name}, \\p{^Name}, \\PX, \\P{Name}
        at p[i], as a range list, folded under (?i) (a negated class under (?i): the
        complement of the folded class, as RE2's AddUGroup)."""
        p, start = self.p, self.i
        c = p[self.i + 1]
        self.i += 2
        negated = c.isupper()
        if c in "dDsSwW":
            ranges = _PERL[c.lower()]
        else:
            if self.i >= len(p):
                raise self.fail(f"Unicode class {p[start:]!r}")
            if p[self.i] == "{":
                end = p.find("}", self.i)
                if end < 0:
                    raise self.fail(f"Unicode class {p[start:]!r}")
                name, self.i = p[self.i + 1:end], end + 1
            else:
                name, self.i = p[self.i], self.i + 1
            table = _categories()
            if name.removeprefix("^") not in table:
                raise ValueError(
                    f"{p[start:self.i]!r} in {p!r}: the reference supports the "
                    f"Unicode general categories (\\pL, \\p{{Lu}}, ...) and \\p{{Any}}; RE2's "
                    f"script classes (\\p{{Greek}}, ...) have no table in Python's unicodedata "
                    f"and are not supported, and other names are not RE2 syntax")
            ranges = table[name.removeprefix("^")]
            negated ^= name.startswith("^")
        if "i" in self.flags:
            ranges = _fold(ranges)
        return _negate(ranges) if negated else ranges

    def bracket(self) -> Ranges:
        """A bracket expression at p[i] == '[' (RE2's ParseCharClass): ']' first is literal,
        '-' first, last or after a range is literal, [:name:] and [:^name:] POSIX classes,
        Perl and Unicode classes, escapes, ranges; under (?i) each item is folded, and a
        leading '^' negates the whole."""
        p, start = self.p, self.i
        self.i += 1
        negated = p.startswith("^", self.i)
        self.i += negated
        items: list[Ranges] = []
        first = True
        fold = "i" in self.flags
        while True:
            if self.i >= len(p):
                self.i = start
                raise self.fail("missing ']'")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if p.startswith("[:", self.i) and p.find(":]", self.i + 2) >= 0:
                end = p.find(":]", self.i + 2)
                name = p[self.i + 2:end]
                posix = _POSIX.get(name.removeprefix("^"))
                if posix is None:
                    raise self.fail(f"POSIX class [:{name}:]")
                posix = _fold(posix) if fold else posix
                items.append(_negate(posix) if name.startswith("^") else posix)
                self.i = end + 2
            elif c == "\\" and p[self.i + 1:self.i + 2] in tuple("pPdDsSwW"):
                items.append(self.class_escape())
            else:
                lo = self.bracket_char()
                hi = lo
                if p.startswith("-", self.i) and self.i + 1 < len(p) and p[self.i + 1] != "]":
                    self.i += 1
                    hi = self.bracket_char()
                    if hi < lo:
                        raise self.fail(f"character class range {chr(lo)}-{chr(hi)}")
                items.append(_fold([(lo, hi)]) if fold else [(lo, hi)])
        ranges = _union(*items)
        return _negate(ranges) if negated else ranges

    def bracket_char(self) -> int:
        if self.i >= len(self.p):
            raise self.fail("missing ']'")
        if self.p[self.i] == "\\":
            return self.char_escape()
        self.i += 1
        return ord(self.p[self.i - 1])


@functools.lru_cache(maxsize=256)
def re2_to_python(pattern: str) -> str:
    """A Python ``re`` pattern whose ``fullmatch`` agrees with RE2's full match of
    ``pattern`` on every string, or ValueError naming the construct.

    Rewritten: Perl classes \\d \\s \\w (ASCII; \\s is [\\t\\n\\f\\r ]) and their negations,
    inside brackets too; \\b \\B (ASCII word characters); POSIX [[:name:]] and [[:^name:]];
    \\pX \\p{Name} \\p{^Name} \\PX for the Unicode general categories and Any (from
    unicodedata: Python's Unicode version, 14.0 in 3.11); '^' '$' (text anchors, line anchors
    under (?m)), \\A, \\z, '.' (no \\n unless (?s)); the flags (?i) (?m) (?s) (?U) and
    (?flags:re) with '-'; repetitions ({,n}, {01} and {x} are literals; nested counts over
    1000 refused); \\Q...\\E; \\x{H...}, \\xHH, octal \\0oo and \\[1-7]o[o] (\\12 is
    octal 012, RE2 having no backreferences); (?P<name>re) and (?<name>re); \\C.
    Case-insensitive matching folds every literal and class by RE2's orbits (see
    :func:`_orbits`), never by Python's IGNORECASE, which has its own rules for 'ı', 'İ', 'ſ'.

    Refused as not RE2 syntax: backreferences (\\1, \\g<1>, \\k<x>, (?P=x)), lookaround,
    atomic groups, possessive and stacked repetition, (?#...), (?x) and other flags, \\Z,
    unknown escapes. Refused as unsupported although RE2 takes them: script classes
    (\\p{Greek}).

    Left different: \\C matches one byte in RE2 (of a UTF-8 string) and one character here,
    which agree on ASCII only ('\\C\\C' fully matches 'é' in RE2); Unicode tables follow
    Python's unicodedata version, RE2's its own.
    """
    return _Translator(pattern).run()
