"""Physics: model and accelerator specs and the exact roofline evaluator (the one source of every printed figure).

May import: numpy, the standard library and ``roofline_opt.errors``. Never a solver, pandas or networkx.
"""
