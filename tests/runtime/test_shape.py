"""Where a text answer writes a call as text (runtime/answering/shape.py)."""

from __future__ import annotations

import pytest

from callmaybe.runtime.answering.shape import SHAPE_REACH, Shape, find_shape


@pytest.mark.parametrize("text, shape", [
    ('Here: {"name": "f"', Shape(6, True)),
    ('Here:\n```json\n{\n  "name" :', Shape(6, True)),
    ("Here:\n```\n{", Shape(6, False)),
    ("Here:\n``", Shape(6, False)),
    ("Here:\n```python\n", Shape(6, False)),
    ('Here: { "na', Shape(6, False)),
    ("Here: {", Shape(6, False)),
    ('Aquí está: {"name":', Shape(11, True)),  # no word of the text counts, only the JSON
    ('{"name": 1} and {"name":', Shape(0, True)),  # the earliest within reach
    ("Here: {x}", None),
    ("```python\nprint(1)", None),
    ('{"city": "Paris"}', None),
    ('Use {"names":', None),
    ("``x", None),
    ("", None),
])
def test_find_shape(text, shape):
    assert find_shape(text) == shape


def test_a_shape_past_the_reach_is_not_looked_for():
    assert find_shape("{" + " " * SHAPE_REACH + '"name":') is None
    assert find_shape("{" + " " * (SHAPE_REACH - 8) + '"name":') == Shape(0, True)
