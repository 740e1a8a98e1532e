"""``callmaybe serve`` failing before it serves: one error line and exit status 2, no model loaded."""

import socket

from click.testing import CliRunner

from callmaybe.cli import main

from .serving import free_port


def test_a_model_that_cannot_be_loaded_is_one_line_and_status_2(tmp_path):
    result = CliRunner().invoke(main, ["serve", "--model", str(tmp_path / "no-such-model"), "--port", str(free_port())])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "no-such-model" in result.stderr


def test_an_address_in_use_is_one_line_and_status_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--model", "smollm2-135m-instruct", "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
