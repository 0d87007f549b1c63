"""The text ops where refmnn read the spec wrongly, found by the differential sweep
(tools/sweep_ops.py with tools/sweeps/text.py against onnxruntime 1.32).

Each test failed on the old code: RegexFullMatch compiled the pattern with Python's ``re``
after a two-rule translation (Unicode \\d \\w \\s \\b, '$' before a final newline, a{,2} read
as a repetition, Python's IGNORECASE folding, RE2-only constructs refused, backreferences and
lookaround accepted); StringSplit without a delimiter used str.split(None, maxsplit); IDF kept
one weight per shared coordinate. The expected values of RegexFullMatch are RE2's, as
onnxruntime 1.32 (which runs RE2) returns them (measured 2026-11-29).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import refmnn

from tests.helpers import make_model

S, B, I64, F = TensorProto.STRING, TensorProto.BOOL, TensorProto.INT64, TensorProto.FLOAT


def _strings(*values: str) -> np.ndarray:
    return np.array(values, dtype=object)


def _full_match(pattern: str, strings: list[str]) -> list[bool]:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=pattern)
    model = make_model([node], [("x", S, [len(strings)])], [("y", B, [len(strings)])], opset=20)
    return refmnn.Session(model).run({"x": _strings(*strings)})["y"].tolist()


@pytest.mark.parametrize("pattern, strings, want", [
    ("\\w", ["é", "_", "\u212a"], [False, True, False]),
    ("\\d", ["\u0661", "1"], [False, True]),
    ("\\s", ["\v", "\xa0", "\t"], [False, False, True]),
    ("[\\W\\d]+", ["é1", "a"], [True, False]),
    ("é\\b", ["é"], [False]),
    ("a\\Bé", ["aé"], [False]),
    ("[[:^alpha:]]", ["1", "a", "\n"], [True, False, True]),
    ("[[:space:]\\d]", ["\v", "\u0661", "\xa0"], [True, False, False]),
])
def test_regex_perl_and_posix_classes_are_ascii_as_in_re2(pattern, strings, want):
    """The spec: "[RE2] regex syntax is used". In RE2 \\d, \\s, \\w, \\b and the POSIX
    classes are ASCII ([0-9], [\\t\\n\\f\\r ], [0-9A-Za-z_]); Python's re reads them as
    Unicode (so \\w matched 'é' and é\\b had a boundary); [[:^alpha:]] is a negated POSIX
    class, which the old rewrite made the set '^A-Za-z' plus ']'."""
    assert _full_match(pattern, strings) == want


@pytest.mark.parametrize("pattern, strings, want", [
    ("a$\\n", ["a\n"], [False]),
    ("a(?m)$\\n^b", ["a\nb", "a\n"], [True, False]),
    ("(a(?i)b)c", ["aBc", "aBC"], [True, False]),
    ("a{,2}", ["aa", "a{,2}"], [False, True]),
    ("a{02}", ["aa", "a{02}"], [False, True]),
])
def test_regex_anchors_and_braces_read_as_in_re2(pattern, strings, want):
    """RE2 syntax: "$ at end of text (like \\z not \\Z) or line (m=true)"; "x{,n} ... NOT
    SUPPORTED" (RE2 reads it, and a count with a leading zero, as literal text); flags may be
    set mid-pattern, up to the end of the group. Python's '$' also matches before a final
    newline, Python 3.11 reads {,2} as {0,2} and refuses (?m) after the start."""
    assert _full_match(pattern, strings) == want


@pytest.mark.parametrize("pattern, strings, want", [
    ("(?i)[a-z]", ["\u0131", "\u0130", "\u212a", "\u017f"], [False, False, True, True]),
    ("(?i)i", ["\u0131", "I"], [False, True]),
    ("(?i)\\x{212a}ß", ["k\u1e9e", "Kß", "kss"], [True, True, False]),
    ("(?i)\\w", ["\u212a", "é"], [True, False]),
    ("(?i)\\W", ["\u212a", "é"], [False, True]),
])
def test_regex_case_folding_is_unicode_simple_folding_as_in_re2(pattern, strings, want):
    """RE2 folds by Unicode's simple case folding (CaseFolding.txt C and S): 'ı' (U+0131) and
    'İ' (U+0130) fold to no other character, 'K' (Kelvin) and 'ſ' fold to k and s, 'ẞ' to ß;
    a folded \\w takes the Kelvin sign and \\W then leaves it out. Python's IGNORECASE
    matched 'ı' and 'İ' to [a-z]."""
    assert _full_match(pattern, strings) == want


@pytest.mark.parametrize("pattern, strings, want", [
    ("\\pL+", ["aΩ", "a1"], [True, False]),
    ("\\PL", ["1", "a"], [True, False]),
    ("[\\pN,]+", ["\u0663,1", "a"], [True, False]),
    ("\\p{Lu}\\p{^Lu}", ["Ab", "AB"], [True, False]),
    ("\\Qa.\\E", ["a.", "ab"], [True, False]),
    ("\\x{e9}\\x41", ["éA"], [True]),
    ("\\12", ["\n", "\x01" + "2"], [True, False]),
    ("\\C", ["a", "\n"], [True, True]),
    ("(?U)a+?b", ["aab"], [True]),
    ("(?<n>a)b", ["ab"], [True]),
])
def test_regex_reads_re2_only_constructs(pattern, strings, want):
    """Valid RE2 that Python's re lacks: Unicode classes \\pL \\PL \\p{Lu} \\p{^Lu} (also in
    brackets), \\Q...\\E quoting, \\x{...}, octal \\12 ("RE2 has no backreferences"), \\C (any
    byte; here any character), the ungreedy flag (?U) and (?<name>re). The old code refused
    them all."""
    assert _full_match(pattern, strings) == want


@pytest.mark.parametrize("pattern, construct", [
    ("(a)\\1", "backreference \\1"),
    ("(?P<n>a)(?P=n)", "backreference (?P=name)"),
    ("(a)\\g<1>", "backreference \\g"),
    ("(?=a)a", "lookahead"),
    ("(?<=a)b", "lookbehind"),
    ("(?>a)", "atomic group"),
    ("a++", "stacked repetition"),
    ("a\\Z", "\\Z"),
    ("(?x)a", "flag group"),
    ("a{1001}", "repetition size"),
])
def test_regex_refuses_what_re2_rejects(pattern, construct):
    """The pattern "must be valid RE2 syntax": RE2 rejects backreferences, lookaround, atomic
    groups, possessive a++ (Python 3.11 takes it), \\Z, (?x) and counts over 1000, so the
    reference does too, with an OpError that names the op and the construct (the old code ran
    most of them with Python's meaning)."""
    with pytest.raises(refmnn.OpError, match="RegexFullMatch") as info:
        _full_match(pattern, ["a"])
    assert construct in str(info.value)


def test_regex_refuses_script_classes_as_unsupported():
    """RE2 takes \\p{Greek}; Python's unicodedata has no script property, so the reference
    refuses it with an error that says so rather than guess."""
    with pytest.raises(refmnn.OpError, match="RegexFullMatch.*script classes"):
        _full_match("\\p{Greek}", ["α"])


def _split(x: np.ndarray, **attrs: object) -> tuple[list, list]:
    node = helper.make_node("StringSplit", ["x"], ["y", "z"], **attrs)
    model = make_model([node], [("x", S, [len(x)])],
                       [("y", S, [len(x), None]), ("z", I64, [len(x)])], opset=20)
    out = refmnn.Session(model).run({"x": x})
    return out["y"].tolist(), out["z"].tolist()


def test_string_split_on_whitespace_strips_the_unsplit_rest():
    """The spec: without a delimiter "consecutive whitespace characters are regarded as a
    single separator and leading or trailing whitespace is removed in the output"; maxsplit
    keeps "the trailing suffix of input string after the final split point". The old
    str.split(None, maxsplit) kept the rest's trailing whitespace ('b c ')."""
    x = _strings(" a  b c ", "x ", "   ")
    assert _split(x, maxsplit=1) == ([["a", "b c"], ["x", ""], ["", ""]], [2, 1, 0])
    assert _split(x, maxsplit=0, delimiter="") == ([["a  b c"], ["x"], [""]], [1, 1, 0])


def test_string_split_whitespace_is_unicode_white_space():
    """The spec splits "on consecutive whitespace": Unicode's White_Space (tab, newline,
    U+00A0, U+3000, ...), not the information separators U+001C-U+001F, which the old
    str.split() also split on."""
    x = _strings("a\x1fb c", "a\u3000b\xa0c\td")
    assert _split(x) == ([["a\x1fb", "c", "", ""], ["a", "b", "c", "d"]], [2, 4])


def test_tfidf_idf_adds_the_weights_of_ngrams_sharing_a_coordinate():
    """The spec, IDF: "all the counts larger than 1 would be truncated to 1 and the i-th
    element in weights would be used to scale (by multiplication) the count of the i-th
    n-gram in pool"; "Y[ngram_indexes[i]] indicates the times that the i-th n-gram is found",
    so n-grams 2 and -4, both at coordinate 1, add: 0.25 * 1 + 2 * 1. The old code kept the
    weight of the last in pool order (0.25); onnxruntime 1.32 that of the last found in the
    input (2); onnx.reference counts the coordinate once (weights[1])."""
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="IDF", min_gram_length=1,
                            max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                            ngram_indexes=[1, 1, 0], pool_int64s=[-4, 2, 3],
                            weights=[2.0, 0.25, 1.0])
    model = make_model([node], [("x", I64, [3])], [("y", F, [2])], opset=9)
    y = refmnn.Session(model).run({"x": np.array([2, 2, -4], dtype=np.int64)})["y"]
    np.testing.assert_array_equal(y, np.array([0.0, 2.25], dtype=np.float32))
