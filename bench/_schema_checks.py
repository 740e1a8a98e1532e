"""Checks on a schema and an instance that the correctness benches share (bench/jsonschemabench.py,
bench/jsonschemasuite.py): the schema's declared key order and the instances the grammar rejects by its
stated design (keys out of declaration order, undeclared keys, whole-number floats for integers)."""

from __future__ import annotations

from typing import Any


def declared_order(schema: Any) -> dict[str, int]:
    """Every property name declared anywhere in ``schema`` (under any ``properties``), with the position
    of its first appearance."""
    order: dict[str, int] = {}

    def walk(node):
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                for k in props:
                    order.setdefault(k, len(order))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return order


def integral_floats(value: Any) -> bool:
    """True when ``value`` holds a float with an integral value (1.0), which JSON Schema counts as an
    integer and the grammar spells only as ``1``."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, list):
        return any(integral_floats(v) for v in value)
    if isinstance(value, dict):
        return any(integral_floats(v) for v in value.values())
    return False


def keys_out_of_order(value: Any, order: dict[str, int]) -> bool:
    """True when ``value`` holds an object whose declared keys do not follow ``order`` (keys ``order``
    does not name are left out of the comparison)."""
    if isinstance(value, dict):
        positions = [order[k] for k in value if k in order]
        if positions != sorted(positions):
            return True
        return any(keys_out_of_order(v, order) for v in value.values())
    if isinstance(value, list):
        return any(keys_out_of_order(v, order) for v in value)
    return False


def undeclared_keys(value: Any, order: dict[str, int]) -> bool:
    """True when ``value`` holds an object with a key ``order`` does not name."""
    if isinstance(value, dict):
        return any(k not in order for k in value) or any(undeclared_keys(v, order) for v in value.values())
    if isinstance(value, list):
        return any(undeclared_keys(v, order) for v in value)
    return False


def opens_objects(schema: Any) -> bool:
    """True when ``schema`` anywhere admits keys beyond its declared properties by a schema:
    ``patternProperties``, or ``additionalProperties`` given as a schema object."""
    if isinstance(schema, dict):
        if "patternProperties" in schema or isinstance(schema.get("additionalProperties"), dict):
            return True
        return any(opens_objects(v) for v in schema.values())
    if isinstance(schema, list):
        return any(opens_objects(v) for v in schema)
    return False
