#!/usr/bin/env python3
"""Static compliance checks for Triton solutions (solution.py).

The source is parsed with Python's own `ast`; it is never imported or executed. The checks enforce a task's
[requirements] (forbidden calls, allowed torch ops) and reject the known ways of cheating a kernel evaluator that
can be seen in the source: calling PyTorch or the reference instead of launching a kernel, try/except fallbacks,
side streams and events, timer and module patching, file and process access, dynamic code, and state carried
across calls. Python operators on tensors (`y[:] = x * 2`) cannot be typed statically and are left to the
runtime checks.

API:   check_triton(source, filename, requirements) -> [{"rule", "file", "line", "message"}, ...]
         line is 1-based; 0 for findings about the whole file (no_kernel, no_solve, a file too large to check)
       reference_names(reference_source) -> sorted top-level names of a task's reference.py
CLI:   python3 d2k_static_check.py < {"source_path": ..., "requirements": {...}}
         optional keys: "filename" (the name the violations carry; default source_path),
                        "reference_path" (reference.py: its top-level names join requirements.reference_names)
       prints {"violations": [...]} on one line, exit 0 (violations or not);
       exit 2 and {"error": ...} when the request or a file cannot be read.

Python 3.11 and 3.12, standard library only.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import sys

# Stable rule names, with one line each (docs/COMPLIANCE.md has the table).
RULES = {
    "syntax": "the file does not parse (or is too large or too deeply nested to check)",
    "no_kernel": "no function decorated with @triton.jit",
    "no_solve": "no module-level solve",
    "kernel_not_launched": "solve never launches a jit kernel (kernel[grid](...)), directly or through helpers",
    "torch_compute": "a PyTorch op outside allowed_torch_ops",
    "forbidden_call": "a name from the task's forbidden_calls",
    "calls_reference": "imports or calls the task's reference or input generator",
    "harness_import": "imports the harness (d2k_harness, _d2k_native, d2k*)",
    "forbidden_module": "imports a module outside the allow list",
    "file_io": "file, descriptor or stdio access",
    "stream": "creates or uses CUDA streams, events or graphs",
    "try_fallback": "try statements or exception-swallowing context managers",
    "dynamic_code": "exec/eval/compile/__import__, non-literal getattr, reflection through dunder attributes",
    "module_patch": "assigns to attributes of imported modules, or touches torch's dispatch internals",
    "timer_patch": "references timing functions (time, triton.testing, elapsed_time)",
    "global_state": "state kept across calls: global, module-level caches, lru_cache, attributes on arguments",
}

MAX_SOURCE_BYTES = 2 << 20
DEFAULT_ALLOWED_TORCH_OPS = ("empty", "empty_like", "zeros", "zeros_like", "view", "reshape", "contiguous")
MAX_VIOLATIONS = 500

# Modules an honest Triton solution may import (the root, and everything under it unless denied below).
ALLOWED_MODULE_ROOTS = frozenset({
    "torch", "triton", "math", "functools", "typing", "dataclasses", "itertools", "operator", "enum", "numbers",
    "__future__",
})

# Submodules of allowed roots that are denied, and the rule that says so (imports and references alike).
DENIED_SUBMODULES = {
    "triton.testing": "timer_patch",
    "torch.utils.benchmark": "timer_patch",
    "torch.profiler": "timer_patch",
    "torch.autograd.profiler": "timer_patch",
    "torch.utils._python_dispatch": "module_patch",
    "torch.overrides": "module_patch",
    "torch.library": "module_patch",
    "torch.utils.cpp_extension": "forbidden_module",
    "torch.multiprocessing": "forbidden_module",
    "torch.distributed": "forbidden_module",
    "torch.hub": "forbidden_module",
    "torch.cuda.jiterator": "forbidden_module",
    "torch.cuda.nccl": "forbidden_module",
    "triton.backends": "forbidden_module",
}

# torch calls that compute nothing (metadata, device queries, grad modes), allowed whatever the task says.
# torch.cuda.synchronize is allowed on purpose: it only waits for work already queued, so it can lengthen the
# solution's own timed window but never hide work from it, forge a result or reorder other streams. Everything
# else around streams is refused (rule `stream`): current_stream/default_stream hand out the stream object that
# wait_stream/record_event and raw-handle tricks need, and an honest Triton solution launches on torch's current
# stream without ever naming it.
SAFE_TORCH_CALLS = frozenset({
    "torch.device", "torch.Size", "torch.dtype", "torch.is_tensor", "torch.is_floating_point", "torch.is_complex",
    "torch.numel", "torch.finfo", "torch.iinfo", "torch.get_default_dtype", "torch.promote_types",
    "torch.result_type", "torch.can_cast", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
    "torch.is_grad_enabled", "torch.is_inference_mode_enabled",
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.current_device",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
    "torch.cuda.device", "torch.cuda.synchronize",
    "torch.Tensor.numel", "torch.Tensor.size", "torch.Tensor.stride", "torch.Tensor.dim", "torch.Tensor.ndimension",
    "torch.Tensor.nelement", "torch.Tensor.data_ptr", "torch.Tensor.is_contiguous", "torch.Tensor.element_size",
    "torch.Tensor.storage_offset", "torch.Tensor.get_device", "torch.Tensor.item", "torch.Tensor.tolist",
})

# Tensor methods that compute (or copy, cast, move to the host): `.X(...)` is torch_compute unless X is in
# allowed_torch_ops. Pure views (view, permute, transpose, unsqueeze, narrow, expand, ...) and metadata
# (numel, size, stride, data_ptr, item, tolist, ...) are not listed: they compute nothing.
CAST_METHODS = frozenset({
    "to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char",
    "cfloat", "cdouble", "cpu", "cuda", "numpy", "clone", "contiguous", "reshape", "flatten", "ravel", "copy_",
    "new_tensor", "pin_memory",
})
COMPUTE_METHODS = frozenset({
    "abs", "abs_", "absolute", "acos", "acosh", "add", "add_", "addbmm", "addcdiv", "addcdiv_", "addcmul",
    "addcmul_", "addmm", "addmm_", "addmv", "addr", "all", "allclose", "amax", "amin", "aminmax", "angle", "any",
    "apply_", "argmax", "argmin", "argsort", "argwhere", "asin", "asinh", "atan", "atan2", "atanh", "baddbmm",
    "bernoulli", "bernoulli_", "bincount", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "bmm", "cauchy_", "ceil", "ceil_", "cholesky", "clamp", "clamp_",
    "clamp_max", "clamp_min", "clip", "clip_", "copysign", "cos", "cosh", "count_nonzero", "cov", "cross",
    "cummax", "cummin", "cumprod", "cumprod_", "cumsum", "cumsum_", "deg2rad", "diag", "diag_embed", "diff",
    "digamma", "dist", "div", "div_", "divide", "dot", "eq", "eq_", "equal", "erf", "erf_", "erfc", "erfinv",
    "exp", "exp_", "exp2", "expm1", "exponential_", "fill_", "fill_diagonal_", "fix", "flip", "fliplr", "flipud",
    "float_power", "floor", "floor_", "floor_divide", "fmax", "fmin", "fmod", "frac", "gather", "gcd", "ge",
    "geometric_", "ger", "greater", "greater_equal", "gt", "heaviside", "histc", "hypot", "i0", "index_add",
    "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_", "index_put", "index_put_",
    "index_reduce", "index_reduce_", "index_select", "inner", "inverse", "isclose", "isfinite", "isinf", "isnan",
    "isneginf", "isposinf", "kron", "kthvalue", "lcm", "ldexp", "le", "lerp", "lerp_", "less", "less_equal",
    "lgamma", "log", "log_", "log10", "log1p", "log2", "log_normal_", "log_softmax", "logaddexp", "logaddexp2",
    "logcumsumexp", "logdet", "logical_and", "logical_not", "logical_or", "logical_xor", "logit", "logsumexp",
    "lt", "lu", "map_", "masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select",
    "matmul", "matrix_exp", "matrix_power", "max", "maximum", "mean", "median", "min", "minimum", "mm", "mode",
    "msort", "mul", "mul_", "multinomial", "multiply", "mv", "mvlgamma", "nan_to_num", "nan_to_num_", "nanmean",
    "nanmedian", "nanquantile", "nansum", "ne", "neg", "neg_", "negative", "nextafter", "nonzero", "norm",
    "normal_", "not_equal", "outer", "pinverse", "polygamma", "pow", "pow_", "prod", "put", "put_", "qr",
    "quantile", "rad2deg", "random_", "reciprocal", "reciprocal_", "relu", "relu_", "remainder", "remainder_",
    "renorm", "repeat", "repeat_interleave", "roll", "rot90", "round", "round_", "rsqrt", "rsqrt_", "scatter",
    "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_", "set_", "sgn", "sigmoid",
    "sigmoid_", "sign", "signbit", "sin", "sinc", "sinh", "slogdet", "softmax", "sort", "sqrt", "sqrt_",
    "square", "square_", "std", "sub", "sub_", "subtract", "sum", "sum_to_size", "svd", "take",
    "take_along_dim", "tan", "tanh", "tanh_", "tensordot", "tile", "topk", "trace", "tril", "tril_", "triu",
    "triu_", "true_divide", "trunc", "trunc_", "uniform_", "unique", "unique_consecutive", "var", "vdot",
    "where", "xlogy", "zero_", "backward", "logical_and_", "bitwise_and_", "bitwise_or_", "mul_", "div_",
}) | CAST_METHODS
# torch functions that compute, for references that are not calls (ops = [torch.cumsum], @torch.compile).
TORCH_FUNCTION_NAMES = (COMPUTE_METHODS - CAST_METHODS) | frozenset({
    "compile", "einsum", "cdist", "conv1d", "conv2d", "conv3d", "linear", "layer_norm", "group_norm",
    "embedding", "scaled_dot_product_attention", "segment_reduce", "searchsorted", "bucketize", "histogram",
    "cat", "stack", "hstack", "vstack", "concat", "concatenate", "vmap", "script", "trace",
})
# Data attributes that share a name with a compute method (torch.finfo(t).max): never flagged when not called.
DATA_ATTRIBUTE_NAMES = frozenset({"max", "min", "real", "imag", "T", "mT", "H", "mH", "data", "grad", "dtype"})

# torch attribute components that create or use streams, events or graphs.
STREAM_COMPONENTS = frozenset({
    "Stream", "stream", "streams", "Event", "set_stream", "current_stream", "default_stream", "ExternalStream",
    "StreamContext", "graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle", "cuda_stream",
    "wait_stream", "wait_event", "record_stream", "record_event", "is_current_stream_capturing",
    "get_stream_from_external", "get_current_stream", "set_current_stream",
})
# Attribute names flagged on any receiver (the receiver is usually a stream or event object).
STREAM_ATTRIBUTES = frozenset({
    "cuda_stream", "wait_stream", "wait_event", "record_stream", "record_event", "get_current_stream",
    "set_current_stream", "is_current_stream_capturing",
})
TIMER_COMPONENTS = frozenset({"elapsed_time", "do_bench", "do_bench_cudagraph", "cudaEventElapsedTime"})
TIMER_ROOTS = frozenset({"time", "timeit"})

FILE_IO_ROOTS = frozenset({"io", "pathlib", "shutil", "tempfile", "pickle", "marshal", "shelve", "glob", "mmap",
                           "fileinput", "dbm"})
FILE_IO_NAMES = frozenset({
    "builtins.open", "os.open", "os.read", "os.write", "os.fdopen", "os.pipe", "os.dup", "os.dup2", "os.close",
    "os.remove", "os.unlink", "os.rename", "os.replace", "os.mkdir", "os.makedirs", "os.listdir", "os.scandir",
    "os.walk", "os.system", "os.popen", "os.truncate", "os.ftruncate", "os.sendfile", "os.symlink", "os.link",
    "os.path", "os.getcwd", "os.chdir", "os.fsync", "os.lseek", "os.pwrite", "os.writev",
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.fromfile", "numpy.loadtxt",
    "numpy.savetxt", "numpy.genfromtxt", "numpy.memmap",
    "torch.load", "torch.save", "torch.from_file",
    "sys.stdout", "sys.stderr", "sys.stdin", "sys.__stdout__", "sys.__stderr__", "sys.__stdin__",
})
FILE_IO_ATTRIBUTES = frozenset({"read_text", "write_text", "read_bytes", "write_bytes", "tofile", "from_file"})

DYNAMIC_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                              "__build_class__"})
DYNAMIC_NAMES = frozenset({"__builtins__", "__loader__", "__spec__"})
DUNDER_ATTRIBUTES = frozenset({
    "__dict__", "__class__", "__subclasses__", "__globals__", "__code__", "__builtins__", "__bases__", "__base__",
    "__mro__", "__closure__", "__func__", "__self__", "__getattribute__", "__setattr__", "__delattr__",
    "__import__", "__loader__", "__spec__", "__reduce__", "__reduce_ex__", "__defaults__", "__kwdefaults__",
    "__wrapped__", "__getattr__", "f_globals", "f_locals", "f_back", "f_code", "f_builtins", "gi_frame",
    "tb_frame", "cr_frame", "co_code", "co_consts",
})
# Attributes of a triton JITFunction that reach its Python body or its launcher internals.
KERNEL_INTERNAL_ATTRIBUTES = frozenset({"fn", "src", "_unsafe_update_src", "cache", "device_caches"})

DISPATCH_NAMES = frozenset({"TorchDispatchMode", "TorchFunctionMode", "__torch_dispatch__", "__torch_function__"})
SYS_PATCH_NAMES = frozenset({"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.path", "sys.settrace",
                             "sys.setprofile", "sys.addaudithook", "sys.excepthook"})

MUTATOR_METHODS = frozenset({
    "append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add", "discard",
    "appendleft", "extendleft", "popleft", "__setitem__", "__delitem__", "put", "sort", "reverse",
    "fill_", "copy_", "zero_", "set_", "resize_",
})
CACHE_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property"})
CONTAINER_FACTORIES = frozenset({"dict", "list", "set", "bytearray", "defaultdict", "OrderedDict", "deque",
                                 "Counter", "ChainMap", "WeakKeyDictionary", "WeakValueDictionary", "SimpleNamespace"})
PLAIN_VALUE_CALLS = frozenset({"list", "dict", "set", "tuple", "sorted", "str", "range", "zip", "enumerate",
                               "reversed", "frozenset", "map", "filter", "int", "float", "len"})
METHOD_SCOPE_EXEMPT = frozenset({"__init__", "__post_init__", "__new__", "__init_subclass__", "__set_name__"})
TIMER_STRINGS = frozenset({"elapsed_time", "do_bench", "do_bench_cudagraph", "cudaEventElapsedTime",
                           "cudaEventRecord", "perf_counter", "perf_counter_ns"})

_BUILTIN_NAMES = frozenset(dir(builtins)) | {"__import__", "__build_class__"}
_FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_DEF_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_TRY_TYPES = tuple(t for t in (getattr(ast, "Try", None), getattr(ast, "TryStar", None)) if t is not None)
_HARNESS_MODULE = re.compile(r"^_?d2k\w*$")
_REFERENCE_PATH = re.compile(r"^[\w./\\-]*reference\.py$")
_MAX_ALIASES = 16
_MAX_COMPONENTS = 16


def _violation(rule, filename, line, message):
    return {"rule": rule, "file": filename, "line": int(line or 0), "message": message}


def _fold_str(node, depth=0):
    """The value of a string expression built from literals ('cum' + 'sum', f'{"a"}b', ''.join([...])), or None."""
    if depth > 64:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold_str(node.left, depth + 1), _fold_str(node.right, depth + 1)
        if left is not None and right is not None:
            return left + right
        return None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                if v.format_spec is not None:
                    return None
                s = _fold_str(v.value, depth + 1)
            else:
                s = _fold_str(v, depth + 1)
            if s is None:
                return None
            parts.append(s)
        return "".join(parts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], (ast.List, ast.Tuple))):
        parts = [_fold_str(e, depth + 1) for e in node.args[0].elts]
        if all(p is not None for p in parts):
            return node.func.value.value.join(parts)
    return None


def _is_str_const(node):
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _chain_root(node):
    """The Name at the bottom of a chain of attributes, subscripts and calls (a.b[c].d() -> a), or None."""
    for _ in range(256):
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return None
    return None


def _mutation_root(node):
    """The Name whose object a mutation reaches: a.b[c].d -> a, CACHE.get(k).append -> CACHE; None through a
    plain function call (helper().append(x) mutates a fresh result, not helper)."""
    for _ in range(256):
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None
    return None


def _is_main_guard(stmt):
    """`if __name__ == "__main__":` (either operand order)."""
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    t = stmt.test
    if len(t.ops) != 1 or not isinstance(t.ops[0], ast.Eq):
        return False
    a, b = t.left, t.comparators[0]
    def is_name(n):
        return isinstance(n, ast.Name) and n.id == "__name__"
    def is_main(n):
        return isinstance(n, ast.Constant) and n.value == "__main__"
    return (is_name(a) and is_main(b)) or (is_name(b) and is_main(a))


def _is_mutable_container(node):
    if isinstance(node, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        return name in CONTAINER_FACTORIES
    return False


def _is_plain_value(node):
    """An expression that is certainly not a tensor: literals, containers, comprehensions, plain builtins."""
    if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp,
                         ast.DictComp, ast.GeneratorExp, ast.JoinedStr)):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PLAIN_VALUE_CALLS:
        return True
    return False


class _Checker:
    def __init__(self, tree, filename, requirements):
        self.tree = tree
        self.file = filename
        req = requirements if isinstance(requirements, dict) else {}

        def str_list(key):
            v = req.get(key) or []
            return [s for s in v if isinstance(s, str) and s] if isinstance(v, (list, tuple)) else []

        # Python names only: C++ names (cub::..., thrust::...) belong to the CUDA checks.
        self.forbidden = [f for f in str_list("forbidden_calls") if "::" not in f]
        self.forbidden_methods = {f.split(".", 2)[2] for f in self.forbidden
                                  if f.startswith("torch.Tensor.") and f.count(".") == 2}
        # A task that lists no allowed_torch_ops at all gets the allocation and view basics; a list, even an
        # empty one, is taken as written.
        if req.get("allowed_torch_ops") is None:
            self.allowed = set(DEFAULT_ALLOWED_TORCH_OPS)
        else:
            self.allowed = set(str_list("allowed_torch_ops"))
        self.reference_names = {"reference", "generate_inputs"} | set(str_list("reference_names"))
        self.out = []
        self.seen = set()
        self.fired = {}

    # --- bookkeeping ----------------------------------------------------------------------------
    def add(self, rule, node_or_line, message):
        line = node_or_line if isinstance(node_or_line, int) else getattr(node_or_line, "lineno", 0)
        key = (rule, line)
        if key in self.seen or len(self.out) >= MAX_VIOLATIONS:
            return
        self.seen.add(key)
        self.out.append(_violation(rule, self.file, line, message))

    def result(self):
        return sorted(self.out, key=lambda v: (v["line"], v["rule"]))

    # --- pass 1: nodes, parents, scopes ---------------------------------------------------------
    def index(self):
        name_stored = any(isinstance(n, ast.Name) and n.id == "__name__" and not isinstance(n.ctx, ast.Load)
                          for n in ast.walk(self.tree))
        self.name_stored = name_stored
        skip_bodies = set()
        if not name_stored:
            for stmt in self.tree.body:
                if _is_main_guard(stmt):
                    skip_bodies.add(id(stmt))
        self.parent = {}
        self.field = {}
        self.scope = {}          # node -> innermost FunctionDef/AsyncFunctionDef/Lambda whose body holds it, or None
        self.class_of = {}       # FunctionDef -> ClassDef when it is a method
        self.in_class = set()    # ids of nodes in a class body (not inside a method): class namespace, not module
        self.nodes = []
        self.docstrings = set()
        stack = [(self.tree, None, None, None, False)]
        while stack:
            node, parent, field, scope, in_class = stack.pop()
            self.parent[node] = parent
            self.field[node] = field
            self.scope[node] = scope
            if in_class:
                self.in_class.add(id(node))
            self.nodes.append(node)
            if isinstance(node, (ast.Module, ast.ClassDef) + _DEF_TYPES):
                body = node.body
                if body and isinstance(body[0], ast.Expr) and _is_str_const(body[0].value):
                    self.docstrings.add(id(body[0].value))
            for fname, value in ast.iter_fields(node):
                children = value if isinstance(value, list) else [value]
                if fname == "body" and id(node) in skip_bodies:
                    continue
                child_scope = scope
                child_in_class = in_class
                if fname in ("body", "args") and isinstance(node, _FUNC_TYPES):
                    child_scope = node  # parameters belong to the function (defaults are evaluated outside)
                    child_in_class = False
                if fname == "body" and isinstance(node, ast.ClassDef):
                    child_in_class = True
                for child in children:
                    if isinstance(child, ast.AST):
                        if isinstance(child, _DEF_TYPES) and isinstance(node, ast.ClassDef) and fname == "body":
                            self.class_of[child] = node
                        stack.append((child, node, fname, child_scope, child_in_class))
        self.nodes.reverse()

    def scope_chain(self, node):
        s = self.scope.get(node)
        while s is not None:
            yield s
            s = self.scope.get(s)

    # --- pass 2: bindings and aliases -----------------------------------------------------------
    def bindings(self):
        self.alias = {}           # local name -> set of dotted qualified names
        self.bound = set()        # every name bound anywhere (shadows builtins)
        self.star_modules = []    # from X import *
        self.imported_roots = set()
        self.module_bind = {}     # module-scope name -> list of (kind, node)
        self.locals = {}          # function -> names bound in it
        self.global_decl = {}     # function -> names declared global
        self.nonlocal_decl = {}   # function -> names declared nonlocal
        self.param_names = {}     # function -> parameter names (in order)
        assigns = []              # (name, value node) for alias propagation

        def bind(name, node, kind, value=None):
            self.bound.add(name)
            s = self.scope.get(node)
            if id(node) in self.in_class:
                return  # a class attribute or method: the class's namespace
            if s is None:
                self.module_bind.setdefault(name, []).append((kind, value if value is not None else node))
            else:
                self.locals.setdefault(s, set()).add(name)

        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imported_roots.add(a.name.split(".")[0])
                    if a.asname:
                        self.alias.setdefault(a.asname, set()).add(a.name)
                        bind(a.asname, node, "import")
                    else:
                        top = a.name.split(".")[0]
                        self.alias.setdefault(top, set()).add(top)
                        bind(top, node, "import")
            elif isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    for a in node.names:
                        bind(a.asname or a.name, node, "import")
                    continue
                self.imported_roots.add(node.module.split(".")[0])
                for a in node.names:
                    if a.name == "*":
                        self.star_modules.append(node.module)
                        continue
                    name = a.asname or a.name
                    self.alias.setdefault(name, set()).add(f"{node.module}.{a.name}")
                    bind(name, node, "import")
            elif isinstance(node, _DEF_TYPES) or isinstance(node, ast.ClassDef):
                bind(node.name, node, "class" if isinstance(node, ast.ClassDef) else "def")
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                parent = self.parent.get(node)
                value = None
                if isinstance(parent, ast.Assign) and node in parent.targets:
                    value = parent.value
                    assigns.append((node.id, parent.value))
                elif isinstance(parent, (ast.AnnAssign, ast.NamedExpr)) and parent.target is node:
                    value = parent.value
                    if value is not None:
                        assigns.append((node.id, value))
                bind(node.id, node, "assign", value)
            elif isinstance(node, ast.arg):
                bind(node.arg, node, "param")
            elif isinstance(node, ast.Global):
                s = self.scope.get(node)
                if s is not None:
                    self.global_decl.setdefault(s, set()).update(node.names)
            elif isinstance(node, ast.Nonlocal):
                s = self.scope.get(node)
                if s is not None:
                    self.nonlocal_decl.setdefault(s, set()).update(node.names)
            if isinstance(node, _FUNC_TYPES):
                a = node.args
                params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
                if a.vararg:
                    params.append(a.vararg.arg)
                if a.kwarg:
                    params.append(a.kwarg.arg)
                self.param_names[node] = params
                # A default that names a function is an alias: def solve(x, y, cs=torch.cumsum)
                positional = a.posonlyargs + a.args
                for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                    assigns.append((p.arg, d))
                for p, d in zip(a.kwonlyargs, a.kw_defaults):
                    if d is not None:
                        assigns.append((p.arg, d))
        # Names bound by a global declaration live at module scope.
        for f, names in self.global_decl.items():
            for n in names:
                self.locals.get(f, set()).discard(n)
        for f, names in self.nonlocal_decl.items():
            for n in names:
                self.locals.get(f, set()).discard(n)
        # Alias propagation to a fixpoint (bounded): fn = torch.cumsum; F = torch.nn.functional; k = kernel
        for _ in range(8):
            changed = False
            for name, value in assigns:
                qs = self.qualnames(value)
                if not qs:
                    continue
                cur = self.alias.setdefault(name, set())
                for q in qs:
                    if q not in cur and len(cur) < _MAX_ALIASES and q.count(".") < _MAX_COMPONENTS:
                        cur.add(q)
                        changed = True
            if not changed:
                break

    def qualnames(self, node, depth=0):
        """Dotted names an expression may stand for, rooted at an import, a builtin or a star import."""
        if depth > 64:
            return set()
        if isinstance(node, ast.Name):
            if node.id in self.alias:
                return set(self.alias[node.id])
            if node.id not in self.bound:
                if node.id in _BUILTIN_NAMES:
                    return {"builtins." + node.id}
                return {f"{m}.{node.id}" for m in self.star_modules}
            return set()
        if isinstance(node, ast.Attribute):
            return {f"{q}.{node.attr}" for q in self.qualnames(node.value, depth + 1) if q.count(".") < _MAX_COMPONENTS}
        if isinstance(node, ast.Call) and node.args:
            fq = self.qualnames(node.func, depth + 1)
            if "builtins.getattr" in fq and len(node.args) >= 2:
                name = _fold_str(node.args[1])
                if name is not None:
                    return {f"{q}.{name}" for q in self.qualnames(node.args[0], depth + 1)}
            if "builtins.__import__" in fq or "importlib.import_module" in fq or "importlib.__import__" in fq:
                name = _fold_str(node.args[0])
                if name:
                    return {name, name.split(".")[0]}
        return set()

    def attr_of(self, node):
        """(receiver, attribute name) of `x.name` or `getattr(x, 'name')`, else (None, None)."""
        if isinstance(node, ast.Attribute):
            return node.value, node.attr
        if (isinstance(node, ast.Call) and len(node.args) >= 2
                and "builtins.getattr" in self.qualnames(node.func)):
            name = _fold_str(node.args[1])
            if name is not None:
                return node.args[0], name
        return None, None

    # --- kernels --------------------------------------------------------------------------------
    def is_triton(self, expr, names):
        if isinstance(expr, ast.Call):
            expr = expr.func
        return any(q.split(".")[0] == "triton" and q.rsplit(".", 1)[-1] in names for q in self.qualnames(expr))

    def find_kernels(self):
        self.kernel_defs = set()
        self.kernel_names = set()
        for node in self.nodes:
            if isinstance(node, _DEF_TYPES) and any(self.is_triton(d, {"jit"}) for d in node.decorator_list):
                self.kernel_defs.add(node)
                self.kernel_names.add(node.name)
        # kernel = triton.jit(fn), or wrapped further: triton.autotune(...)(triton.jit(fn))
        for node in self.nodes:
            if isinstance(node, ast.Assign) and any(
                    isinstance(n, ast.Call) and self.is_triton(n, {"jit"}) for n in ast.walk(node.value)):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.kernel_names.add(t.id)
        # Names that hold kernels: k = kernel, k = a if c else b, KERNELS = {torch.float32: k32}, k = KERNELS[dt]
        for _ in range(4):
            for node in self.nodes:
                if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                    continue
                if isinstance(node.value, ast.Call) or not any(
                        isinstance(n, ast.Name) and n.id in self.kernel_names for n in ast.walk(node.value)):
                    continue
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Name):
                        self.kernel_names.add(t.id)

    def in_kernel(self, node):
        return any(f in self.kernel_defs for f in self.scope_chain(node))

    # --- rules on imports -----------------------------------------------------------------------
    def module_rule(self, name):
        """(rule, message) for importing module `name`, or None when it is fine."""
        parts = name.split(".")
        if _HARNESS_MODULE.match(parts[0]):
            return "harness_import", f"imports the harness module {name}"
        if "reference" in parts or parts[0] == "d2k_task_reference":
            return "calls_reference", f"imports the task's reference ({name})"
        for prefix, rule in DENIED_SUBMODULES.items():
            if name == prefix or name.startswith(prefix + "."):
                return rule, f"imports {name}"
        if parts[0] == "torch" and any(c.startswith("_") and not c.startswith("__") for c in parts[1:]):
            return "module_patch", f"imports torch internals ({name})"
        if parts[0] in TIMER_ROOTS:
            return "forbidden_module", f"imports {name} (timing functions have no place in a solution)"
        if parts[0] not in ALLOWED_MODULE_ROOTS:
            return "forbidden_module", f"imports {name}, outside the allowed modules"
        return None

    def check_imports(self, node):
        if isinstance(node, ast.Import):
            for a in node.names:
                r = self.module_rule(a.name)
                if r:
                    self.add(r[0], node, r[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                self.add("forbidden_module", node, "relative import (a solution is a single file)")
                return
            if not node.module:
                return
            r = self.module_rule(node.module)
            if r:
                self.add(r[0], node, r[1])
                return
            for a in node.names:
                if a.name == "*":
                    continue
                full = f"{node.module}.{a.name}"
                r = self.module_rule(full)
                if r:
                    self.add(r[0], node, r[1])
                self.check_qualname(node, {full}, imported=True)

    # --- rules on resolved names ----------------------------------------------------------------
    def check_qualname(self, node, qs, imported=False):
        """Rules that apply to any reference to a dotted name. Returns the set of rules that fired."""
        fired = set()

        def fire(rule, msg):
            fired.add(rule)
            self.add(rule, node, msg)

        for q in sorted(qs):
            parts = q.split(".")
            root = parts[0]
            for f in self.forbidden:
                if q == f or q.startswith(f + "."):
                    fire("forbidden_call", f"uses {q}, forbidden by the task ({f})")
            if root == "torch":
                if any(c in STREAM_COMPONENTS for c in parts[1:]):
                    fire("stream", f"uses {q}: streams, events and graphs are not allowed")
                if any(c.startswith("_") and not c.startswith("__") for c in parts[1:]):
                    fire("module_patch", f"uses torch internals ({q})")
            if root == "triton" and any(c in STREAM_COMPONENTS for c in parts[1:]):
                fire("stream", f"uses {q}: streams are not allowed")
            for prefix, rule in DENIED_SUBMODULES.items():
                if q == prefix or q.startswith(prefix + "."):
                    fire(rule, f"uses {q}")
            if root in TIMER_ROOTS and len(parts) > 1:
                fire("timer_patch", f"uses {q}: timing functions have no place in a solution")
            if any(c in TIMER_COMPONENTS for c in parts[1:]):
                fire("timer_patch", f"uses {q}: timing functions have no place in a solution")
            if root in FILE_IO_ROOTS or any(q == n or q.startswith(n + ".") for n in FILE_IO_NAMES):
                if not imported:
                    fire("file_io", f"uses {q}: no file or stream I/O in a solution")
            if (root not in ALLOWED_MODULE_ROOTS and root != "builtins" and root not in self.imported_roots
                    and not imported):
                fire("forbidden_module", f"uses {q}, a module outside the allowed modules")
            if root == "builtins" and len(parts) == 2 and parts[1] in DYNAMIC_BUILTINS:
                fire("dynamic_code", f"uses {parts[1]}")
            if root == "importlib" and not imported:
                fire("dynamic_code", f"uses {q}")
            if q in ("operator.attrgetter", "operator.methodcaller"):
                fire("dynamic_code", f"uses {q} (a method looked up by name)")
            if any(q == n or q.startswith(n + ".") for n in SYS_PATCH_NAMES):
                fire("module_patch", f"uses {q}")
            if q in CACHE_DECORATORS:
                fire("global_state", f"uses {q}: results cached across calls")
            if any(c in DISPATCH_NAMES for c in parts):
                fire("module_patch", f"uses {q}: dispatch modes can reroute every torch op")
        return fired

    def check_reference_node(self, node):
        """A maximal Name/Attribute chain (or getattr/__import__ call) not itself the value of an attribute."""
        parent = self.parent.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        qs = self.qualnames(node)
        fired = self.check_qualname(node, qs) if qs else set()
        self.fired[id(node)] = fired
        called = isinstance(parent, ast.Call) and parent.func is node
        decorator = self.field.get(node) == "decorator_list"
        # A torch function handed around as a value (map(torch.exp, ...), ops = [torch.cumsum]) or used as a
        # decorator (@torch.compile): dtypes and data attributes share the namespace, so only known op names.
        if qs and not called and not fired and isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            for q in qs:
                parts = q.split(".")
                last = parts[-1]
                if parts[0] != "torch" or q in SAFE_TORCH_CALLS or last in self.allowed:
                    continue
                if decorator or (last in TORCH_FUNCTION_NAMES and last not in DATA_ATTRIBUTE_NAMES):
                    self.add("torch_compute", node, f"refers to {q}, a PyTorch op outside allowed_torch_ops")
                    break
        return qs, fired

    # --- rules on calls -------------------------------------------------------------------------
    def check_call(self, node):
        func = node.func
        fq = self.qualnames(func)
        fired = self.fired.get(id(func), set())
        if fq and not isinstance(func, (ast.Name, ast.Attribute)):
            fired = self.check_qualname(node, fq)  # getattr(torch, "cumsum")(...), __import__("x").y(...)
        for kw in node.keywords:
            if kw.arg == "stream":
                self.add("stream", node, "passes stream=: launches go on the harness's stream")
        if "builtins.getattr" in fq or "builtins.setattr" in fq or "builtins.delattr" in fq:
            fn = next(q for q in ("builtins.getattr", "builtins.setattr", "builtins.delattr") if q in fq)[9:]
            if len(node.args) >= 2 and not _is_str_const(node.args[1]):
                self.add("dynamic_code", node, f"{fn} with a computed attribute name")
            if fn in ("setattr", "delattr") and node.args:
                target = node.args[0]
                if self.qualnames(target):
                    self.add("module_patch", node, f"{fn} on a module or builtin")
                else:
                    self.mutation(node, target, f"{fn} on a shared object")
        if "builtins.print" in fq and any(kw.arg == "file" for kw in node.keywords):
            self.add("file_io", node, "print(file=...): no file or stream I/O in a solution")
        if "builtins.type" in fq and len(node.args) == 3:
            self.add("dynamic_code", node, "type() with three arguments builds a class at run time")
        if "builtins.next" in fq and node.args:
            root = _chain_root(node.args[0])
            if root is not None and self.is_shared_name(root, node):
                self.add("global_state", node, f"next() on {root.id}, an iterator that lives across calls")
        # The reference or its input generator, by name
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in self.reference_names and not (isinstance(func, ast.Attribute) and self.qualnames(func.value)
                                                  and not self.reference_root(func.value)):
            self.add("calls_reference", node, f"calls {name}, a name of the task's reference.py")
        # torch functions
        if fq:
            if any(q.split(".")[0] == "torch" for q in fq) and not fired:
                for q in sorted(fq):
                    parts = q.split(".")
                    if parts[0] != "torch" or q in SAFE_TORCH_CALLS or parts[-1] in self.allowed:
                        continue
                    if len(parts) == 1:
                        continue
                    self.add("torch_compute", node, f"calls {q}, a PyTorch op outside allowed_torch_ops")
                    break
            return
        # method calls on values the checker cannot type
        receiver, attr = self.attr_of(func)
        if receiver is None or self.qualnames(receiver) or self.in_kernel(node) or self.is_plain(receiver):
            return
        if attr == "sort" and any(kw.arg in ("key", "reverse") for kw in node.keywords):
            return  # list.sort(key=..., reverse=...): Tensor.sort takes dim/descending/stable
        if attr in self.forbidden_methods:
            self.add("forbidden_call", node, f".{attr}() is forbidden by the task (torch.Tensor.{attr})")
        elif attr in COMPUTE_METHODS and attr not in self.allowed:
            self.add("torch_compute", node, f".{attr}() is a PyTorch op outside allowed_torch_ops")

    def reference_root(self, node):
        return any("reference" in q.split(".") for q in self.qualnames(node))

    def is_plain(self, receiver):
        if _is_plain_value(receiver):
            return True
        if isinstance(receiver, ast.Name):
            values = self.plain_names.get(receiver.id)
            return bool(values)
        return False

    def collect_plain_names(self):
        """Names only ever bound to literals, containers or plain builtins (never tensors)."""
        values = {}
        other = set()
        for node in self.nodes:
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                parent = self.parent.get(node)
                if isinstance(parent, ast.Assign) and node in parent.targets:
                    values.setdefault(node.id, []).append(parent.value)
                elif isinstance(parent, ast.AnnAssign) and parent.target is node and parent.value is not None:
                    values.setdefault(node.id, []).append(parent.value)
                else:
                    other.add(node.id)
            elif isinstance(node, ast.arg):
                other.add(node.arg)
        self.plain_names = {n: v for n, v in values.items()
                            if n not in other and all(_is_plain_value(x) for x in v)}

    # --- rules on attributes --------------------------------------------------------------------
    def check_attribute(self, node):
        attr = node.attr
        if attr in DUNDER_ATTRIBUTES:
            self.add("dynamic_code", node, f"reflection through .{attr}")
        if attr in DISPATCH_NAMES:
            self.add("module_patch", node, f".{attr}: dispatch modes can reroute every torch op")
        if attr in STREAM_ATTRIBUTES:
            self.add("stream", node, f".{attr}: streams and events are not allowed")
        if attr in TIMER_COMPONENTS:
            self.add("timer_patch", node, f".{attr}: timing functions have no place in a solution")
        if attr in FILE_IO_ATTRIBUTES:
            self.add("file_io", node, f".{attr}(): no file I/O in a solution")
        if (attr in KERNEL_INTERNAL_ATTRIBUTES and isinstance(node.value, ast.Name)
                and node.value.id in self.kernel_names):
            self.add("dynamic_code", node, f"{node.value.id}.{attr} reaches into the jit kernel's internals")
        if not isinstance(node.ctx, ast.Load):
            if self.qualnames(node.value):
                q = sorted(self.qualnames(node.value))[0]
                self.add("module_patch", node, f"assigns to {q}.{attr}: modules are not to be patched")
            return
        # A method of a tensor taken as a value: f = g.cumsum; f(dim=0)
        parent = self.parent.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        if called or self.qualnames(node.value) or self.in_kernel(node) or self.is_plain(node.value):
            return
        if attr in self.forbidden_methods:
            self.add("forbidden_call", node, f".{attr} is forbidden by the task (torch.Tensor.{attr})")

    # --- state across calls ---------------------------------------------------------------------
    def is_shared_name(self, name_node, at):
        """Whether a Name used inside a function refers to something that outlives the call."""
        f = self.scope.get(at)
        if f is None:
            return False
        n = name_node.id
        if n in self.global_decl.get(f, set()):
            return True
        if n in self.locals.get(f, set()):
            return False
        for outer in self.scope_chain(f):
            if n in self.locals.get(outer, set()) or n in self.nonlocal_decl.get(outer, set()):
                return outer in self.factories
        binds = self.module_bind.get(n)
        return bool(binds) and not all(kind == "import" for kind, _ in binds)

    def mutation(self, at, target, what):
        root = _mutation_root(target)
        if root is None:
            return
        f = self.scope.get(at)
        if f is None:
            return
        if self.is_shared_name(root, at):
            self.add("global_state", at, f"{what}: {root.id} lives across calls (caching outputs is a known cheat)")
            return
        params = self.param_names.get(f, [])
        cls = self.class_of.get(f)
        if cls is not None and params and root.id == params[0] and f.name not in METHOD_SCOPE_EXEMPT:
            self.add("global_state", at, f"{what}: state kept on {root.id} across calls")

    def check_state(self, node):
        if isinstance(node, ast.Global) and self.scope.get(node) is not None:
            self.add("global_state", node, f"global {', '.join(node.names)}: state kept across calls")
            return
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
            self.mutation(node, node.value, "writes into a shared object")
            # Attributes set on arguments survive: the harness reuses its tensors across calls.
            f = self.scope.get(node)
            if isinstance(node, ast.Attribute) and f is not None:
                root = _chain_root(node.value)
                params = self.param_names.get(f, [])
                is_self = self.class_of.get(f) is not None and params and root is not None and root.id == params[0]
                if root is not None and root.id in params and not is_self:
                    self.add("global_state", node, f"sets .{node.attr} on the argument {root.id}: state kept "
                                                   "on objects the harness passes again")
            return
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            f = self.scope.get(node)
            if f is not None and node.id in self.nonlocal_decl.get(f, set()):
                for outer in self.scope_chain(f):
                    if node.id in self.locals.get(outer, set()):
                        if outer in self.factories:
                            self.add("global_state", node, f"rebinds {node.id}, a closure variable that lives "
                                                           "across calls")
                        break
            return
        if isinstance(node, ast.Call):
            receiver, attr = self.attr_of(node.func)
            if receiver is not None and attr in MUTATOR_METHODS:
                self.mutation(node, receiver, f".{attr}()")
            return
        if isinstance(node, _FUNC_TYPES):
            for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                if _is_mutable_container(d):
                    self.add("global_state", d, "a mutable default argument lives across calls")

    def find_factories(self):
        """Module functions called at import time: their locals survive in the closures they return."""
        self.factories = set()
        defs = {}
        for kind_list_name, binds in self.module_bind.items():
            for kind, n in binds:
                if kind == "def":
                    defs.setdefault(kind_list_name, []).append(n)
        for node in self.nodes:
            if isinstance(node, ast.Call) and self.scope.get(node) is None:
                f = node.func
                if isinstance(f, ast.Name) and f.id in defs:
                    self.factories.update(defs[f.id])
            if isinstance(node, _DEF_TYPES) and self.scope.get(node) is None:
                for d in node.decorator_list:
                    d = d.func if isinstance(d, ast.Call) else d
                    if isinstance(d, ast.Name) and d.id in defs:
                        self.factories.update(defs[d.id])

    # --- solve and the call graph ---------------------------------------------------------------
    def check_solve(self):
        binds = self.module_bind.get("solve")
        if not binds:
            self.add("no_solve", 0, "no module-level solve(): the harness calls solve(*inputs, *outputs, **params)")
            return
        if not self.kernel_defs and not self.kernel_names:
            return  # no_kernel says it already
        module_defs = {}
        module_classes = {}
        for name, bl in self.module_bind.items():
            for kind, n in bl:
                if kind == "def":
                    module_defs.setdefault(name, []).append(n)
                elif kind == "class":
                    module_classes.setdefault(name, []).append(n)
        for kind, n in binds:
            start = [n] if kind == "def" else [n] if isinstance(n, ast.AST) else []
            if not self.reaches_launch(start, module_defs, module_classes):
                line = getattr(n, "lineno", 0)
                self.add("kernel_not_launched", line, "solve() never launches a @triton.jit kernel "
                                                      "(kernel[grid](...)), directly or through helpers")

    def reaches_launch(self, start, module_defs, module_classes):
        seen = set()
        work = list(start)
        passed_kernel = False
        param_launch = False
        while work:
            item = work.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            roots = [item]
            if isinstance(item, ast.ClassDef):
                roots = [b for b in item.body if isinstance(b, _DEF_TYPES)]
            for root in roots:
                for sub in ast.walk(root):
                    if isinstance(sub, ast.Call):
                        target = sub.func
                        if isinstance(target, ast.Subscript):
                            base = target.value
                            holder = _chain_root(base)
                            if holder is not None and holder.id in self.kernel_names:
                                return True
                            if isinstance(base, ast.Attribute) and base.attr in self.kernel_names:
                                return True
                            if isinstance(base, ast.Name):
                                param_launch = True
                        elif (isinstance(target, ast.Attribute) and target.attr == "run"
                              and isinstance(target.value, ast.Name) and target.value.id in self.kernel_names):
                            return True
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                        if sub.id in self.kernel_names:
                            passed_kernel = True
                        for d in module_defs.get(sub.id, []):
                            if d not in self.kernel_defs:
                                work.append(d)
                        work.extend(module_classes.get(sub.id, []))
            if passed_kernel and param_launch:
                return True
        return False

    # --- strings --------------------------------------------------------------------------------
    def check_string(self, node):
        if id(node) in self.docstrings:
            return
        parent = self.parent.get(node)
        if isinstance(parent, ast.Expr) or isinstance(parent, ast.JoinedStr):
            return
        s = node.value.strip()
        if _HARNESS_MODULE.match(s):
            self.add("harness_import", node, f"names the harness module {s!r}")
        if s in ("reference", "d2k_task_reference") or _REFERENCE_PATH.match(s):
            self.add("calls_reference", node, f"names the task's reference ({s!r})")
        if s in TIMER_STRINGS:
            self.add("timer_patch", node, f"names the timing function {s!r}")

    # --- driver ---------------------------------------------------------------------------------
    def run(self):
        self.index()
        self.bindings()
        self.find_kernels()
        self.collect_plain_names()
        self.find_factories()
        if self.name_stored:
            for node in self.nodes:
                if isinstance(node, ast.Name) and node.id == "__name__" and not isinstance(node.ctx, ast.Load):
                    self.add("dynamic_code", node, "assigns __name__")
        if not self.kernel_defs and not self.kernel_names:
            self.add("no_kernel", 0, "no function decorated with @triton.jit: the hot path must be your kernels")
        for node in self.nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.check_imports(node)
            elif isinstance(node, _TRY_TYPES):
                self.add("try_fallback", node, "try statement: no fallbacks around the kernel (an error must "
                                               "surface as an error)")
            elif isinstance(node, _DEF_TYPES) and node.name in ("__exit__", "__aexit__"):
                self.add("try_fallback", node, f"defines {node.name}: a context manager can swallow exceptions")
            elif isinstance(node, _DEF_TYPES) and node.name in DISPATCH_NAMES:
                self.add("module_patch", node, f"defines {node.name}: dispatch hooks can reroute every torch op")
            if isinstance(node, ast.Name):
                if node.id in DYNAMIC_NAMES:
                    self.add("dynamic_code", node, f"uses {node.id}")
                if node.id == "__file__":
                    self.add("file_io", node, "uses __file__ (locating files next to the solution)")
            if isinstance(node, (ast.Name, ast.Attribute)):
                self.check_reference_node(node)
            if isinstance(node, ast.Attribute):
                self.check_attribute(node)
            if isinstance(node, ast.Call):
                self.check_call(node)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.check_string(node)
            self.check_state(node)
        self.check_solve()


def check_triton(source, filename, requirements):
    """Static compliance violations of a Triton solution's source; [] when there are none."""
    filename = str(filename)
    # Bytes are parsed as the import system reads a file (BOM, coding cookie); a str is taken as decoded.
    size = len(source) if isinstance(source, (bytes, bytearray)) else len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return [_violation("syntax", filename, 0, f"larger than {MAX_SOURCE_BYTES} bytes: too large to check")]
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [_violation("syntax", filename, e.lineno or 0, f"does not parse: {e.msg}")]
    except (ValueError, RecursionError, MemoryError) as e:
        return [_violation("syntax", filename, 0, f"does not parse: {type(e).__name__}: {e}")]
    checker = _Checker(tree, filename, requirements)
    try:
        checker.run()
    except RecursionError:
        return [_violation("syntax", filename, 0, "nests too deeply to be checked")]
    return checker.result()


def reference_names(reference_source):
    """Top-level names a task's reference.py defines (functions, classes, assigned names), sorted."""
    tree = ast.parse(reference_source)
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names.add(stmt.target.id)
    return sorted(names)


def _fail(message):
    sys.stdout.write(json.dumps({"error": message}) + "\n")
    sys.stdout.flush()
    return 2


def main(argv=None):
    try:
        request = json.loads(sys.stdin.read())
        if not isinstance(request, dict) or not isinstance(request.get("source_path"), str):
            return _fail("the request must be a JSON object with a string source_path")
        requirements = request.get("requirements") or {}
        if not isinstance(requirements, dict):
            return _fail("requirements must be a JSON object")
    except (ValueError, UnicodeDecodeError) as e:
        return _fail(f"the request is not JSON: {e}")
    path = request["source_path"]
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SOURCE_BYTES + 1)
    except OSError as e:
        return _fail(f"cannot read {path}: {e.strerror or e}")
    ref_path = request.get("reference_path")
    if ref_path:
        try:
            with open(ref_path, "rb") as f:
                names = reference_names(f.read())
        except (OSError, SyntaxError, ValueError) as e:
            return _fail(f"cannot read the reference {ref_path}: {e}")
        requirements = dict(requirements)
        requirements["reference_names"] = sorted(set(requirements.get("reference_names") or []) | set(names))
    filename = request.get("filename") if isinstance(request.get("filename"), str) else path
    violations = check_triton(data, filename, requirements)
    sys.stdout.write(json.dumps({"violations": violations}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
