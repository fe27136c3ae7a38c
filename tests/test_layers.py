"""The library's layers (README "Layout"): what each layer may import, that the package's imports
have no cycle, what sits at its top, and what a practitioner's core install (numpy and scipy only)
can run."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "paperlib"
COMPUTING = ("fdp", "mechanisms", "audit", "implementations", "practitioner")
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> set[str]:
    """Absolute names of every module a file imports, lazy (in-function) imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PKG.parent).with_suffix("").parts
    pkg = list(rel[:-1]) if rel[-1] != "__init__" else list(rel[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)] + ([node.module] if node.module else [])
                out.add(".".join(base))
            else:
                out.add(node.module)
    return out


def _files(layer: str):
    return sorted((PKG / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", COMPUTING)
def test_computing_layers_never_import_the_artifact(layer):
    bad = {str(f.relative_to(PKG)): sorted(m for m in _imports(f) if m.startswith("paperlib.artifact"))
           for f in _files(layer)}
    assert not {k: v for k, v in bad.items() if v}, "a computing module imports paperlib.artifact"


#: each computing layer and the layers above it, which it never imports (README "Layout")
ABOVE = {"fdp": ("mechanisms", "audit", "implementations", "practitioner"),
         "mechanisms": ("audit", "implementations", "practitioner"),
         "audit": ("implementations", "practitioner"), "implementations": ("practitioner",)}


@pytest.mark.parametrize("layer", sorted(ABOVE))
def test_no_layer_imports_a_layer_above_it(layer):
    """The arrows point down: e.g. the audit of the fixed step (implementations) runs the fix's code from
    implementations/opacus_divisor.py, which the practitioner's fix re-exports, not the other way."""
    above = tuple(f"paperlib.{a}" for a in ABOVE[layer])
    bad = {str(f.relative_to(PKG)): sorted(m for m in _imports(f) if m.startswith(above)) for f in _files(layer)}
    assert not {k: v for k, v in bad.items() if v}, bad


def test_fdp_uses_numpy_and_scipy_only():
    allowed = {"numpy", "scipy"}
    # fdp/pld/engine.py composes on dp_accounting (the [accounting] extra), imported inside a function only;
    # fdp/progress.py draws bars with tqdm when it is installed (imported lazily, skipped if absent)
    extra = {"engine.py": {"dp_accounting"}, "progress.py": {"tqdm"}}
    for f in _files("fdp"):
        for m in _imports(f):
            top = m.split(".")[0]
            assert (top in STDLIB or top in allowed or top in extra.get(f.name, ())
                    or m.startswith(("paperlib.fdp", "paperlib.fdp.validation"))), (f, m)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """paperlib module -> the paperlib modules it imports (lazy imports included; ``from pkg import name``
    counts as an import of ``pkg.name`` when that is a module, else of ``pkg``)."""
    modules = {_module_name(f) for f in PKG.rglob("*.py")}
    graph = {}
    for f in PKG.rglob("*.py"):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        me = _module_name(f)
        rel = f.relative_to(PKG.parent).with_suffix("").parts
        pkg = list(rel[:-1])
        out = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - (node.level - 1)] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            out.update(n for n in names if n in modules and n != me)
        graph[me] = out
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a list of modules, first = last), or None. Imports of a package's own
    ``__init__`` by its submodules are left out (Python runs ``__init__`` first; PEP 562 exports are lazy)."""
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if m.startswith(n + "."):  # a submodule importing its own package
                continue
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_package_imports_have_no_cycle():
    assert _cycle(_import_graph()) is None, " -> ".join(_cycle(_import_graph()))


def test_the_cycle_check_would_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    graph = _import_graph()
    assert "paperlib.mechanisms.certified" in graph["paperlib.mechanisms.curves"]  # the dispatch above both
    assert "paperlib.mechanisms.multiround" in graph["paperlib.mechanisms.certified"]
    graph["paperlib.mechanisms.multiround"].add("paperlib.mechanisms.certified")  # the old lazy import
    assert _cycle(graph) is not None


def test_nothing_but_init_main_and_cli_at_the_top():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"], top
    layers = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
    assert layers == ["artifact", "audit", "fdp", "implementations", "mechanisms", "practitioner"], layers


def test_no_curve_method_is_probed():
    """Curves are asked through the TradeOff interface (epsilon_bounds, accounting, ...), never probed with
    hasattr; no module reads a private name of another paperlib module."""
    probes = ("epsilon_bounds", "delta_bounds", "beta_bounds", "accounting", "curve", "lower", "upper", "progress",
              "delta_limit", "hockey", "epsilon")
    modules = {_module_name(f): f for f in PKG.rglob("*.py")}
    for name, f in modules.items():
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr" and len(node.args) == 2:
                arg = node.args[1]
                assert not (isinstance(arg, ast.Constant) and arg.value in probes), (name, arg.value)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("paperlib") and \
                    not name.startswith("paperlib.artifact"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                assert not private, (name, node.module, private)


def test_layering_check_would_fail(tmp_path):
    """The checker sees a lazy import of the artifact layer inside a function."""
    f = PKG / "fdp" / "_probe_for_test.py"
    try:
        f.write_text("def f():\n    from paperlib.artifact import claims\n")
        assert "paperlib.artifact" in _imports(f)
    finally:
        f.unlink()


def _run_without(blocked, code):
    """Run ``code`` in a fresh interpreter in which importing any of ``blocked`` fails,
    as it does where those packages are not installed."""
    prelude = (
        "import sys, importlib.abc\n"
        f"B = {tuple(blocked)!r}\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in B:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                          cwd=PKG.parent, timeout=300)


def test_core_imports_neither_torch_nor_matplotlib():
    code = ("import sys, paperlib, paperlib.fdp, paperlib.mechanisms\n"
            "import paperlib.fdp.tradeoff, paperlib.fdp.gaussian, paperlib.fdp.mixture, paperlib.fdp.chisquare\n"
            "import paperlib.fdp.clt, paperlib.mechanisms.core, paperlib.mechanisms.guarantees\n"
            "import paperlib.mechanisms.multiround, paperlib.mechanisms.simulation, paperlib.mechanisms.curves\n"
            "import paperlib.mechanisms.claimed, paperlib.practitioner, paperlib.practitioner.check\n"
            "import paperlib.practitioner.releases, paperlib.practitioner.run, paperlib.cli\n"
            "heavy = [m for m in ('torch', 'matplotlib', 'opacus', 'torchvision') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent, timeout=300)
    assert r.returncode == 0, r.stderr


EPS_ARGS = ["epsilon", "--mechanism", "easgm", "--bound", "upper", "--N", "999", "--q", "0.005", "--sigma", "10",
            "--n", "26010", "--delta", "1e-5"]
EXTRAS = ("torch", "torchvision", "opacus", "tqdm", "matplotlib", "dp_accounting")


def test_cli_core_commands_run_without_the_extras():
    code = f"import sys; from paperlib.cli import main; sys.exit(main({EPS_ARGS!r}))"
    blocked = _run_without(EXTRAS, code)
    full = subprocess.run([sys.executable, "-m", "paperlib", *EPS_ARGS], capture_output=True, text=True,
                          cwd=PKG.parent, timeout=300)
    assert blocked.returncode == 0 and full.returncode == 0, blocked.stderr + full.stderr
    assert json.loads(blocked.stdout) == json.loads(full.stdout)
    assert 0 < json.loads(full.stdout)["epsilon"] < 100


def test_cli_audit_without_the_extra_names_it():
    code = ("import sys; from paperlib.cli import main; sys.exit(main(['audit', '--mechanism', 'easgm', '--N', '3', "
            "'--q', '0.5', '--sigma', '2', '--C', '1', '--n', '20', '--trials', '100', "
            "'--distinguisher', 'optimal', '--seed', '0']))")
    r = _run_without(EXTRAS, code)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "[audit] extra" in lines[0] and lines[0].startswith("paperlib: error: audit"), r.stderr
