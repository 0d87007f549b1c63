"""String ops: StringConcat, StringNormalizer, StringSplit, RegexFullMatch, TfIdfVectorizer.

String tensors are NumPy ``object`` arrays holding Python ``str`` (bytes are decoded as
UTF-8 on input). Per-string work (splitting, casing, matching) runs through
``np.frompyfunc``: there is no vectorised string kernel to call.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from refmnn.dtypes import DType
from refmnn.graph import TensorType, ValueType
from refmnn.ops._infer import broadcast, shape_of
from refmnn.ops._re2 import re2_to_python
from refmnn.ops._schema import Attr, InferContext, flag, op


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _strings(x: np.ndarray) -> np.ndarray:
    """x as an object array of str (same shape)."""
    x = np.asarray(x)
    if x.dtype.kind not in "OUS":
        raise TypeError(f"expected a string tensor, got {x.dtype}")
    return np.asarray(np.frompyfunc(_text, 1, 1)(x), dtype=object).reshape(x.shape)


def _objects(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """An object array of the given shape (frompyfunc returns a bare object for 0-d input)."""
    out = np.empty(shape, dtype=object)
    out[...] = values
    return out


@op("StringConcat", since=20, inputs=("X", "Y"), outputs=("Z",),
    infer=broadcast(DType.string))
def string_concat(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Z = X + Y (string concatenation), elementwise with NumPy broadcasting; UTF-8 safe."""
    x, y = _strings(X), _strings(Y)
    shape = np.broadcast_shapes(x.shape, y.shape)
    return _objects(np.frompyfunc(lambda a, b: a + b, 2, 1)(x, y), shape)


# -------------------------------------------------------------------------- StringNormalizer

def _infer_normalizer(ctx: InferContext, x: ValueType | None, *, case_change_action: str,
                      is_case_sensitive: int, locale: str | None,
                      stopwords: tuple[str, ...] | None) -> TensorType:
    shape = shape_of(x)
    if shape is None:
        return TensorType(DType.string, None)
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] not in (1, None)):
        ctx.fail(f"StringNormalizer takes a [C] or [1, C] tensor, got {list(shape)}")
    if stopwords:
        shape = (*shape[:-1], None)  # the kept count depends on the data
    return TensorType(DType.string, shape)


@op("StringNormalizer", since=10, inputs=("X",), outputs=("Y",), infer=_infer_normalizer,
    attrs=(Attr("case_change_action", "string", "NONE", "LOWER, UPPER or NONE"),
           flag("is_case_sensitive", 0, "compare stopwords case-sensitively"),
           Attr("locale", "string", None, "casing locale (accepted; Python's Unicode casing used)"),
           Attr("stopwords", "strings", None, "elements to remove")))
def string_normalizer(X: np.ndarray, *, case_change_action: str, is_case_sensitive: int,
                      locale: str | None, stopwords: tuple[str, ...] | None) -> np.ndarray:
    """Remove stopword elements from X, then lower/upper-case the rest.

    X: [C] or [1, C] strings. An element is removed when it equals a stopword (compared after
    str.lower() on both sides unless is_case_sensitive). Casing uses Python's locale-independent
    Unicode str.lower()/str.upper(): ``locale`` is accepted but not applied (the spec's default
    en_US casing agrees for ordinary text; Turkish dotted/dotless i, for one, would differ).
    Output: the kept elements in order, shape [K] or [1, K]; when nothing is kept, [""] with shape
    [1] or [1, 1].
    """
    if case_change_action not in ("LOWER", "UPPER", "NONE"):
        raise ValueError(f"case_change_action must be LOWER, UPPER or NONE: {case_change_action!r}")
    x = _strings(X)
    if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[0] != 1):
        raise ValueError(f"StringNormalizer takes a [C] or [1, C] tensor, got {list(x.shape)}")
    row = x.reshape(-1)
    if stopwords:
        fold = (lambda s: s) if is_case_sensitive else str.lower
        stops = {fold(s) for s in stopwords}
        row = row[np.frompyfunc(lambda s: fold(s) not in stops, 1, 1)(row).astype(bool)]
    if case_change_action == "LOWER":
        row = np.frompyfunc(str.lower, 1, 1)(row)
    elif case_change_action == "UPPER":
        row = np.frompyfunc(str.upper, 1, 1)(row)
    if row.size == 0:
        row = np.array([""], dtype=object)
    return _objects(row, row.shape).reshape((1, -1) if x.ndim == 2 else (-1,))


# ------------------------------------------------------------------------------ StringSplit

_WHITESPACE = ("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
"""Unicode's White_Space property (PropList.txt): what StringSplit separates on without a
delimiter. Python's str.split() also splits on U+001C-U+001F, the information separators,
which str.isspace() counts (bidi class B/S) but Unicode does not call whitespace."""
_WHITESPACE_RUN = re.compile(f"[{_WHITESPACE}]+")


def _split_on_whitespace(s: str, maxsplit: int) -> list[str]:
    """s without leading and trailing whitespace, split at runs of whitespace, at most
    ``maxsplit`` times (all when negative); an empty or blank s gives no substrings."""
    s = s.strip(_WHITESPACE)
    if not s:
        return []
    return [s] if maxsplit == 0 else _WHITESPACE_RUN.split(s, max(maxsplit, 0))


def _infer_split(ctx: InferContext, x: ValueType | None, *, delimiter: str | None,
                 maxsplit: int | None) -> tuple[TensorType, TensorType]:
    shape = shape_of(x)
    return (TensorType(DType.string, None if shape is None else (*shape, None)),
            TensorType(DType.int64, shape))


@op("StringSplit", since=20, inputs=("X",), outputs=("Y", "Z"), infer=_infer_split,
    attrs=(Attr("delimiter", "string", None, "separator; whitespace runs when absent or empty"),
           Attr("maxsplit", "int", None, "at most this many splits per element (from the left)")))
def string_split(X: np.ndarray, *, delimiter: str | None,
                 maxsplit: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Split every string of X; Y holds the substrings, Z their counts.

    With a delimiter, consecutive delimiters delimit empty strings ("a..b" -> a, "", b) and an
    empty string gives one empty substring. Without one (absent or ""), the spec: "consecutive
    whitespace characters are regarded as a single separator and leading or trailing
    whitespace is removed in the output": the string is stripped, then split at runs of
    whitespace, so an empty or blank string gives no substrings and the unsplit rest keeps no
    trailing whitespace (" a  b c " with maxsplit 1 -> "a", "b c", where Python's
    str.split(None, 1) keeps "b c "). Whitespace is Unicode's White_Space property (tabs,
    newlines, U+00A0, U+3000, ...; not U+001C-U+001F, which str.split() also takes).
    maxsplit limits the splits (from the left; unset or negative: no limit); the unsplit rest
    is the last substring. Y: X.shape + [max count], padded with ""; Z: int64, X.shape.
    """
    x = _strings(X)
    limit = -1 if maxsplit is None else maxsplit
    if delimiter:
        parts = [s.split(delimiter, limit) for s in x.reshape(-1)]
    else:
        parts = [_split_on_whitespace(s, limit) for s in x.reshape(-1)]
    counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
    width = int(counts.max()) if counts.size else 0
    y = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        y[i, :len(p)] = p
    return y.reshape(*x.shape, width), counts


# ---------------------------------------------------------------------------- RegexFullMatch

@op("RegexFullMatch", since=20, inputs=("X",), outputs=("Y",),
    infer=lambda ctx, x, *, pattern: TensorType(DType.bool, shape_of(x)),
    attrs=(Attr("pattern", "string", None, "RE2 pattern the whole string must match"),))
def regex_full_match(X: np.ndarray, *, pattern: str | None) -> np.ndarray:
    """Y = True where the whole string matches ``pattern``, elementwise; Y bool, X's shape.

    The spec: "[RE2] regex syntax is used" and the pattern "must be valid RE2 syntax". The
    pattern is rewritten token by token into a Python ``re`` pattern with RE2's meaning
    (:func:`refmnn.ops._re2.re2_to_python`, which lists every construct) and run with
    ``re.fullmatch``. RE2's readings, where Python's differ: \\d \\s \\w \\b and the POSIX
    classes are ASCII-only (\\s is [\\t\\n\\f\\r ], no \\v); '$' is the end of the text
    (not before a final newline) and '^' its start, unless (?m); a{,2} and a{01} are literal
    text; \\12 is octal; (?i) folds by Unicode simple case folding (CaseFolding.txt C+S, so
    'ı' and 'İ' match only themselves, 'ſ' matches 's', the Kelvin sign 'k'); \\pL, \\p{Lu},
    \\PN, \\p{^L}, \\p{Any}, \\Q...\\E, \\x{e9}, (?U), (?<name>...) are read.

    A pattern RE2 rejects is refused (ValueError naming the construct): backreferences,
    lookaround, atomic groups, possessive or stacked repetition, \\Z, (?#...), (?x), counts
    over 1000. Refused though RE2 takes them: script classes such as \\p{Greek} (Python has
    no script table). Left different: \\C is any byte in RE2 and any character here (the same
    on ASCII text: '\\C\\C' fully matches 'é', two UTF-8 bytes, in RE2 only); the Unicode
    tables are Python's (14.0 in 3.11), RE2's may be newer (letters added since are Cn here).
    RE2 runs in linear time; Python's re may backtrack.
    """
    if pattern is None:
        raise ValueError("RegexFullMatch needs the 'pattern' attribute")
    try:
        regex = re.compile(re2_to_python(pattern))
    except re.error as exc:  # what the tokenizer leaves to Python, e.g. an unbalanced group
        raise ValueError(f"{pattern!r} is not RE2 syntax: {exc}") from exc
    x = _strings(X)
    matched = np.frompyfunc(lambda s: regex.fullmatch(s) is not None, 1, 1)(x)
    return np.asarray(matched, dtype=bool).reshape(x.shape)


# --------------------------------------------------------------------------- TfIdfVectorizer

def _infer_tfidf(ctx: InferContext, x: ValueType | None, *, ngram_indexes: tuple[int, ...],
                 **attrs: Any) -> TensorType:
    shape = shape_of(x)
    size = max(ngram_indexes) + 1 if ngram_indexes else 0
    if shape is None:
        return TensorType(DType.float32, None)
    if len(shape) == 2:
        return TensorType(DType.float32, (shape[0], size))
    return TensorType(DType.float32, (size,))


def _pool_by_size(pool: np.ndarray,
                  ngram_counts: tuple[int, ...]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """n -> (pool n-grams [P_n, n], their positions j among all pool n-grams [P_n])."""
    result = {}
    first = 0
    for n, start in enumerate(ngram_counts, start=1):
        end = ngram_counts[n] if n < len(ngram_counts) else len(pool)
        if (end - start) % n:
            raise ValueError(f"pool entries {start}..{end} do not form whole {n}-grams")
        grams = pool[start:end].reshape(-1, n)
        result[n] = (grams, np.arange(first, first + len(grams)))
        first += len(grams)
    return result


def _count_ngrams(rows: np.ndarray, grams: np.ndarray, positions: np.ndarray, distance: int,
                  counts: np.ndarray) -> None:
    """Add to counts[r, j] how often pool n-gram j (rows of ``grams``, ids) occurs in row r
    with ``distance`` between its items. rows: [N, C] token ids; counts: [N, P]."""
    n = grams.shape[1]
    span = (n - 1) * distance
    if span >= rows.shape[1]:
        return
    starts = np.arange(rows.shape[1] - span)
    found = rows[:, starts[:, None] + distance * np.arange(n)].reshape(-1, n)  # [N*S, n]
    _, group = np.unique(np.concatenate([grams, found]), axis=0, return_inverse=True)
    gram_of_group = np.full(group.max() + 1, -1)
    gram_of_group[group[:len(grams)]] = positions
    hit = gram_of_group[group[len(grams):]].reshape(rows.shape[0], -1)  # [N, S], -1 = no n-gram
    row_index = np.broadcast_to(np.arange(rows.shape[0])[:, None], hit.shape)
    np.add.at(counts, (row_index[hit >= 0], hit[hit >= 0]), 1)


@op("TfIdfVectorizer", since=9, inputs=("X",), outputs=("Y",), infer=_infer_tfidf,
    attrs=(Attr("max_gram_length", "int", doc="largest n-gram length counted"),
           Attr("max_skip_count", "int", doc="most items skipped between n-gram items"),
           Attr("min_gram_length", "int", doc="smallest n-gram length counted"),
           Attr("mode", "string", doc="TF, IDF or TFIDF"),
           Attr("ngram_counts", "ints", doc="start of the 1-grams, 2-grams, ... in the pool"),
           Attr("ngram_indexes", "ints", doc="output coordinate of each pool n-gram"),
           Attr("pool_int64s", "ints", None, "integer n-gram pool"),
           Attr("pool_strings", "strings", None, "string n-gram pool"),
           Attr("weights", "floats", None, "weight of each pool n-gram (IDF/TFIDF)")))
def tfidf_vectorizer(X: np.ndarray, *, max_gram_length: int, max_skip_count: int,
                     min_gram_length: int, mode: str, ngram_counts: tuple[int, ...],
                     ngram_indexes: tuple[int, ...], pool_int64s: tuple[int, ...] | None,
                     pool_strings: tuple[str, ...] | None,
                     weights: tuple[float, ...] | None) -> np.ndarray:
    """Count pool n-grams in each row of X and weight the counts.

    X: [C] or [N, C] of int32/int64 (with pool_int64s) or strings (with pool_strings).
    For every n in [min_gram_length, max_gram_length] and skip k in [0, max_skip_count], the
    n-gram starting at position i is (x[i], x[i+d], ..., x[i+(n-1)d]) with d = k+1; 1-grams are
    counted once, not once per skip. With c_j the number of times pool n-gram j is found and
    o_j = ngram_indexes[j]:

    * TF:    Y[o] = sum of c_j over the j with o_j = o;
    * TFIDF: Y[o] = sum of weights[j] * c_j (c_j without weights);
    * IDF:   Y[o] = sum of weights[j] * min(c_j, 1) (weights 1 when absent).

    In IDF mode the spec truncates "all the counts larger than 1 ... to 1 and the i-th element
    in weights would be used to scale (by multiplication) the count of the i-th n-gram in
    pool"; where two pool n-grams share a coordinate (ngram_indexes with a duplicate) their
    scaled counts add, as TF and TFIDF add theirs ("Y[ngram_indexes[i]] indicates the times
    that the i-th n-gram is found"). ONNX Runtime 1.32 keeps instead the weight of whichever
    of them it found last in the input.

    weights is indexed by pool n-gram as the spec says (ONNX Runtime 1.31 agrees; onnx.reference
    indexes it by output coordinate; the two agree when ngram_indexes is the identity).
    Y: float32, [max(ngram_indexes)+1] or [N, that]; an empty X gives zeros.
    """
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ValueError(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    if (pool_int64s is None) == (pool_strings is None):
        raise ValueError("exactly one of pool_int64s and pool_strings must be given")
    if pool_int64s is not None:
        pool = np.array(pool_int64s, dtype=np.int64)
    else:
        pool = np.array(pool_strings, dtype=object)
    rows = np.asarray(X)
    rows = rows.reshape(1, -1) if rows.ndim <= 1 else rows  # [N, C]
    rows = _strings(rows) if pool_strings is not None else rows.astype(np.int64)
    # Tokens as small integer ids (shared by pool and input), so n-grams compare as int rows.
    _, ids = np.unique(np.concatenate([pool, rows.reshape(-1)]), return_inverse=True)
    pool_ids, row_ids = ids[:len(pool)], ids[len(pool):].reshape(rows.shape)
    counts = np.zeros((rows.shape[0], len(ngram_indexes)), dtype=np.int64)  # [N, P]
    for n, (grams, positions) in _pool_by_size(pool_ids, ngram_counts).items():
        if min_gram_length <= n <= max_gram_length and len(grams):
            for distance in range(1, (max_skip_count + 1 if n > 1 else 1) + 1):
                _count_ngrams(row_ids, grams, positions, distance, counts)
    w = np.asarray(weights, dtype=np.float64) if weights else np.ones(len(ngram_indexes))
    out = np.asarray(ngram_indexes, dtype=np.int64)
    y = np.zeros((rows.shape[0], out.max() + 1), dtype=np.float64)
    scaled = {"TF": counts, "IDF": np.minimum(counts, 1) * w, "TFIDF": counts * w}[mode]
    np.add.at(y, (slice(None), out), scaled)
    y = y.astype(np.float32)
    return y if np.asarray(X).ndim == 2 else y.reshape(-1)


OPS = (string_concat, string_normalizer, string_split, regex_full_match, tfidf_vectorizer)
