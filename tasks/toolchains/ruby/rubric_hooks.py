"""Static rules about RSpec's own machinery, on the tree-sitter Ruby tree: a spec, a factory
or a support file that changes how results are reported (`result-hook`) or which examples run
(`hidden-tests`).

A file under spec/factories/ or spec/support/ is loaded with every spec, so an ``around`` hook
there that clears an example's exception turns the whole suite green. What is flagged:

- `result-hook`: a formatter or reporter set or registered (``config.formatter =``,
  ``add_formatter``, ``RSpec::Core::Formatters.register``, ``config.reporter``,
  ``register_listener``), the output streams or exit codes of the configuration set; an
  ``after``/``around`` hook whose block rescues (a factory's ``after(:create)`` callback is
  not such a hook); an example's exception or result written (``instance_variable_set(:@exception``,
  ``display_exception =``, ``execution_result.status =``); RSpec's own classes reopened or
  patched (``class RSpec::Core::Example``, ``RSpec::Core::Example.prepend(...)``); and
  ``expect``/``it``/``raise`` redefined with ``def``.
- `hidden-tests`: filters that leave examples out (``filter_run_excluding``,
  ``filter_run_including``, ``filter_run``, ``exclusion_filter``/``inclusion_filter``,
  ``filter_run_when_matching`` on anything but ``:focus``, the configuration's ``pattern``,
  ``exclude_pattern`` or ``files_to_run``); in a support file also ``skip``/``pending``/``x*``
  groups outside a factory definition, and ``define_derived_metadata``.

The bundled examples' spec_helper and rails_helper (``expect_with``, ``mock_with``,
``config.order = :random``, ``config.include FactoryBot::Syntax::Methods``,
``use_transactional_fixtures``), factories with traits and callbacks, and ``before`` hooks
stay allowed.
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from tasks.core.types import Finding

#: Settings of the configuration that send results elsewhere or change the exit status.
OUTPUT_SETTINGS = frozenset(
    {
        "formatter",
        "reporter",
        "default_formatter",
        "output_stream",
        "error_stream",
        "deprecation_stream",
        "failure_exit_code",
        "error_exit_code",
    }
)
#: Settings of the configuration that choose which spec files load.
FILE_SETTINGS = frozenset({"pattern", "exclude_pattern", "files_to_run"})
#: Calls that register a formatter or listener, wherever they are.
LISTENERS = frozenset({"add_formatter", "register_listener"})
#: Filters that leave examples out of the run.
FILTERS = frozenset(
    {
        "filter_run_excluding",
        "filter_run_including",
        "filter_run",
        "exclusion_filter",
        "inclusion_filter",
    }
)
#: Hooks that run after an example (a rescue there swallows what the example raised).
AFTER_HOOKS = frozenset({"after", "around", "append_after", "prepend_after"})
#: An example's result, as written through its execution result.
RESULT_FIELDS = frozenset({"status", "exception", "pending_exception", "pending_message"})
#: Ways to patch a class from outside.
PATCHES = frozenset(
    {
        "prepend",
        "include",
        "class_eval",
        "module_eval",
        "class_exec",
        "module_exec",
        "instance_eval",
        "define_method",
        "alias_method",
        "remove_method",
        "undef_method",
        "send",
        "__send__",
    }
)
#: Methods a spec relies on; a ``def`` of one replaces RSpec's.
RSPEC_METHODS = frozenset(
    {"expect", "is_expected", "it", "specify", "example", "raise", "fail", "eq", "raise_error"}
)
#: Calls that skip examples, from a support file.
SKIPS = frozenset(
    {"skip", "pending", "xit", "xspecify", "xexample", "xdescribe", "xcontext", "xfeature"}
)
#: The FactoryBot DSL: a call directly inside one of these is an attribute or a callback.
FACTORY_BLOCKS = frozenset({"factory", "trait", "transient", "define", "modify"})


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def _line(node: Node) -> int:
    return node.start_point.row + 1


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _method(node: Node) -> str:
    return _text(node.child_by_field_name("method")) if node.type == "call" else ""


def _block(node: Node) -> Node | None:
    return node.child_by_field_name("block") if node.type == "call" else None


def _first_arg(node: Node) -> Node | None:
    args = node.child_by_field_name("arguments")
    named = list(args.named_children) if args is not None else []
    return named[0] if named else None


def _enclosing_block_call(node: Node) -> Node | None:
    """The nearest call with a block around `node` (``factory :x do ... end``)."""
    parent = node.parent
    while parent is not None:
        if parent.type in ("do_block", "block") and parent.parent is not None:
            return parent.parent
        parent = parent.parent
    return None


def _in_factory(node: Node) -> bool:
    outer = _enclosing_block_call(node)
    return outer is not None and _method(outer) in FACTORY_BLOCKS


def _config_names(root: Node) -> frozenset[str]:
    """How the file names RSpec's configuration: ``RSpec.configuration`` and the parameter of
    every ``RSpec.configure do |config|`` block."""
    names = {"RSpec.configuration"}
    for node in _walk(root):
        block = _block(node)
        if _method(node) != "configure" or block is None:
            continue
        params = next((c for c in block.named_children if c.type == "block_parameters"), None)
        if params is not None:
            names.update(_text(p) for p in params.named_children if p.type == "identifier")
    return frozenset(names)


#: (rule, message) of one node, or None.
_Hit = tuple[str, str] | None
RESULT, HIDDEN = "result-hook", "hidden-tests"


def _assignment_hit(node: Node, config: frozenset[str]) -> _Hit:
    left = node.child_by_field_name("left")
    if left is None or left.type != "call":
        return None
    name, receiver = _method(left), _text(left.child_by_field_name("receiver"))
    if name in OUTPUT_SETTINGS and receiver in config:
        return RESULT, f"`{receiver}.{name} =` changes how results are reported"
    if name in FILE_SETTINGS and receiver in config:
        return HIDDEN, f"`{receiver}.{name} =` changes which spec files run"
    if name in ("exclusion_filter", "inclusion_filter"):
        return HIDDEN, f"`{name} =` leaves examples out of the run"
    if name == "display_exception" or (name in RESULT_FIELDS and "execution_result" in receiver):
        return RESULT, f"`{_text(left)[:60]} =` rewrites an example's result"
    return None


def _call_hit(node: Node, config: frozenset[str]) -> _Hit:
    name = _method(node)
    receiver = _text(node.child_by_field_name("receiver"))
    first = _text(_first_arg(node))
    if name in LISTENERS or (name == "register" and receiver.endswith("Formatters")):
        return RESULT, f"`{name}` registers a formatter or listener"
    if name == "reporter" and receiver in config:
        return RESULT, f"`{receiver}.reporter` reaches the reporter"
    rewrites = any(word in first for word in ("exception", "execution_result"))
    if name in ("instance_variable_set", "remove_instance_variable") and rewrites:
        return RESULT, f"`{_text(node)[:60]}` rewrites an example's result"
    if name in PATCHES and _is_rspec(receiver):
        return RESULT, f"`{receiver}.{name}` patches RSpec itself"
    if name in FILTERS:
        return HIDDEN, f"`{name}` leaves examples out of the run"
    if name == "filter_run_when_matching" and first != ":focus":
        return HIDDEN, f"`{_text(node)[:60]}` leaves examples out of the run"
    if name in AFTER_HOOKS and not _in_factory(node) and _rescues(_block(node)):
        return RESULT, f"`{name}` hook rescues what the example raised"
    return None


def _is_rspec(name: str) -> bool:
    """RSpec's own namespace (``RSpec``, ``RSpec::Core::Example``), not ``RSpecHelpers``."""
    return name == "RSpec" or name.startswith("RSpec::") or name.startswith("::RSpec")


def _rescues(block: Node | None) -> bool:
    if block is None:
        return False
    return any(n.type in ("rescue", "rescue_modifier") for n in _walk(block))


def _definition_hit(node: Node) -> _Hit:
    name = _text(node.child_by_field_name("name"))
    if node.type in ("class", "module") and _is_rspec(name):
        return RESULT, f"`{node.type} {name}` reopens RSpec itself"
    if node.type == "method" and name in RSPEC_METHODS:
        return RESULT, f"`def {name}` replaces RSpec's own"
    return None


def _support_hit(node: Node) -> _Hit:
    """What skips examples from a support file (it applies to every spec that loads it)."""
    if node.type not in ("call", "identifier"):
        return None
    name = _method(node) if node.type == "call" else _text(node)
    if name == "define_derived_metadata":
        return HIDDEN, "`define_derived_metadata` can skip every example"
    parent = node.parent
    bare = node.type == "identifier" and parent is not None
    bare = (
        bare and parent is not None and parent.type in ("block_body", "body_statement", "program")
    )
    receiverless = node.type == "call" and node.child_by_field_name("receiver") is None
    if (receiverless or bare) and name in SKIPS and not _in_factory(node):
        return HIDDEN, f"`{name}` in a support file skips examples wholesale"
    return None


def hook_findings(path: str, root: Node, *, support: bool) -> list[Finding]:
    """The `result-hook` and `hidden-tests` findings of one parsed file; `support` adds the
    rules that only a file loaded with every spec (a factory, a support file) can break."""
    config = _config_names(root)
    found: list[Finding] = []
    for node in _walk(root):
        hit: _Hit = None
        if node.type == "assignment":
            hit = _assignment_hit(node, config)
        elif node.type == "call":
            hit = _call_hit(node, config)
        else:
            hit = _definition_hit(node)
        if hit is None and support:
            hit = _support_hit(node)
        if hit is not None:
            found.append(Finding(path=path, line=_line(node), rule=hit[0], message=hit[1]))
    return found


def support_findings(path: str, text: str) -> list[Finding]:
    """The findings of a support file (a factory, spec/support/*.rb, a helper): the rules above
    with those only a support file can break; [] for a file that is not Ruby."""
    if not path.endswith(".rb"):
        return []
    from tasks.toolchains.ruby.rubric import _parser, first_error_line

    root = _parser().parse(text.encode("utf-8")).root_node
    if root.has_error:
        msg = "the file does not parse as Ruby (it cannot load): fix the syntax first"
        return [Finding(path=path, line=first_error_line(root), rule="syntax", message=msg)]
    return sorted(hook_findings(path, root, support=True), key=lambda f: (f.line, f.rule))


def canary_test(text: str, token: str) -> str:
    """`text` with one more example group whose one example must fail, named with `token`
    (before ``__END__``, which ends what Ruby reads)."""
    canary = (
        f'RSpec.describe "autopilot canary {token}" do\n'
        '  it "must fail" do\n'
        "    expect(1).to eq(2)\n"
        "  end\n"
        "end\n"
    )
    head, marker, tail = text.partition("\n__END__\n")
    return f"{head.rstrip()}\n\n{canary}{marker}{tail}"
