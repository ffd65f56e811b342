"""Tasks: KernelBench files load unchanged, extras are read, the built-in suite is sound."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelevo.tasks import TaskError, builtin_names, load_task
from kernelevo.tasks.loader import import_task_module, instantiate

KERNELBENCH_FILE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Simple model that performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
'''


def test_a_kernelbench_file_loads_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "19_ReLU.py"
    path.write_text(KERNELBENCH_FILE)
    task = load_task(str(path), "small")
    assert task.name == "19_ReLU" and not task.builtin and not task.allow_partial
    assert task.dtype is None and task.tolerances("float32") == (1e-4, 1e-4)
    assert task.tolerances("bfloat16") == (1e-2, 1e-2)
    assert task.scale_atol  # the default atol is read in units of a small output's magnitude


@pytest.mark.parametrize(("extra", "scaled"), [("ATOL = 1e-3\n", False), ("ATOL = 1e-3\nSCALE_ATOL = True\n", True),
                                               ("SCALE_ATOL = False\n", False)])
def test_a_declared_atol_is_taken_as_written_unless_asked_to_scale(tmp_path: Path, extra: str, scaled: bool) -> None:
    path = tmp_path / "task.py"
    path.write_text(KERNELBENCH_FILE + extra)
    assert load_task(str(path), "small").scale_atol is scaled


def test_the_builtin_suite_covers_the_families() -> None:
    names = builtin_names()
    assert len(names) >= 12
    for family in ["softmax", "log_softmax", "layernorm", "rmsnorm", "cross_entropy", "row_sum", "row_max",
                   "row_argmax", "matmul_bias_gelu", "attention", "conv_relu_scale", "mlp_block",
                   "elementwise_chain"]:
        assert family in names


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_task_runs_at_small_size(name: str) -> None:
    task = load_task(name, "small")
    model, inputs = instantiate(task)
    out = model(*inputs)
    assert torch.isfinite(out.float()).all()
    assert sum(x.numel() for x in inputs) < 100_000  # small enough for the CPU interpreter
    assert task.description


def test_small_overrides_change_module_globals() -> None:
    module = import_task_module(load_task("softmax").path, "small")
    assert (module.rows, module.cols) == (7, 1000)
    module = import_task_module(load_task("softmax").path, "full")
    assert (module.rows, module.cols) == (32768, 16384)


def test_extras_are_read() -> None:
    task = load_task("matmul_bias_gelu", "small")
    assert task.dtype == "bfloat16" and task.atol == 2e-2
    assert task.declared_flops == 2 * 33 * 48 * 80
    assert load_task("conv_relu_scale").allow_partial


@pytest.mark.parametrize(("content", "words"), [
    ("def broken(:\n", "syntax error"),
    ("import torch\nclass Model(torch.nn.Module): pass\n", "defines `get_inputs`"),
    ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
    (KERNELBENCH_FILE + "SMALL = {'nope': 1}\n", "does not define"),
    (KERNELBENCH_FILE + "DTYPE = 'int8'\n", "DTYPE must be"),
])
def test_malformed_tasks_get_clear_messages(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "task.py"
    path.write_text(content)
    with pytest.raises(TaskError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_task(str(path), "small")


def test_unknown_task_names_list_the_builtins() -> None:
    with pytest.raises(TaskError, match="softmax"):
        load_task("no_such_task")
    with pytest.raises(TaskError, match="not found"):
        load_task("missing.py")


BIG_KERNELBENCH = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, bias_shape):
        super(Model, self).__init__()
        self.linear = nn.Linear(features, features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.linear(x) + self.bias)

batch_size = 1024 * 4
features = 2048
kernel_size = 3
bias_shape = (features,)

def get_inputs():
    return [torch.rand(batch_size, features)]

def get_init_inputs():
    return [features, bias_shape]
'''


def test_an_unchanged_large_file_gets_an_automatic_small_size(tmp_path: Path) -> None:
    """No SMALL dict: the sizes are halved together, derived values follow, small counts stay, and
    the full size is untouched."""
    from kernelevo.tasks.shrink import SMALL_VALUES

    path = tmp_path / "big.py"
    path.write_text(BIG_KERNELBENCH)
    small = load_task(str(path), "small")
    assert set(small.size_overrides) == {"batch_size", "features"}  # kernel_size (3) stays
    model, inputs = instantiate(small)
    values = inputs[0].numel() + sum(p.numel() for p in model.parameters())
    assert values <= SMALL_VALUES and inputs[0].shape[1] == small.size_overrides["features"]
    assert model.bias.shape == (small.size_overrides["features"],)  # bias_shape was derived: it follows
    assert model(*inputs).shape == inputs[0].shape
    full = import_task_module(path, "full")
    assert full.batch_size == 4096 and full.features == 2048 and load_task(str(path), "full").size_overrides == {}


def test_a_file_that_breaks_when_shrunk_keeps_its_sizes(tmp_path: Path) -> None:
    path = tmp_path / "fixed.py"
    path.write_text(BIG_KERNELBENCH.replace("return torch.relu(", "assert x.shape[1] == 2048\n        return torch.relu("))
    assert load_task(str(path), "small").size_overrides == {}
    small = tmp_path / "small_enough.py"
    small.write_text(BIG_KERNELBENCH.replace("1024 * 4", "4").replace("2048", "64"))
    assert load_task(str(small), "small").size_overrides == {}


def test_odd_sizes_shrink_and_stay_odd(tmp_path: Path) -> None:
    """Irregular sizes (M, K, N = 8205, 2949, 5921) are halved to odd numbers: the shrunk task is
    small and still irregular, so its masks and ragged tiles are exercised."""
    from kernelevo.tasks.shrink import SMALL_VALUES

    path = tmp_path / "irregular.py"
    path.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

M = 8205
K = 2949
N = 5921

def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]

def get_init_inputs():
    return []
''')
    small = load_task(str(path), "small")
    assert set(small.size_overrides) == {"M", "K", "N"}
    assert all(v % 2 == 1 for v in small.size_overrides.values())
    _, (a, b) = instantiate(small)
    assert a.numel() + b.numel() + a.shape[0] * b.shape[1] <= SMALL_VALUES


def test_unpacked_sizes_shrink_and_outputs_count(tmp_path: Path) -> None:
    """``height, width = 512, 512`` shrinks like one size a line, and a small input whose product is
    large (an outer product) is shrunk for its output's sake."""
    from kernelevo.tasks.shrink import SMALL_VALUES

    path = tmp_path / "outer.py"
    path.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

height, width = 8192, 4096

def get_inputs():
    return [torch.rand(height, 16), torch.rand(16, width)]

def get_init_inputs():
    return []
''')
    small = load_task(str(path), "small")
    assert set(small.size_overrides) == {"height", "width"}
    _, (a, b) = instantiate(small)
    assert a.shape[0] * b.shape[1] + a.numel() + b.numel() <= SMALL_VALUES


def test_sizes_written_in_place_in_get_inputs_shrink_too(tmp_path: Path) -> None:
    """A user's file writes ``torch.randn(4096, 1024)`` and ``return [1024, 4096]`` in place, not as
    module constants: those literals are sizes as well, halved together (the 3 of a count stays)."""
    from kernelevo.tasks.shrink import SMALL_VALUES

    path = tmp_path / "inline.py"
    path.write_text('''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)

    def forward(self, x, q):
        return self.fc(x).sum() + q.sum()

def get_inputs():
    return [torch.randn(4096, 1024), *[torch.randn(2, 3, 512) for _ in range(3)][:1]]

def get_init_inputs():
    return [1024, 4096]
''')
    small = load_task(str(path), "small")
    model, inputs = instantiate(small)
    assert inputs[0].shape[1] == model.fc.in_features < 1024  # the input and the constructor halved together
    assert inputs[1].shape[:2] == (2, 3) and inputs[1].shape[2] < 512
    assert inputs[0].numel() + sum(p.numel() for p in model.parameters()) <= SMALL_VALUES
    full = import_task_module(path, "full")
    assert full.get_init_inputs() == [1024, 4096] and full.get_inputs()[0].shape == (4096, 1024)
