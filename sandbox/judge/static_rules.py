"""What a candidate's source may import, call and touch: the vocabularies the static checks
(``static_checks.py``) hold a candidate's source against."""

from __future__ import annotations

# Modules a candidate may import. Anything else (os, sys, gc, inspect, ctypes, importlib,
# subprocess, socket, ...) gives a way around the harness and is rejected.
ALLOWED_IMPORTS = {
    "__future__",
    "math",
    "typing",
    "typing_extensions",
    "functools",
    "itertools",
    "dataclasses",
    "enum",
    "numbers",
    "collections",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.nn.utils.weight_norm",
    "torch.nn.utils.parametrizations",
    "torch.utils.cpp_extension",
    "torch.cuda",
    "triton",
}
ALLOWED_IMPORT_PREFIXES = ("triton.",)
TRITON_FORBIDDEN_PREFIXES = ("triton.profiler", "triton.knobs")
TRITON_FORBIDDEN_WHY = "Triton's profiler or its process-wide settings, which the judge's own kernels share"
"""Triton's profiler (Proton, on CUPTI) could stop the forensic trace's collection; its knobs change
how every later kernel of the process is compiled and launched, the judge's own included."""

MODULE_ATTRIBUTES = {"sys", "os", "subprocess", "importlib", "builtins", "ctypes", "gc", "inspect", "socket",
                     "bltns", "shutil", "pickle", "marshal", "multiprocessing", "signal", "threading", "pathlib", "io",
                     "logging", "traceback", "warnings", "types", "setuptools", "sysconfig", "runpy", "weakref",
                     "tempfile", "posix", "mmap", "fcntl", "resource", "select", "selectors", "pty",
                     # modules kept under a private name (``tempfile._os``, ``typing._sys``)
                     "_os", "_sys", "_io", "_shutil", "_thread", "_threading", "_imp", "_weakref", "_signal",
                     "_socket", "_pickle", "_ctypes", "_posixsubprocess",
                     # a frame's or a generator's way to its caller's globals
                     "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next", "gi_frame",
                     "cr_frame", "ag_frame"}
"""Modules that libraries keep as plain attributes (``torch.hub.sys``, ``cpp_extension.os``,
``torch.cuda.os``): reached on any object, they hand over the process past the import allowlist."""

MODULE_IDENTITY = {"__name__", "__file__", "__spec__", "__loader__", "__package__", "__path__", "__cached__"}
"""A module's own name and file, read as bare names: how it was imported and from where, which tells a
judged process from a user's import. Only ``if __name__ == "__main__":`` is allowed (it reads the same
in both)."""

PLACE_ATTRIBUTES = {"get_default_build_root", "default_cache_dir", "default_dump_dir", "default_override_dir",
                    "get_cache_manager", "getcwd", "gethostname", "getuid", "getpid"}
"""Where the process keeps its compile caches, and who and where it is: the same questions tell the judge's
process from a user's. Refused on any object; a kernel has no use for them."""

SOURCE_ATTRIBUTES = {"file_name", "filename", "co_filename", "rewriter", "raw_src", "get_capture_scope", "asm",
                     "used_global_vals", "device_caches"}
"""Where a compiled kernel (or code object) came from: its file's path, which names the judge's job
folder, and a kernel's own view of its module (its globals, its compiled text). Refused on any object,
as ``.fn`` is."""

EVALUATING_ATTRIBUTES = {"get_type_hints", "ForwardRef", "_evaluate", "evaluate_forward_ref", "get_annotations",
                         "singledispatch", "singledispatchmethod", "_eval_type"}
"""Library functions that evaluate strings as code (a string annotation is only a constant to these
checks): ``eval`` by another name."""

PRIVATE_ALLOWED = {"_calculate_fan_in_and_fan_out", "_calculate_correct_fan", "_replace", "_asdict", "_fields",
                   "_make", "_version", "_value_", "_name_"}
"""Private names honest code uses (an nn.Linear's initialisation, a named tuple's methods, a tensor's
version counter, an enum's value): the rest of a library's private attributes are refused."""

FILE_ATTRIBUTES = {"from_file", "fromfile", "tofile", "memmap", "open_memmap"}
"""Ways objects read or map files (``torch.from_file``, ``UntypedStorage.from_file``, NumPy's):
refused on any object, as ``open`` is. A tripwire: the sandbox is what keeps host files out of reach."""

DYNAMIC_ATTRIBUTE = {"getattr", "setattr", "hasattr"}
"""Checked where they are called with a literal name; used as values (``g = getattr``,
``reduce(getattr, ...)``), they would reach any name unseen."""

FORBIDDEN_BUILTINS = {
    "eval": "runs code the checker cannot see",
    "exec": "runs code the checker cannot see",
    "compile": "builds code the checker cannot see",
    "__import__": "imports modules around the import allowlist",
    "globals": "reaches module state of the harness",
    "locals": "reaches frames of the harness",
    "vars": "reaches object internals",
    "delattr": "removes attributes (monkeypatching)",
    "open": "touches files; candidates compute, they do not read or write files",
    "input": "reads from the terminal",
    "breakpoint": "stops the harness",
    "exit": "ends the harness early",
    "quit": "ends the harness early",
}

ALLOWED_DUNDERS = {"__init__", "__name__", "__qualname__", "__doc__"}

# torch functions that allocate, describe or reshape without computing the task's work. Random
# fills are here because candidates create their parameters the way the reference does (the same
# calls under the same seed); random numbers never compute a task's answer.
TORCH_GLUE = {
    "randn", "rand", "randint", "randperm", "randn_like", "rand_like", "randint_like", "normal",
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "arange", "tensor", "as_tensor", "is_tensor", "numel", "finfo", "iinfo",
    "get_default_dtype", "no_grad", "inference_mode", "enable_grad", "device", "dtype", "Size",
    "Tensor", "Generator", "manual_seed", "reshape", "flatten", "squeeze", "unsqueeze", "transpose",
    "permute", "t", "chunk", "split", "narrow", "unbind", "broadcast_shapes", "is_floating_point",
    "result_type", "promote_types", "can_cast",
}
TORCH_GLUE_PREFIXES = ("cuda.", "utils.cpp_extension.", "nn.")
# Always rejected, strict or not: they change global state the reference and the harness rely on,
# or hand the work to torch's own compiler.
TORCH_FORBIDDEN = {
    "compile": "torch.compile is the baseline, not a custom kernel",
    "set_default_dtype": "changes global state the reference depends on",
    "set_default_device": "changes global state the reference depends on",
    "set_default_tensor_type": "changes global state the reference depends on",
    "use_deterministic_algorithms": "turns off the harness's poisoning of fresh memory",
    "set_deterministic_debug_mode": "changes global state the harness depends on",
    "set_float32_matmul_precision": "changes the reference's precision",
    "set_flush_denormal": "changes the reference's arithmetic",
    "set_num_threads": "changes global state the reference depends on",
    "load": "reads a file (and unpickles it); candidates compute, they do not read or write files",
    "save": "writes a file; candidates compute, they do not read or write files",
}
TORCH_FORBIDDEN_PREFIXES = (
    "overrides", "library", "utils._", "_", "backends", "fx", "export", "jit", "profiler", "autograd.profiler",
    "hub",  # hands out sys and os (torch.hub.sys.modules): the whole process, past the import allowlist
    "cuda.profiler", "cuda.cudart",  # cudaProfilerStop: the forensic trace would stop seeing kernels
    "serialization", "package", "onnx", "cuda.memory.",  # files read or written (load, export, snapshots)
)

NATIVE_FORBIDDEN = {
    "ProfilerStop": "profiler control would hide kernels from the forensic trace",
    "ProfilerStart": "profiler control would hide kernels from the forensic trace",
    "ProfilerInitialize": "profiler control would hide kernels from the forensic trace",
    "dlsym": "looking symbols up at run time could reach profiler control under a built name",
    "dlopen": "loading libraries at run time could reach profiler control under a built name",
    "GetProcAddress": "looking driver entry points up at run time could reach profiler control",
    "DriverEntryPoint": "looking driver entry points up at run time could reach profiler control",
    "cupti": "CUPTI is the profilers' interface: a candidate has no use for it",
}
"""Words refused in CUDA and C++ sources: a kernel has no business controlling, or looking up, the
profiling tools the forensic pass relies on. A tripwire, not the defence (the trace's own rules are)."""

# nn classes that only hold parameters; calling any other nn module computes the reference's work.
NN_HOLDERS = {"Parameter", "ParameterList", "ParameterDict", "ModuleList", "ModuleDict", "Module", "Identity"}

TENSOR_HOOKS = {"__torch_dispatch__", "__torch_function__"}
"""A tensor subclass's hooks: torch run inside them hides under the op they intercept (a clone)."""
SUBCLASS_ATTRIBUTES = {"as_subclass"}
"""Views of a tensor as a subclass, whose hooks then run on its ops."""
