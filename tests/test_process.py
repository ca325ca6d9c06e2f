"""The edge: every command is an argument list with a timeout, and failures carry data."""

import pytest

from jupyter_gtc import _process
from jupyter_gtc.exceptions import CommandError


def test_arguments_are_never_interpreted_by_a_shell():
    hostile = "a'; echo foo; $(id) `id` > /tmp/x"
    assert _process.run(["printf", "%s", hostile]).stdout == hostile


def test_failure_carries_argv_exit_code_and_stderr():
    with pytest.raises(CommandError) as info:
        _process.run(["ls", "/no/such/path"])
    err = info.value
    assert err.argv == ["ls", "/no/such/path"] and err.returncode == 2
    assert "No such file" in err.stderr and "ls exited with code 2" in str(err)


def test_timeout_is_an_error_not_a_hang():
    with pytest.raises(CommandError) as info:
        _process.run(["sleep", "5"], timeout=0.2)
    assert info.value.returncode is None and "timed out after 0.2s" in str(info.value)


def test_missing_program():
    with pytest.raises(CommandError) as info:
        _process.run(["no-such-program-gtc"])
    assert info.value.returncode == 127
