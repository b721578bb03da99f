"""The type stubs (monoflow/_monoflow.pyi) name what the module has, and the module what they name."""

import ast
import inspect
import os
import re

import monoflow
from monoflow import _monoflow


def stub_names():
    tree = ast.parse(open(os.path.join(os.path.dirname(monoflow.__file__), "_monoflow.pyi")).read())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AnnAssign))
                                and not isinstance(n, ast.AnnAssign)} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
    return names


def test_stubs_and_module_name_the_same_things():
    stubs = stub_names()
    public = {n for n in dir(_monoflow) if not n.startswith("_")}
    assert set(stubs) == public
    assert set(monoflow.__all__) == public
    for name, members in stubs.items():
        runtime = getattr(_monoflow, name)
        if members is None:
            assert callable(runtime), name
            continue
        if issubclass(runtime, BaseException):  # attributes set on each instance (errors.cpp)
            continue
        has = {n for n, _ in inspect.getmembers(runtime) if not n.startswith("_")}
        assert members - {"__init__"} == has, name


def test_keyword_arguments_match_the_stubs():
    tree = ast.parse(open(os.path.join(os.path.dirname(monoflow.__file__), "_monoflow.pyi")).read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            declared = [a.arg for a in node.args.args + node.args.kwonlyargs]
            signature = getattr(_monoflow, node.name).__doc__.splitlines()[0]  # pybind11's, with the types
            assert re.findall(r"(?:\(|, )(\w+): ", signature) == declared, (node.name, signature)
