"""A notebook's parameters, read from its source without running it.

:func:`notebook_params` parses ``notebooks/<name>.py`` (the jupytext percent source) with
:mod:`ast` and evaluates the top-level constants as they are in one mode, so that scripts
and tests that need a notebook's parameters (``bench/device_check.py``, the grading tests)
read them from the notebook instead of keeping a copy. Nothing in the file is executed.

Standard library only (``ast``, ``pathlib``, ``copy``): the module must stay importable
without the book's machinery.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

__all__ = ["MODES", "NOTEBOOKS_DIR", "notebook_params"]

#: the modes a notebook runs in (as :data:`paperlib.artifact.notebook.MODES`, repeated here so this
#: module imports nothing of the book; a test checks they are equal)
MODES = ("smoke", "quick", "full")
#: the repository's notebooks folder (the default of ``notebooks_dir``)
NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
#: the module whose ``pick(mode, smoke=..., quick=..., full=...)`` the notebooks call
_PICK_MODULE = "paperlib.artifact.notebook"
#: methods that change a list, dict or set in place: a call of one on a parameter's name drops it
_MUTATORS = {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "sort", "reverse", "update",
             "setdefault", "add", "discard", "difference_update", "intersection_update",
             "symmetric_difference_update"}


class _Skip(Exception):
    """An expression this reader does not evaluate (a call, a comprehension, an unknown name, ...)."""


def notebook_params(name: str, mode: str = "full", notebooks_dir: str | Path | None = None) -> dict:
    """The top-level constants of notebook ``name`` as they are in ``mode``, read with :mod:`ast`.

    Parameters
    ----------
    name
        The notebook's file name without ``.py``, e.g. ``"04_audit_figure2"``; the file
        ``<notebooks_dir>/<name>.py`` must exist.
    mode
        ``"smoke"``, ``"quick"`` or ``"full"``; replaces the value the parameter cell gives
        ``MODE`` (papermill's ``-p MODE``). ``DEVICE`` and ``SEED`` keep the cell's values.
    notebooks_dir
        Folder of the notebook sources; default :data:`NOTEBOOKS_DIR` (this repository's).

    Returns
    -------
    dict
        ``{variable name: value}`` for every module-level assignment (in file order, a later
        one replacing an earlier) whose value is built only from

        * literals: constants, negative numbers, lists, tuples, dicts and sets of evaluable values;
        * names defined earlier in the file by such an assignment (``MODE``, ``DEVICE``, ``SEED`` too);
        * ``pf.pick(MODE, smoke=a, quick=b, full=c)`` (``pick`` of ``paperlib.artifact.notebook``
          under the name the file imports it as): the keyword named by the first argument's value;
        * ``a if X == Y else b`` / ``!=``, ``X`` and ``Y`` evaluable: the branch the test selects
          (only that branch is evaluated).

        Tuple targets are unpacked (``N, SIGMA = 4, 10.0`` gives both). Values are fresh copies
        (mutating one leaves the others alone). Anything else — any other call, a comprehension,
        arithmetic, an attribute, a name bound by ``import``/``for``/``def``/``with``, or inside an
        ``if``/``for``/``try`` block — is skipped, not guessed: a later such binding of a name
        removes it, so does a ``global`` declaration of it in a function, and so does any in-place
        change of a list/dict/set parameter anywhere in the file (``X[k] = ...``, ``X.k = ...``,
        ``X += ...``, ``del X[k]``, ``X.append(...)``, ``X.update(...)``, ...; aliases and changes
        made by called functions are not tracked).

    Raises
    ------
    ValueError
        ``name`` is not a notebook in ``notebooks_dir``; ``mode`` is not one of :data:`MODES`.
        One line, naming the parameter. A file that is not valid Python raises SyntaxError.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    folder = Path(NOTEBOOKS_DIR if notebooks_dir is None else notebooks_dir)
    path = folder / f"{name}.py" if isinstance(name, str) and name and "/" not in name and "\\" not in name else None
    if path is None or not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.py")) if folder.is_dir() else []
        raise ValueError(f"name must be a notebook in {folder} ({', '.join(known) or 'none there'}), got {name!r}")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    env: dict = {}
    picks: set[str] = set()  # names under which the file can call pick: "pf.pick" or "pick"
    for stmt in tree.body:
        picks |= _pick_names(stmt)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            try:
                value = mode if _is_name(targets, "MODE") else _value(stmt.value, env, picks)
                bound = [_bind(t, value) for t in targets]
            except _Skip:
                _forget(env, _stored_names(stmt))
                continue
            for b in bound:
                env.update(b)
        else:
            _forget(env, _stored_names(stmt))
    _forget(env, {n for n in _mutated_names(tree) if isinstance(env.get(n), (list, dict, set))})
    _forget(env, {n for g in ast.walk(tree) if isinstance(g, ast.Global) for n in g.names})  # a call may rebind
    return env


def _is_name(targets, ident: str) -> bool:
    return len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == ident


def _bind(target, value) -> dict:
    """``{name: value}`` for one assignment target (names, tuples/lists of names); _Skip otherwise."""
    if isinstance(target, ast.Name):
        return {target.id: copy.deepcopy(value)}  # `a = b = [...]`: two lists, as two names' values should be
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)) \
            and len(target.elts) == len(value):
        out = {}
        for t, v in zip(target.elts, value):
            out.update(_bind(t, v))
        return out
    raise _Skip


def _value(node, env: dict, picks: set):
    """The value of expression ``node`` under the rules of :func:`notebook_params`; _Skip otherwise."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _value(node.operand, env, picks)
        if isinstance(v, bool) or not isinstance(v, (int, float, complex)):
            raise _Skip
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise _Skip
        items = [_value(e, env, picks) for e in node.elts]
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        try:
            return kind(items)
        except TypeError:  # an unhashable member of a set
            raise _Skip from None
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # {**other}
            raise _Skip
        try:
            return {_value(k, env, picks): _value(v, env, picks) for k, v in zip(node.keys, node.values)}
        except TypeError:  # an unhashable key
            raise _Skip from None
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _Skip
        return copy.deepcopy(env[node.id])
    if isinstance(node, ast.Call) and _dotted(node.func) in picks:
        kw = {k.arg: k.value for k in node.keywords}
        if len(node.args) != 1 or set(kw) != set(MODES):
            raise _Skip
        which = _value(node.args[0], env, picks)
        if which not in MODES:
            raise _Skip
        return _value(kw[which], env, picks)
    if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
            and isinstance(node.test.ops[0], (ast.Eq, ast.NotEq)):
        left, right = _value(node.test.left, env, picks), _value(node.test.comparators[0], env, picks)
        chosen = (left == right) == isinstance(node.test.ops[0], ast.Eq)
        return _value(node.body if chosen else node.orelse, env, picks)
    raise _Skip


def _dotted(node) -> str | None:
    """``"a.b"`` for the expression ``a.b`` (names and attributes only), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _pick_names(stmt) -> set:
    """The names under which ``stmt`` (an import) makes ``paperlib.artifact.notebook.pick`` callable."""
    out = set()
    if isinstance(stmt, ast.ImportFrom) and not stmt.level:
        for a in stmt.names:
            if f"{stmt.module}.{a.name}" == _PICK_MODULE:
                out.add(f"{a.asname or a.name}.pick")
            elif stmt.module == _PICK_MODULE and a.name == "pick":
                out.add(a.asname or "pick")
    elif isinstance(stmt, ast.Import):
        for a in stmt.names:
            if a.name == _PICK_MODULE:
                out.add(f"{a.asname}.pick" if a.asname else f"{_PICK_MODULE}.pick")
    return out


def _stored_names(node) -> set:
    """Every name ``node`` binds in the module's namespace (not inside nested functions or classes,
    whose own names are their locals, except those declared ``global`` there)."""
    out = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(node.name)
        return out | {n for g in ast.walk(node) if isinstance(g, ast.Global) for n in g.names}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return {node.id}
    if isinstance(node, ast.Lambda):
        return out
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        # comprehension variables are local to it; a walrus inside still binds in the module
        return {n.target.id for n in ast.walk(node) if isinstance(n, ast.NamedExpr)}
    for child in ast.iter_child_nodes(node):
        out |= _stored_names(child)
    return out


def _mutated_names(tree) -> set:
    """Names changed in place anywhere in the file: ``X[...] =``, ``X.a =``, ``X +=``, ``del X[...]``,
    ``X.append(...)`` and the other :data:`_MUTATORS` (functions' bodies included)."""
    out = set()

    def base(n):
        while isinstance(n, (ast.Subscript, ast.Attribute)):
            n = n.value
        return n.id if isinstance(n, ast.Name) else None

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            out.add(base(node.func.value))
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                    out.add(base(sub))
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    out.discard(None)
    return out


def _forget(env: dict, names) -> None:
    for n in names:
        env.pop(n, None)
