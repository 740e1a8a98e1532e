import pytest

from callmaybe.core.catalog import parse_catalog
from callmaybe.compiler.automata.lexical import BOOLEAN, INTEGER, NUMBER, STRING, escape
from callmaybe.compiler.schema.compiler import SchemaCompiler
from callmaybe.compiler.automata.syntax import call_regex, object_regex
from callmaybe.core.errors import SchemaError


def value(schema):
    c = SchemaCompiler("f", root={"properties": {"p": schema}})
    node = c.value(schema, ["p"])
    return node.regex


def test_scalar_regexes_are_exact():
    assert STRING == r'"(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00(?:0[0-7bef]|1[0-9a-f]))*"'
    assert INTEGER == r"-?(?:0|[1-9][0-9]*)"
    assert NUMBER.startswith(r"-?(?:0|[1-9][0-9]*|(?:[1-9][0-9]{0,15}\.[0-9]+|0\.(?:0{0,20}[1-9][0-9]*|0+))|")
    assert value({"type": "string"}) == STRING
    assert value({"type": "number"}) == NUMBER
    assert value({"type": "integer"}) == INTEGER
    assert value({"type": "boolean"}) == BOOLEAN == "(?:true|false)"
    assert value({"type": "null"}) == "null"


def test_enum_and_const_are_json_encoded_then_escaped():
    assert value({"enum": ["a.b", 'q"x', 1, None]}) == r'(?:"a\.b"|"q\\"x"|1|1\.0|null)'
    assert value({"const": "C++ (x)"}) == r'"C\+\+ \(x\)"'
    assert value({"enum": ["é"]}) == '"é"'
    assert escape("a\nb") == r"a\x0ab"


def test_array_and_nested_object():
    assert value({"type": "array", "items": {"type": "boolean"}}) == (
        r"\[(?:(?:true|false)(?:, (?:true|false))*)?\]"
    )
    assert value({"type": "array", "items": {"type": "null"}, "minItems": 1, "maxItems": 2}) == (
        r"\[null(?:, null){0,1}\]"
    )
    nested = {"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"]}
    assert value(nested) == r'\{"x": null\}'


def test_optional_properties_every_subset_in_order():
    members = [('"a"', "1", False), ('"b"', "2", True), ('"c"', "3", False)]  # keys as JSON text
    assert object_regex(members) == r'\{(?:"a": 1, "b": 2(?:, "c": 3)?|"b": 2(?:, "c": 3)?)\}'
    assert object_regex([('"a"', "1", False)]) == r'\{(?:"a": 1)?\}'
    assert object_regex([]) == r"\{\}"


def test_call_regex():
    fns = parse_catalog([{"name": "f", "parameters": {"x": {"type": "null"}}}], "t")
    regex = SchemaCompiler("f").parameters(fns[0].parameters).regex
    assert call_regex([("f", regex)]) == r'\{"name": "f", "parameters": \{"x": null\}\}'


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"type": "date"}, "function 'f', parameter 'p': unknown type \"date\""),
        ({"type": "string", "minLength": -1}, "function 'f', parameter 'p': malformed minLength/maxLength (-1, None)"),
        ({"$ref": "http://example.com/s.json"},
         "function 'f', parameter 'p': unsupported $ref 'http://example.com/s.json' (a reference outside the document: nothing is fetched)"),
        ({"$ref": "#/$defs/missing"}, "function 'f', parameter 'p': $ref '#/$defs/missing' does not resolve"),
    ],
)
def test_uncompilable_schemas_name_function_parameter_keyword(schema, message):
    with pytest.raises(SchemaError) as err:
        value(schema)
    assert str(err.value) == message


@pytest.mark.parametrize("schema", [
    {"enum": []},
    {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 2},
    {"type": "integer", "minimum": 5, "maximum": 4},
    {"type": "string", "minLength": 3, "maxLength": 2},
    {"enum": ["a", "b"], "type": "integer"},
])
def test_unsatisfiable_schemas_are_errors(schema):
    from callmaybe.core.catalog import parse_catalog
    from callmaybe.compiler.grammar import compile_grammar
    fns = parse_catalog([{"name": "f", "parameters": {"p": schema}}], "t")
    with pytest.raises(SchemaError) as err:
        compile_grammar(fns)
    assert str(err.value) == ("function 'f', parameter 'p': the parameter's schema admits no value (unsatisfiable), "
                              "and it is required")


def test_ref_fragment_is_percent_decoded_and_pointer_unescaped():
    from callmaybe.compiler.grammar import schema_dfa
    schema = {"definitions": {"a:b": {"type": "integer"}, "c/d": {"const": "x"}}, "type": "object",
              "properties": {"p": {"$ref": "#/definitions/a%3Ab"}, "q": {"$ref": "#/definitions/c~1d"}},
              "required": ["p", "q"]}
    dfa, _ = schema_dfa(schema)
    assert dfa.accepts(b'{"p": 3, "q": "x"}')
    assert not dfa.accepts(b'{"p": "3", "q": "x"}')


def test_definitions_are_translated_for_jsonschema_once_per_root():
    """The root's definitions in Python's regex dialect (an enum's sibling keywords are checked by jsonschema
    against them): translated once, again only for another root."""
    from callmaybe.compiler.schema.diagnostics import SchemaContext

    ctx = SchemaContext("f", root={"$defs": {"p": {"pattern": "^\\w$"}}, "definitions": {"q": {"type": "string"}}})
    got = ctx.python_definitions()
    assert got == {"$defs": {"p": {"pattern": "^[\\u0030-\\u0039\\u0041-\\u005a\\u005f\\u0061-\\u007a]$"}},
                   "definitions": {"q": {"type": "string"}}}
    assert ctx.python_definitions() is got
    ctx.root = {"$defs": {"r": {"pattern": "a"}}}
    assert ctx.python_definitions() == {"$defs": {"r": {"pattern": "a"}}}
