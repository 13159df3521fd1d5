"""Discrete-event simulation of continuous batching, driven by the evaluator's step times (docs/physics/queueing.md).

``arrivals`` makes the requests (a renewal process or a trace file); ``engine`` serves them: one aggregated instance
with chunked prefill, or x prefill and y decode instances with the KV transfer between them; ``summary`` turns the
per-request times into percentiles, utilisation and throughput.

May import: physics and the base modules (errors, checks, files). Nothing below the CLI imports it.
"""
