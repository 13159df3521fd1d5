"""Does a calibrated profile generalise? Held-out median error of three estimates (issue 23).

Rows (those ``calibrate`` fits: mapped point rows with a stated batch, no MTP, no assumption) are split into
training and held-out sets; on the held-out rows the median |estimate / measured - 1| is reported for

- ``uncalibrated``: the prior profile (neutral by default: the default preset);
- ``median-ratio scale``: the prior's estimate times the training rows' median measured / estimate of the same
  accelerator (1 for an accelerator without training rows);
- ``calibrated``: the profile ``calibrate`` fits to the training rows (per accelerator; the prior where an accelerator
  has no training rows).

With ``--by-engine`` both the scale and the fit are per accelerator and engine (the rows' framework), as
``calibrate --engine`` fits.

Splits: by source (train on one file, hold out another: the reference rows against the newer public rows, both
ways) and random k-fold over all rows pooled (k = 5, seed 0).

    python benchmarks/calibration_holdout.py
    python benchmarks/calibration_holdout.py --files A.csv B.csv --folds 5 --profile neutral
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from roofline_opt.catalog import load_gpu
from roofline_opt.catalog.profiles import load_profile
from roofline_opt.fidelity.calibration import calibrate as cal
from roofline_opt.fidelity.measured import map_row, read_measured

HERE = Path(__file__).resolve().parent
FILES = (
    HERE.parent / ".." / "shared" / "reference" / "measured_points.csv",
    HERE.parent / "tests" / "data" / "measured_public_extra.csv",
    HERE.parent / "tests" / "data" / "measured_public_2026.csv",
)


BY_ENGINE = [False]
"""Fit per accelerator and engine (``--by-engine``) instead of per accelerator."""


def load(files):
    """(file index, gpu card, setup, measured tok/s per request) of every fitted row of the files."""
    out = []
    for i, path in enumerate(files):
        for r, s in cal.fitted_rows([map_row(c) for c in read_measured(path)]):
            group = s.gpu_card + (f" {cal.engine_key(r.framework)}" if BY_ENGINE[0] else "")
            out.append((i, group, s, float(r.measured_tok_s_per_request)))
    return out


def held_out_errors(rows, train: np.ndarray, test: np.ndarray, profile) -> dict[str, np.ndarray]:
    """ln(estimate / measured) of the held-out rows under each method, fitted on the training rows."""
    gpus = np.array([r[1] for r in rows])
    measured = np.array([r[3] for r in rows])
    out = {k: np.full(len(rows), np.nan) for k in ("uncalibrated", "median-ratio scale", "calibrated")}
    for gpu in sorted(set(gpus[test])):
        mine = np.flatnonzero(gpus == gpu)
        fit_on, check = mine[train[mine]], mine[test[mine]]
        preset = profile.preset_for(load_gpu(gpu.split()[0]))
        prior = cal.prior_values(preset)
        predict = cal.predictor([rows[i][2] for i in mine], preset)
        at_prior = predict(prior[None, :])[0]
        local = {i: j for j, i in enumerate(mine)}
        c, f = [local[i] for i in check], [local[i] for i in fit_on]
        base = np.log(at_prior[c] / measured[check])
        out["uncalibrated"][check] = base
        scale = float(np.median(measured[fit_on] / at_prior[f])) if len(f) else 1.0
        out["median-ratio scale"][check] = base + np.log(scale)
        if len(f):
            coordinates, _ = cal.fit_values(lambda p, f=f, predict=predict: predict(p)[:, f], measured[fit_on], prior)
            values = cal.fit.values_at(prior, coordinates[None, :])
            out["calibrated"][check] = np.log(predict(values)[0][c] / measured[check])
        else:
            out["calibrated"][check] = base
    return {k: v[test] for k, v in out.items()}


def median_abs(log_errors: np.ndarray) -> float:
    return float(np.median(np.abs(np.expm1(log_errors))))


def report(name: str, errors: dict[str, np.ndarray]) -> None:
    figures = ", ".join(f"{k} {median_abs(v):.1%}" for k, v in errors.items())
    print(f"{name} ({len(next(iter(errors.values())))} held-out rows): {figures}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", type=Path, default=list(FILES))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--profile", default="neutral", help="prior profile (packaged name or file)")
    parser.add_argument("--by-engine", action="store_true", help="fit (and scale) per accelerator and engine")
    args = parser.parse_args()
    BY_ENGINE[0] = args.by_engine
    profile = load_profile(args.profile)
    rows = load(args.files)
    source = np.array([r[0] for r in rows])
    print(f"{len(rows)} rows: " + ", ".join(f"{p.name} {int(np.sum(source == i))}" for i, p in enumerate(args.files)))
    for i, a in enumerate(args.files):
        for j, b in enumerate(args.files):
            if i != j and np.any(source == i) and np.any(source == j):
                report(f"train {a.name}, hold out {b.name}", held_out_errors(rows, source == i, source == j, profile))
    fold = np.random.default_rng(0).permutation(len(rows)) % args.folds
    pooled: dict[str, list[np.ndarray]] = {}
    for k in range(args.folds):
        for name, e in held_out_errors(rows, fold != k, fold == k, profile).items():
            pooled.setdefault(name, []).append(e)
    report(f"random {args.folds}-fold, all rows pooled", {k: np.concatenate(v) for k, v in pooled.items()})


if __name__ == "__main__":
    main()
