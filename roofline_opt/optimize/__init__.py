"""Optimisation: the decision space, evaluator-derived tables, the Pyomo MIP, HiGHS, queries, sweeps and the oracle.

May import: ``roofline_opt.physics`` and the base modules (errors, checks), Pyomo, HiGHS, numpy and pandas.
"""
