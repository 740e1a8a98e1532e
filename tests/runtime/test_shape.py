"""Where a text answer writes a call as text (runtime/answering/shape.py)."""

from __future__ import annotations

import pytest

from callmaybe.runtime.answering.shape import SHAPE_REACH, Shape, find_shape

NAMES = ("get_weather", "get_time")


@pytest.mark.parametrize("text, shape", [
    ('Here: {"name": "get_weather"', Shape(6, True)),
    ('Here:\n```json\n{\n  "name" : "get_time"', Shape(6, True)),
    ('Here: {"name": "get_', Shape(6, False)),  # either function still
    ('Here: {"name": "get_weather', Shape(6, False)),  # the closing quote may still come
    ('Here: {"name": "', Shape(6, False)),
    ("Here:\n```\n{", Shape(6, False)),
    ("Here:\n``", Shape(6, False)),
    ("Here:\n```python\n", Shape(6, False)),
    ('Here: { "na', Shape(6, False)),
    ("Here: {", Shape(6, False)),
    ('Aquí está: {"name": "get_time"', Shape(11, True)),  # no word of the text counts, only the JSON
    ('{"name": "get_time"} and {"name": "get_weather"', Shape(0, True)),  # the earliest within reach
    ('Example: {"name": "John Doe", "age": 3}', None),  # a JSON object the user asked for
    ('Example: {"name": "get_weatherman"', None),
    ('Example: {"name": "John', None),
    ('{"name": 1', None),
    ("Here: {x}", None),
    ("```python\nprint(1)", None),
    ('{"city": "Paris"}', None),
    ('Use {"names":', None),
    ("``x", None),
    ("", None),
])
def test_find_shape(text, shape):
    assert find_shape(text, NAMES) == shape


def test_a_shape_past_the_reach_is_not_looked_for():
    name = '"name": "get_time"'
    assert find_shape("{" + " " * (SHAPE_REACH + len("get_weather")) + name, NAMES) is None
    assert find_shape("{" + " " * (SHAPE_REACH + len("get_weather") - len(name) - 1) + name, NAMES) == Shape(0, True)
    assert find_shape('{"name": "get_time"', ()) is None  # no catalog, no call
