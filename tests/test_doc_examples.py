"""Every example in README.md and docs/ runs and prints what its page shows (tools/doc_examples.py).

Numbers may differ by 2% (tools/doc_examples.RELATIVE_TOLERANCE), text only in whitespace and table-rule widths.
When the physics changes, ``python tools/doc_examples.py --write`` rewrites the pages from the real output.
Blocks marked ``<!-- example: slow -->`` run only with ROOFLINE_OPT_SLOW_EXAMPLES=1.
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "doc_examples.py"
spec = importlib.util.spec_from_file_location("doc_examples", TOOL)
doc_examples = importlib.util.module_from_spec(spec)
sys.modules["doc_examples"] = doc_examples
spec.loader.exec_module(doc_examples)

EXAMPLES = [e for page in doc_examples.pages() for e in doc_examples.examples(page) if e.mark != "skip"]


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_prints_what_its_page_shows(example):
    if example.mark == "slow" and os.environ.get(doc_examples.SLOW_ENV) != "1":
        pytest.skip(f"slow example: set {doc_examples.SLOW_ENV}=1 to run it")
    problems = doc_examples.check(example)
    assert not problems, "\n".join(problems) + "\n(regenerate with: python tools/doc_examples.py --write)"


def test_numbers_within_tolerance_agree_and_others_do_not():
    assert doc_examples.differences(["batch 62  tok/s 48.44"], "batch 62 tok/s 48.9\n") == []
    assert doc_examples.differences(["tok/s 48.44"], "tok/s 50.1\n") != []
    assert doc_examples.differences(["solver: mip, optimal, gap 0"], "solver: mip, optimal, gap 1.354e-16\n") == []
    assert doc_examples.differences(["layout tp8pp1ep1"], "layout tp8pp2ep1\n") != []


def test_an_ellipsis_shows_the_first_lines_only():
    assert doc_examples.differences(["a 1", "..."], "a 1\nb 2\nc 3\n") == []
    assert doc_examples.differences(["a 1"], "a 1\nb 2\n") != []


def test_table_rules_and_column_widths_may_change():
    shown = ["gpu   bits", "----  ----", "h200    16"]
    assert doc_examples.differences(shown, "gpu       bits\n--------  ----\nh200        16\n") == []


def test_every_page_has_its_examples_parsed():
    # a console block whose first line is not a command would make the parser raise: this loads every page
    assert EXAMPLES, "no examples found in README.md and docs/"
