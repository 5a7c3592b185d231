"""Every built-in plugin, called without satind, against an independent implementation;
argument parsing and discovery."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from satind_plugins import fib, knapsack, nqueens, raytracer, sat, search, tree, tsp

from satind import NotChecked, UsageError
from satind import plugin as plugins
from tests import independent


def _run(plugin: plugins.Plugin, argv: list[str]) -> object:
    """The plugin's sequential answer: its entry called as a plain function."""
    return plugin.entry(*plugin.parse_args(argv))


@pytest.mark.parametrize("n", [0, 1, 2, 10, 24])
def test_fib(n: int) -> None:
    assert _run(fib.PLUGIN, [str(n), "5"]) == independent.fib(n)


@pytest.mark.parametrize("n", range(1, 9))
def test_nqueens(n: int) -> None:
    assert _run(nqueens.PLUGIN, [str(n)]) == independent.nqueens(n) == nqueens.KNOWN[n]


@pytest.mark.parametrize(("items", "seed"), [(10, 1), (20, 2), (30, 3), (45, 4)])
def test_knapsack(items: int, seed: int) -> None:
    (weights, values), capacity = knapsack.instance(items, seed)
    expected = independent.knapsack(list(weights), list(values), capacity)
    assert _run(knapsack.PLUGIN, [str(items), str(seed)]) == expected


@pytest.mark.parametrize(("cities", "seed"), [(4, 1), (6, 2), (8, 3), (9, 4)])
def test_tsp(cities: int, seed: int) -> None:
    assert _run(tsp.PLUGIN, [str(cities), str(seed)]) == independent.tsp(tsp.cities(cities, seed))


def test_tsp_held_karp_agrees_with_brute_force() -> None:
    points = tsp.cities(8, 11)
    assert tsp.held_karp(tsp.distances(points)) == independent.tsp(points)


@pytest.mark.parametrize(("variables", "seed"), [(8, 1), (10, 2), (12, 3), (12, 4), (6, 9)])
def test_sat_random(variables: int, seed: int) -> None:
    clauses = sat.random_3sat(variables, seed)
    result = _run(sat.PLUGIN, ["random", str(variables), str(seed)])
    assert (result is not None) == independent.satisfiable(list(clauses), variables)
    if result is not None:
        assert sat.verify(clauses, result)


def test_sat_dimacs_file(tmp_path: Path) -> None:
    cnf = tmp_path / "f.cnf"
    cnf.write_text("c a comment\np cnf 3 4\n1 2 0\n-1 2 0\n-2 3 0\n-3 -2 0\n")
    assert _run(sat.PLUGIN, [str(cnf)]) is None  # 2 is forced true, then 3 and not 3
    cnf.write_text("p cnf 3 2\n1 -2 0\n2 3 0\n")
    model = _run(sat.PLUGIN, [str(cnf)])
    assert model is not None and sat.verify(((1, -2), (2, 3)), model)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("1 2 0\n", "before the 'p cnf' line"),
        ("p cnf 2 1\n1 x 0\n", "'x' is not a literal"),
        ("p cnf 2 1\n1 3 0\n", "exceeds 2 variables"),
        ("p cnf 2 2\n1 2 0\n", "declares 2 clauses but has 1"),
        ("p dnf 2 1\n", "expected 'p cnf"),
    ],
)
def test_sat_dimacs_errors_name_the_problem(tmp_path: Path, text: str, error: str) -> None:
    cnf = tmp_path / "bad.cnf"
    cnf.write_text(text)
    with pytest.raises(UsageError, match=error):
        sat.PLUGIN.parse_args([str(cnf)])


@pytest.mark.parametrize(("depth", "branching"), [(0, 3), (1, 5), (3, 3), (4, 2)])
def test_tree(depth: int, branching: int) -> None:
    want = independent.tree(depth, branching)
    assert tree.expected(depth, branching) == want
    assert _run(tree.PLUGIN, [str(depth), str(branching), "0"]) == want


def test_raytracer_tiles_equal_a_plain_row_by_row_render(tmp_path: Path) -> None:
    width, height = 70, 45  # odd sizes: uneven quadrants
    pixels = _run(raytracer.PLUGIN, [str(width), str(height)])
    plain = b"".join(
        raytracer.pixel(x, y, width, height) for y in range(height) for x in range(width)
    )
    assert pixels == plain
    out = tmp_path / "img.png"
    digest = raytracer.PLUGIN.make_report([str(width), str(height), str(out)], pixels)
    assert digest == hashlib.sha256(plain).hexdigest()
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    idat = data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8]
    rows = zlib.decompress(idat)
    assert len(rows) == height * (1 + width * 3)


@pytest.mark.parametrize(
    ("plugin", "argv", "error"),
    [
        (fib.PLUGIN, [], "missing N"),
        (fib.PLUGIN, ["x"], "N must be an integer"),
        (fib.PLUGIN, ["30", "5", "7"], "too many arguments"),
        (nqueens.PLUGIN, ["0"], "between 1 and 32"),
        (knapsack.PLUGIN, ["10"], "missing SEED"),
        (tsp.PLUGIN, ["2", "1"], "between 3 and 64"),
        (raytracer.PLUGIN, ["10", "10", "out.jpg"], "must be a .png"),
        (sat.PLUGIN, [], "DIMACS file or 'random VARS SEED'"),
        (sat.PLUGIN, ["/nonexistent.cnf"], "cannot read"),
        (tree.PLUGIN, ["3", "2", "5", "nap"], "'sleep' or 'busy'"),
        (tree.PLUGIN, ["30", "256", "1"], "more than 10\\*\\*8"),
    ],
)
def test_bad_arguments_give_usage(plugin: plugins.Plugin, argv: list[str], error: str) -> None:
    with pytest.raises(UsageError, match=error) as info:
        plugin.parse_args(argv)
    assert f"usage: satind run|submit {plugin.usage}" in str(info.value)


def test_checks_reject_wrong_results() -> None:
    with pytest.raises(AssertionError):
        fib.check((10, 5), 56)
    with pytest.raises(AssertionError):
        nqueens.check((8, 0, 0, 0, 2), 91)
    args = knapsack.parse(["20", "1"])
    with pytest.raises(AssertionError):
        knapsack.check(args, knapsack.solve(*args) + 1)
    with pytest.raises(AssertionError):
        sat.check((((1,), (-1, 2)), (), 2, 8), (-1, 2))
    with pytest.raises(AssertionError, match="does not satisfy"):  # no assignment at all
        sat.check((((1,), (-1, 2)), (), 2, 8), (-1, 1, 2))
    args = tsp.parse(["12", "3"])
    with pytest.raises(AssertionError, match="2875 long, not 2876"):
        tsp.check(args, 2876)
    args = raytracer.parse(["40", "30"])
    image = bytearray(raytracer.PLUGIN.entry(*args))
    raytracer.check(args, bytes(image))
    image[3 * (40 * 7 + 5)] ^= 1
    with pytest.raises(AssertionError, match=r"pixel \(5, 7\)"):
        raytracer.check(args, bytes(image))


@pytest.mark.parametrize(("variables", "seed"), [(10, 2), (12, 3), (14, 3), (16, 1)])
def test_sat_check_confirms_unsat_on_every_assignment(variables: int, seed: int) -> None:
    args = sat.parse(["random", str(variables), str(seed)])
    unsat = not independent.satisfiable(list(args[0]), variables)
    assert sat.satisfiable_by_table(args[0], variables) is not unsat
    if unsat:
        sat.check(args, None)
    else:
        with pytest.raises(AssertionError, match="satisfiable"):
            sat.check(args, None)


def test_tsp_held_karp_agrees_with_an_independent_dynamic_program() -> None:
    for cities, seed in ((10, 4), (11, 7), (12, 3)):
        points = tsp.cities(cities, seed)
        assert tsp.held_karp(tsp.distances(points)) == independent.tsp_exact(points)


def test_checks_say_what_they_cannot_verify() -> None:
    # Above these sizes a check cannot verify the answer: the run says "not checked", never
    # "ok" (plugin/hooks.judge).
    depth, spec = search.parse(["12", "4", "1"])
    leaf = (1,) * depth
    score = search.evaluate(leaf, spec[1], spec[2])
    assert score < spec[3]  # not a needle: only a walk of the whole tree could confirm it
    knapsack_args = knapsack.parse(["300", "1"])
    cases: list[tuple[Any, tuple[Any, ...], Any, str]] = [
        (tsp.check, tsp.parse([str(tsp.CHECK_CITIES + 1), "1"]), 1, "cities"),
        (nqueens.check, (len(nqueens.KNOWN), 0, 0, 0, 3), 1, "queens"),
        (tree.check, ((), 5, 20, 0.0, "sleep"), 0, "leaves"),
        (raytracer.check, (641, 480, 0, 0, 641, 480), bytes(641 * 480 * 3), "pixels"),
        (sat.check, (sat.random_3sat(30, 1), (), 30, 8), None, "UNSAT"),
        (search.check, (depth, spec), [score, list(leaf)], "needle"),
        (knapsack.check, knapsack_args, knapsack_args[4], "cells"),
    ]
    for check, args, result, why in cases:
        with pytest.raises(NotChecked, match=why):
            check(args, result)


def test_discovery_finds_builtins_and_path_plugins(tmp_path: Path) -> None:
    found = plugins.discover()
    builtin = {"fib", "nqueens", "knapsack", "tsp", "raytracer", "sat", "tree"}
    assert builtin | {"search", "othello", "barneshut"} <= found.keys()
    assert all(p.code_hash and p.source.startswith("built-in") for p in found.values())
    # The kind of run each root starts, which the core reads instead of importing the drivers.
    kinds = {name: p.kind for name, p in found.items()}
    assert kinds["fib"] == "divide-and-conquer"
    assert kinds["kmeans"] == "iterative"
    assert kinds["heat2d"] == "spmd"
    (tmp_path / "double.py").write_text(
        "from satind import Plugin, spawnable\n"
        "@spawnable\n"
        "def double(x: int) -> int:\n"
        "    return 2 * x\n"
        "PLUGIN = Plugin(name='double', entry=double, usage='double X',\n"
        "                parse=lambda argv: (int(argv[0]),))\n"
    )
    (tmp_path / "notes.py").write_text("x = 1\n")  # no Plugin: ignored
    found = plugins.discover([tmp_path])
    assert found["double"].source.startswith("path")
    assert found["double"].entry(21) == 42


def test_a_module_of_spawnable_functions_is_a_plugin_by_itself(tmp_path: Path) -> None:
    # No PLUGIN: named after the file, its first function the entry, by name it refuses.
    (tmp_path / "sumsq.py").write_text(
        "import satind\n\n"
        "@satind.spawnable\n"
        "def sumsq(n: int) -> int:\n"
        "    return sum(i * i for i in range(n))\n\n"
        "@satind.spawnable\n"
        "def cube(x: int) -> int:\n"
        "    return x ** 3\n"
    )
    (tmp_path / "_private.py").write_text(
        "from satind import spawnable\n\n@spawnable\ndef f(x: int) -> int:\n    return x\n"
    )
    found = plugins.discover([tmp_path])
    assert "_private" not in found
    plugin = found["sumsq"]
    assert plugin.source.startswith("path") and plugin.entry(4) == 14
    assert plugin.function("cube")(2) == 8
    with pytest.raises(UsageError, match="module of functions without a PLUGIN"):
        plugin.parse_args(["3"])


def test_unknown_plugin_lists_the_available_ones() -> None:
    with pytest.raises(plugins.UnknownPlugin) as info:
        plugins.find("fibonacci")
    assert "fib" in info.value.available and "available:" in str(info.value)


def test_entry_point_plugins_are_discovered(monkeypatch: pytest.MonkeyPatch) -> None:
    class EntryPoint:
        name = "fake"
        value = "satind_plugins.fib:PLUGIN"

        def load(self) -> object:
            import dataclasses

            return dataclasses.replace(fib.PLUGIN, name="fib-from-ep")

    def entry_points(group: str) -> list[EntryPoint]:
        assert group == "satind.plugins"
        return [EntryPoint()]

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    found = plugins.discover()
    assert found["fib-from-ep"].source.startswith("entry point fake")


def test_plugin_descriptor_rejects_a_plain_function() -> None:
    with pytest.raises(TypeError, match="@spawnable"):
        plugins.Plugin(name="x", entry=len, usage="x", parse=lambda a: ())  # type: ignore[arg-type]


def test_results_are_json_reportable() -> None:
    for plugin, argv in [(fib.PLUGIN, ["10"]), (sat.PLUGIN, ["random", "6", "1"])]:
        json.dumps(plugin.make_report(argv, _run(plugin, argv)))


def _plugin_file(name: str, body: str) -> str:
    return (
        f"import {name}_helper\n"
        "from satind import Plugin, spawnable\n"
        "@spawnable\n"
        f"def {name}_entry(x: int) -> int:\n    return {name}_helper.f(x)\n"
        f"PLUGIN = Plugin(name={name!r}, entry={name}_entry, usage='{name} X',\n"
        "                parse=lambda argv: (int(argv[0]),))\n"
    ) + body


def test_a_plugin_directory_is_a_package_root_and_rescan_loads_changes(tmp_path: Path) -> None:
    (tmp_path / "pkgroot_helper.py").write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "pkgroot.py").write_text(_plugin_file("pkgroot", ""))
    first = plugins.discover([tmp_path])["pkgroot"]
    assert first.entry(1) == 2  # the sibling helper module was imported
    # The code hash covers the helper too: changing only the helper changes the plugin.
    (tmp_path / "pkgroot_helper.py").write_text("def f(x):\n    return x + 100\n")
    again = plugins.rescan([tmp_path]).plugins["pkgroot"]
    assert again.code_hash != first.code_hash
    assert again.entry(1) == 101
    assert first.entry(1) == 2  # what was loaded before keeps its code
    # The spawnable's name now means the new function.
    from satind.api import lookup_spawnable

    found = lookup_spawnable(again.entry.name)
    assert found is not None and found(1) == 101
    # A removed file is gone after a rescan.
    (tmp_path / "pkgroot.py").unlink()
    assert "pkgroot" not in plugins.rescan([tmp_path]).plugins
