"""String ops: StringNormalizer (case actions, stopwords in and out of case, [C] and [1, C],
everything removed), StringConcat (broadcasting, empty strings), StringSplit (whitespace,
single- and multi-character delimiters, maxsplit), RegexFullMatch (RE2 patterns: classes,
repetition, alternation, flags, anchors) and TfIdfVectorizer (TF/IDF/TFIDF, n-gram lengths,
skips, integer and string pools, weights, rank 1 and 2)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from refmnn.dtypes import DType
from refmnn_conformance.runner import reference_outputs

from ._sweep import Sample, SampleContext, Sweep

_CHARS = "abxyzABXYZ019 .,-_!" + "ÉéßıİΩñ"
"""The alphabet of random strings: ASCII letters of both cases, digits, space, punctuation and
a few non-ASCII letters (whose case mappings are where engines part)."""
_WORDS = ("apple", "Apple", "APPLE", "the", "The", "a", "b", "x1", "", "ÉTÉ", "été", "straße",
          "Iı", "İSTANBUL", "hello world", "ΩΩ")
"""Whole elements for StringNormalizer and TfIdfVectorizer: case variants of a few words."""


def _shape(rng: np.random.Generator, low: int, high: int, empty: float = 0.0
           ) -> tuple[int, ...]:
    """A shape of rank in [low, high], dims in [1, 4] (0 with probability ``empty`` each)."""
    rank = int(rng.integers(low, high + 1))
    return tuple(0 if rng.random() < empty else int(rng.integers(1, 5)) for _ in range(rank))


def _text(rng: np.random.Generator, longest: int = 6, chars: str = _CHARS) -> str:
    """A random string of 0 to ``longest`` characters from ``chars``."""
    return "".join(rng.choice(list(chars), int(rng.integers(0, longest + 1))))


def _strings(rng: np.random.Generator, shape: tuple[int, ...],
             make: Callable[[np.random.Generator], str] = _text) -> np.ndarray:
    """An object array of ``shape`` filled by ``make(rng)`` (random strings by default)."""
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    for i in range(flat.size):
        flat[i] = make(rng)
    return out


def _word(rng: np.random.Generator) -> str:
    """One of :data:`_WORDS`."""
    return str(rng.choice(_WORDS))


def draw_string_normalizer(ctx: SampleContext, opset: int) -> Sample:
    """A random StringNormalizer: X [C] or [1, C] (C in 1..6) of words in several cases;
    case_change_action each of LOWER/UPPER/NONE or left out, is_case_sensitive 0/1 or left
    out, locale en_US.UTF-8 (onnxruntime's default, which the machine must have) or left out;
    stopwords (half the time) a few words in random case, now and then every element of X
    (everything removed)."""
    rng = ctx.rng
    c = int(rng.integers(1, 7))
    x = _strings(rng, (c,) if rng.random() < 0.5 else (1, c), _word)
    attrs: dict[str, object] = {}
    action = int(rng.integers(0, 4))
    if action:
        attrs["case_change_action"] = ("LOWER", "UPPER", "NONE")[action - 1]
    if rng.random() < 0.6:
        attrs["is_case_sensitive"] = int(rng.integers(0, 2))
    if rng.random() < 0.3:
        attrs["locale"] = "en_US.UTF-8"
    if rng.random() < 0.6:
        stops = [_word(rng) for _ in range(int(rng.integers(1, 4)))]
        if rng.random() < 0.2:
            stops = [str(s) for s in x.reshape(-1)]
        attrs["stopwords"] = stops
    return Sample((x,), attrs)


def _broadcast_pair(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes of ranks 0-3 that broadcast together (dims 0-3, some made 1)."""
    full = _shape(rng, 0, 3, empty=0.05)

    def part() -> tuple[int, ...]:
        keep = len(full) if rng.random() < 0.6 else int(rng.integers(0, len(full) + 1))
        tail = full[len(full) - keep:]
        return tuple(1 if rng.random() < 0.3 else d for d in tail)
    return part(), part()


def draw_string_concat(ctx: SampleContext, opset: int) -> Sample:
    """A random StringConcat: X and Y of ranks 0-3 that broadcast together (either side
    stretched, empty dims now and then), random strings including empty ones."""
    rng = ctx.rng
    a, b = _broadcast_pair(rng)
    return Sample((_strings(rng, a), _strings(rng, b)))


_DELIMITERS = (" ", ",", "-", "ab", ", ", "--", "é", "ßß")


def _splittable(rng: np.random.Generator, delimiter: str | None, tabs: bool,
                empty: bool) -> str:
    """A string of 1-4 random pieces (0-4 if ``empty``) joined by ``delimiter`` or by runs of
    spaces (and, if ``tabs``, tabs, newlines, U+3000 and U+00A0, with U+001F -- an information
    separator, not whitespace -- inside the pieces), with separators doubled or at the ends
    now and then."""
    seps = [delimiter] if delimiter else \
        [" ", "  "] + (["\t", " \n ", "\u3000", "\xa0 "] if tabs else [])
    chars = "abxAB1.,-é" + ("\x1f" if tabs else "")
    pieces = [_text(rng, 4, chars) for _ in range(int(rng.integers(0 if empty else 1, 5)))]
    out = ""
    for i, piece in enumerate(pieces):
        out += (str(rng.choice(seps)) * int(rng.integers(1, 3)) if i else "") + piece
    if rng.random() < 0.2:
        out = str(rng.choice(seps)) + out
    if rng.random() < 0.2:
        out += str(rng.choice(seps))
    return out


def draw_string_split(ctx: SampleContext, opset: int) -> Sample:
    """A random StringSplit: X of rank 0-2 (empty dims now and then) of strings joined by the
    delimiter; delimiter left out, "", a single or a multi-character string (some non-ASCII);
    maxsplit left out or 0-3; both outputs (both are required). Tabs, newlines and Unicode
    spaces among the whitespace, and empty elements, in a third of the samples each."""
    rng = ctx.rng
    attrs: dict[str, object] = {}
    kind = int(rng.integers(0, 4))
    delimiter = None
    if kind == 1:
        attrs["delimiter"] = ""
    elif kind >= 2:
        delimiter = attrs["delimiter"] = str(rng.choice(_DELIMITERS))
    if rng.random() < 0.5:
        attrs["maxsplit"] = int(rng.integers(0, 4))
    tabs, empty = bool(rng.random() < 0.3), bool(rng.random() < 0.3)
    x = _strings(rng, _shape(rng, 0, 2, empty=0.05),
                 lambda r: _splittable(r, delimiter, tabs, empty))
    return Sample((x,), attrs, outputs=2)


_ATOMS = ("a", "b", "x", "A", "1", "é", "ß", ".", "\\.", "[a-z]", "[^a-z]", "[A-Za-z0-9]",
          "\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "[[:alpha:]]", "[[:digit:]]",
          "[[:punct:]]", "[[:upper:]]", "[[:space:]]", "[[:^alpha:]]", "[é-ñ]", "\\x41", "\\-",
          "[\\d,]", "\\n", "\\b", "$\\n", "\\B", "[\\W\\d]", "[^\\D]", "k")
"""Pattern atoms both RE2 and Python's re parse (a few with different meanings: the Perl
classes and \\b are ASCII in RE2, Unicode in re; $ is end of text in RE2)."""
_RE2_ONLY = ("\\pL", "\\PL", "\\p{Lu}", "\\p{^L}", "[\\pN,]", "\\x{e9}", "\\x{212a}",
             "\\Qa.\\E", "\\12", "\\C")
"""RE2 atoms Python's re lacks: Unicode classes, \\x{...}, \\Q...\\E quoting, octal, any byte.
Not drawn: script classes (\\p{Greek}), which the reference refuses (Python has no script
table; refmnn/ops/_re2.py)."""
_REPEATS = ("", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "+?", "{,2}")


def _pattern(rng: np.random.Generator, depth: int = 0) -> str:
    """A random RE2 pattern: 1-4 terms (an atom -- now and then one only RE2 has --, an
    alternation group or a nested group), each repeated now and then; flags (?i), (?s), (?U)
    and anchors ^ $ \\A \\z at the ends."""
    terms = []
    for _ in range(int(rng.integers(1, 5))):
        roll = rng.random()
        if roll < 0.15 and depth < 2:
            term = "(" + _pattern(rng, depth + 1) + "|" + _pattern(rng, depth + 1) + ")"
        elif roll < 0.25 and depth < 2:
            term = str(rng.choice(["(", "(?:", "(?P<g>" if depth == 0 else "("])) + \
                _pattern(rng, depth + 1) + ")"
        else:
            term = str(rng.choice(_RE2_ONLY if roll > 0.97 else _ATOMS))
        terms.append(term + str(rng.choice(_REPEATS)))  # RE2 repeats assertions too
    pattern = "".join(terms)
    if depth == 0:
        pattern = str(rng.choice(["", "", "^", "\\A"])) + pattern + \
            str(rng.choice(["", "", "$", "\\z", ".*"]))
        flags = ["", "", "", "", "", "(?i)", "(?s)", "(?i)(?s)", "(?U)", "(?m)", "(?im)"]
        pattern = str(rng.choice(flags)) + pattern
    return pattern


def draw_regex_full_match(ctx: SampleContext, opset: int) -> Sample:
    """A random RegexFullMatch: a random RE2 pattern (see ``_pattern``) over X of rank 0-3
    (empty dims now and then) of short random strings (newlines, vertical tabs, U+00A0, the
    long s and the Kelvin sign -- which fold to s and k -- and an Arabic-Indic digit too), a
    few of which it matches."""
    rng = ctx.rng
    chars = _CHARS + "\n\v\xa0ſ\u212a\u0661k"
    x = _strings(rng, _shape(rng, 0, 3, empty=0.05), lambda r: _text(r, 4, chars))
    return Sample((x,), {"pattern": _pattern(rng)})


def draw_tfidf(ctx: SampleContext, opset: int) -> Sample:
    """A random TfIdfVectorizer: X [C] or [N, C] (C in 0..8) of tokens from a small vocabulary
    (integers, or strings when drawn in string); a pool of distinct 1..3-grams over the same
    vocabulary with ngram_counts at their starts (some lengths empty), ngram_indexes a
    permutation of 0..P-1 (plus an unused coordinate, or two n-grams on one coordinate, now
    and then), mode TF/IDF/TFIDF, weights (half the time), min/max_gram_length and
    max_skip_count 0-2."""
    rng = ctx.rng
    is_text = ctx.dtype == np.dtype(object)
    vocab: list[object] = ["a", "b", "Ab", "ß", "c d", ""] if is_text else [1, 2, 3, 5, 7, -4]
    n_vocab = int(rng.integers(2, len(vocab) + 1))

    def token() -> object:
        return vocab[int(rng.integers(0, n_vocab))]
    c = int(rng.integers(0 if rng.random() < 0.1 else 1, 9))
    shape = (c,) if rng.random() < 0.5 else (int(rng.integers(1, 4)), c)
    x = np.array([token() for _ in range(int(np.prod(shape)))],
                 dtype=object if is_text else ctx.dtype).reshape(shape)
    max_n = int(rng.integers(1, 4))
    pool: list[object] = []
    counts, total = [], 0  # total: the number of pool n-grams
    for n in range(1, max_n + 1):
        counts.append(len(pool))
        grams = {tuple(token() for _ in range(n))
                 for _ in range(int(rng.integers(0 if n > 1 else 1, 5)))}
        for gram in sorted(grams, key=str):
            pool.extend(gram)
        total += len(grams)
    size = total + int(rng.integers(0, 2))
    indexes = rng.permutation(size)[:total]
    if indexes.max() < size - 1 and rng.random() < 0.5:
        indexes[int(rng.integers(0, total))] = size - 1
    if total > 1 and rng.random() < 0.2:  # two pool n-grams counted at one coordinate
        indexes[int(rng.integers(0, total))] = indexes[int(rng.integers(0, total))]
    low = int(rng.integers(1, max_n + 1))
    attrs: dict[str, object] = {
        "mode": str(rng.choice(["TF", "IDF", "TFIDF"])),
        "min_gram_length": low, "max_gram_length": int(rng.integers(low, max_n + 1)),
        "max_skip_count": int(rng.integers(0, 3)), "ngram_counts": counts,
        "ngram_indexes": [int(i) for i in indexes],
        ("pool_strings" if is_text else "pool_int64s"): pool}
    if rng.random() < 0.5:
        attrs["weights"] = [float(w) for w in rng.choice([0.5, 1.0, 2.0, 0.25], total)]
    return Sample((x,), attrs)


def _onnx_reference_agrees(sample: Sample, op: str, opset: int) -> bool:
    """Whether onnx.reference's outputs on ``sample`` hold the reference's values once made
    object arrays (it returns NumPy unicode arrays, dtype <U, where tensor(string) is object)."""
    names = [f"x{i}" for i in range(len(sample.inputs))]
    outputs = [f"y{i}" for i in range(sample.outputs)]
    node = helper.make_node(op, names, outputs, **dict(sample.attrs))
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, TensorProto.STRING, list(a.shape))
                     for n, a in zip(names, sample.inputs, strict=True)],
        [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = dict(zip(names, sample.inputs, strict=True))
    try:
        theirs = ReferenceEvaluator(model).run(None, feeds)
    except Exception:
        return False
    mine = reference_outputs(op, "", opset, sample)
    return all(np.array_equal(np.asarray(t).astype(object), np.asarray(m))
               for t, m in zip(theirs, mine, strict=True))


_AS_UNICODE = ("onnx.reference 1.23.2 returns {what} as a NumPy unicode array (dtype <U), not "
               "the object array of tensor(string); the values agree")


def _multi_char_casing(strings: object, how: str) -> bool:
    """Whether any character of ``strings`` has a full Unicode ``how`` ("lower"/"upper")
    mapping of other than one character (Python's 'ß'.upper() == 'SS', 'İ'.lower() == 'i̇')."""
    return any(len(getattr(ch, how)()) != 1 for s in np.asarray(strings, dtype=object).reshape(-1)
               for ch in str(s))


def known_string_normalizer(sample: Sample, opset: int, peer: str) -> str | None:
    """StringNormalizer: full against simple case mappings (ambiguous in the spec), and
    onnx.reference's scikit-learn-like rewrite of the op."""
    x, attrs = sample.inputs[0], sample.attrs
    action = attrs.get("case_change_action", "NONE")
    stops = list(attrs.get("stopwords", []))
    insensitive = bool(stops) and not attrs.get("is_case_sensitive", 0)
    if peer == "onnxruntime":
        if (action == "UPPER" and _multi_char_casing(x, "upper")
                or action == "LOWER" and _multi_char_casing(x, "lower")
                or insensitive and _multi_char_casing([*x.reshape(-1), *stops], "lower")):
            return ("onnxruntime 1.32 cases one character at a time (std::ctype<wchar_t> in "
                    "en_US.UTF-8: simple mappings, 'ß' stays 'ß', 'İ' lowers to 'i'); the "
                    "reference uses Python's full Unicode mappings ('ß'.upper() == 'SS', "
                    "'İ'.lower() == 'i̇'), a documented choice: the spec says only 'according to "
                    "locale', default en_US, and names neither")
        return None
    if _onnx_reference_agrees(sample, "StringNormalizer", opset):
        return _AS_UNICODE.format(what="the normalized strings")
    flat = [str(s) for s in x.reshape(-1)]
    if "" in flat or any(" " in s or not s.isascii() for s in flat) \
            or insensitive and action == "NONE":
        return ("onnx.reference 1.23.2 strips accents (NFKD), drops empty elements, removes "
                "stopwords word by word inside each element (split on ' ') and matches them "
                "after the case change, case-sensitively under NONE; the spec removes whole "
                "elements equal to a stopword (case-insensitively unless is_case_sensitive) and "
                "keeps the rest as they are")
    return None


def known_string_concat(sample: Sample, opset: int, peer: str) -> str | None:
    """StringConcat: onnx.reference's unicode arrays."""
    if peer == "onnx.reference" and _onnx_reference_agrees(sample, "StringConcat", opset):
        return _AS_UNICODE.format(what="a concatenation of 0-d inputs")
    return None


_SEPARATORS = "\x1c\x1d\x1e\x1f"
"""The information separators: str.isspace() and str.split() take them as whitespace; Unicode's
White_Space property, which the reference splits on, does not."""


def known_string_split(sample: Sample, opset: int, peer: str) -> str | None:
    """StringSplit: onnxruntime's whitespace (spaces only) and empty strings; onnx.reference's
    str.split (trailing whitespace kept after maxsplit, information separators split on)."""
    flat = [str(s) for s in sample.inputs[0].reshape(-1)]
    by_whitespace = not sample.attrs.get("delimiter")
    if peer == "onnx.reference":
        if by_whitespace and "maxsplit" in sample.attrs and any(s != s.rstrip() for s in flat):
            return ("onnx.reference 1.23.2 splits with str.split(None, maxsplit), which keeps "
                    "the trailing whitespace of the unsplit rest; the spec: 'leading or trailing "
                    "whitespace is removed in the output' (onnxruntime agrees with the reference)")
        if by_whitespace and any(ch in _SEPARATORS for s in flat for ch in s):
            return ("onnx.reference 1.23.2 splits with str.split(), which takes U+001C-U+001F "
                    "(information separators) for whitespace; the reference splits on Unicode's "
                    "White_Space property, which does not hold them (nor does onnxruntime split "
                    "on them)")
        return None
    if by_whitespace and any(ch.isspace() and ch != " " and ch not in _SEPARATORS
                             for s in flat for ch in s):
        return ("onnxruntime 1.32 splits on ' ' alone when the delimiter is unset or empty; the "
                "spec: 'the input is split on consecutive whitespace' (tabs, newlines, U+00A0 "
                "and U+3000 are whitespace, Unicode's White_Space; onnx.reference agrees with "
                "the reference on them)")
    if sample.attrs.get("delimiter") and "" in flat:
        return ("onnxruntime 1.32 gives an empty string no substrings (Z = 0) under a delimiter; "
                "the reference gives one empty substring (Z = 1), as onnx.reference and "
                "str.split do: no delimiter in it, so zero splits and one substring (the spec "
                "says nothing of an empty element: ambiguous)")
    return None


def known_regex_full_match(sample: Sample, opset: int, peer: str) -> str | None:
    """RegexFullMatch: onnx.reference hands the RE2 pattern to Python's re untranslated;
    onnxruntime's RE2 matches \\C to one byte of the UTF-8 text."""
    pattern = str(sample.attrs["pattern"])
    flat = [str(s) for s in sample.inputs[0].reshape(-1)]
    if peer == "onnxruntime":
        if "\\C" in pattern and not all(s.isascii() for s in flat):
            return ("RE2's \\C matches one byte of the UTF-8 text, so it can match part of a "
                    "character ('\\C\\C' fully matches 'é'); the reference matches text, not "
                    "bytes, and reads \\C as any one character (documented in RegexFullMatch)")
        return None
    try:
        raw = re.compile(pattern)
    except re.error:
        return None
    mine = reference_outputs("RegexFullMatch", "", opset, sample)[0].reshape(-1)
    if any((raw.fullmatch(s) is not None) != bool(m) for s, m in zip(flat, mine, strict=True)):
        return ("onnx.reference 1.23.2 compiles the RE2 pattern with Python's re as it is; on "
                "this pattern re's reading differs from RE2's (re's \\d \\w \\s \\b are "
                "Unicode, RE2's ASCII; re's $ also matches before a final newline; re reads "
                "a{,2} as a repetition, RE2 as literal text; re reads [[:alpha:]] as the set "
                "'[:alph' then ']'; re's IGNORECASE folds 'ı', 'İ' by its own rules)")
    return None


def known_tfidf(sample: Sample, opset: int, peer: str) -> str | None:
    """TfIdfVectorizer: onnx.reference indexes weights by output coordinate; where pool n-grams
    share a coordinate, IDF counts it once in onnx.reference and keeps one weight in
    onnxruntime."""
    attrs = sample.attrs
    weights, indexes = attrs.get("weights"), attrs["ngram_indexes"]
    shared = attrs["mode"] == "IDF" and len(set(indexes)) < len(indexes)
    if peer == "onnx.reference" and shared:
        return ("onnx.reference 1.23.2, in IDF mode, adds the counts of the pool n-grams that "
                "share a coordinate before truncating to 1, so the coordinate counts once; the "
                "spec truncates each n-gram's count ('the count of the i-th n-gram in pool') "
                "and the scaled counts add")
    if peer == "onnxruntime" and shared:
        return ("onnxruntime 1.32, in IDF mode, gives a coordinate shared by two pool n-grams "
                "the weight of whichever it found last in the input; the spec truncates each "
                "n-gram's count to 1 and scales 'the count of the i-th n-gram in pool' by the "
                "i-th weight, and the counts of n-grams that share a coordinate add (as in TF "
                "and TFIDF, where onnxruntime adds them too)")
    if peer == "onnx.reference" and weights and attrs["mode"] != "TF" and any(
            i >= len(weights) or weights[j] != weights[i] for j, i in enumerate(indexes)):
        return ("onnx.reference 1.23.2 scales coordinate o by weights[o]; the spec: 'the i-th "
                "element in weights would be used to scale ... the count of the i-th n-gram in "
                "pool' (onnxruntime agrees with the reference)")
    return None


SWEEPS = (
    Sweep("StringNormalizer", (10,), draw_string_normalizer, dtypes=(DType.string,),
          known=known_string_normalizer),
    Sweep("StringConcat", (20,), draw_string_concat, dtypes=(DType.string,),
          known=known_string_concat),
    Sweep("StringSplit", (20,), draw_string_split, dtypes=(DType.string,),
          known=known_string_split),
    Sweep("RegexFullMatch", (20,), draw_regex_full_match, dtypes=(DType.string,),
          known=known_regex_full_match),
    Sweep("TfIdfVectorizer", (9,), draw_tfidf, dtypes=(DType.int64, DType.int32, DType.string),
          known=known_tfidf),
)
