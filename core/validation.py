"""jsonschema validators for our schemas: the draft a schema names (else a default), its format checker, and
ECMA-262 ``\\p{...}`` property classes in patterns read as the grammar reads them (:mod:`.patterns`).

Used wherever a value or a schema is checked with jsonschema: the catalog's check of each schema at load
(:func:`check_schema`), the check of each call after generation and grounding (``runtime``), and the
compiler's checks of enum values and ``contains`` items. Messages name the patterns as written.
"""

from __future__ import annotations

from typing import Any

import jsonschema

from .patterns import UnknownProperty, python_pattern, python_schema

__all__ = ["UnknownProperty", "Checker", "check_schema"]


def _written(schema: Any, translated: Any, out: dict[str, str] | None = None) -> dict[str, str]:
    """translated pattern -> the pattern as written, for every pattern :func:`python_schema` changed."""
    out = {} if out is None else out
    if isinstance(schema, dict) and isinstance(translated, dict):
        if isinstance(schema.get("pattern"), str) and translated.get("pattern") != schema["pattern"]:
            out[translated["pattern"]] = schema["pattern"]
        if isinstance(schema.get("patternProperties"), dict):
            for k in schema["patternProperties"]:
                if isinstance(k, str) and python_pattern(k) != k:
                    out[python_pattern(k)] = k
        for key, value in schema.items():
            _written(value, translated.get(key), out)
    elif isinstance(schema, list) and isinstance(translated, list):
        for a, b in zip(schema, translated):
            _written(a, b, out)
    return out


class Checker:
    """Checks values against ``schema`` with jsonschema: the validator class its ``$schema`` names (else
    ``default``), with that class's format checker unless ``formats`` is False. Raises UnknownProperty for a
    pattern property class the check cannot read (:func:`~.patterns.python_pattern`)."""

    def __init__(self, schema: Any, default: type = jsonschema.Draft202012Validator, formats: bool = True):
        self.schema = schema
        self.translated = python_schema(schema)
        self.cls = jsonschema.validators.validator_for(schema, default=default)
        self.validator = self.cls(self.translated, format_checker=self.cls.FORMAT_CHECKER if formats else None)

    def is_valid(self, value: Any) -> bool:
        """True when ``value`` is valid."""
        return self.validator.is_valid(value)

    def errors(self, value: Any) -> list[jsonschema.ValidationError]:
        """jsonschema's errors on ``value`` (their schemas hold the translated patterns)."""
        return list(self.validator.iter_errors(value))

    def message(self, value: Any) -> str | None:
        """The message of the most relevant error on ``value`` (jsonschema's ``best_match``), with patterns as
        written; None when ``value`` is valid."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is None:
            return None
        text = error.message
        if self.translated is not self.schema:
            for translated, written in _written(self.schema, self.translated).items():
                text = text.replace(repr(translated), repr(written))
        return text


def check_schema(schema: Any, default: type = jsonschema.Draft202012Validator) -> None:
    """Check ``schema`` against its draft's meta-schema (patterns read as :class:`Checker` reads them). Raises
    jsonschema.SchemaError for an invalid schema, UnknownProperty for a property class the check after
    generation cannot read."""
    cls = jsonschema.validators.validator_for(schema, default=default)
    cls.check_schema(python_schema(schema))
