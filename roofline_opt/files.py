"""User files in and out: bounded reads (size, rows; YAML and JSON parsed by ``documents``) and writes that appear
whole or not at all, written through to what a path is (a device, a FIFO, a symlink's target) and never replacing
it (nor an input of the run)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from roofline_opt.documents import MAX_NESTING as MAX_NESTING
from roofline_opt.documents import MAX_YAML_ALIASES as MAX_YAML_ALIASES
from roofline_opt.documents import MAX_YAML_VALUES as MAX_YAML_VALUES
from roofline_opt.documents import load_json as load_json
from roofline_opt.documents import load_yaml as load_yaml
from roofline_opt.errors import InvalidInput

MiB = 1 << 20
MAX_CARD_BYTES = 1 * MiB
"""Largest model/accelerator card or HuggingFace config.json read (real ones are a few KB)."""
MAX_CLUSTER_BYTES = 32 * MiB
"""Largest cluster file read (a 10,000-GPU GraphML is about 5 MB)."""
MAX_CSV_BYTES = 64 * MiB
"""Largest CSV read (--from-csv, --measured, --observed)."""
MAX_CSV_ROWS = 10_000
"""Most data rows of a CSV read (--from-csv, --measured; --observed has its own, smaller cap)."""
MAX_CSV_COLUMNS = 256
"""Most fields in one CSV line."""
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
"""Text cells starting with one of these are read as formulas by spreadsheets; CSV output prefixes them with '."""


# ----------------------------------------------------------------------------------------------- reading


def _size_text(n_bytes: int) -> str:
    return f"{n_bytes // MiB} MiB" if n_bytes >= MiB else f"{n_bytes} bytes"


def read_text(path: str | os.PathLike[str], field: str, max_bytes: int, what: str = "this file") -> str:
    """The UTF-8 text of ``path``, at most ``max_bytes`` long (devices and FIFOs are read up to the cap only)."""
    path = Path(path)
    try:
        if path.is_dir():
            raise InvalidInput(field, f"cannot be read: {str(path)!r} is a folder")
        data = _read_at_most(path, max_bytes + 1)
    except OSError as exc:
        raise InvalidInput(field, f"cannot be read: {exc.strerror or exc}") from exc
    if data is None:
        raise InvalidInput(field, "cannot be read: it is a FIFO with no writer")
    if len(data) > max_bytes:
        raise InvalidInput(field, f"is larger than {_size_text(max_bytes)}, the limit for {what}")
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (spreadsheet exports) is not part of the text
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, f"cannot be read: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not text.strip():
        raise InvalidInput(field, "is empty")
    return text


_inputs_read: dict[tuple[int, int], str] | None = None
"""(device, inode) -> path of every regular file read while ``inputs_tracked`` is active; None when it is not."""


@contextlib.contextmanager
def inputs_tracked() -> Iterator[None]:
    """Remember every regular file read (``read_text``) while active, so that no output replaces one of them
    (``write_output`` and ``check_destination`` refuse it, through links too): a command's inputs are never
    overwritten by its own outputs."""
    global _inputs_read
    previous, _inputs_read = _inputs_read, {}
    try:
        yield
    finally:
        _inputs_read = previous


def _refuse_input(path: Path, field: str, inputs: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """InvalidInput if ``path`` is (through links) one of ``inputs`` or a file read while inputs are tracked."""
    try:
        info = os.stat(path)
    except OSError:
        return  # a new path is nobody's input
    known = dict(_inputs_read or {})
    for source in inputs:
        with contextlib.suppress(OSError, TypeError, ValueError):
            if source is not None:
                other = os.stat(source)
                known.setdefault((other.st_dev, other.st_ino), str(source))
    if stat.S_ISREG(info.st_mode) and (source := known.get((info.st_dev, info.st_ino))) is not None:
        raise InvalidInput(field, f"must not be the input file {source!r}: it would be overwritten")


def _read_at_most(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``path``; None for a FIFO nobody writes to (reading it would wait forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and _inputs_read is not None:
            _inputs_read.setdefault((info.st_dev, info.st_ino), str(path))
        if stat.S_ISFIFO(info.st_mode):
            try:
                first = os.read(fd, limit)
            except BlockingIOError:  # a writer is connected and has not written yet
                first = b""
            else:
                if not first:
                    return None
        else:
            first = b""
        os.set_blocking(fd, True)
        chunks = [first]
        size = len(first)
        while size < limit:
            chunk = os.read(fd, min(limit - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_csv_cells(
    path: str | os.PathLike[str], field: str, required: Sequence[str], rows_are: str, max_rows: int = MAX_CSV_ROWS
) -> Any:
    """A user's CSV as a pandas frame of stripped text cells (blank = ""), with its required columns and at most
    ``max_rows`` rows; any problem is InvalidInput. ``field`` names the flag, ``rows_are`` what a row holds."""
    import io

    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise InvalidInput(
            field, f"must be an existing CSV file. Got {str(path)!r} instead (no such file {path.absolute()})."
        )
    text = read_text(path, field, MAX_CSV_BYTES, "a CSV file")
    _check_csv_shape(text, path, field, required, max_rows)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError as exc:
        raise InvalidInput(field, f"{path} is empty: it needs a header line and one row per {rows_are}") from exc
    except (pd.errors.ParserError, ValueError) as exc:
        raise InvalidInput(field, f"{path} cannot be read as CSV: {exc}") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise InvalidInput(field, f"{path} has a header but no rows")
    return frame


def located(field: str, path: str | os.PathLike[str]) -> str:
    """Where a problem in the file ``path`` given as ``field`` is, as an error names it: ``--workload: mix.csv``
    (just the path when the file is its own field, a positional FILE)."""
    return str(path) if field == str(path) else f"{field}: {path}"


def _check_csv_shape(text: str, path: Path, field: str, required: Sequence[str], max_rows: int) -> None:
    """Refuse, before pandas sees it, a CSV without a ``required`` column, of more than ``max_rows`` rows, with a line
    of more than MAX_CSV_COLUMNS fields or more fields than its header (pandas would silently shift them into an
    index), or with an oversized cell."""
    import csv
    import io

    width = None
    try:
        for number, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if not row:
                continue
            if len(row) > MAX_CSV_COLUMNS:
                raise InvalidInput(field, f"{path} line {number} has more than {MAX_CSV_COLUMNS} fields")
            if width is None:
                width = len(row)
                names = [cell.strip() for cell in row]
                twice = sorted({name for name in names if name and names.count(name) > 1})
                if twice:
                    msg = f"column is given twice in the header of {path}: give each column once"
                    raise InvalidInput(f"{field}: {twice[0]}", msg)
                missing = [c for c in required if c not in {cell.strip() for cell in row}]
                if missing:
                    msg = f"column is missing: the file needs columns {', '.join(required)}"
                    raise InvalidInput(f"{located(field, path)}: {missing[0]}", msg)
            elif len(row) > width:
                msg = f"{path} line {number} has {len(row)} fields but the header {width}: quote cells with commas"
                raise InvalidInput(field, msg)
            if number > max_rows + 1:
                raise InvalidInput(field, f"{path} has more than {max_rows:,} rows, the limit for one run: split it")
    except csv.Error as exc:
        raise InvalidInput(field, f"{path} cannot be read as CSV: {exc}") from exc


# ----------------------------------------------------------------------------------------------- writing


_stopped = [False]
"""Whether the run was interrupted: set by the CLI's signal handler (see stop_writing)."""


def stop_writing(stop: bool = True) -> None:
    """From now on (until called with ``False``) every output write raises KeyboardInterrupt instead of writing: a run
    a signal reached writes nothing, even when a library swallowed the KeyboardInterrupt the signal raised."""
    _stopped[0] = stop


def _check_not_stopped() -> None:
    if _stopped[0]:
        raise KeyboardInterrupt


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while a few renames complete, then deliver them to the previous handlers: no
    half-moved output."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {
        s: signal.signal(s, lambda signum, _frame: caught.append(signum))
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


def _umask() -> int:
    """The process umask (read by setting and restoring it), so written files get the usual permissions."""
    current = os.umask(0)
    os.umask(current)
    return current


def _cannot(field: str, path: Path, exc: OSError | str) -> InvalidInput:
    reason = exc if isinstance(exc, str) else exc.strerror or str(exc)
    return InvalidInput(field, f"cannot write {str(path)!r}: {reason}")


def _kind(mode: int) -> str | None:
    """What a special file is, for messages; None for the kinds written through (character devices, FIFOs)."""
    if stat.S_ISDIR(mode):
        return os.strerror(errno.EISDIR)
    if stat.S_ISBLK(mode):
        return "it is a block device (refusing to write a disk)"
    if stat.S_ISSOCK(mode):
        return "it is a socket"
    return None


DESCRIPTOR_PREFIXES = ("/dev/fd/", "/proc/")
"""Paths under these folders (``/dev/fd/1``, ``/proc/self/fd/1``), ``/dev/stdout`` and links to them name an open
descriptor: written through, never replaced (a regular file under ``/dev/shm`` is an ordinary file)."""
MAX_LINK_HOPS = 40


_OWN_FD = re.compile(r"/(?:proc/self|dev)/fd/(\d+)")
_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _own_descriptor(path: Path) -> int | None:
    """The descriptor number ``/dev/stdout``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names, else None."""
    text = os.path.abspath(path)
    match = _OWN_FD.fullmatch(text)
    return int(match.group(1)) if match else _STANDARD_STREAMS.get(text)


def _names_a_descriptor(path: Path) -> bool:
    """Whether ``path``, or a symlink on the way to its target, names an open descriptor (``/dev/stdout``,
    ``/dev/fd/N``, ``/proc/...``): such a path is written through, so ``--csv /dev/stdout > file`` writes into file."""
    text = os.path.abspath(path)
    for _ in range(MAX_LINK_HOPS):
        if text.startswith(DESCRIPTOR_PREFIXES) or text in _STANDARD_STREAMS:
            return True
        try:
            link = os.readlink(text)
        except OSError:
            return False
        text = os.path.normpath(os.path.join(os.path.dirname(text), link))
    return False


def _write_descriptor(fd: int, data: bytes, path: Path, field: str) -> None:
    """Write to one of our own descriptors after what Python has buffered for it, sharing its file offset."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream.fileno() == fd:
                stream.flush()
    try:
        _write_all(fd, data)
    except OSError as exc:
        raise _cannot(field, path, exc) from exc


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_through(path: Path, data: bytes, field: str, append: bool = False) -> None:
    """Write into an existing character device, FIFO (it needs a reader) or system path without replacing it."""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _cannot(field, path, "it is a FIFO with no reader") from exc
        raise _cannot(field, path, exc) from exc
    try:
        os.set_blocking(fd, True)
        _write_all(fd, data)
    except OSError as exc:
        raise _cannot(field, path, exc) from exc
    finally:
        os.close(fd)


def _replace_atomically(path: Path, write: Any, field: str, mode: int | None) -> None:
    """Write through a temporary file beside ``path`` and rename it over ``path``: all of it or nothing, even when
    interrupted. ``mode`` keeps an existing file's permissions."""
    tmp_name = None
    try:
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.name}.", delete=False) as f:
            tmp_name = f.name
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, mode if mode is not None else 0o666 & ~_umask())
        _check_not_stopped()
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise _cannot(field, path, exc) from exc
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)


def write_output(path: str | os.PathLike[str], write: Any, field: str) -> None:
    """Produce an output file with ``write(binary_file)``. A regular file (or a new path, or a symlink's regular
    target) is replaced atomically; a character device or FIFO is written through; a folder, block device or socket
    is refused. A symlink stays a symlink. An output that is one of the run's inputs (see inputs_tracked) is refused."""
    _check_not_stopped()
    path = Path(path)
    try:
        info = os.stat(path)  # what the path is, through any symlinks
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _cannot(field, path, exc) from exc
    special = info is not None and not stat.S_ISREG(info.st_mode)
    refused = _kind(info.st_mode) if special and info is not None else None
    if refused is not None:
        raise _cannot(field, path, refused)
    _refuse_input(path, field)
    if special or (info is not None and _names_a_descriptor(path)):
        import io

        buffer = io.BytesIO()
        write(buffer)
        fd = _own_descriptor(path)
        if fd is not None:
            _write_descriptor(fd, buffer.getvalue(), path, field)
        else:
            _write_through(path, buffer.getvalue(), field, append=not special)
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if not os.path.isdir(target.parent):
        raise _cannot(field, path, os.strerror(errno.ENOENT))
    _replace_atomically(target, write, field, None if info is None else stat.S_IMODE(info.st_mode))


def write_text_atomic(path: str | os.PathLike[str], text: str, field: str = "output") -> None:
    """Write ``text`` (UTF-8) to ``path`` whole or not at all (see write_output for special files)."""
    write_output(path, lambda f: f.write(text.encode("utf-8")), field)


def formula_safe(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (=, +, -, @, tab, CR first) prefixed with ', so it shows as
    text; numbers and text spelling a number (-1.5, +2e3) are kept as they are."""
    if not isinstance(value, str) or not value.startswith(FORMULA_PREFIXES):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def csv_text(frame: Any, header: bool = True) -> str:
    """A pandas frame as CSV text (no index) with every text cell made formula-safe; ``header=False`` for the lines
    of a CSV written in chunks."""
    from pandas.api.types import is_numeric_dtype

    safe = frame.copy()
    safe.columns = [formula_safe(str(c)) for c in safe.columns]
    for column in safe.columns:
        if not is_numeric_dtype(safe[column]):
            safe[column] = safe[column].map(formula_safe, na_action="ignore")
    return safe.to_csv(index=False, header=header)


def write_csv(path: str | os.PathLike[str], frame: Any, field: str) -> None:
    """Write a frame as a formula-safe CSV, whole or not at all."""
    write_text_atomic(path, csv_text(frame), field)


def plot_formats() -> tuple[str, ...]:
    """File extensions matplotlib can save a figure as (png, pdf, svg, ...)."""
    from matplotlib.figure import Figure

    return tuple(sorted(Figure().canvas.get_supported_filetypes()))


def check_destination(
    path: str | os.PathLike[str],
    field: str,
    formats: Iterable[str] | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
) -> None:
    """Fail early (InvalidInput naming ``field``) if ``path`` cannot be written: no such folder, a folder, a block
    device or socket, one of the run's ``inputs``, or an extension outside ``formats``; lets a command refuse before
    hours of work and leave no partial output."""
    path = Path(path)
    try:
        exists = path.exists()
        if exists:
            kind = _kind(os.stat(path).st_mode)
            if kind is not None:
                raise _cannot(field, path, kind)
            _refuse_input(path, field, inputs)
        elif not Path(os.path.realpath(path)).parent.is_dir():
            raise _cannot(field, path, os.strerror(errno.ENOENT))
    except OSError as exc:  # a name too long, a loop of links, a folder one may not enter
        raise _cannot(field, path, exc) from exc
    if formats is not None:
        formats = tuple(formats)
        if _format(path, formats) not in formats:
            wanted = ", ".join(f".{f}" for f in formats)
            raise InvalidInput(field, f"must end in one of {wanted}. Got {str(path)!r} instead.")


def save_figure_atomic(figure: Any, path: str | os.PathLike[str], field: str = "--plot") -> None:
    """Save a matplotlib figure (format from the extension) whole or not at all (see write_output)."""
    path = Path(path)
    formats = plot_formats()
    check_destination(path, field, formats)
    write_output(path, lambda f: figure.savefig(f, format=_format(path, formats)), field)


def _format(path: Path, formats: tuple[str, ...]) -> str:
    """The file format an output path asks for: its extension; PNG for a device or FIFO named without one."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in formats and path.exists() and not path.is_file() and not path.is_dir():
        return "png"
    return suffix


def check_folder(path: str | os.PathLike[str], field: str = "--out") -> Path:
    """``path`` as an output folder: missing (it will be created) or an existing folder, never a file."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InvalidInput(field, f"must be a folder. Got {str(out)!r} instead (a file).")
    return out


@contextlib.contextmanager
def output_folder(path: str | os.PathLike[str], field: str = "--out") -> Iterator[Path]:
    """A temporary folder beside ``path`` to write a set of files into; on success they appear in ``path`` together
    (a new or empty ``path`` is the renamed temporary folder; files of an existing one are replaced by renames with
    signals held). On any failure or interrupt nothing appears and the temporary folder is removed."""
    out = check_folder(path, field)
    parent = Path(os.path.realpath(out)).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out.name}.partial-"))
    except OSError as exc:
        raise InvalidInput(field, f"cannot create {str(out)!r}: {exc.strerror or exc}") from exc
    try:
        yield staging
        with signals_deferred():
            _check_not_stopped()
            _move_into(staging, out, field)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_into(staging: Path, out: Path, field: str) -> None:
    """Move the staged files to ``out``: one rename for a new or empty folder, else one rename per file."""
    try:
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        if not out.exists():
            os.chmod(staging, 0o777 & ~_umask())
            os.rename(staging, out)
            return
        for staged in sorted(staging.iterdir()):
            destination = out / staged.name
            if destination.is_symlink() or (destination.exists() and not destination.is_file()):
                write_output(destination, lambda f, staged=staged: f.write(staged.read_bytes()), field)
            else:
                os.replace(staged, destination)
    except OSError as exc:
        raise InvalidInput(field, f"cannot write into {str(out)!r}: {exc.strerror or exc}") from exc
