"""The package's layout shows its layers, and the public face does not depend on it."""
import ast
from pathlib import Path

import newrllama

PACKAGE = Path(newrllama.__file__).resolve().parent
# Lower layers never import higher ones; the doors import anything below them but not each other.
LAYERS = {"base": 0, "models": 1, "runs": 2, "engine": 3, "labels": 4, "findings": 5, "server": 6, "cluster": 6, "doors": 7}
BASE_MODULES = {"errors", "_lib", "_capi", "version", "columns", "frames"}  # below every layer: the caller's data in and out
TOP_LEVEL_DOORS = {"__init__", "__main__", "_r_helpers"}  # the public face, the command line, R's helpers
PUBLIC_NAMES = [
    "Adjudication", "Agreement", "Annotation", "AnnotationPlan", "Annotations", "AnnotationTask", "AnnotationWarning", "AsyncTextStream", "BaseModelWarning", "Calibration", "Cascade", "CascadeChoice", "ClosedError", "Cluster",
    "ClusterError", "ClusterStats", "CoderAgreement", "Codings", "CodingDesign", "CodingPlan", "CodingSampleWarning", "Coefficient", "Completion", "Context", "ContextError",
    "DeterminismWarning", "Device", "EngineStats", "FailedTextsWarning", "GenerationError", "GenerationStats", "InvalidArgumentError", "LabelScores",
    "LibraryMismatchError", "MeanScore", "Model", "ModelLoadError", "NewrllamaDeprecationWarning", "NewrllamaError", "Prevalence", "RecommendedModel", "Recording", "Regression",
    "ReliabilityBin", "Robustness", "SamplingParams", "SchedulerConfig", "Share", "ShareDifference", "SystemInfo",
    "TemplateError", "TextStream", "TokenizeError", "Validation", "agreement", "annotate", "calibrate", "choose_cascade_share", "cross_fit",
    "default_model_path", "expected_scores", "generate_parallel", "label_shares", "least_confident", "mean_score", "methods_text", "plan_annotation", "plan_coding",
    "prevalence",
    "read_coding_design", "recommended_models", "read_coding_sheet", "read_codings", "regression", "robustness", "system_info", "validate", "weighted_kappa", "write_coding_sheet",
]


def layer_of(module: str) -> str:
    """"newrllama.engine.calls.context" -> "engine"; a top-level module is base or a door."""
    parts = module.split(".")[1:]
    if len(parts) > 1 or (parts and parts[0] in LAYERS and parts[0] not in ("base", "doors")):
        return parts[0]
    name = parts[0] if parts else "__init__"
    if name in BASE_MODULES:
        return "base"
    assert name in TOP_LEVEL_DOORS, f"newrllama.{name} is in no layer: put it in a subpackage"
    return "doors"


def is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists() or name == "newrllama._capi"


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def runtime_nodes(tree: ast.AST):
    """Every node of tree except those under `if TYPE_CHECKING:` (imports for type hints only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(child for child in ast.iter_child_nodes(node) if not is_type_checking_block(child))


def imports_of(path: Path, module: str, type_hints_too: bool = False):
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if type_hints_too else runtime_nodes(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("newrllama"):
                # "from package import name": the module name, if it is one, else the package itself.
                yield from {f"{target}.{a.name}" if is_module(f"{target}.{a.name}") else target for a in node.names}
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("newrllama"))


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        yield path, name[:-len(".__init__")] if name.endswith(".__init__") else name


def test_imports_only_run_downward_between_subpackages():
    wrong = []
    for path, module in modules():
        mine = layer_of(module)
        for target in imports_of(path, module):
            theirs = layer_of(target)
            if theirs == mine:
                continue
            if LAYERS[theirs] >= LAYERS[mine] and mine != "doors":
                wrong.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert wrong == []


def test_the_layout_test_sees_an_upward_import():
    assert layer_of("newrllama.labels.annotate") == "labels" and layer_of("newrllama.engine") == "engine"
    assert LAYERS[layer_of("newrllama.labels.codebook")] > LAYERS[layer_of("newrllama.engine.calls.context")]
    found = list(imports_of(PACKAGE / "engine" / "calls" / "context.py", "newrllama.engine.calls.context"))
    assert "newrllama.runs.results_file" in found and "newrllama.errors" in found


def test_every_subpackage_says_what_it_holds():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, init


def test_a_wheel_holds_every_subpackage():
    import tomllib
    listed = tomllib.loads((PACKAGE.parents[1] / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {".".join(init.parent.relative_to(PACKAGE.parent).parts) for init in PACKAGE.rglob("__init__.py")}
    assert sorted(listed) == sorted(found)


def test_the_public_names_are_those_of_before():
    assert sorted(newrllama.__all__) == sorted(PUBLIC_NAMES)
    assert all(getattr(newrllama, name, None) is not None for name in PUBLIC_NAMES)


# The engine's modules that decide and keep books (scheduling policy, sampling parameters, the sequence layout,
# what a step did, the requests, the prefix cache's runs, the scoring of labels): they run without the C library,
# so they are tested without a model; the step's assembly lends their arrays to C.
PURE_ENGINE_MODULES = ["policy", "sampling.params", "sampling.sampling_table", "kv.sequence_layout", "step.step_events",
                       "step.stops", "step.results", "step.request", "kv.prefix_cache", "step.prompt_prefixes",
                       "step.choices", "step.label_flow"]
C_LIBRARY = {"newrllama._lib", "newrllama._capi"}


def import_closure(module: str) -> set:
    """The package's modules that importing module loads (type-only imports aside)."""
    paths = {name: path for path, name in modules()}
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in paths:  # the compiled _capi has no source to read
            todo.extend(imports_of(paths[name], name))
    return seen


def test_the_engines_policy_and_bookkeeping_modules_do_not_load_the_c_library():
    loading = {m: sorted(import_closure(f"newrllama.engine.{m}") & C_LIBRARY) for m in PURE_ENGINE_MODULES}
    assert {m: c for m, c in loading.items() if c} == {}
    assert import_closure("newrllama.engine.step.scheduler") & C_LIBRARY  # the check sees a module that does


def circles(graph: dict) -> list:
    """The groups of modules that import one another, directly or through others (Tarjan's components)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_the_engines_modules_import_each_other_in_no_circle():
    # Type hints count: a module that names another's classes depends on it as much as one that calls it.
    graph = {name: {t for t in imports_of(path, name, type_hints_too=True) if t.startswith("newrllama.engine.")}
             for path, name in modules() if name.startswith("newrllama.engine.")}
    assert circles(graph) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check sees one


# The engine's rooms, each serving one thing, in the order they may import one another (a room imports only those
# before it; policy.py, the scheduler's numbers and queue, is the one module beside them, below every room).
ENGINE_ROOMS = ["llama", "sampling", "kv", "step", "calls"]


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else "engine"


def test_the_engine_is_rooms_that_import_only_the_rooms_before_them():
    engine = PACKAGE / "engine"
    assert sorted(p.name for p in engine.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ENGINE_ROOMS)
    assert sorted(p.stem for p in engine.glob("*.py")) == ["__init__", "policy"]
    upward = []
    for path, name in modules():
        if not name.startswith("newrllama.engine."):
            continue
        mine = room_of(name)
        for target in imports_of(path, name, type_hints_too=True):
            theirs = room_of(target) if target.startswith("newrllama.engine.") else None
            if theirs in ENGINE_ROOMS and (mine == "engine" or ENGINE_ROOMS.index(theirs) > ENGINE_ROOMS.index(mine)):
                upward.append(f"{name} imports {target}")
    assert upward == []
    assert room_of("newrllama.engine.step.scheduler") == "step" and room_of("newrllama.engine.policy") == "engine"


# The engine's edge with C: the model and its vocabulary, the context, its KV sequences, the samplers, the step's
# assembly and call, and what the build can do. Every other engine module reaches C through these.
ENGINE_C_EDGE = {"model", "vocab", "context", "kv_store", "samplers", "step_assembly", "system"}


def test_only_the_engines_c_edge_imports_the_c_library():
    direct = {name.rsplit(".", 1)[1] for path, name in modules() if name.startswith("newrllama.engine.")
              and set(imports_of(path, name, type_hints_too=True)) & C_LIBRARY}
    assert direct == ENGINE_C_EDGE and len(ENGINE_C_EDGE) <= 7


R_SOURCES = PACKAGE.parents[1] / "r_package" / "R"


def test_r_reaches_python_through_one_door_that_holds_every_name_it_calls():
    import re
    import newrllama._r_helpers as door
    code = re.compile(r"^\s*#.*$", re.MULTILINE)
    sources = {path.name: code.sub("", path.read_text()) for path in sorted(R_SOURCES.glob("*.R"))}
    # Only python.R starts Python and opens the door; every other file goes through python_helpers().
    other_ways = {name for name, text in sources.items() if name != "python.R"
                  and re.search(r"py_newrllama\(\)\$|reticulate::import\(", text)}
    called = {m for text in sources.values() for m in re.findall(r"python_helpers\(\)\$(\w+)", text)}
    assert other_ways == set() and len(called) > 40
    assert sorted(name for name in called if not hasattr(door, name)) == []
