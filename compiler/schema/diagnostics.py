"""What the schema compiler says about a schema: :class:`Note` (a keyword not enforced, ignored or cut) and
:class:`SchemaContext`, the state every part of the schema compiler shares (the function named in messages,
the root schema ``$ref`` pointers resolve against, the limits and the work counted against them, and the
notes collected so far)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ...core.errors import SchemaError
from ...core.patterns import python_schema
from ..limits import Budget, CompileLimits
from .uris import Resources


@dataclass(frozen=True)
class Note:
    """Something the compiler did not enforce or changed: ``kind`` is "not enforced", "ignored" (unknown
    keyword), "limited" (narrowed: any value nested a bounded depth) or "unrolled"
    (recursion cut); ``where`` names the function and parameter path."""

    kind: str
    where: str
    keyword: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.keyword}" + (f" ({self.detail})" if self.detail else "")


class SchemaContext:
    """The schemas of one function (or one standalone schema) being compiled.

    ``function`` names it in messages, after ``label`` ("function" or "schema"); ``root`` is the schema
    ``$ref`` pointers resolve against; ``max_recursion`` is how many times one ``$ref`` may be entered on a
    path; ``any_depth`` how deep an unconstrained value ("any JSON value") may nest. ``notes`` collects what
    was not enforced, ignored, limited or unrolled, each once, in order. ``budget`` counts the work against
    ``limits`` (:mod:`..limits`; the defaults when None). ``cuts`` lists each ``(ref, place)`` where recursion
    through ``ref`` was cut; a ref in ``assume`` is taken to admit some value where it is cut (used to tell
    a recursion with no base case from other unsatisfiable schemas).
    """

    def __init__(self, function: str, root: Any = None, max_recursion: int = 3, any_depth: int = 2,
                 label: str = "function", limits: CompileLimits | None = None):
        self.function = function
        self.label = label
        self.root = root if root is not None else {}
        self.max_recursion = max_recursion
        self.any_depth = any_depth
        self.notes: list[Note] = []
        self._noted: set[Note] = set()  # the same notes, to find one again at once (schemas note thousands)
        self.limits = limits or CompileLimits()
        self.budget = Budget(self.limits, self.where_at)
        self.cuts: list[tuple[str, str]] = []
        self.assume: frozenset[str] = frozenset()
        #: True while compiling a schema loosely: a language that contains every valid value (what is
        #: subtracted for ``not``, an ``if`` condition's else side, the other ``oneOf`` branches).
        self.loose = False
        self._python_defs: tuple[Any, dict[str, Any]] | None = None  # (the root translated, its definitions)

    def python_definitions(self) -> dict[str, Any]:
        """The root's ``$defs`` and ``definitions`` with their patterns in Python's dialect
        (:func:`~callmaybe.core.patterns.python_schema`), for jsonschema to check values against sibling
        keywords that may ``$ref`` them; translated once per compile (JSONSchemaStore's statamic blueprint
        checks 116 enums against its definitions: 0.23 s translating them each time). Raises UnknownProperty
        as ``python_schema`` does."""
        root = self.root
        if self._python_defs is None or self._python_defs[0] is not root:  # a new root: translated again
            self._python_defs = (root, {k: python_schema(root[k]) for k in ("$defs", "definitions")
                                        if isinstance(root, dict) and k in root})
        return self._python_defs[1]

    @contextmanager
    def loosened(self) -> Iterator[None]:
        """Compile loosely inside the ``with`` block (see :attr:`loose`): keywords the grammar narrows by
        design (closed objects, key order, formats stricter than their definition, ``3.0`` not an integer,
        recursion cut) are widened instead, and keywords not enforced are dropped, so that the language
        contains every valid value."""
        before, self.loose = self.loose, True
        try:
            yield
        finally:
            self.loose = before

    @property
    def resources(self) -> Resources:
        """The resources, anchors and base URIs of :attr:`root` (:mod:`.uris`), found once per root."""
        if getattr(self, "_resources_of", None) is not self.root:
            self._resources = Resources(self.root)
            self._resources_of = self.root
        return self._resources

    @property
    def ref_overrides(self) -> bool:
        """True under drafts 4-7 (the root's ``$schema``), where keywords beside ``$ref`` are ignored."""
        declared = self.root.get("$schema") if isinstance(self.root, dict) else None
        return isinstance(declared, str) and any(f"draft-0{n}" in declared for n in (3, 4, 6, 7))

    def where(self, path: list[str]) -> str:
        """``function 'f', parameter 'a.b'`` for ``path`` ``["a", "b"]`` (the function alone for ``[]``)."""
        where = f"{self.label} '{self.function}'"
        if path:
            where += f", parameter '{'.'.join(path)}'"
        return where

    def where_at(self, at: str) -> str:
        """``function 'f' at '#/properties/p'``: the function and a place in its schema (a JSON pointer, as
        ``$ref`` writes it)."""
        return f"{self.label} '{self.function}' at '{at}'"

    def error(self, path: list[str], message: str) -> SchemaError:
        """A SchemaError (returned, for the caller to raise) naming the function, the path and ``message``."""
        return SchemaError(f"{self.where(path)}: {message}")

    def note(self, kind: str, path: list[str], keyword: str, detail: str = "") -> None:
        """Record a :class:`Note` (once: an equal note already recorded is not repeated). Nothing is recorded
        while compiling loosely: what a loose language leaves out only widens what is subtracted."""
        if self.loose:
            return
        n = Note(kind, self.where(path), keyword, detail)
        if n not in self._noted:
            self._noted.add(n)
            self.notes.append(n)
