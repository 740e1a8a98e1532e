"""A value that writes what the request states in another format: dates, times, numbers, units, codes."""

import pytest

from callmaybe.runtime.policy.reformat import abbreviates, reformat, request_numbers


def test_number_mentions():
    from callmaybe.runtime.policy.reformat import number_mentions

    assert number_mentions("a = 1, b = -3, c = 2; a = 1, b = 2, c = 1") == {1.0: 3, 2.0: 2, -3.0: 1}
    # a range's dash is no sign; words count only where no digits state the value
    assert number_mentions("pages 1-5, the first one and five") == {1.0: 1, 5.0: 1}
    assert number_mentions("twenty-one and 3 pm") == {20.0: 1, 1.0: 1, 21.0: 1, 3.0: 1, 15.0: 1}
    assert request_numbers("b = -3 and -4") == {3.0, 4.0}
    assert number_mentions("$1,234.56 at 10 am and 2 pm; z = \u22122") == {1234.56: 1, 10.0: 1, 2.0: 1, 14.0: 1,
                                                                          -2.0: 1}


def test_request_numbers():
    assert request_numbers("On March 3, 2021 at 2:30 pm, 1,000 people paid 2.5") == \
        {3.0, 2021.0, 2.0, 30.0, 14.0, 1000.0, 2.5}
    assert request_numbers("twenty-one of the first two hundred") == {20.0, 1.0, 21.0, 2.0, 100.0, 200.0}
    assert request_numbers("12 am and 12 pm") == {12.0, 0.0}
    assert request_numbers("no numbers here") == set()


@pytest.mark.parametrize("short, said, expected", [
    ("km", "in kilometers", "kilometers"),
    ("hrs", "two hours", "hours"),
    ("ny", "new york city", "new york"),
    ("usa", "the united states of america", "united states of america"),
    ("cm", "a radius of 4 inches", None),
    ("k", "kilometers", None),  # one letter is no abbreviation
    ("of", "of france", None),  # a linking word never starts the initials
])
def test_abbreviates(short, said, expected):
    assert abbreviates(short, said.split()) == expected


@pytest.mark.parametrize("value, request_text, expected", [
    ("2021-03-03", "What was the pound to yen rate on March 3, 2021?", "2021, 3, 3"),
    ("2021-03-03T14:00:00Z", "on March 3rd 2021 at 2 pm", "2021, 3, 3, 14"),
    ("March 3", "on 3/3/2021", "march (3), 3"),
    ("21st", "the twenty-first", "21"),
    ("2", "two tickets", "2"),
    ("km", "in kilometers", "km (kilometers)"),
    ("km/h", "kilometers per hour", "km (kilometers), h"),
    ("NY", "hotels in New York", "ny (new york)"),
    ("2021-01-01", "the rate in 2021", None),  # the day is a guess
    ("2023-10-05", "the weather tomorrow", None),
    ("cm", "a radius of 4 inches", None),
    ("00", "at noon", None),  # padding alone is no evidence
    ("c", "in celsius", None),  # a single letter alone is no evidence
    ("Paris", "in Paris", None),  # stated as written: nothing is reformatted
    ("", "anything", None),
])
def test_reformat(value, request_text, expected):
    assert reformat(value, request_text) == expected


@pytest.mark.parametrize("short, word, expected", [
    ("sec", "seconds", True), ("hrs", "hours", True), ("ft", "feet", True), ("km", "kilometers", True),
    ("cm", "centimeters", True), ("mhz", "megahertz", True), ("kg", "kilograms", True),
    ("cm", "circumference", False), ("ca", "calculate", False), ("km", "km", False), ("mi", "miles", False),
])
def test_shortens(short, word, expected):
    from callmaybe.runtime.policy.reformat import shortens

    assert shortens(short, word) is expected


def test_number_mentions_in_every_form():
    from callmaybe.runtime.policy.reformat import number_mentions

    assert number_mentions("a room for two adults and 2 children", every_form=True) == {2.0: 2}
    assert number_mentions("a room for two adults and 2 children") == {2.0: 1}
    # ordinals enumerate: "the second setup" states no 2
    assert number_mentions("the first setup has 1 loop, the second 2", every_form=True) == {1.0: 1, 2.0: 1}
    assert number_mentions("twenty-one days, the twenty-first", every_form=True) == {20.0: 1, 1.0: 1, 21.0: 1}
    assert number_mentions("one hundred samples, max 100", every_form=True) == {1.0: 1, 100.0: 2}
