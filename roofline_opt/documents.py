"""YAML and JSON documents parsed within bounds: nesting, aliases, expanded size, duplicate keys, and numbers read as
ASCII decimals only; any problem is one InvalidInput naming the source (and the key)."""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

from roofline_opt.checks import NumericText
from roofline_opt.errors import InvalidInput

MAX_NESTING = 64
"""Deepest nesting of lists and mappings in a YAML or JSON file."""
MAX_YAML_ALIASES = 100
"""Most alias uses (``*name``) in a YAML file."""
MAX_YAML_VALUES = 100_000
"""Most values a YAML file may expand to once its aliases are resolved (an alias bomb expands to billions)."""


_DECIMAL_INT = r"^[-+]?(?:0|[1-9][0-9]*)$"
_DECIMAL_FLOAT = (
    r"^[-+]?(?:[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+"
    r"|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""The numbers YAML files are read with: ASCII decimals (``8``, ``-1.5``, ``1e3``, ``.inf``), not YAML 1.1's
hexadecimal, octal (``010000``), sexagesimal (``1:08:16``) or digit-separated (``4_096``) integers."""
_LOOKS_NUMERIC = re.compile(
    r"[-+]?(?:[0-9][0-9_]*(?::[0-5]?[0-9])*(?:\.[0-9_]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?0[xX][0-9a-fA-F_]+|[-+]?0[oO][0-7_]+|[-+]?0[bB][01_]+|[-+]?\.(?:inf|nan)",
    re.ASCII | re.IGNORECASE,
)
"""Text that reads as a number to a person or to YAML 1.1: refused where a YAML file gives it as text."""
NOT_DECIMAL = (
    "must be an ASCII decimal number (4096, 1.5e3), or quoted if it is text: YAML 1.1 reads {value!r} as a "
    "hexadecimal, octal, sexagesimal or digit-separated number, which this reader does not."
)


class _Refused(Exception):
    """A structural limit of a YAML or JSON file was exceeded; ``key`` names the field when there is one."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@functools.cache
def _yaml_loader(c_parser: bool = True) -> type:
    """A safe YAML loader that refuses deep nesting, alias bombs and duplicate keys (PyYAML imported on use).

    With libyaml (``c_parser``, when PyYAML has it) the text is scanned and parsed in C, about ten times faster on a
    card; composing nodes and constructing values stay in Python, where the limits below are checked as each node is
    composed, so a hostile file is refused the same way by either parser.
    """
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    if TYPE_CHECKING:
        from yaml.parser import Parser

        class _Mixed(Parser, Composer, SafeConstructor):
            """What Bounds is mixed into, for the type checker: a parser, PyYAML's composer and a constructor."""

    else:
        _Mixed = object

    class Bounds(_Mixed):
        """The limits, checked while composing and constructing (a mixin over a PyYAML parser)."""

        depth, aliases, values = 0, 0, 0
        sizes: dict[int, int]

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise _Refused(f"uses more than {MAX_YAML_ALIASES} aliases (*name)")
                node = super().compose_node(parent, index)
                self._count(self.sizes.get(id(node), 1))
                return node
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _Refused(f"nests lists and mappings deeper than {MAX_NESTING} levels")
            try:
                before = self.values
                node = super().compose_node(parent, index)
                self._count(1)
                self.sizes[id(node)] = self.values - before
                return node
            finally:
                self.depth -= 1

        def _count(self, n: int) -> None:
            self.values += n
            if self.values > MAX_YAML_VALUES:
                raise _Refused(f"expands to more than {MAX_YAML_VALUES} values (through its aliases)")

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                _refuse_numeric_text(key_node, value_node)
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = self.construct_object(key_node)
                    line = key_node.start_mark.line + 1
                    if key in seen:
                        msg = f"is given twice (lines {seen[key]} and {line}): give each key once"
                        raise _Refused(msg, key=str(key))
                    seen[key] = line
            return super().construct_mapping(node, deep)

    def _refuse_numeric_text(key_node: Any, value_node: Any) -> None:
        """A plain value (or list item) YAML 1.1 would read as a non-decimal number: refused naming its key."""
        items = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for item in items:
            text = item.value.strip() if isinstance(item, yaml.ScalarNode) and not item.style else ""
            decimal = re.match(_DECIMAL_INT, text) or re.match(_DECIMAL_FLOAT, text)
            if item.tag == "tag:yaml.org,2002:str" and _LOOKS_NUMERIC.fullmatch(text) and not decimal:
                raise _Refused(NOT_DECIMAL.format(value=item.value), key=str(key_node.value))

    def construct_text(constructor: Any, node: Any) -> str:
        """A text value; text spelling a number (quoted, !!str) is marked so that number fields refuse it."""
        text = constructor.construct_scalar(node)
        return NumericText(text) if _LOOKS_NUMERIC.fullmatch(text.strip()) else text

    class DecimalResolver(Resolver):
        """YAML 1.1's implicit types with numbers read as ASCII decimals only."""

    numeric = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    DecimalResolver.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in numeric]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }
    DecimalResolver.add_implicit_resolver(numeric[0], re.compile(_DECIMAL_INT), list("-+0123456789"))
    DecimalResolver.add_implicit_resolver(numeric[1], re.compile(_DECIMAL_FLOAT), list("-+0123456789."))

    if c_parser and getattr(yaml, "__with_libyaml__", False):
        from yaml._yaml import CParser

        class CBoundedLoader(Bounds, Composer, CParser, SafeConstructor, DecimalResolver):
            """libyaml's events, composed by PyYAML's Composer (ahead of CParser's own, which checks nothing)."""

            def __init__(self, stream: str) -> None:
                CParser.__init__(self, stream)
                Composer.__init__(self)
                SafeConstructor.__init__(self)
                DecimalResolver.__init__(self)
                self.sizes: dict[int, int] = {}

        CBoundedLoader.add_constructor("tag:yaml.org,2002:str", construct_text)
        return CBoundedLoader

    class BoundedLoader(Bounds, yaml.SafeLoader):
        yaml_implicit_resolvers = DecimalResolver.yaml_implicit_resolvers

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.sizes: dict[int, int] = {}

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            # the scanner looks ahead over a whole flow collection: refuse deep [[[... before that costs seconds
            if self.flow_level >= MAX_NESTING:
                raise _Refused(f"nests lists and mappings deeper than {MAX_NESTING} levels")
            super().fetch_flow_collection_start(token_class)

    BoundedLoader.add_constructor("tag:yaml.org,2002:str", construct_text)
    return BoundedLoader


def _refusal(source: str, exc: _Refused) -> InvalidInput:
    return InvalidInput(source if exc.key is None else f"{source}: {exc.key}", str(exc))


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML safely (no Python tags) within MAX_NESTING, MAX_YAML_ALIASES and MAX_YAML_VALUES, without
    duplicate keys; any problem is one InvalidInput naming ``source`` (and the key).

    libyaml parses first; text it rejects is parsed again by PyYAML's own parser, whose verdict (a value or the
    message naming the line, the same wording whether or not libyaml is installed) is the answer.
    """
    import yaml

    try:
        try:
            return _parse_yaml(text, c_parser=True)
        except (yaml.YAMLError, ValueError, RecursionError):
            return _parse_yaml(text, c_parser=False)  # PyYAML's own parser words the message
    except _Refused as exc:
        raise _refusal(source, exc) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InvalidInput(source, f"is not valid YAML: {getattr(exc, 'problem', None) or exc}{where}") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, a pathological document
        raise InvalidInput(source, f"is not valid YAML: {exc or type(exc).__name__}") from None


def _parse_yaml(text: str, c_parser: bool) -> Any:
    loader = _yaml_loader(c_parser)(text)  # the reader already refuses control characters
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _check_json_nesting(text: str) -> None:
    """Refuse JSON nested deeper than MAX_NESTING before the (recursive) decoder sees it."""
    depth = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_NESTING:
            raise _Refused(f"nests lists and objects deeper than {MAX_NESTING} levels")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused("is given twice in one object: give each key once", key=key)
        out[key] = value
    return out


def load_json(text: str, source: str) -> Any:
    """Parse JSON within MAX_NESTING and without duplicate keys; any problem is one InvalidInput naming ``source``."""
    try:
        _check_json_nesting(text)
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _Refused as exc:
        raise _refusal(source, exc) from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(source, f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(source, f"is not valid JSON: {exc or type(exc).__name__}") from None
