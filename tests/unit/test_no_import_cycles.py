"""No two kafkapy modules import each other, directly or round a longer loop (issue 24).

The layer contracts (test_layers.py) keep packages in order, but inside one
package, or between a package's ``__init__`` and its own modules, files may
still import one another: then neither can be read, tested or moved without
the other, and which one loads first decides whether an import fails. This
test builds the import graph with grimp (the graph import-linter builds;
function-level imports count too, so an import hidden inside a function does
not cut a cycle) and finds its strongly connected components. For each
cycle it prints the chain of imports, with the line of each, so a failure
says what to move: usually the piece both sides need, into the lower module
or a small module of its own.
"""

import grimp


def strongly_connected(graph) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative:
    the import graph is deeper than Python's default recursion limit allows
    for comfort)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        return module, iter(sorted(graph.find_modules_directly_imported_by(module)))

    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [visit(root)]
        while work:
            module, imported = work[-1]
            for other in imported:
                if other not in index:
                    work.append(visit(other))
                    break
                if other in on_stack:
                    low[module] = min(low[module], index[other])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def describe(graph, component: list[str]) -> str:
    """The cycles through ``component``, each as its chain of imports with
    the line of each, until every member has been shown in one."""
    lines = [f"import cycle among {', '.join(component)}:"]
    shown: set[str] = set()
    for first in component:
        if first in shown:
            continue
        second = min(m for m in graph.find_modules_directly_imported_by(first) if m in component)
        chain = (first,) + graph.find_shortest_chain(importer=second, imported=first)
        shown.update(chain)
        for importer, imported in zip(chain, chain[1:]):
            details = graph.get_import_details(importer=importer, imported=imported)
            where = f"line {details[0]['line_number']}: {details[0]['line_contents']}" if details else "?"
            more = f"; {len(details) - 1} more line(s)" if len(details) > 1 else ""
            lines.append(f"  {importer} -> {imported}  ({where}{more})")
        lines.append("")
    return "\n".join(lines).rstrip()


def test_no_import_cycles():
    graph = grimp.build_graph("kafkapy", cache_dir=None)
    cycles = [describe(graph, component) for component in strongly_connected(graph)]
    assert not cycles, "\n\n".join(cycles)


def test_a_cycle_is_found_and_described():
    """The finder itself: a loop of three and a pair are found, a chain is not."""
    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"),
                               ("p.d", "p.e"), ("p.e", "p.d"), ("p.e", "p.f")]:
        graph.add_import(importer=importer, imported=imported, line_number=1,
                         line_contents=f"import {imported}")
    assert strongly_connected(graph) == [["p.a", "p.b", "p.c"], ["p.d", "p.e"]]
    assert describe(graph, ["p.a", "p.b", "p.c"]).splitlines() == [
        "import cycle among p.a, p.b, p.c:",
        "  p.a -> p.b  (line 1: import p.b)",
        "  p.b -> p.c  (line 1: import p.c)",
        "  p.c -> p.a  (line 1: import p.a)",
    ]
