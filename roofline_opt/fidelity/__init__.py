"""Fidelity: how far to trust the roofline. Measured serving figures against it, efficiency fits, the paper's
headline results and the answer's sensitivity to contested assumptions.

``validate`` maps each row of a measured-points CSV (columns of ``examples/measured_points.csv``, mapping in
``measured``; benchmark clients' result files become such rows in ``measurements``) to a setup and checks the
roofline bound (prediction >= measurement). ``calibrate`` fits an engine profile's efficiencies (FLOP, HBM, NCCL
latency and kernel launch factors) to the rows of each accelerator, regularised towards a prior profile inside
physical bounds, and returns the calibrated profile (``calibration``). ``reproduce`` compares our integer frontiers
with the notebook's continuous headline numbers (physics.md section 8). ``sensitivity`` re-solves a frontier with
the contested assumptions moved.

May import: the public API (``roofline_opt.api``), the catalog, the physics, the report and the base modules.
"""

from roofline_opt.fidelity.calibration.calibrate import PARAMETERS as FIT_PARAMETERS
from roofline_opt.fidelity.calibration.calibrate import AcceleratorFit, Calibration, calibrate, card_yaml
from roofline_opt.fidelity.measured import MEASURED_COLUMNS, MeasuredRow, MeasuredSetup, map_row, read_measured
from roofline_opt.fidelity.measurements import Description, read_any
from roofline_opt.fidelity.reproduce import (
    CASES,
    CONTEXT_CANDIDATES,
    PaperCase,
    Reproduction,
    choose_context,
    compare_case,
    reproduce,
)
from roofline_opt.fidelity.sensitivity import Sensitivity, plot_sensitivity, sensitivity, variants
from roofline_opt.fidelity.summary import ValidationSummary, by_framework, plot_panels, summarise
from roofline_opt.fidelity.validate import ValidationRow, validate

__all__ = [
    "CASES",
    "CONTEXT_CANDIDATES",
    "FIT_PARAMETERS",
    "MEASURED_COLUMNS",
    "AcceleratorFit",
    "Calibration",
    "Description",
    "MeasuredRow",
    "MeasuredSetup",
    "PaperCase",
    "Reproduction",
    "Sensitivity",
    "ValidationRow",
    "ValidationSummary",
    "by_framework",
    "calibrate",
    "card_yaml",
    "choose_context",
    "compare_case",
    "map_row",
    "plot_panels",
    "plot_sensitivity",
    "read_any",
    "read_measured",
    "reproduce",
    "sensitivity",
    "summarise",
    "validate",
    "variants",
]
