"""The schema resources of one JSON schema document and how ``$ref`` and ``$dynamicRef`` find their targets
in it (JSON Schema 2020-12 core, sections 8.2 and 9: base URIs, ``$id``, ``$anchor``, ``$dynamicAnchor``;
draft 4-7 spell an anchor as ``$id``/``id`` with a plain fragment).

Every place in the document is named by a *location*: a JSON pointer from the document's root written as a
URI fragment (``#/$defs/node``). A location's base URI is found lexically, by applying each ``$id`` met on
the way down from the root (RFC 3986 reference resolution, :func:`urllib.parse.urljoin`); the root's base
is its own ``$id`` or :data:`DEFAULT_BASE`. A reference resolves against the base URI of the place where it
is written, to a resource of this document (an ``$id``) plus a fragment: a JSON pointer within that resource
or an anchor name. References outside the document (remote URIs) are refused: nothing is fetched.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

#: The base URI of a document without a root ``$id`` (a name no real document has).
DEFAULT_BASE = "https://callmaybe.invalid/schema.json"

#: Keywords whose values are data, not schemas (their ``$id`` and ``$anchor`` keys mean nothing).
_DATA = frozenset({"const", "enum", "default", "examples", "example"})


class UnresolvedRef(ValueError):
    """A reference that does not name a place in this document (remote, or no such pointer or anchor)."""


class RemoteRef(UnresolvedRef):
    """A reference to a resource outside this document."""


def _pointer(tokens: list[str]) -> str:
    """The location (``#/a/b``) of the path ``tokens`` (each escaped as RFC 6901 says)."""
    return "#" + "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _tokens(pointer: str) -> list[str]:
    """The unescaped tokens of a JSON pointer fragment (``/a/b`` or ``#/a/b``; percent-decoded first)."""
    text = unquote(pointer[1:] if pointer.startswith("#") else pointer)
    if not text:
        return []
    if not text.startswith("/"):
        raise UnresolvedRef(f"{pointer!r} is not a JSON pointer")
    return [t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/")]


def _join(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (a fragment-only reference keeps the base, whatever its scheme)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


class Resources:
    """The resources (``$id``), anchors and dynamic anchors of one schema document ``root``.

    ``resources`` maps an absolute URI (no fragment) to the location of its schema; ``anchors`` and
    ``dynamic`` map ``(resource URI, name)`` to the location of the schema that declares ``$anchor`` /
    ``$dynamicAnchor`` ``name`` (a dynamic anchor is an anchor too). Built by one walk of the document.
    """

    def __init__(self, root: Any):
        self.root = root
        self.resources: dict[str, str] = {}
        self.anchors: dict[tuple[str, str], str] = {}
        self.dynamic: dict[tuple[str, str], str] = {}
        self._bases: dict[str, str] = {}
        declared = root.get("$schema") if isinstance(root, dict) else None
        #: drafts 3-7: keywords beside ``$ref`` are ignored, its sibling ``$id`` included
        self.legacy = isinstance(declared, str) and any(f"draft-0{n}" in declared for n in (3, 4, 6, 7))
        self._walk(root, [], DEFAULT_BASE, top=True)

    def _walk(self, node: Any, tokens: list[str], base: str, top: bool = False) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                self._walk(item, tokens + [str(i)], base)
            return
        if not isinstance(node, dict):
            return
        here = _pointer(tokens)
        base = self._rebase(node, base)
        self._bases[here] = base
        if top or (("$id" in node or "id" in node) and not self._id_ignored(node)):
            self.resources.setdefault(urldefrag(base)[0], here)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors.setdefault((urldefrag(base)[0], node[key]), here)
                if key == "$dynamicAnchor":
                    self.dynamic.setdefault((urldefrag(base)[0], node[key]), here)
        for ident in (node.get("$id"), node.get("id")):  # draft 4-7: "#name" is an anchor
            if isinstance(ident, str) and ident.startswith("#") and len(ident) > 1 and "/" not in ident:
                self.anchors.setdefault((urldefrag(base)[0], ident[1:]), here)
        for key, value in node.items():
            if key in _DATA or key in ("$id", "id", "$anchor", "$dynamicAnchor"):
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                       "dependencies"):
                if isinstance(value, dict):
                    for name, sub in value.items():
                        self._walk(sub, tokens + [key, name], base)
                continue
            self._walk(value, tokens + [key], base)

    def _id_ignored(self, node: dict[str, Any]) -> bool:
        """True when ``node``'s ``$id`` is a sibling of ``$ref`` under drafts 3-7, which ignore it."""
        return self.legacy and "$ref" in node

    def _rebase(self, node: dict[str, Any], base: str) -> str:
        """The base URI inside ``node``: its ``$id`` (or draft-4 ``id``) resolved against ``base``, unless
        that is only a fragment (an anchor in drafts 4-7) or ignored beside ``$ref`` (drafts 3-7)."""
        if self._id_ignored(node):
            return base
        ident = node.get("$id", node.get("id"))
        if isinstance(ident, str) and not ident.startswith("#"):
            return urljoin(base, urldefrag(ident)[0])
        return base

    def base_of(self, location: str) -> str:
        """The base URI in force at ``location`` (found lexically from the root; the default base for a
        location that is not a schema of the document)."""
        known = self._bases.get(location)
        if known is not None:
            return known
        node, base = self.root, DEFAULT_BASE
        try:
            tokens = _tokens(location)
        except UnresolvedRef:
            return DEFAULT_BASE
        if isinstance(node, dict):
            base = self._rebase(node, base)
        for t in tokens:
            if isinstance(node, dict) and t in node:
                node = node[t]
            elif isinstance(node, list) and t.isdigit() and int(t) < len(node):
                node = node[int(t)]
            else:
                break
            if isinstance(node, dict):
                base = self._rebase(node, base)
        return base

    def at(self, location: str) -> Any:
        """The schema at ``location`` (a pointer from the root); raises UnresolvedRef when there is none."""
        node = self.root
        for t in _tokens(location):
            if isinstance(node, dict) and t in node:
                node = node[t]
            elif isinstance(node, list) and t.isdigit() and int(t) < len(node):
                node = node[int(t)]
            else:
                raise UnresolvedRef(f"no schema at {location!r}")
        return node

    def locate(self, ref: str, where: str) -> str:
        """The location that ``ref``, written at location ``where``, refers to. Raises UnresolvedRef for a
        reference that names no pointer or anchor in the document, RemoteRef for one outside it."""
        uri, fragment = urldefrag(_join(self.base_of(where), ref))
        resource = self.resources.get(uri)
        if resource is None:
            raise RemoteRef(f"remote reference {ref!r} ({uri} is not in this document; nothing is fetched)")
        if not fragment or fragment.startswith("/"):
            location = resource + fragment  # a pointer within the resource
            self.at(location)
            return location
        location = self.anchors.get((uri, fragment))
        if location is None:
            raise UnresolvedRef(f"anchor {fragment!r} is not declared in {uri}")
        return location

    def locate_dynamic(self, ref: str, where: str, scope: list[str]) -> str:
        """The location of ``$dynamicRef`` ``ref`` written at ``where``, with ``scope`` the locations entered
        on the way here (outermost first; the dynamic scope): when the reference resolves to a schema with a
        ``$dynamicAnchor`` of the fragment's name, the outermost resource of the scope that declares a
        dynamic anchor of that name wins; otherwise it behaves as ``$ref``."""
        target = self.locate(ref, where)
        fragment = urldefrag(ref)[1]
        target_schema = self.at(target)
        if not fragment or fragment.startswith("/") or not isinstance(target_schema, dict) \
                or target_schema.get("$dynamicAnchor") != fragment:
            return target
        for location in scope:
            uri = urldefrag(self.base_of(location))[0]
            found = self.dynamic.get((uri, fragment))
            if found is not None:
                return found
        return target
