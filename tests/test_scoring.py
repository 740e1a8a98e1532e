from callmaybe.runtime.evaluation.scoring import bfcl_match, bfcl_normalize, public_match


def test_public_rules():
    exp = {"name": "fn_substitute_string_with_regex",
           "parameters": {"source_string": "The cat sat", "regex": "\\bcat\\b", "replacement": "dog"}}
    same = {"name": exp["name"], "parameters": {**exp["parameters"], "regex": "cat"}}
    other = {"name": exp["name"], "parameters": {**exp["parameters"], "regex": "a"}}
    assert public_match(same, exp) == (True, True)
    assert public_match(other, exp) == (True, False)
    assert public_match({"name": "fn_greet", "parameters": {"name": "Shrek"}},
                        {"name": "fn_greet", "parameters": {"name": "shrek"}}) == (True, True)
    assert public_match({"name": "f", "parameters": {"a": 2}}, {"name": "f", "parameters": {"a": 2.0}}) == (True, True)
    assert public_match({"name": "g", "parameters": {}}, {"name": "f", "parameters": {}}) == (False, False)


def test_bfcl_rules():
    exp = {"name": "f", "parameters": {"city": ["New York, NY"], "unit": ["", "celsius"], "n": [5.0],
                                       "xs": [[1, 2]], "d": [{"a": ["x", "X"], "b": [""]}]}}
    ok = {"name": "f", "parameters": {"city": "new york ny", "n": 5, "xs": [1, 2], "d": {"a": "x"}}}
    assert bfcl_match(ok, exp) == (True, True)
    assert bfcl_match({**ok, "parameters": {**ok["parameters"], "xs": [2, 1]}}, exp) == (True, False)
    assert bfcl_match({**ok, "parameters": {**ok["parameters"], "zz": 1}}, exp) == (True, False)
    missing = dict(ok["parameters"])
    del missing["n"]
    assert bfcl_match({"name": "f", "parameters": missing}, exp) == (True, False)
    assert bfcl_normalize("New York, NY") == "newyorkny"


PARALLEL = {"calls": [{"name": "play", "parameters": {"artist": ["Taylor Swift"], "minutes": [20]}},
                      {"name": "play", "parameters": {"artist": ["Maroon 5"], "minutes": [15]}}]}


def test_bfcl_parallel_rules():
    from callmaybe.runtime.evaluation.scoring import bfcl_calls_match, bfcl_parallel_match

    swift = {"name": "play", "parameters": {"artist": "taylor swift", "minutes": 20}}
    maroon = {"name": "play", "parameters": {"artist": "Maroon 5", "minutes": 15}}
    assert bfcl_calls_match([maroon, swift], PARALLEL["calls"])  # order-free
    assert not bfcl_calls_match([swift, swift], PARALLEL["calls"])  # each expected call needs its own
    assert not bfcl_calls_match([swift], PARALLEL["calls"])  # one call short
    # one call: never the whole case, but it can be one of the expected calls
    assert bfcl_parallel_match(swift, PARALLEL) == (True, False, True)
    assert bfcl_parallel_match({"name": "play", "parameters": {"artist": "ABBA", "minutes": 20}}, PARALLEL) == \
        (True, False, False)
    assert bfcl_parallel_match({"name": "stop", "parameters": {}}, PARALLEL) == (False, False, False)


def test_bipartite_matching_does_not_depend_on_order():
    from callmaybe.runtime.evaluation.scoring import bfcl_calls_match

    # the first expected call accepts either company; a greedy matcher fails when Apple comes first
    expected = [{"name": "f", "parameters": {"c": ["Microsoft", "Apple"]}},
                {"name": "f", "parameters": {"c": ["Apple"]}}]
    apple, microsoft = {"name": "f", "parameters": {"c": "Apple"}}, {"name": "f", "parameters": {"c": "Microsoft"}}
    assert bfcl_calls_match([apple, microsoft], expected) and bfcl_calls_match([microsoft, apple], expected)
