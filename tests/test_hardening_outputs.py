"""Output paths are written through to what they are: a character device stays a device, a symlink stays a link (its
regular target replaced whole), a FIFO is fed, a full device is a one-line failure; an input is never overwritten;
CSV cells are formula-safe."""

from __future__ import annotations

import os
import stat
import sys
import threading

import pandas as pd
import pytest
from hardening import EVALUATE, assert_one_line, hidden_leftovers, run

from roofline_opt import files
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, main
from roofline_opt.errors import InvalidInput

NULL_DEVICE = os.makedev(1, 3)
FULL_DEVICE = os.makedev(1, 7)
LOOP_DEVICE = os.makedev(7, 0)


def make_device(path, device, kind=stat.S_IFCHR):
    os.mknod(path, 0o666 | kind, device)
    return path


def test_csv_onto_a_character_device_writes_through_and_keeps_the_device(tmp_path, capsys):
    null = make_device(tmp_path / "null", NULL_DEVICE)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(null))

    assert (code, err) == (EXIT_OK, "")
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == NULL_DEVICE
    assert hidden_leftovers(tmp_path) == []


def test_csv_onto_a_full_device_is_one_line_exit_2_and_the_device_stays(tmp_path, capsys):
    full = make_device(tmp_path / "full", FULL_DEVICE)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(full))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "No space left on device")
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_csv_onto_a_symlink_replaces_its_regular_target_and_keeps_the_link(tmp_path, capsys):
    target = tmp_path / "target.csv"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    link = tmp_path / "link.csv"
    link.symlink_to(target.name)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(link))

    assert (code, err) == (EXIT_OK, "")
    assert link.is_symlink() and os.readlink(link) == "target.csv"
    assert pd.read_csv(target)["tp"].tolist() == [1]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert hidden_leftovers(tmp_path) == []


def test_csv_onto_a_dangling_symlink_creates_its_target(tmp_path, capsys):
    link = tmp_path / "link.csv"
    link.symlink_to("made.csv")

    code, _, _ = run(capsys, *EVALUATE, "--csv", str(link))

    assert code == EXIT_OK
    assert link.is_symlink() and pd.read_csv(tmp_path / "made.csv")["batch"].tolist() == [1]


def test_csv_onto_a_symlink_to_a_device_writes_through_to_the_device(tmp_path, capsys):
    full = make_device(tmp_path / "full", FULL_DEVICE)
    link = tmp_path / "link.csv"
    link.symlink_to(full)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(link))

    assert_one_line(err, code, EXIT_BAD_INPUT, "No space left on device")
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(full).st_mode)


def test_csv_into_a_fifo_feeds_its_reader_and_keeps_the_fifo(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    try:
        code, _, err = run(capsys, *EVALUATE, "--csv", str(fifo))
    finally:
        reader.join(timeout=10)

    assert (code, err) == (EXIT_OK, "")
    assert received and received[0].startswith("model,")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_csv_into_a_fifo_without_reader_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(fifo))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "FIFO with no reader")


def test_csv_onto_a_block_device_is_refused_by_name(tmp_path, capsys):
    disk = make_device(tmp_path / "disk", LOOP_DEVICE, stat.S_IFBLK)

    code, _, err = run(capsys, *EVALUATE, "--csv", str(disk))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "block device")
    assert stat.S_ISBLK(os.lstat(disk).st_mode)


def test_a_failed_write_keeps_the_old_file_whole_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old\n")

    def half_then_fail(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(InvalidInput, match="No space left on device"):
        files.write_output(out, half_then_fail, "--csv")

    assert out.read_text() == "old\n"
    assert hidden_leftovers(tmp_path) == []


def test_calibrate_out_equal_to_measured_is_refused_and_the_measurements_stay(tmp_path, capsys):
    measured = tmp_path / "measured.csv"
    measured.write_text((files.Path(__file__).parent / "data" / "measured_synthetic.csv").read_text())
    before = measured.read_text()

    code, _, err = run(capsys, "calibrate", "--measured", str(measured), "--gpu", "h100-sxm", "--out", str(measured))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--out", "input file")
    assert measured.read_text() == before


def test_evaluate_csv_equal_to_its_input_csv_is_refused(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("model,gpu,tp,pp,batch\nllama-3-8b,h100-sxm,1,1,1\n")

    code, _, err = run(capsys, "evaluate", "--from-csv", str(rows), "--csv", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert rows.read_text().count("\n") == 2


def test_models_onto_a_full_stdout_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    full = make_device(tmp_path / "full", FULL_DEVICE)
    with open(full, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        code, _, err = run(capsys, "models")
        monkeypatch.undo()

    assert_one_line(err, code, EXIT_BAD_INPUT, "standard output", "No space left on device")


# ----------------------------------------------------------------------------------------------- formula-safe CSV


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("-1.5", "-1.5"),
        ("+2e3", "+2e3"),
        ("h100-sxm", "h100-sxm"),
    ],
)
def test_a_text_cell_that_a_sheet_would_run_is_prefixed_with_a_quote_and_numbers_are_kept(cell, written):
    assert files.formula_safe(cell) == written


def test_csv_output_keeps_negative_numbers_numeric_and_quotes_formula_text():
    frame = pd.DataFrame({"name": ["=1+1", "ok"], "delta": [-0.25, 3.0]})

    text = files.csv_text(frame)

    assert text.splitlines() == ["name,delta", "'=1+1,-0.25", "ok,3.0"]


def test_validate_csv_output_quotes_a_formula_in_a_measured_cell(tmp_path, capsys):
    measured = tmp_path / "measured.csv"
    header = "model,precision,gpu,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu"
    measured.write_text(f'{header}\n"=HYPERLINK(""http://evil"")",BF16,H100,TP1,batch 1,100,100,50,50\n')
    out = tmp_path / "out.csv"

    code, _, _ = run(capsys, "validate", "--measured", str(measured), "--csv", str(out))

    assert code == EXIT_OK
    assert pd.read_csv(out)["model"].tolist() == ['\'=HYPERLINK("http://evil")']


def test_csv_to_dev_stdout_writes_into_standard_output(capfd):
    code = main([*EVALUATE, "--csv", "/dev/stdout", "--json"])
    captured = capfd.readouterr()

    assert (code, captured.err) == (EXIT_OK, "")
    assert "model,weight_bits," in captured.out and '"model": "llama-3-8b"' in captured.out


def test_a_plot_onto_a_character_device_without_extension_is_drawn_as_png(tmp_path, capsys):
    null = make_device(tmp_path / "null", NULL_DEVICE)
    cluster = files.Path(__file__).parent / "data" / "clusters" / "twelve-gpus.yaml"

    code, _, err = run(capsys, "cluster", "draw", str(cluster), "--out", str(null))

    assert (code, err) == (EXIT_OK, "")
    assert stat.S_ISCHR(os.lstat(null).st_mode)
