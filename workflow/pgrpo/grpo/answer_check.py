"""Answer checking by answer kind: is a completion's final answer the gold answer?

Implements the binary verifiable reward's comparison (Section 4.2) and the benchmark scoring (Section 4.3) for the
answer kinds of :data:`KINDS`:

- ``number``: a single real number, e.g. GSM8K's ``#### 1,234`` or GSM-Plus' ``72``. Thousands separators
  (``1,234``, ``1 234`` as the whole answer, LaTeX ``1{,}234`` / ``1,\\!234`` / ``1\\,234``), signs, decimals,
  fractions ``3/4``, a currency sign before and a ``%`` or unit after are understood. A separator belongs to a
  number only: a comma groups thousands when it is followed by exactly three digits (``1,234`` = 1234), otherwise
  it is a decimal comma (``2,74`` = 2.74; accepted in a completion's ``####`` answer and, for an explicit
  ``kind="number"``, in the gold; under ``auto`` a gold ``1,5`` is a list, read by math-verify).
- ``integer``: the same for AIME-style answers, whose gold must be an integer (``042`` = 42).
- ``choice``: a multiple-choice letter A-E (``B``, ``(B)``, ``\\text{(B)}``, "the answer is (B)").
- ``math``: anything else (intervals, sets, tuples, ``\\dfrac``, radicals, ``\\text{}`` units, matrices,
  equations), compared by math-verify's ``parse``/``verify`` with LaTeX and plain-expression extraction.
- ``latex``: as ``math``, but the completion's answer must be written in LaTeX (math-verify's LaTeX extraction
  only: ``\\boxed{}``, ``$...$``, ``\\(...\\)``, ``\\[...\\]``).
- ``auto`` (default): ``number`` when the gold answer is a plain number, ``choice`` when it is a letter A-E,
  else ``math``.

The completion's final answer is, in order: the answer after its first ``####`` that starts like an answer (a
Markdown heading such as ``#### Step 1`` is not one; text after the answer line is ignored, as lm-eval's GSM8K
strict match), read by the number rules above, or by math-verify when it is LaTeX; otherwise math-verify's own
extraction over the whole text, which prefers ``\\boxed{}``, then "final answer is", "answer: ...", then the last
LaTeX expression or number; a number never starts inside a word (``H2O``, ``AZYUK2A``). A gold answer field is read
by :func:`gold_answer`: the text after ``####``, else the final ``\\boxed{}`` (adjacent boxes such as
``\\boxed{1}, \\boxed{2}`` form one list answer), else the field itself; commas are kept except in numbers, and
``None``/``N/A`` is no gold. ``verify``'s float rounding (6 decimals) also applies to decimals in the ``####`` path.

math-verify limits each parse and comparison with ``signal.alarm`` (``parsing_timeout``/``timeout_seconds``),
which works only in the main thread (elsewhere math-verify raises); in any other thread (a DataLoader or reward
worker) the timeouts are switched off. A signal cannot interrupt SymPy inside one huge C-level integer operation
either, so inputs that would build astronomically large numbers (``10^{10^{10}}``, ``99999!``) are refused in
every thread. The alarm, where used, replaces any SIGALRM timer of the caller for its duration. Nothing here
raises (except ValueError for an unknown kind): any failure is a wrong answer. Pure functions, no file I/O.
"""

from __future__ import annotations

import math
import re
import signal
import threading
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

__all__ = ["KINDS", "accuracy_reward", "completion_text", "extract_final_answer", "gold_answer",
           "is_correct", "last_boxed", "resolve_kind"]

#: The answer kinds :func:`is_correct` and :func:`gold_answer` accept.
KINDS: tuple[str, ...] = ("auto", "number", "integer", "choice", "math", "latex")
#: Seconds math-verify may spend on one parse or comparison (main thread only).
TIMEOUT_SECONDS = 5
#: A completion longer than this is checked on its last MAX_CHARS characters (from a line start).
MAX_CHARS = 20000
#: MetaMathQA's responses end with "The answer is: X".
_METAMATH = re.compile(r"The answer is\s*:", re.IGNORECASE)
NULL_GOLDS = frozenset({"none", "null", "nan", "n/a", "na", "undefined", "no answer", "?", "-", ""})

# --------------------------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------------------------

_LATEX_SEPARATORS = (("{,}", ","), (",\\!", ","), ("\\!", ""), ("\\,", "\u2009"), ("\\;", " "), ("\\ ", " "),
                     ("\u2212", "-"), ("\\$", "$"))
_SPACES = " \u00a0\u2009\u202f"
_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def completion_text(completion: Any) -> str:
    """The generated text: a string, a message dict's ``content``, or the last assistant message of a chat list
    (TRL passes ``[{"role": "assistant", "content": ...}]``); content given as parts joins their ``text``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content", "")
        if isinstance(content, list):
            content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        return content if isinstance(content, str) else ""
    if isinstance(completion, (list, tuple)) and completion:
        if isinstance(completion[-1], str):
            return completion[-1]
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role") == "assistant"]
        if assistant or messages:
            return completion_text((assistant or messages)[-1])
    return ""


def _strip_delims(s: str) -> str:
    """Strip whitespace, one enclosing ``$..$``/``$$..$$``/``\\(..\\)``/``\\[..\\]`` and a trailing period."""
    s = s.strip()
    for left, right in _DELIMS:
        inner = s[len(left):len(s) - len(right)]
        if (len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right)
                and "$" not in inner and "\\(" not in inner and "\\[" not in inner):
            s = inner.strip()
            break
    s = s.rstrip()
    while s.endswith(".") and not s.endswith(".."):
        s = s[:-1].rstrip()
    return s


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{..}``/``\\fbox{..}`` with balanced braces: (start, end, content)."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth = 0
        for j in range(m.end() - 1, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    out.append((m.start(), j + 1, text[m.end():j].strip()))
                    break
    return [b for i, b in enumerate(out) if not any(o[0] < b[0] < o[1] for o in out[:i])]  # drop nested


_BOX_GAP = re.compile(r"(?:\s|\$|\\[()\[\]]|[.,;]|\\quad|\\qquad|\\text\{\s*(?:and|or|,)?\s*\}|\band\b|\bor\b)*")


def last_boxed(text: str) -> str | None:
    """The final boxed answer: the content of the last ``\\boxed{}``, or of the adjacent boxes that end the last
    run (``\\boxed{-2} and \\boxed{1}`` -> ``"-2, 1"``); None when there is no non-empty box."""
    if not isinstance(text, str) or "box" not in text:
        return None
    boxes = [b for b in _boxes(text) if b[2]]
    if not boxes:
        return None
    run = [boxes[-1]]
    for prev in reversed(boxes[:-1]):
        if not _BOX_GAP.fullmatch(text[prev[1]:run[0][0]]):
            break
        run.insert(0, prev)
    contents = list(dict.fromkeys(b[2] for b in run))
    return ", ".join(contents)


# --------------------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------------------

_NUM_BODY = r"(?:\d[\d,\u00a0\u2009\u202f ]*\d|\d)(?:\.\d+)?|\.\d+"
_NUM_TOKEN = re.compile(rf"(?P<sign>[-+]\s?)?(?:\$|[€£¥₹]|\\euro)?\s?(?P<num>{_NUM_BODY})")
_DENOM = re.compile(rf"\s*/\s*(?:\$|[€£¥₹])?(?P<num>{_NUM_BODY})")
_COMMA_GROUPS = re.compile(r"[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?")
_SPACE_GROUPS = re.compile(r"[1-9]\d{0,2}(?:[ \u00a0\u2009\u202f]\d{3})+(?:[.,]\d+)?")
_PLAIN = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_DEC_COMMA = re.compile(r"\d+,\d+")


def _normalize_separators(s: str) -> str:
    for old, new in _LATEX_SEPARATORS:
        s = s.replace(old, new)
    return s


def _read_body(body: str, decimal_comma: bool) -> tuple[Fraction, bool, str] | None:
    """The value of an unsigned number body, whether it has a decimal point (or comma), and its plain text."""
    if _PLAIN.fullmatch(body):
        clean = body
    elif _COMMA_GROUPS.fullmatch(body):
        clean = body.replace(",", "")
    elif _SPACE_GROUPS.fullmatch(body) and (decimal_comma or "," not in body):
        clean = re.sub(f"[{_SPACES}]", "", body).replace(",", ".")
    elif decimal_comma and _DEC_COMMA.fullmatch(body):
        clean = body.replace(",", ".")
    else:
        return None
    return Fraction(clean), "." in clean, clean


def _number_at(s: str, m: re.Match, decimal_comma: bool) -> tuple[Fraction, bool, int, str] | None:
    """Read the number token ``m`` (trimming separators off its end until it reads), with a ``/ d`` after it:
    (value, written as a decimal, end in ``s``, plain text such as ``-1234.50`` or ``3/4``)."""
    body = m.group("num")
    while True:
        value = _read_body(body.rstrip(", " + _SPACES), decimal_comma)
        if value is not None:
            break
        cut = max(body.rfind(c) for c in ", \u00a0\u2009\u202f")
        if cut <= 0:
            return None
        body = body[:cut]
    number, decimal, plain = value
    end = m.start("num") + len(body.rstrip(", " + _SPACES))
    d = _DENOM.match(s, end)
    if d and len(body) == len(m.group("num")):
        den = _read_body(d.group("num"), False)
        if den is not None and den[0] != 0:
            number, decimal, end, plain = number / den[0], decimal or den[1], d.end(), f"{plain}/{den[2]}"
    if m.group("sign") and m.group("sign")[0] == "-":
        number, plain = -number, f"-{plain}"
    return number, decimal, end, plain


def _first_number(s: str, decimal_comma: bool = True) -> tuple[Fraction, bool, int, str] | None:
    """The first number of ``s`` that does not start inside a word (``H2O``, ``x2``, ``COVID-19``)."""
    for m in _NUM_TOKEN.finditer(s):
        start = m.start()
        before = s[start - 1] if start else ""
        inside_word = bool(before) and (before.isalnum() or before in "_.")
        hyphenated = (not m.group("sign") and start > 1 and before in "-+" and s[start - 2].isalnum())
        if inside_word or hyphenated:
            continue
        got = _number_at(s, m, decimal_comma)
        if got is not None:
            return got
    return None


def _full_number(s: str, decimal_comma: bool, allow_percent: bool = False) -> tuple[Fraction, bool, str] | None:
    """The value of ``s`` when the whole of it is one number (sign, currency, separators, fraction)."""
    s = _normalize_separators(s).strip()
    if allow_percent:
        s = re.sub(r"\s*(?:\\?%|\\percent)$", "", s)
    m = _NUM_TOKEN.match(s)
    if not m:
        return None
    got = _number_at(s, m, decimal_comma)
    if got is None or s[got[2]:].strip():
        return None
    return got[0], got[1], got[3]


def _canonical(x: Fraction) -> str:
    """``1234``, ``-2.5``, ``3/7``: an integer, a terminating decimal, or a fraction."""
    if x.denominator == 1:
        return str(x.numerator)
    d = x.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return f"{x.numerator}/{x.denominator}"
    digits = 0
    while (x * 10**digits).denominator != 1:
        digits += 1
    scaled = abs(x.numerator) * 10**digits // x.denominator
    whole, frac = divmod(scaled, 10**digits)
    return f"{'-' if x < 0 else ''}{whole}.{frac:0{digits}d}"


def _numbers_equal(a: Fraction, b: Fraction, decimal: bool, float_rounding: int) -> bool:
    """Exact equality; when either side was written as a decimal, equality after rounding to ``float_rounding``
    decimals (as math-verify compares a float with a number)."""
    if a == b:
        return True
    return decimal and round(a, float_rounding) == round(b, float_rounding)


# --------------------------------------------------------------------------------------------------------------
# The completion's answer after ####, multiple-choice letters
# --------------------------------------------------------------------------------------------------------------

_MARKER = re.compile(r"####[ \t]*\n?[ \t]*([^\n]*)")
#: "#### Step 1", "#### None", "#### 1. Setting up": a Markdown heading, not an answer.
_HEADING = re.compile(r"[A-Za-z]{2}|\d{1,2}[.)]\s+[A-Z][a-z]")
_LATEXISH = re.compile(r"\\[A-Za-z]|\^|\{|_")


def _marker_answer(text: str) -> str | None:
    """The answer line after the first ``####`` that is followed by an answer (not by a word)."""
    for m in _MARKER.finditer(text):
        span = m.group(1).strip()
        if span and not _HEADING.match(span.lstrip("*_ ")):
            return span
    return None


def _span_number(span: str) -> tuple[Fraction, bool, str] | None:
    """The number a ``####`` answer line states: after its last ``=``, the first number (not LaTeX)."""
    s = _normalize_separators(span)
    if "=" in s:
        s = s.rsplit("=", 1)[1]
    if _LATEXISH.search(s.replace("\\%", "%")):
        return None
    got = _first_number(s)
    return (got[0], got[1], got[3]) if got else None


_LETTER = re.compile(r"\(?([A-E])\)?(?:[.):]|\s|$)")
_UNWRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textrm|mathbb)\s*\{([^{}]*)\}")
_CHOICE_ANCHOR = re.compile(r"(?i:\b(?:final answer|answer|option|choice)\b)([^\n]{0,48})")
_ANCHORED_LETTER = re.compile(r"(?<![A-Za-z\\])\(?([A-E])\)?(?![A-Za-z0-9])")


def _choice_letter(s: str | None, whole: bool = False) -> str | None:
    """The letter A-E that ``s`` states (``B``, ``(B) 12``, ``\\text{(B)}``); with ``whole`` nothing else."""
    if not s:
        return None
    s = _strip_delims(_UNWRAP.sub(r"\1", _strip_delims(s))).strip(" *{}$")
    m = (re.fullmatch(r"\(?([A-E])\)?", s) if whole else _LETTER.match(s))
    return m.group(1) if m else None


def _choice_of(text: str) -> str | None:
    span = _marker_answer(text)
    if span is not None:
        return _choice_letter(span)
    letter = _choice_letter(last_boxed(text))
    if letter:
        return letter
    for anchor in reversed(list(_CHOICE_ANCHOR.finditer(text))):
        m = _ANCHORED_LETTER.search(_UNWRAP.sub(r"\1", anchor.group(1)))
        if m:
            return m.group(1)
    return _choice_letter(text, whole=True)


# --------------------------------------------------------------------------------------------------------------
# math-verify
# --------------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _targets() -> tuple[tuple, tuple]:
    """(LaTeX + expression targets, LaTeX only). One fixed config each: math-verify caches its regexes per config
    with a cache of size one, so alternating configs would recompile them on every call."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    latex = LatexExtractionConfig(boxed_match_priority=0)  # a completion's \boxed{} is its answer
    return (latex, ExprExtractionConfig()), (latex,)


def _timeout() -> int | None:
    """math-verify's signal-based timeout where signals work (the main thread), else None (no timeout)."""
    if hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread():
        return TIMEOUT_SECONDS
    return None


_COSTLY = re.compile(r"\^\s*\{?\s*\(?\s*\d{6,}|\^\s*\{\s*\d+\s*\^|\^\s*\d+\s*\^\s*\{?\d{2,}|\d{4,}\s*!|\*\*\s*\d{6,}"
                     r"|\d{400,}")


def _costly(text: str) -> bool:
    """Whether SymPy could spend unbounded time on ``text`` (huge exponents, towers, factorials, digit runs)."""
    return bool(_COSTLY.search(text))


def _mv_parse(text: str, latex_only: bool) -> list:
    from math_verify import parse

    timeout = _timeout()
    if _costly(text):
        return []
    targets = _targets()[1 if latex_only else 0]
    try:
        return parse(text, list(targets), parsing_timeout=timeout)
    except BaseException as e:  # math-verify's TimeoutException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return []


@lru_cache(maxsize=4096)
def _mv_gold(gold: str, latex_only: bool, timeout: int | None) -> tuple:
    """The parsed gold (cached: a group of completions shares one gold). Bare LaTeX is wrapped in ``$...$``."""
    text = gold
    prose = "\\" not in gold and re.search(r"[A-Za-z]{3,}\s+[A-Za-z]{3,}", gold)
    if not any(d in gold for d in ("$", "\\(", "\\[", "\\boxed")) and not prose:
        text = f"${gold}$"
    return tuple(_mv_parse(text, latex_only))


def _mv_equal(gold: str, pred_text: str, latex_only: bool, float_rounding: int, set_relation: bool) -> bool:
    from math_verify import verify

    g = list(_mv_gold(gold, latex_only, _timeout()))
    if not g:
        return False
    p = _mv_parse(pred_text, latex_only)
    if not p:
        return False
    try:
        return bool(verify(g, p, float_rounding=float_rounding, allow_set_relation_comp=set_relation,
                           timeout_seconds=_timeout()))
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return False


def _span_for_mv(span: str) -> str:
    """A ``####`` answer as math-verify input: LaTeX without delimiters is wrapped in ``$...$``."""
    if _LATEXISH.search(span) and not any(d in span for d in ("$", "\\(", "\\[")):
        return f"${span}$"
    return span


def _tail(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    tail = text[-MAX_CHARS:]
    newline = tail.find("\n")
    return tail[newline + 1:] if 0 <= newline < len(tail) // 2 else tail


# --------------------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------------------


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")


def gold_answer(answer_field_text: Any, kind: str = "auto") -> str | None:
    """The gold final answer of a dataset's answer field, or None when it holds none.

    The text after ``####`` (GSM8K), else the final boxed answer (:func:`last_boxed`), else the text after the
    last "The answer is:" (MetaMathQA), else the whole field; enclosing ``$...$`` and a trailing period are
    removed. A plain number comes back without separators or currency sign (``"#### $1,234"`` -> ``"1234"``;
    integer kind: ``"042"`` -> ``"42"``); a letter A-E (``"\\text{(B)}"``) as ``"B"`` under ``auto`` and
    ``choice``; anything else (``"(1,3]"``, ``"\\{1,2\\}"``, ``"\\frac{1}{2}"``) as written, commas kept.
    ``kind="integer"`` returns None unless the answer is an integer, ``kind="choice"`` unless it is a letter;
    ``kind="number"`` also reads a decimal comma (``"2,74"``) and a trailing ``%``. Raises ValueError for an
    unknown ``kind``; anything else that is not an answer gives None.
    """
    _check_kind(kind)
    if isinstance(answer_field_text, bool) or answer_field_text is None:
        return None
    if isinstance(answer_field_text, (int, float)):
        if not math.isfinite(answer_field_text):
            return None
        text = _canonical(Fraction(repr(answer_field_text)) if isinstance(answer_field_text, float)
                          else Fraction(answer_field_text))
    elif isinstance(answer_field_text, str):
        text = answer_field_text
    else:
        return None
    marks = list(_METAMATH.finditer(text))
    if "####" in text:
        raw = text[text.index("####") + 4:].strip().split("\n", 1)[0]
    elif marks and "box" not in text:
        raw = text[marks[-1].end():]
    else:
        raw = last_boxed(text) or text
    raw = _strip_delims(raw)
    if raw.strip().lower().strip(".") in NULL_GOLDS:
        return None
    if kind in ("auto", "number", "integer"):
        num = _full_number(raw, decimal_comma=kind != "auto", allow_percent=kind != "auto")
        if num is not None and (kind != "integer" or num[0].denominator == 1):
            return str(num[0].numerator) if kind == "integer" else num[2]
        if kind == "integer":
            return None
    if kind in ("auto", "choice"):
        letter = _choice_letter(raw, whole=True)
        if letter or kind == "choice":
            return letter
    return raw


def resolve_kind(gold: str) -> str:
    """The kind ``auto`` resolves to for a gold answer (as returned by :func:`gold_answer`)."""
    if _full_number(gold, decimal_comma=False) is not None:
        return "number"
    if _choice_letter(gold, whole=True):
        return "choice"
    return "math"


def extract_final_answer(text: Any) -> str | None:
    """The final answer a completion states, as a string (for logs and inspection; :func:`is_correct` decides).

    The answer after ``####`` (a plain number without separators: ``"#### $1,234."`` -> ``"1234"``), else the
    final boxed answer, else what math-verify extracts (the "answer is" phrase, the last LaTeX expression or
    number). A chat message list is accepted. None when there is no answer.
    """
    text = completion_text(text)
    if not text.strip():
        return None
    span = _marker_answer(text)
    if span is not None:
        num = _span_number(span)
        return num[2] if num else _strip_delims(span)
    boxed = last_boxed(text)
    if boxed:
        num = _full_number(boxed, decimal_comma=False)
        return num[2] if num else boxed
    parsed = _mv_parse(_tail(text), latex_only=False)
    if parsed and isinstance(parsed[-1], str) and parsed[-1].strip():
        return parsed[-1].strip()
    return None


def is_correct(completion: Any, gold: Any, kind: str = "auto", *, float_rounding: int = 6,
               allow_set_relation_comp: bool = False) -> bool:
    """Whether the completion's final answer equals the gold answer (garbage of any type is simply False).

    ``completion``: the generated text, or a chat list of messages (the last assistant message counts).
    ``gold``: an answer field (``"... #### 42"``, a solution with ``\\boxed{}``) or a gold answer; it is read by
    :func:`gold_answer` with ``kind``, and a gold of None (``#### None``) is never matched. ``kind``: one of
    :data:`KINDS` (``auto`` decides by the gold). ``float_rounding`` and ``allow_set_relation_comp`` are
    math-verify's ``verify`` options (decimals compared after rounding; whether a gold set may equal a
    predicted relation such as ``-2 <= x <= 7``). Raises ValueError only for an unknown ``kind``.
    """
    _check_kind(kind)
    try:
        text = completion_text(completion)
        if not text.strip():
            return False
        target = gold_answer(gold, kind)
        if target is None:
            return False
        resolved = resolve_kind(target) if kind == "auto" else kind
        span = _marker_answer(text)
        if resolved in ("number", "integer"):
            num = _full_number(target, decimal_comma=True, allow_percent=True)
            if num is not None:
                if span is not None:
                    pred = _span_number(span)
                    if pred is not None:
                        if resolved == "integer" and pred[0].denominator != 1:
                            return False
                        return _numbers_equal(num[0], pred[0], num[1] or pred[1], float_rounding)
                pred_text = _span_for_mv(span) if span is not None else _tail(text)
                return _mv_equal(num[2], pred_text, False, float_rounding, allow_set_relation_comp)
            resolved = "math"
        if resolved == "choice":
            return _choice_of(text) == _choice_letter(target, whole=True)
        pred_text = _span_for_mv(span) if span is not None else _tail(text)
        return _mv_equal(target, pred_text, resolved == "latex", float_rounding, allow_set_relation_comp)
    except Exception:  # noqa: BLE001 - a reward must never raise
        return False


def accuracy_reward(completions: Sequence[Any], answer: Sequence[Any], answer_kind: Sequence[str] | None = None,
                    **kwargs: Any) -> list[float]:
    """TRL reward function: 1.0 where :func:`is_correct`, else 0.0. TRL passes the dataset's columns as keyword
    arguments: ``answer`` (gold field) and, if the dataset has one, ``answer_kind`` (one of :data:`KINDS`)."""
    kinds = list(answer_kind) if answer_kind is not None else ["auto"] * len(completions)
    rewards = []
    for comp, gold, kind in zip(completions, answer, kinds):
        try:
            rewards.append(1.0 if is_correct(comp, gold, kind if kind in KINDS else "auto") else 0.0)
        except Exception:  # noqa: BLE001
            rewards.append(0.0)
    return rewards
