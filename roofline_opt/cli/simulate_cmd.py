"""``roofline-opt simulate``: one setup (described as ``evaluate`` describes it) serving random arrivals or a trace,
step by step; TTFT/TPOT percentiles, utilisation and throughput beside the queueing model's."""

from __future__ import annotations

import argparse
from typing import Any

from roofline_opt import checks
from roofline_opt.errors import InvalidInput

SETUP_FLAGS = (
    "engine",
    "profile",
    "model",
    "weight_bits",
    "gpu",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "dp_attention",
    "two_batch_overlap",
    "batch",
    "context",
    "draft",
    "acceptance",
    "gamma_max",
    "preset",
    "usd_per_gpu_hour",
    "kv_bits",
    "isl",
    "osl",
    "serving",
    "chunk_tokens",
    "prefill_gpu",
    "prefill_tp",
    "prefill_tp_2d",
    "prefill_pp",
    "prefill_batch",
    "prefill_instances",
    "decode_instances",
)
"""The flags of ``evaluate`` a simulated setup takes (same names, help and defaults)."""
BURSTINESS_HELP = (
    "squared coefficient of variation of the gaps between arrivals, c_a^2: 1 is Poisson, above 1 bursty "
    "(gamma-distributed gaps), 0 evenly spaced (default 1)"
)
"""Help of --burstiness, here and in the queries (one definition)."""
PREFIX_TOKENS_HELP = (
    "cached prefix tokens at the start of every prompt (a prefix-cache hit: read, not prefilled; a disaggregated "
    "prefill instance sends only the rest's KV cache, the decode side holding the prefix), below --isl (default 0)"
)
PREFIX_HIT_RATE_HELP = "share of requests whose --prefix-tokens prefix is cached, in [0, 1] (default 1)"
DEFAULT_REQUESTS = 2000
MAX_OUTPUT_TOKENS = 5_000_000
"""Most output tokens one run decodes (requests x osl): a bound on its steps."""
EXAMPLE = (
    "example: roofline-opt simulate --model llama-3-8b --gpu h100-sxm --tp 1 --pp 1 --batch 64 --isl 2000 --osl 200 "
    "--rate-req-s 4 --burstiness 2"
)


def _setup(args: argparse.Namespace, isl: Any, osl: Any):
    """The simulated setup, checked by the API as ``evaluate`` checks one (errors name the flags)."""
    from roofline_opt import api
    from roofline_opt.cli import names
    from roofline_opt.optimize import setups

    for field in setups.REQUIRED:
        if getattr(args, field) is None:
            raise InvalidInput(names.flag(field), "is required")
    values = {f: getattr(args, f, None) for f in (*setups.REQUIRED, *setups.DEFAULTS)} | {"isl": isl, "osl": osl}
    with names.flag_names((*values, "usd_per_gpu_hour")):
        return api.checked_setup(
            values, usd_per_gpu_hour=args.usd_per_gpu_hour, engine=args.engine, profile=args.profile
        )


def _requests(args: argparse.Namespace):
    """The requests to serve and the arrival process the queueing model sees."""
    from roofline_opt.optimize.space import MAX_CONTEXT
    from roofline_opt.physics.queueing import Arrivals
    from roofline_opt.physics.requests import Workload
    from roofline_opt.simulate import arrivals

    if args.trace:
        given = [
            f
            for f, v in (
                ("--rate-req-s", args.rate_req_s),
                ("--burstiness", args.burstiness),
                ("--isl", args.isl),
                ("--osl", args.osl),
                ("--requests", args.requests),
                ("--prefix-tokens", args.prefix_tokens),
                ("--prefix-hit-rate", args.prefix_hit_rate),
            )
            if v is not None
        ]
        if given:
            raise InvalidInput("--trace", f"gives arrivals and lengths: drop {', '.join(given)}")
        reqs = arrivals.read_trace(args.trace, "--trace", MAX_CONTEXT, MAX_CONTEXT)
        return reqs, Arrivals.of_times(reqs.arrival_s)
    for flag, value in (("--rate-req-s", args.rate_req_s), ("--isl", args.isl), ("--osl", args.osl)):
        if value is None:
            raise InvalidInput(flag, "is required (or give --trace FILE)")
    rate = checks.positive_float("--rate-req-s", args.rate_req_s, maximum=1e6)
    burst = 1.0 if args.burstiness is None else args.burstiness
    scv = checks.positive_float("--burstiness", burst, allow_zero=True, maximum=100.0)
    n = checks.positive_int(
        "--requests",
        DEFAULT_REQUESTS if args.requests is None else args.requests,
        minimum=2,
        maximum=arrivals.MAX_REQUESTS,
    )
    isl = checks.positive_int("--isl", args.isl, minimum=0, maximum=MAX_CONTEXT)
    osl = checks.positive_int("--osl", args.osl, maximum=MAX_CONTEXT)
    seed = checks.positive_int("--seed", args.seed, minimum=0)
    process = Arrivals(rate, scv)
    workload = Workload.single(isl, osl)
    if args.prefix_tokens is not None or args.prefix_hit_rate is not None:
        from roofline_opt.api import prefixed_workload

        with_flags = {"prefix_tokens": "--prefix-tokens", "prefix_hit_rate": "--prefix-hit-rate", "isl": "--isl"}
        try:
            workload = prefixed_workload(workload, args.prefix_tokens, args.prefix_hit_rate) or workload
        except InvalidInput as exc:
            raise InvalidInput(with_flags.get(exc.field, exc.field), exc.message) from exc
    return arrivals.draw(process, workload, n, seed), process


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from roofline_opt import report
    from roofline_opt.optimize import setups
    from roofline_opt.physics import queueing
    from roofline_opt.physics import requests as rq
    from roofline_opt.physics import tpot_percentiles as tq
    from roofline_opt.simulate import engine, summary

    reqs, process = _requests(args)
    if int(reqs.osl.sum()) > MAX_OUTPUT_TOKENS:
        raise InvalidInput("--requests", f"times --osl may be at most {MAX_OUTPUT_TOKENS:,} output tokens per run")
    workload = reqs.workload
    setup, specs = _setup(args, round(workload.mean_isl), round(workload.mean_osl))
    model, gpu = specs.model(setup.model, "--model")[0], specs.gpu(setup.gpu, "--gpu")
    preset = specs.preset(setup, gpu)
    if setup.serving == rq.DISAGG and specs.preset(setup, specs.gpu(setup.prefill_gpu, "--prefill-gpu")) != preset:
        msg = "prices prefill and decode accelerators differently under this profile: simulate runs one preset"
        raise InvalidInput("--prefill-gpu", msg + " (give both sides one accelerator family)")
    layout = setups.request_layout(setup)
    physics = engine.Physics(model, preset, setup.weight_bits)
    spec = setups.request_speculation(setup, specs, "--draft")
    seed = checks.positive_int("--seed", args.seed, minimum=0)
    out: dict[str, Any] = {} if specs.profile is None else {"profile": specs.profile.name}
    out |= {
        "serving": setup.serving,
        "arrival_rate_req_s": process.rate_per_s,
        "arrival_scv": process.scv,
    }
    if setup.serving == rq.DISAGG:
        p_gpu = specs.gpu(setup.prefill_gpu, "--prefill-gpu")
        p_layout = setups.prefill_layout(setup)
        prefill = (p_gpu, p_layout, setup.prefill_batch, setup.prefill_instances)
        decode = (gpu, layout, setup.batch, setup.decode_instances)
        served = engine.disaggregated(physics, prefill, decode, reqs, spec, seed)
        static = rq.disaggregated_figures(
            model,
            preset,
            setup.weight_bits,
            workload,
            (p_gpu, p_layout, float(setup.prefill_batch), setup.prefill_instances),
            (gpu, layout, float(setup.batch), setup.decode_instances),
            spec=spec,
        )
        model_ttft = None
        if setup.prefill_batch == 1:
            model_ttft = queueing.disaggregated_ttft(
                model,
                preset,
                setup.weight_bits,
                workload,
                (p_gpu, p_layout, setup.prefill_instances),
                (gpu, layout),
                process,
                draft=None if spec is None else spec.draft,
                draft_weight_bits=setup.draft_weight_bits,
            )
    else:
        served = engine.aggregated(physics, gpu, layout, setup.batch, setup.chunk_tokens, reqs, spec, seed)
        static = rq.aggregated_figures(
            model, gpu, preset, setup.weight_bits, layout, float(setup.batch), workload, setup.chunk_tokens, 1.0, spec
        )
        model_ttft = queueing.aggregated_ttft(
            model, gpu, preset, setup.weight_bits, layout, workload, setup.chunk_tokens, process, spec=spec
        )
    out.update(summary.figures(served))
    for p, v in zip(queueing.PERCENTILES, model_ttft["ttft_s"] if model_ttft else [None] * 3, strict=True):
        out[f"queueing_ttft_p{p:g}_s"] = None if v is None else float(v)
    agg = setup.serving != rq.DISAGG
    decode_arrivals = queueing.Arrivals(process.rate_per_s / (1 if agg else setup.decode_instances), process.scv)
    tpots = tq.tpot_at_rate_s(
        model, gpu, preset, setup.weight_bits, layout, workload, setup.chunk_tokens, decode_arrivals, agg, spec=spec
    )
    for p, v in zip(queueing.PERCENTILES, tpots, strict=True):
        out[f"queueing_tpot_p{p:g}_s"] = float(v)
    out["queueing_prefill_utilisation"] = float(model_ttft["utilisation"]) if model_ttft else None
    out["evaluator_ttft_s"] = float(np.asarray(static["ttft_s"]).item())
    out["evaluator_tpot_s"] = float(np.asarray(static["tpot_s"]).item())
    out["fits_in_memory"] = bool(np.asarray(static["fits_in_memory"]).item())
    if args.json:
        print(report.to_json_object(out))
    else:
        import pandas as pd

        rows = pd.DataFrame(
            {"field": list(out), "value": ["n/a" if v is None else report.format_number(v) for v in out.values()]}
        )
        print(report.frame_to_table(rows))
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``simulate``: evaluate's setup flags plus arrivals, request count and seed."""
    from roofline_opt.cli import command_help
    from roofline_opt.cli import evaluate_cmd as ec

    scratch = argparse.ArgumentParser(add_help=False).add_subparsers()
    ec.add_parsers(scratch)
    evaluate = scratch.choices["evaluate"]
    p = subparsers.add_parser(
        "simulate",
        help=command_help("simulate"),
        description="Serve requests on one setup step by step (continuous batching: aggregated with chunked prefill, "
        "or disaggregated prefill/decode with the KV transfer), every step's time from the evaluator; prints TTFT and "
        "TPOT percentiles, utilisation and throughput, the queueing model's TTFT and TPOT percentiles beside them.",
        epilog=EXAMPLE,
    )
    for action in evaluate._actions:
        if action.dest in SETUP_FLAGS:
            p._add_action(action)
    p.add_argument("--rate-req-s", dest="rate_req_s", help="mean arrivals per second (required unless --trace)")
    p.add_argument("--burstiness", help=BURSTINESS_HELP)
    p.add_argument("--trace", metavar="FILE.csv", help="arrivals and lengths: a CSV of arrival_s, isl, osl per request")
    p.add_argument("--prefix-tokens", dest="prefix_tokens", help=PREFIX_TOKENS_HELP)
    p.add_argument("--prefix-hit-rate", dest="prefix_hit_rate", help=PREFIX_HIT_RATE_HELP)
    p.add_argument("--requests", help=f"requests drawn (default {DEFAULT_REQUESTS})")
    p.add_argument(
        "--seed",
        default=0,
        help="seed of the drawn arrivals and lengths, and of the tokens a draft gets accepted (default 0)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=run, parser=p)
