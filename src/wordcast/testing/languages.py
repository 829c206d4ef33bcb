"""The reference of language detection: fastText's own prediction (fasttext-predict, its C++)
with the ``lid.176`` model, which the core's detector (``wordcast._core.LanguageDetector``,
``rust/src/detection.rs``) is held equal to text by text."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from wordcast.query.languages import ENGLISH, model_path


class FastTextReference:
    """fastText's ``predict`` on the model the services use, loaded once per process."""

    _lock = threading.Lock()
    _model: object | None = None

    @classmethod
    def _loaded(cls) -> object:
        with cls._lock:
            if cls._model is None:
                import fasttext  # fasttext-predict: the prediction half of fastText, no numpy

                cls._model = fasttext.load_model(str(model_path()))
            return cls._model

    @classmethod
    def detect_many(cls, texts: Sequence[str]) -> list[str]:
        """The language of each text, as the model's code (``en`` for one without a word)."""
        predict = cls._loaded().predict  # type: ignore[attr-defined]
        found = []
        for text in texts:
            line = " ".join(text.split())  # fastText reads one line
            if not line:
                found.append(ENGLISH)
                continue
            labels, _ = predict(line, k=1)
            found.append(labels[0].removeprefix("__label__") if labels else ENGLISH)
        return found
