"""What a request states, and leaving arguments out: optional strings and numbers the request gives no
ground for are left out, everything else is kept."""

from callmaybe.core.catalog import parse_catalog
from callmaybe.runtime.policy.evidence import verdicts
from callmaybe.runtime.policy.grounding import drop, is_stated, normalize


def drop_unstated(params, fn, request):
    """What the Answerer does when restating finds nothing: leave out every optional argument the request
    does not ground."""
    return drop(params, fn, [k for k, v in verdicts(params, fn, request).items() if not v.keep])

FN = parse_catalog([{"type": "function", "function": {"name": "find", "parameters": {
    "type": "object",
    "properties": {"city": {"type": "string"}, "category": {"type": "string"}, "unit": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}, "limit": {"type": "integer"},
                   "exact": {"type": "boolean"}},
    "required": ["city"]}}}], "t")[0]
REQUEST = "Find vegan places in Los Angeles, CA open late; distances in Miles."


def test_normalize_keeps_letters_and_digits_only():
    assert normalize("Los Angeles, CA") == "losangelesca"
    assert normalize("kg/m³ São") == "kgm3são"  # NFKC: ³ -> 3
    assert normalize("Hauptstraße") == normalize("HAUPTSTRASSE") == "hauptstrasse"
    assert normalize("Cafe\u0301") == normalize("Café")


def test_is_stated():
    said = REQUEST
    assert is_stated("los angeles", said) and is_stated("MILES", said)
    assert not is_stated("Drama", said) and not is_stated("", said) and not is_stated("--", said)
    assert is_stated(["vegan", "Los Angeles"], said) and not is_stated(["vegan", "halal"], said)
    assert is_stated(3, said) and is_stated(False, said) and is_stated({"x": "nope"}, said)


def test_only_unstated_optional_strings_and_numbers_are_dropped():
    params = {"city": "Paris", "category": "Drama", "unit": "miles", "tags": ["vegan"], "limit": 10,
              "exact": True}
    kept, dropped = drop_unstated(params, FN, REQUEST)
    assert dropped == ["category", "limit"]
    assert kept == {"city": "Paris", "unit": "miles", "tags": ["vegan"], "exact": True}
    kept, dropped = drop_unstated(params, FN, REQUEST.replace("open late", "top 10 open late"))
    assert dropped == ["category"] and kept["limit"] == 10
    assert drop_unstated({"city": "Paris"}, FN, REQUEST) == ({"city": "Paris"}, [])


def test_nothing_is_dropped_when_the_schema_would_break():
    fn = parse_catalog([{"type": "function", "function": {"name": "g", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "minProperties": 2}}}], "t")[0]
    assert drop_unstated({"a": "x", "b": "stated"}, fn, "stated") == ({"a": "x", "b": "stated"}, [])


def test_symbols_count_when_written_as_such():
    fn = parse_catalog([{"type": "function", "function": {"name": "split", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}, "sep": {"type": "string"}},
        "required": ["text"]}}}], "t")[0]
    assert drop_unstated({"text": "a;b", "sep": ";"}, fn, 'Split "a;b" on ";"') == ({"text": "a;b", "sep": ";"}, [])
    assert drop_unstated({"text": "a;b", "sep": "|"}, fn, 'Split "a;b" please') == ({"text": "a;b"}, ["sep"])


def test_draft7_dependencies_are_respected():
    fn = parse_catalog([{"type": "function", "function": {"name": "w", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "dependencies": {"a": ["b"]}}}}], "t")[0]
    assert drop_unstated({"a": "paris", "b": "metric"}, fn, "weather in paris") == \
        ({"a": "paris", "b": "metric"}, [])


def test_words_up_to_an_ending_are_stated():
    from callmaybe.runtime.policy.grounding import close, words

    assert words("Opening_hours, ticket-PRICE") == ["opening", "hours", "ticket", "price"]
    assert close("strengths", "strength") and close("detailed", "detail") and close("women", "woman")
    assert close("mile", "miles") and not close("cm", "centimeters") and not close("in", "inches")
    assert not close("real", "roots") and not close("drama", "dramatically")
    # a stem of 5 characters or more with two endings of one word family (BFCL parallel_99)
    assert close("vaporization", "vaporizing") and close("condensation", "condensing")
    assert not close("vapor", "vaporization") and not close("condition", "condensing")
    # words with digits are close only when equal
    assert not close("2021", "2020") and not close("ua102", "ua101") and close("2020", "2020")
    request = "Get me strength and weakness traits; avoid highways and toll roads in woman tennis"
    assert is_stated(["strengths", "weaknesses"], request) and is_stated(["highways", "tolls"], request)
    assert is_stated("women", request) and not is_stated("Drama", request)
    assert not is_stated("your_database_name", "Update my customer information in the database")
