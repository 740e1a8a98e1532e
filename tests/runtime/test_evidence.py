"""The evidence on each optional argument: grounded by the request (stated, reformatted, a label it names) or
copied, a placeholder, a guess."""

import pytest

from callmaybe.core.catalog import parse_catalog
from callmaybe.runtime.policy.evidence import Verdict, defaults, offered, partly_stated, placeholder, verdicts, weigh

UNIT = {"type": "string", "description": "The unit of measure. Defaults to 'cm'."}
CATEGORY = {"type": "string", "description": "The category of the film (e.g. Drama, Comedy, etc). Default is 'all'"}
EXTRAS = {"type": "array", "items": {"type": "string"}, "description": "Add-ons, e.g. 'Early Entry Pass', 'Parking'."}


@pytest.mark.parametrize("value, expected", [
    ("your_database_name", True), ("my_database", True), ("Your city", True), ("example.com", True),
    ("string", True), ("N/A", True), ("default", True), ("CustomerInfo", False), ("my", False), ("Sample Street", True),
])
def test_placeholder(value, expected):
    assert placeholder(value) is expected


def test_defaults():
    assert defaults(UNIT) == ["cm"]
    assert defaults({"description": "Type of gas, with 'air' as default."}) == ["air"]
    assert defaults({"description": "Defaults to square meters."}) == ["square meters"]
    assert defaults({"default": "Homo sapiens", "description": "The species."}) == ["homo sapiens"]
    assert defaults({"description": "The species."}) == []


def test_offered():
    assert offered("Drama", CATEGORY) and offered("all", CATEGORY)
    assert not offered("Dram", CATEGORY) and not offered("Horror", CATEGORY)
    assert offered("early-entry pass", EXTRAS)  # letters and digits compared, at word edges
    assert offered("x", {"enum": ["x", "y"]}) and offered("Z", {"examples": ["z"]})


def test_partly_stated():
    assert partly_stated("Early Entry Pass", "two tickets with early entry") == ["early", "entry"]
    assert partly_stated("Personal Info", "the personal record") == ["personal"]
    assert partly_stated("Early Entry Pass", "two tickets with early access") == []  # 1 of 3
    assert partly_stated("a b", "a b") == []  # no word of 3 letters or more


@pytest.mark.parametrize("value, request_text, schema, expected", [
    ("miles", "distances in miles", UNIT, Verdict(True, "stated in the request")),
    ("km", "distances in kilometers", UNIT, Verdict(True, "a reformat of what the request states: km (kilometers)")),
    ("cm", "the circumference", UNIT, Verdict(False, 'the parameter\'s default ("cm"), copied from the catalog')),
    ("cm", "a radius of 4 inches", UNIT, Verdict(False, 'the parameter\'s default ("cm"), copied from the catalog')),
    ("Drama", "find a film by Nolan", CATEGORY,
     Verdict(False, 'a value the catalog offers ("Drama"), which the request does not name')),
    ("Tokyo", "find a film by Nolan", CATEGORY,
     Verdict(False, 'not in the request, nor a reformat or label of what it states ("Tokyo")')),
    ("my_database", "update my record in the database", {"type": "string"},
     Verdict(False, 'a placeholder ("my_database")')),
    ("my_database", "use the table my_database", {"type": "string"}, Verdict(True, "stated in the request")),
    (["Early Entry Pass", "Parking"], "early entry and parking", EXTRAS,
     Verdict(True, '"Early Entry Pass": a label the catalog offers; the request states early, entry; '
                   '"Parking": stated in the request')),
    (["Valet", "Parking"], "with parking", EXTRAS,  # "Valet" is not offered: no sibling rule
     Verdict(False, 'not in the request, nor a reformat or label of what it states ("Valet")')),
    (True, "anything", UNIT, Verdict(True, "not text or a number (booleans, lists of numbers, objects and null "
                                           "are kept)")),
    ([3, 4], "anything", UNIT, Verdict(True, "not text or a number (booleans, lists of numbers, objects and null "
                                             "are kept)")),
    # numbers: stated (digits, words, scale, sign), converted between units, said by a word; else left out
    (3, "add three apples", UNIT, Verdict(True, "stated in the request")),
    (0.05, "at 5% a year", UNIT, Verdict(True, "stated in the request")),
    (-1000, "a loss of $1000", UNIT, Verdict(True, "stated in the request")),
    (120, "a flight of 2 hours", UNIT, Verdict(True, "2 converted between units (x60)")),
    (0.5, "a radius of 50 cm", UNIT, Verdict(True, "50 converted between units (/100)")),
    (4, "compounded quarterly", UNIT, Verdict(True, 'what "quarterly" says')),
    # BFCL parallel_94 and parallel_8: a filler, and a year nobody asked for
    (8854187, "The experiment is conducted in a vacuum.", UNIT,
     Verdict(False, "not a number the request states, nor a unit conversion of one (8854187)")),
    (2020, "the population of Alaska", UNIT,
     Verdict(False, "not a number the request states, nor a unit conversion of one (2020)")),
    (30, "concerts next month", {"type": "integer", "default": 30},
     Verdict(False, "the parameter's default (30), copied from the catalog")),
])
def test_weigh(value, request_text, schema, expected):
    assert weigh(value, request_text, schema) == expected


GENRE = {"type": "string", "enum": ["Comedy", "Drama", "Horror", "Thriller", "Sci-fi", "dontcare"],
         "default": "dontcare", "description": "Genre of the movie."}
VOICE = {"type": "string", "enum": ["en-US", "fr-FR", "es-ES", "de-DE", "zh-CN", "ja-JP"], "default": "en-US"}
LABEL = "a label of the parameter's enum other than its default: the model's choice"


@pytest.mark.parametrize("value, request_text, schema, expected", [
    # BFCL live (development part), live_simple_211-117-3, live_simple_227-118-1, live_multiple_186-81-0:
    # right labels that no word of the request names; the word rule left them out
    ("Comedy", "Can you help me find a movie in the Comic genre with James Corden in it?", GENRE, Verdict(True, LABEL)),
    ("zh-CN", "Listen to the phrase '我爱学习' in a male voice and in Chinese", VOICE, Verdict(True, LABEL)),
    ("celsius", "北京后天的天气如何？", {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "fahrenheit"},
     Verdict(True, LABEL)),
    # bench/catalogs/optional_args_cases.jsonl: the same in other languages
    ("Horror", "Che film dell'orrore danno a Milano?", GENRE, Verdict(True, LABEL)),
    ("es-ES", "Lee en voz alta 'hola a todos' en español con voz de hombre.", VOICE, Verdict(True, LABEL)),
    # the default is still a copy from the catalog, a label the description offers still needs the request's words
    ("dontcare", "Che film dell'orrore danno a Milano?", GENRE,
     Verdict(False, 'the parameter\'s default ("dontcare"), copied from the catalog')),
    ("Drama", "find a film by Nolan", CATEGORY,
     Verdict(False, 'a value the catalog offers ("Drama"), which the request does not name')),
])
def test_an_enum_label_other_than_the_default_is_the_models_choice(value, request_text, schema, expected):
    assert weigh(value, request_text, schema) == expected


def test_verdicts_keep_required_arguments():
    fn = parse_catalog([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": UNIT}, "required": ["city"]}}}], "t")[0]
    assert verdicts({"city": "Rome", "unit": "cm"}, fn, "weather in Paris") == {
        "city": Verdict(True, "required"),
        "unit": Verdict(False, 'the parameter\'s default ("cm"), copied from the catalog'),
    }


def test_another_call_must_bring_a_stated_value_and_no_guess():
    from callmaybe.runtime.policy.evidence import another_call

    request = "Compute the Pythagorean Theorem of two side lengths: 3 and 4, 5 and 12."
    first = [{"a": 3, "b": 4}]
    assert another_call({"a": 5, "b": 12}, first, request) == Verdict(
        True, "the request states 5, 12, which no earlier call used")
    assert another_call({"a": 13, "b": 5}, first + [{"a": 5, "b": 12}], request) == Verdict(
        False, "13 is neither in the request nor in an earlier call (a guess)")
    assert another_call({"a": 12, "b": 5}, first + [{"a": 5, "b": 12}], request) == Verdict(
        False, "it uses no value the earlier calls did not (a repeat)")
    houses = "Predict house price for a house of size 3000 sq ft. in location New York and 4000 sq ft. in Los Angeles"
    earlier = [{"location": "New York", "size": 3000}, {"location": "Los Angeles", "size": 4000}]
    assert not another_call({"location": "New York", "size": 4000}, earlier, houses).keep
    # BFCL parallel_46: calls that run through a grid (each varying argument repeats a value) may recombine
    teams = "Find the winning percentage of Lakers and Bulls in NBA seasons 2018 and 2020."
    earlier = earlier_teams = [{"team": "Lakers", "season": 2018}, {"team": "Bulls", "season": 2018},
                               {"team": "Lakers", "season": 2020}]
    assert another_call({"team": "Bulls", "season": 2020}, earlier, teams) == Verdict(
        True, "a new combination of the values earlier calls gave each argument, which run through a grid")
    assert another_call({"team": "Lakers", "season": 2020}, earlier, teams) == Verdict(
        False, "it repeats an earlier call")
    # BFCL parallel_21 and parallel_33: a value shared by every call, or one dimension whose values all
    # differ, is no grid
    crimes = "money laundering in San Francisco in 2019 and in Texas in 2018"
    earlier = [{"crime": "money laundering", "location": "San Francisco", "year": 2019},
               {"crime": "money laundering", "location": "Texas", "year": 2018}]
    assert not another_call({"crime": "money laundering", "location": "San Francisco", "year": 2018}, earlier,
                            crimes).keep
    offices = "president in 1980 and 2016, vice president in 1975 and 2011"
    earlier = [{"year": 1980, "position": "president"}, {"year": 2016, "position": "president"},
               {"year": 1975, "position": "vice president"}, {"year": 2011, "position": "vice president"}]
    assert not another_call({"year": 1980, "position": "vice president"}, earlier, offices).keep
    # BFCL parallel_16 and parallel_62: a sign the words give; 0 is no exception (parallel_18: "for 1, 5 and
    # 10 years" ran on to {"number_of_years": 0} when it was); a negative no sign gives is a guess
    roi = ("Calculate return on investment for an initial investment of $2000 with a gain of $500. Do the same "
           "calculation for an initial investment of $5000 with a loss of $1000.")
    assert another_call({"initial_investment": 5000, "gain_loss": -1000}, [{"initial_investment": 2000,
                        "gain_loss": 500}], roi) == Verdict(True, "the request states 5000, -1000, which no earlier call used")
    assert another_call({"a": 5, "b": -7}, [{"a": 3, "b": 4, "c": 2}], "3x^2 + 4x + 2 and 5x^2 - 7x").keep
    assert not another_call({"a": 5, "b": -7, "c": 0}, [{"a": 3, "b": 4, "c": 2}], "3x^2 + 4x + 2 and 5x^2 - 7x").keep
    assert not another_call({"a": 5, "b": -8}, [{"a": 3, "b": 4}], "3x^2 + 4x and 5x^2 - 7x").keep
    assert another_call({"n": -5}, [{"n": 5}, {"n": 7}], "Factorial of 5 and 7.") == Verdict(
        False, "-5 is neither in the request nor in an earlier call (a guess)")
    # numbers with a scale, as the plain system message asks the model to write them
    assert another_call({"amount": 3000000}, [{"amount": 1000000}], "Convert 1 million and 3 million").keep
    assert another_call({"rate": 0.07}, [{"rate": 0.05}], "Interest at 5% and 7%").keep
    # the grid rule needs the same arguments: a call that leaves one out is no combination
    assert not another_call({"team": "Bulls"}, earlier_teams, teams).keep
    assert not another_call({"team": "Lakers", "season": 2018, "playoffs": None}, earlier_teams, teams).keep
    # another function with the same arguments is another call
    assert another_call({"city": "Paris"}, [{"city": "Paris"}], "Weather in Paris and a hotel in Paris",
                        "book_hotel", ["get_weather"]) == Verdict(True, "it calls book_hotel, which no earlier call did")
    assert another_call({"city": "Paris"}, [{"city": "Paris"}], "Weather in Paris and a hotel in Paris",
                        "get_weather", ["get_weather"]) == Verdict(False, "it repeats an earlier call")
    routes = [{"from": "Paris", "to": "Rome"}, {"from": "Paris", "to": "Berlin"}]
    assert another_call({"from": "Rome", "to": "Paris"}, routes, "Routes from Paris to Rome and to Berlin") == \
        Verdict(False, "it uses no value the earlier calls did not (a repeat)")  # Rome never was a "from"
    # values in other words: a number in words, a reformatted date; booleans are not judged
    assert another_call({"n": 5, "exact": True}, [{"n": 3, "exact": True}], "factorial of three and five").keep
    assert another_call({"city": "Paris", "date": "2021-03-04"}, [{"city": "Rome", "date": "2021-03-03"}],
                        "Weather in Rome on March 3, 2021 and in Paris on March 4, 2021").keep


def test_another_call_may_use_a_value_the_request_states_again():
    from callmaybe.runtime.policy.evidence import another_call

    # BFCL parallel_92: New York City and Miami are each stated twice, so the way back is asked for
    trip = ("What is the shortest driving distance in miles from New York City to Los Angeles and then from Los "
            "Angeles to Miami, considering that you have to return to New York City from Miami?")
    legs = [{"origin": "New York City", "destination": "Los Angeles", "unit": "miles"},
            {"origin": "Los Angeles", "destination": "Miami", "unit": "miles"}]
    assert another_call({"origin": "Miami", "destination": "New York City", "unit": "miles"}, legs, trip) == Verdict(
        True, 'the request states "Miami", "New York City" more often than earlier calls used it')
    legs.append({"origin": "Miami", "destination": "New York City", "unit": "miles"})
    assert another_call({"origin": "Los Angeles", "destination": "New York City", "unit": "miles"}, legs, trip) == \
        Verdict(False, "it uses no value the earlier calls did not (a repeat)")
    # BFCL parallel_64: "a = 1, b = 2, and c = 1" after three equations that used 1 once; "b = -3" states -3,
    # not 3, so 3 (stated twice, used twice) cannot come back
    equations = ("The first one has coefficients a = 2, b = 5, and c = 3 and I want to find all roots, real or "
                 "complex. The second equation has coefficients a = 1, b = -3, and c = 2 and I only want to find "
                 "the real roots. The third equation has coefficients a = 4, b = -7, and c = 3 and I want to find "
                 "all roots, real or complex. And the last equation has coefficients a = 1, b = 2, and c = 1 and I "
                 "only want to find the real roots.")
    solved = [{"a": 2, "b": 5, "c": 3, "root_type": "all"}, {"a": 1, "b": -3, "c": 2, "root_type": "real"},
              {"a": 4, "b": -7, "c": 3, "root_type": "all"}]
    assert another_call({"a": 1, "b": 2, "c": 1, "root_type": "real"}, solved, equations) == Verdict(
        True, 'the request states 1, 2, "real" more often than earlier calls used it')
    solved.append({"a": 1, "b": 2, "c": 1, "root_type": "real"})
    assert another_call({"a": 1, "b": 2, "c": 3, "root_type": "all"}, solved, equations) == Verdict(
        False, "it uses no value the earlier calls did not (a repeat)")
    # BFCL parallel_98: the charge of 2 used at /charge; "2 meters" is the same number at another argument
    field = ("Can you calculate the electric field strength at a distance of 0.5 meters from a point charge of 2 "
             "Coulombs located in a vacuum? Then, can you also calculate the electric field strength at a distance "
             "of 1 meter and 2 meters from the same point charge?")
    measured = [{"charge": 2, "distance": 0.5, "medium": "vacuum"}, {"charge": 2, "distance": 1.0, "medium": "vacuum"}]
    assert another_call({"charge": 2, "distance": 2.0, "medium": "vacuum"}, measured, field) == Verdict(
        True, "the request states 2.0 more often than earlier calls used it")
    measured.append({"charge": 2, "distance": 2.0, "medium": "vacuum"})
    assert another_call({"charge": 2, "distance": 2.0, "medium": "vacuum"}, measured, field) == Verdict(
        False, "it repeats an earlier call")
    field += " Lastly, can you calculate it at a distance of 1 meter from the same point charge but in air?"
    assert another_call({"charge": 2, "distance": 1.0, "medium": "air"}, measured, field) == Verdict(
        True, 'the request states "air", which no earlier call used')
    measured.append({"charge": 2, "distance": 1.0, "medium": "air"})
    # the model ran on: 1 is stated twice and used twice, so the distances are no grid; the charge is a
    # constant of the turn, so 1 cannot move there
    assert another_call({"charge": 2, "distance": 2.0, "medium": "air"}, measured, field) == Verdict(
        False, "it uses no value the earlier calls did not (a repeat)")
    assert another_call({"charge": 1, "distance": 1.0, "medium": "vacuum"}, measured, field) == Verdict(
        False, "it uses no value the earlier calls did not (a repeat)")
    # BFCL parallel_10: a swap is no new call; each number is stated once
    sides = "Compute the Pythagorean Theorem of two side lengths: 3 and 4, 5 and 12."
    assert not another_call({"a": 4, "b": 3}, [{"a": 3, "b": 4}, {"a": 5, "b": 12}], sides).keep


def test_values_the_request_spells_in_two_cases_are_two_values():
    from callmaybe.runtime.policy.evidence import another_call

    # BFCL parallel_116: the genotypes AA, Aa and aa are three values; the second call was taken for a repeat
    asked = ("Can you calculate the frequency of the homozygous dominant genotype (AA), heterozygous genotype "
             "(Aa), and homozygous recessive genotype (aa)?")
    names = ["hardy_weinberg"] * 2
    earlier = [{"allele_frequency": 0.7, "genotype": "AA"}, {"allele_frequency": 0.7, "genotype": "Aa"}]
    assert another_call(earlier[1], earlier[:1], asked, names[0], names[:1]) == \
        Verdict(True, 'the request states "Aa", which no earlier call used')
    assert another_call({"allele_frequency": 0.7, "genotype": "aa"}, earlier, asked, names[0], names) == \
        Verdict(True, 'the request states "aa", which no earlier call used')
    assert another_call({"allele_frequency": 0.7, "genotype": "AA"}, earlier, asked, names[0], names) == \
        Verdict(False, "it repeats an earlier call")
    # a request with one spelling (a sentence's first letter says nothing): case is not a new value
    assert another_call({"city": "paris"}, [{"city": "Paris"}], "Paris weather please. I fly to paris tomorrow",
                        "w", ["w"]) == Verdict(False, "it repeats an earlier call")
    assert another_call({"city": "new york"}, [{"city": "New York"}], "Weather in New York and Paris", "w", ["w"]) == \
        Verdict(False, "it repeats an earlier call")


def test_another_call_may_choose_a_label_the_catalog_offers():
    from callmaybe.runtime.policy.evidence import another_call

    # BFCL parallel_8: "USA" is stated; "country" is offered by the description, not stated
    census = {"type": "object", "properties": {
        "area": {"type": "string", "description": "Name of the city, state, or country."},
        "type": {"type": "string", "description": "Specify whether the area is city/state/country."}}}
    asked = "the population of New York City, NY, and Los Angeles, CA, and also for Alaska state and USA"
    earlier = [{"area": "New York City, NY", "type": "city"}, {"area": "Alaska", "type": "state"}]
    names = ["get_population"] * 2
    assert another_call({"area": "USA", "type": "country"}, earlier, asked, "get_population", names, census) == \
        Verdict(True, 'the request states "USA", which no earlier call used')
    # an offered label is no new value: Alaska as a country is a repeat
    assert another_call({"area": "Alaska", "type": "country"}, earlier, asked, "get_population", names, census) == \
        Verdict(False, "it uses no value the earlier calls did not (a repeat)")
    # without the schema, the label is a guess
    assert another_call({"area": "USA", "type": "country"}, earlier, asked, "get_population", names) == \
        Verdict(False, '"country" is neither in the request nor in an earlier call (a guess)')


def test_a_new_function_called_with_earlier_values_and_the_catalog_s_example_is_not_asked_for():
    from callmaybe.runtime.policy.evidence import another_call

    # bench/catalogs/parallel_langs_cases.jsonl: after the weather calls, find_restaurants with the city of an
    # earlier call and "Thai", the catalog's "e.g. Thai", in every language
    restaurants = {"type": "object", "properties": {
        "city": {"type": "string"}, "cuisine": {"type": "string", "description": "One cuisine, e.g. Thai."},
        "price": {"type": "string", "enum": ["cheap", "fine"]}}}
    weather = [{"city": "Berlin"}, {"city": "Hamburg"}]
    names = ["get_weather"] * 2
    asked = "Wie ist das Wetter in Berlin und Hamburg?"
    assert another_call({"city": "Berlin", "cuisine": "Thai"}, weather, asked, "find_restaurants", names,
                        restaurants) == Verdict(False, "it calls find_restaurants with values of earlier calls and "
                                                       "the catalog's example \"Thai\", which the request does not "
                                                       "state")
    # the cuisine stated: asked for
    assert another_call({"city": "Berlin", "cuisine": "Thai"}, weather, "Wetter in Berlin und Hamburg, und Thai in "
                        "Berlin?", "find_restaurants", names, restaurants) == \
        Verdict(True, "it calls find_restaurants, which no earlier call did")
    # an enum label is the catalog's choice, not an example: a new function with it stays (as before)
    assert another_call({"city": "Berlin", "price": "cheap"}, weather, asked, "find_restaurants", names,
                        restaurants) == Verdict(True, "it calls find_restaurants, which no earlier call did")
    # a new function with earlier values only, no example: as before
    assert another_call({"city": "Berlin"}, weather, asked, "find_restaurants", names, restaurants) == \
        Verdict(True, "it calls find_restaurants, which no earlier call did")

def test_numbers_in_scientific_notation_are_stated():
    from callmaybe.runtime.policy.evidence import _scaled_mentions, another_call

    # BFCL parallel_96: "8.854 x 10^-12 F/m", then "5 x 10^-12 F/m"
    asked = "a permittivity of 8.854 x 10^-12 F/m, then a relative permittivity of 5 x 10^-12 F/m"
    assert _scaled_mentions(asked) == {8.854e-12: 1, 5e-12: 1}
    assert _scaled_mentions("6.022×10^23 and 1.5e-3, 3 million, 5%") == {6.022e23: 1, 0.0015: 1, 3e6: 1, 0.05: 1}
    assert another_call({"q": 5, "eps": 5e-12}, [{"q": 5, "eps": 8.854e-12}], asked) == Verdict(
        True, "the request states 5e-12, which no earlier call used")
    assert weigh(8.854e-12, asked, {}) == Verdict(True, "stated in the request")


def test_numbers_as_people_write_them():
    from callmaybe.runtime.policy.evidence import another_call

    # thousands separators with decimals; trailing zeros; a sign is part of the number
    assert weigh(1234.56, "Transfer $1,234.56 from checking to savings", {}) == Verdict(True, "stated in the request")
    assert another_call({"price": 1299.99}, [{"price": 999.99}], "Tax on a $999.99 phone and a $1,299.99 laptop") \
        == Verdict(True, "the request states 1299.99, which no earlier call used")
    assert weigh(-74.006, "the weather at latitude 40.7128, longitude -74.0060", {}) == Verdict(
        True, "stated in the request")
    assert another_call({"amount": -1500}, [{"amount": 2000}], "Deposit $2,000 and withdraw $1,500").keep
    assert another_call({"celsius": 5}, [{"celsius": -5}], "Convert -5°C to Fahrenheit") == Verdict(
        False, "5 is neither in the request nor in an earlier call (a guess)")
    assert not weigh(5, "Set the thermostat to -5 degrees", {}).keep
    # conversions start from numbers written in digits: "the first" is no 1 to make 100 of
    assert weigh(100, "Find the first Italian restaurant open in Boston", {}) == Verdict(
        False, "not a number the request states, nor a unit conversion of one (100)")
    assert weigh(60, "a meeting of 1 hour", {}) == Verdict(True, "1 converted between units (x60)")
    # "10 am" states 10 once: an alarm at 10 on Tuesday is no new call
    assert another_call({"hour": 10, "day": "Tuesday"}, [{"hour": 10, "day": "Monday"}, {"hour": 7, "day": "Tuesday"}],
                        "Set an alarm for 10 am on Monday and 7 am on Tuesday") == Verdict(
        False, "it uses no value the earlier calls did not (a repeat)")
    # digits are not close to other digits: a year one off is a guess
    assert another_call({"city": "Tokyo", "year": "2025"}, [{"city": "Tokyo", "year": "2020"}],
                        "What was the population of Tokyo in 2020?") == Verdict(
        False, '"2025" is neither in the request nor in an earlier call (a guess)')


def test_joined_first_call():
    from callmaybe.runtime.policy.evidence import joined

    # BFCL parallel_7 and parallel_18: "5,10 and 15" read as 510, "1,5 and 10 years" as 15
    later = [{"number": 5}, {"number": 10}, {"number": 15}]
    assert joined({"number": 510}, later, "Find the factorial of 5,10 and 15.") == Verdict(
        False, "510 joins what later calls give apart (10, 5)")
    assert joined({"years": 15, "amount": 1000}, [{"years": n, "amount": 1000} for n in (1, 5, 10)],
                  "$1000 for 1,5 and 10 years") == Verdict(False, "15 joins what later calls give apart (1, 5)")
    # BFCL parallel_41: two cities in one value
    shops = "a music shop in San Francisco, California, and Chicago, Illinois"
    assert joined({"location": "San Francisco, CA; Chicago, IL"},
                  [{"location": "San Francisco, CA"}, {"location": "Chicago, IL"}], shops) == Verdict(
        False, '"San Francisco, CA; Chicago, IL" joins what later calls give apart (chicagoil, sanfranciscoca)')
    # stated as written, a string is still a join when later calls give its parts apart
    assert joined({"genre": "rock and jazz"}, [{"genre": "rock"}, {"genre": "jazz"}], "rock and jazz concerts") == \
        Verdict(False, '"rock and jazz" joins what later calls give apart (jazz, rock)')
    assert joined({"location": "Paris, London, Rome"}, [{"location": c} for c in ("Paris", "London", "Rome")],
                  "What's the weather in Paris, London and Rome?") == Verdict(
        False, '"Paris, London, Rome" joins what later calls give apart (london, paris, rome)')
    # a number the request writes, or a value no two later values spell, is no join
    assert joined({"number": 510}, later, "Find the factorial of 510, 5, 10 and 15.") == Verdict(
        True, "no value joins later ones")
    assert joined({"number": 7}, later, "Find the factorial of 5,10 and 15.").keep
    assert joined({"number": 1015}, later[:1], "Find the factorial of 5,10 and 15.").keep  # one later value


def test_first_call_needs_one_stated_value():
    from callmaybe.runtime.policy.evidence import first_call

    triangle = "Calculate the area of a triangle given the base is 10 meters and height is 5 meters."
    assert first_call({"weight": 70.0, "height": 1.75}, triangle) == Verdict(False,
                                                                            "none of its values is in the request")
    assert first_call({"base": 10, "height": 5, "unit": "m2"}, triangle) == Verdict(True, "the request states 10")
    assert first_call({}, triangle) == Verdict(True, "it takes no value")
    assert first_call({"verbose": True}, triangle) == Verdict(True, "it takes no value")


def test_claimed_numbers_left_out():
    from callmaybe.runtime.policy.evidence import claimed

    # BFCL parallel_95: "a radius of 1 meter" is the radius of the second setup, not a permeability
    loops = ("In the first setup, the loop has a radius of 0.5 meters and is carrying a current of 10 Amperes. "
             "In the second setup, the loop has a radius of 1 meter and is carrying a current of 15 Amperes.")
    required = {"current", "radius"}
    calls = [({"current": 10, "radius": 0.5, "permeability": 1}, required),
             ({"current": 15, "radius": 1.0, "permeability": 1}, required)]
    taken = Verdict(False, "1 is stated once in the request, and the required radius takes it")
    assert claimed(calls, loops) == [{"permeability": taken}, {"permeability": taken}]
    # BFCL simple_python_99: "from 0 to 2 pi" gives the start of the range, not a phase shift
    sine = "Plot a sine wave from 0 to 2 pi with a frequency of 5 Hz."
    assert claimed([({"start_range": 0.0, "end_range": 2.0, "frequency": 5, "phase_shift": 0},
                     {"start_range", "end_range", "frequency"})], sine) == [
        {"phase_shift": Verdict(False, "0 is stated once in the request, and the required start_range takes it")}]
    # stated twice or more, in any form: one mention may fill two arguments, so nothing is judged
    assert claimed([({"radius": 1, "permeability": 1}, {"radius"})], "radius 1 m, permeability 1") == [{}]
    assert claimed([({"adults": 2, "children": 2}, {"adults"})], "a room for two adults and 2 children") == [{}]
    assert claimed([({"rate": 5, "years": 5}, {"rate"})], "5% for five years") == [{}]
    assert claimed([({"length": 5, "width": 5, "decimals": 5}, {"length", "width"})],
                   "the area of a square of side 5, rounded to 5 decimal places") == [{}]
    assert claimed([({"a": -3, "b": -3}, {"a"})], "a is -3 and b is minus 3") == [{}]
    assert claimed([({"a": -3, "b": -3}, {"a"})], "a is -3") == [
        {"b": Verdict(False, "-3 is stated once in the request, and the required a takes it")}]
    # the same name required in another call: one quantity given to two functions
    assert claimed([({"city": "Paris", "days": 3}, {"city", "days"}), ({"city": "Paris", "days": 3}, {"city"})],
                   "the forecast and the air quality in Paris for 3 days") == [{}, {}]
    # a value every call gives one required argument is one mention ("the same current in both")
    assert claimed([({"current": 10, "n": 10}, {"current"}), ({"current": 10, "n": 10}, {"current"})],
                   "10 amperes in both") == [{"n": Verdict(False, "10 is stated once in the request, and "
                                                                  "the required current takes it")}] * 2
    # no required argument holds it, the request does not state it as written, it is no number, or no float
    assert claimed([({"a": 3, "scale": 3}, {"a"}), ({"a": 4, "scale": 3}, {"a"})], "3 and 4 at scale 3") == [{}, {}]
    assert claimed([({"minutes": 120, "hours": 2}, {"hours"})], "for 2 hours") == [{}]
    assert claimed([({"id": 10**400, "n": 10**400}, {"id"})], "id 1" + "0" * 400) == [{}]
    assert claimed([({"a": 1, "flag": True, "name": "1"}, {"a"})], "use 1") == [{}]
