"""One layout record: answers' ``Setup``, fleet ``Candidate`` and evaluate's ``SetupRow`` take their layout fields and
defaults from ``optimize/layout_record.py``, and still print in their own orders."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from roofline_opt.optimize import layout_record, setups
from roofline_opt.optimize.fleet.candidates import CANDIDATE_ORDER, Candidate
from roofline_opt.optimize.layout_record import LAYOUT_DEFAULTS, LayoutChoice, ServingChoice
from roofline_opt.optimize.results import SETUP_ORDER, Setup
from roofline_opt.optimize.setups import ROW_ORDER, SetupRow

RECORDS = {Setup: ServingChoice, SetupRow: ServingChoice, Candidate: LayoutChoice}


def _fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("record", RECORDS, ids=lambda cls: cls.__name__)
def test_each_record_is_the_shared_layout_record(record):
    assert issubclass(record, LayoutChoice)
    assert issubclass(record, RECORDS[record])


@pytest.mark.parametrize("record", RECORDS, ids=lambda cls: cls.__name__)
def test_each_record_has_the_shared_field_names_and_defaults(record):
    base, mine = _fields(RECORDS[record]), _fields(record)
    for name, f in base.items():
        assert mine[name].default == f.default, name
        assert mine[name].type == f.type, name


def test_the_three_records_agree_on_every_layout_default():
    shared = _fields(LayoutChoice)
    for name in shared:
        defaults = {cls.__name__: _fields(cls)[name].default for cls in RECORDS}
        assert len({repr(d) for d in defaults.values()}) == 1, (name, defaults)
    serving = set(_fields(ServingChoice)) - set(shared)
    assert _fields(Setup)["prefill_tp"].default == _fields(SetupRow)["prefill_tp"].default
    assert serving <= set(_fields(Setup)) and serving <= set(_fields(SetupRow))


def test_evaluate_input_defaults_are_the_records():
    for name, value in LAYOUT_DEFAULTS.items():
        if name in setups.DEFAULTS and name != "prefill_gpu":
            assert setups.DEFAULTS[name] == value, name


def test_a_setup_built_with_the_required_fields_only_takes_the_record_defaults():
    setup = Setup(gpu="h100-sxm", weight_bits=16, tp=8, batch=32, gamma=0)
    candidate = Candidate(
        model=0, gpu="h100-sxm", weight_bits=16, tp=8, gamma=0, batch=32, time_per_token_s=0.01, usd_per_hour=2.0
    )
    for name in _fields(LayoutChoice):
        if name not in ("gpu", "weight_bits", "tp"):
            assert getattr(setup, name) == getattr(candidate, name) == LAYOUT_DEFAULTS[name], name


@pytest.mark.parametrize(
    ("record", "order"), [(Setup, SETUP_ORDER), (SetupRow, ROW_ORDER), (Candidate, CANDIDATE_ORDER)]
)
def test_each_printed_order_names_every_field_once(record, order):
    assert sorted(order) == sorted(_fields(record))


def test_printed_orders_keep_the_columns_as_before():
    """The orders the records printed in before they shared a base (asdict of the old field lists)."""
    assert SETUP_ORDER[:11] == (
        "gpu",
        "weight_bits",
        "tp",
        "tp_2d",
        "pp",
        "ep",
        "batch",
        "gamma",
        "replicas",
        "dp_attention",
        "kv_bits",
    )
    assert CANDIDATE_ORDER[:11] == (
        "model",
        "gpu",
        "weight_bits",
        "tp",
        "tp_2d",
        "pp",
        "ep",
        "gamma",
        "kv_bits",
        "chunk_tokens",
        "batch",
    )
    assert ROW_ORDER[:3] == ("model", "weight_bits", "gpu")


CHANGED_RECORD = """
import importlib.util, json, sys
path = sys.argv[1]
text = open(path).read()
edits = (("    ep: int = 1\\n", "    ep: int = 2\\n"), ("    prefill_tp: int = 1\\n", "    prefill_tp: int = 3\\n"))
for old, new in edits:
    assert old in text, old
    text = text.replace(old, new)
import roofline_opt.physics.requests
spec = importlib.util.spec_from_loader("roofline_opt.optimize.layout_record", loader=None, origin=path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
exec(compile(text, path, "exec"), module.__dict__)
from roofline_opt.optimize import setups
from roofline_opt.optimize.fleet.candidates import Candidate
from roofline_opt.optimize.results import Setup
from roofline_opt.optimize.setups import SetupRow
row = {f: SetupRow.__dataclass_fields__[f].default for f in ("ep", "prefill_tp")}
print(json.dumps({
    "setup": [Setup(gpu="g", weight_bits=16, tp=1, batch=1, gamma=0).ep, Setup(gpu="g", weight_bits=16, tp=1, batch=1,
              gamma=0).prefill_tp],
    "candidate": Candidate(model=0, gpu="g", weight_bits=16, tp=1, gamma=0, batch=1, time_per_token_s=1.0,
                           usd_per_hour=1.0).ep,
    "row": [row["ep"], row["prefill_tp"]],
    "defaults": [setups.DEFAULTS["ep"], setups.DEFAULTS["prefill_tp"]],
}))
"""


def test_a_default_changed_in_the_record_changes_all_three():
    """Edit two defaults in layout_record.py's source (ep 1 -> 2, prefill_tp 1 -> 3) and import the three records."""
    source = Path(layout_record.__file__)
    done = subprocess.run(
        [sys.executable, "-c", CHANGED_RECORD, str(source)], capture_output=True, text=True, check=True, timeout=120
    )
    seen = json.loads(done.stdout)
    assert seen == {"setup": [2, 3], "candidate": 2, "row": [2, 3], "defaults": [2, 3]}
