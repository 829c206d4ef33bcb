"""The compiled analyser against the reference on every text of every corpus (ARCHITECTURE
invariant 6): each pypi summary and Debian description gives the same terms, so every token of
the corpora is normalised and stemmed alike (PyStemmer's porter, behind the compiled tokeniser).
It reads 870,000 texts through both analysers: too slow for the unit suite."""

from __future__ import annotations

import itertools

from wordcast.corpus.files import debian_documents, pypi_posts
from wordcast.query.analysis import Analyser, compiled_analyser


def test_every_corpus_text_analyses_as_the_reference_says() -> None:
    reference, compiled = Analyser(), compiled_analyser()
    texts = itertools.chain((t for _, _, t in pypi_posts()), (d for _, d in debian_documents()))
    seen = 0
    while batch := list(itertools.islice(texts, 20_000)):
        got = compiled.terms_many(batch)
        wrong = [
            (t, reference.terms(t), g)
            for t, g in zip(batch, got, strict=True)
            if reference.terms(t) != g
        ]
        assert not wrong, wrong[:3]
        seen += len(batch)
    assert seen > 870_000
