"""YAML as orthobench reads its files (suites, check thresholds): safe, and strict where PyYAML
is lenient or unbounded.

:func:`load_yaml` refuses, each as a ``yaml.MarkedYAMLError`` with its place, what would otherwise
pass unseen or exhaust memory: a duplicate key (the last would win silently: a repeated ``min:``
of a threshold would replace the first), nesting deeper than :data:`MAX_DEPTH`, more than
:data:`MAX_NODES` nodes with aliases expanded (an alias bomb), an alias inside its own anchor,
control characters (a binary file), values that do not construct (``2001-02-30``) and numbers
YAML 1.1 reads in another base than 10 (``010`` is 8, ``0x10`` 16, ``1:30`` 90).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

#: Deepest nesting of YAML collections (a suite needs about 6 levels).
MAX_DEPTH = 32
#: Most YAML nodes of a file, counted with its aliases expanded.
MAX_NODES = 100_000


def load_yaml(text: str) -> Any:
    """The one document of ``text``, read by :class:`StrictLoader`.

    Raises:
        yaml.YAMLError: for anything the loader refuses (:func:`yaml_error_parts` describes it).
    """
    loader = StrictLoader(text)  # refuses a control character (a binary file) already
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_error_parts(err: yaml.YAMLError) -> tuple[str | None, str]:
    """``(place, problem)`` of a YAML error: ``"line L, column C"`` where it has a mark (else
    None) and its problem in one line."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
    return where, getattr(err, "problem", None) or str(err).splitlines()[0]


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses, each as a ``MarkedYAMLError`` with its line: duplicate
    keys, collections nested deeper than :data:`MAX_DEPTH`, a document of more than
    :data:`MAX_NODES` nodes with its aliases expanded (an alias bomb names a few nodes that
    expand to billions) or an alias inside its own anchor, values that do not construct
    (``2001-02-30``), and integers with a leading zero, ``0x`` or ``0b`` or numbers with a ``:``,
    which YAML 1.1 reads as octal, hexadecimal, binary or base 60 (``budget: 010`` is 8)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expanded_size(node)
        return super().construct_document(node)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as err:
            raise ConstructorError(None, None, f"invalid value: {err}", node.start_mark) from None

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults` may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # unhashable: the base class refuses it
                continue
            if repeated:
                raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = super().construct_yaml_int(node)
        digits = node.value.replace("_", "").lstrip("+-")
        if (digits.startswith("0") and digits != "0") or ":" in digits:
            raise _not_decimal(node, value, "integer")
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if ":" in node.value:
            raise _not_decimal(node, value, "number")
        return value


# The base class registers its own constructors by tag, so an override is registered anew.
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def _not_decimal(node: yaml.ScalarNode, value: float, noun: str) -> ConstructorError:
    """The error for ``node``, a number YAML 1.1 reads in another base than 10 as ``value``."""
    digits = node.value.lstrip("+-")
    base = "base 60" if ":" in digits else {"0x": "hexadecimal", "0b": "binary"}.get(digits[:2])
    return ConstructorError(
        None,
        None,
        f"{node.value!r} is {base or 'octal'} in YAML 1.1, so {value}: write a decimal {noun}, "
        "or quote it for a string",
        node.start_mark,
    )


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph of more than :data:`MAX_NODES` nodes counted with aliases expanded
    (each alias counts its anchor's whole subtree), or with an alias inside its own anchor.

    Iterative and memoized by node, so it takes time linear in the file whatever the aliases
    expand to.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, closing = stack.pop()
        children = _children(node)
        if closing:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_NODES:
                raise ComposerError(
                    None,
                    None,
                    f"more than {MAX_NODES} nodes with its aliases expanded",
                    node.start_mark,
                )
        elif id(node) not in sizes:
            if id(node) in open_nodes:
                raise ComposerError(None, None, "an alias inside its own anchor", node.start_mark)
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []
