"""The per-phase breakdown that --profile prints."""

from callmaybe.runtime.decoding.profile import Profile


def test_lines_give_each_phase_its_share_and_the_rest_as_other():
    p = Profile()
    p.add("prefill", 2.0, tokens=300)
    p.add("decode step", 0.5, tokens=1)
    p.add("decode step", 0.5, tokens=1)
    p.add("mask", 0.25)
    p.add("forced tokens", 0.1, calls=0)  # looked for forced text, found none
    assert p.lines(4.0) == [
        "phase           seconds   share   calls  tokens  ms/call",
        "prefill            2.00   50.0%       1     300   2000.0",
        "decode step        1.00   25.0%       2       2    500.0",
        "mask               0.25    6.2%       1            250.0",
        "forced tokens      0.10    2.5%       0",
        "other              0.65   16.2%",
        "total              4.00  (forward passes 3.00 s, 75.0%)",
    ]


def test_a_verify_pass_is_a_forward_pass():
    p = Profile()
    p.add("decode step", 1.0, tokens=1)
    p.add("verify pass", 1.5, tokens=5)  # one pending token and a draft of four
    assert p.lines(3.0) == [
        "phase           seconds   share   calls  tokens  ms/call",
        "decode step        1.00   33.3%       1       1   1000.0",
        "verify pass        1.50   50.0%       1       5   1500.0",
        "other              0.50   16.7%",
        "total              3.00  (forward passes 2.50 s, 83.3%)",
    ]
