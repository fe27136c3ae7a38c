"""The one-line errors built from pip's output carry no terminal escape sequences
(paperlib.implementations.opacus_code.wheels._last_line): pip's rich console colours its
errors when it believes it writes to a terminal (FORCE_COLOR, some CI), and its last line
is then a bare ``ESC[0m``."""

from __future__ import annotations

import os
import subprocess

import pytest

from paperlib.implementations.opacus_code import wheels
from paperlib.implementations.opacus_code.rules import AuditError

COLOURED = ("\x1b[0m\x1b[31mERROR: Could not find a version that satisfies the requirement opacus==1.0.2 "
            "(from versions: none)\x1b[0m\x1b[31m\n\x1b[0m\x1b[31mERROR: No matching distribution found for "
            "opacus==1.0.2\x1b[0m\x1b[31m\n\x1b[0m\n")
LAST = "ERROR: No matching distribution found for opacus==1.0.2"


@pytest.mark.parametrize("text,want", [
    (COLOURED, LAST),
    ("plain line\nlast one\n", "last one"),
    ("\x1b]8;;https://pip.pypa.io\x1b\\link\x1b]8;;\x1b\\ text\n", "link text"),  # OSC hyperlink
    ("error [0m\n[1;31m\n", "error"),  # SGR codes whose ESC was lost on the way
    ("opacus[m] and a[1] list\n", "opacus[m] and a[1] list"),  # brackets that are not escape codes stay
    ("\x1b[0m\n\n", "no output"),
    ("", "no output"),
])
def test_last_line_strips_escape_sequences(text, want):
    assert wheels._last_line(text) == want


def test_offline_download_error_is_clean_with_a_colouring_pip(tmp_path, monkeypatch):
    """A real pip, offline (no index, an empty find-links folder) and forced to colour:
    fetch_wheel's AuditError is pip's last error line, without escape codes."""
    (tmp_path / "links").mkdir()
    for k, v in {"FORCE_COLOR": "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "links"),
                 "PIP_CONFIG_FILE": os.devnull}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(AuditError) as e:
        wheels.fetch_wheel("1.0.2", tmp_path / "cache")
    msg = str(e.value)
    assert "\x1b" not in msg and "[0m" not in msg and "[31m" not in msg, repr(msg)
    assert msg.startswith("pip download of opacus==1.0.2 failed: ERROR:") and "opacus==1.0.2" in msg.split(": ", 1)[1]
    assert len(msg.splitlines()) == 1


def test_colouring_pip_really_ends_with_a_bare_escape(tmp_path):
    """The premise of the test above: forced colour, pip's stderr ends with ESC[0m alone."""
    env = dict(os.environ, FORCE_COLOR="1", PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path), PIP_CONFIG_FILE=os.devnull)
    r = subprocess.run([wheels.sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--no-deps",
                        "-d", str(tmp_path), "opacus==1.0.2"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0
    if "\x1b" not in r.stderr:
        pytest.skip("this pip does not colour its output")
    assert [ln for ln in r.stderr.splitlines() if ln.strip()][-1].strip() == "\x1b[0m"
