"""`bringup diagnose` on an empty log says the file is empty and how to capture one (exit 2), not 'nothing recognised'."""

import io

from bringup.cli import main


def test_empty_file_is_bad_input(capsys, tmp_path):
    log = tmp_path / "crash.log"
    log.write_text("\n  \n")
    assert main(["diagnose", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log} is empty" in err and "2>&1" in err


def test_empty_standard_input_is_bad_input(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["diagnose", "-"]) == 2
    assert "standard input was empty" in capsys.readouterr().err
