"""One public API: ``roofline_opt.__all__``, keyword-only targets, lists and numbers as inputs, errors naming the
API's parameters (the command line names its flags)."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import roofline_opt
from roofline_opt import api
from roofline_opt.cli import EXIT_BAD_INPUT, main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize import space

SMALL = {"tp_degrees": [1, 2], "pp_degrees": [1], "max_batch": 256, "preset": "paper"}
QUERIES = (api.fastest, api.cheapest, api.frontier)
ANSWERS = (api.fastest_answer, api.fastest_answers, api.cheapest_answer, api.cheapest_answers, api.frontier_frame)


def test_every_public_name_resolves_and_nothing_else_is_offered() -> None:
    for name in roofline_opt.__all__:
        assert getattr(roofline_opt, name) is not None, name
    with pytest.raises(AttributeError):
        roofline_opt.Prepared  # noqa: B018 (an internal type is not part of the package's API)


def test_the_package_exports_the_api_functions_themselves() -> None:
    for name in roofline_opt.__all__:
        if name in api.__all__:
            assert getattr(roofline_opt, name) is getattr(api, name), name


@pytest.mark.parametrize("function", QUERIES, ids=lambda f: f.__name__)
def test_a_query_takes_model_and_gpu_by_position_and_everything_else_by_keyword(function) -> None:
    params = list(inspect.signature(function).parameters.values())
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]

    assert positional == ["model", "gpu"]


@pytest.mark.parametrize("function", ANSWERS, ids=lambda f: f.__name__)
def test_a_question_level_query_takes_its_target_by_keyword(function) -> None:
    params = list(inspect.signature(function).parameters.values())

    assert [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD] == ["q"]


def test_a_budget_given_by_position_is_refused() -> None:
    with pytest.raises(TypeError):
        api.fastest("llama-3-8b", "h100-sxm", 2.0, **SMALL)  # type: ignore[misc]


def test_lists_and_tuples_are_the_same_question() -> None:
    a = api.question("llama-3-8b", ["h100-sxm", "h200"], weight_bits=[16, 8], **SMALL)
    b = api.question("llama-3-8b", ("h100-sxm", "h200"), weight_bits=(16, 8), **{**SMALL, "tp_degrees": (1, 2)})

    assert a == b
    assert a.tp_degrees == (1, 2) and a.weight_bits == (16, 8)


def test_a_single_number_is_a_one_item_list() -> None:
    q = api.question("llama-3-8b", "h100-sxm", **{**SMALL, "tp_degrees": 2}, chunk_tokens=1024, kv_bits=8)

    assert q.tp_degrees == (2,) and q.kv_bits == (8,)


@pytest.mark.parametrize(
    ("parameter", "text"),
    [("gpu", "h100-sxm,h200"), ("tp_degrees", "1,2"), ("kv_bits", "16,8"), ("serving", "agg,disagg")],
)
def test_comma_separated_text_is_refused_naming_the_parameter(parameter: str, text: str) -> None:
    space = {**SMALL, "gpu": "h100-sxm", parameter: text}
    with pytest.raises(InvalidInput) as exc:
        api.question("llama-3-8b", **space)

    assert exc.value.field == parameter and "list of values" in exc.value.message


@pytest.mark.parametrize(
    ("parameter", "values", "repeated"),
    [("tp_degrees", [8, "8"], "8"), ("pp_degrees", (1, 2, 1.0), "1"), ("weight_bits", [16, 16], "16")],
)
def test_a_list_offering_a_value_twice_is_refused_naming_the_value(parameter: str, values, repeated: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        api.question("llama-3-8b", "h100-sxm", **{**SMALL, parameter: values})

    assert exc.value.field == parameter
    assert exc.value.message.startswith(f"must list each value once; {repeated} is given twice.")


def test_split_lists_reads_the_command_lines_notation() -> None:
    values = api.split_lists({"gpu": "h100-sxm, h200", "tp_degrees": "1,2", "max_batch": "64", "draft": None})

    assert values == {"gpu": ("h100-sxm", "h200"), "tp_degrees": ("1", "2"), "max_batch": "64", "draft": None}
    assert api.question("llama-3-8b", **values).tp_degrees == (1, 2)


def test_api_errors_name_parameters_and_quote_the_others_they_mention() -> None:
    with pytest.raises(InvalidInput) as exc:
        api.question("llama-3-8b", "h100-sxm", ttft_ms=500)

    assert exc.value.field == "ttft_ms"
    assert "`isl`" in exc.value.message and "--" not in exc.value.message


def test_the_command_line_names_the_flags_of_the_same_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--ttft-ms", "500"])
    err = capsys.readouterr().err

    assert code == EXIT_BAD_INPUT
    assert err.startswith("roofline-opt: error: --ttft-ms: ") and "--isl" in err and "`" not in err


def test_the_time_limit_is_named_time_limit_s_in_the_api_and_time_limit_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    q = api.question("llama-3-8b", "h100-sxm", **SMALL)
    with pytest.raises(InvalidInput) as exc:
        api.fastest_answer(q, time_limit_s=-1)
    code = main(["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--time-limit", "-1"])

    assert exc.value.field == "time_limit_s"
    assert code == EXIT_BAD_INPUT and "--time-limit: " in capsys.readouterr().err


def _documented_defaults(function) -> dict[str, str]:
    """``name : type, default X`` lines of a numpydoc Parameters section: parameter -> X."""
    doc = inspect.getdoc(function) or ""
    section = doc.split("Parameters\n----------\n", 1)[-1].split("\n\n", 1)[0]
    return dict(re.findall(r"^(\w+) : [^\n]*, default ([^\n]+)$", section, flags=re.MULTILINE))


PUBLIC_FUNCTIONS = [getattr(api, name) for name in api.__all__ if inspect.isfunction(getattr(api, name))]


@pytest.mark.parametrize("function", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_every_public_function_has_numpydoc_sections_for_its_parameters(function) -> None:
    doc = inspect.getdoc(function) or ""
    names = [n for n, p in inspect.signature(function).parameters.items() if p.kind is not p.VAR_KEYWORD]

    assert "Parameters\n----------\n" in doc and "Returns\n-------\n" in doc
    for name in names:
        assert re.search(rf"^(\w+, )*{name}(, \w+)* : ", doc, flags=re.MULTILINE), name


@pytest.mark.parametrize("function", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_a_default_a_docstring_states_is_the_signatures(function) -> None:
    """A default written in a docstring is checked against the code, so the two cannot drift apart."""
    parameters = inspect.signature(function).parameters
    for name, text in _documented_defaults(function).items():
        assert ast.literal_eval(text) == parameters[name].default, name


@pytest.mark.parametrize("function", PUBLIC_FUNCTIONS, ids=lambda f: f.__name__)
def test_a_default_constant_a_docstring_names_is_the_signatures(function) -> None:
    """``(default ``DEFAULT_X``)``: the constant exists, and is the default unless None derives it."""
    doc = inspect.getdoc(function) or ""
    parameters = inspect.signature(function).parameters
    pattern = r"^((?:\w+, )*\w+) : [^\n]*\n\s+[^\n]*?\(defaults? ``(DEFAULT_\w+)``"
    for names, constant in re.findall(pattern, doc, re.MULTILINE):
        default = parameters[names.split(", ")[0]].default
        assert default is None or getattr(space, constant) == default, (names, constant)
