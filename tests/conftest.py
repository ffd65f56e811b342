"""Shared fixtures: evaluators with short limits, candidate paths, and the CI rule for skips.

With ``KERNELEVO_TEST_FAILURES`` set to a file, each failure's report is written there at once.

Tests that need a service or tool that CI provides (bubblewrap) skip on a developer's machine that
lacks it, with the reason, and fail under CI (``CI=true``), where .ci/run must provide it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelevo.sandbox.exit_codes import EXIT_ENVIRONMENT
from kernelevo.sandbox.isolation import namespaces
from kernelevo.sandbox.judge.evaluate import EvalConfig, EvalError, Evaluator, detect_device
from kernelevo.sandbox.models import TimingPolicy

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = ROOT / "tests" / "candidates"
IN_CI = os.environ.get("CI") == "true"
ON_GPU = detect_device() == "cuda"


FAILURE_LOG = os.environ.get("KERNELEVO_TEST_FAILURES")
"""Where each failure's report is appended the moment it happens. A run stopped from outside (a GPU
call's time limit) never prints pytest's summary: without this, a failure seen there leaves no reason."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # under pytest-xdist the controller hears each worker's reports again: written once, by the worker
    if FAILURE_LOG and report.failed and not hasattr(report, "node"):
        with open(FAILURE_LOG, "a") as log:
            log.write(f"=== {report.nodeid} ({report.when}, {report.duration:.1f} s)\n{report.longreprtext}\n\n")


def candidate(name: str) -> Path:
    return CANDIDATES / f"{name}.py"


def require_bwrap() -> None:
    """Full isolation needs bubblewrap: skip without it on a developer's machine, fail in CI."""
    if namespaces.tier() != "bwrap":
        message = "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` for full isolation"
        if IN_CI:
            pytest.fail(f"CI must provide bubblewrap (.ci/run installs it): {message}")
        pytest.skip(message)


def require_gpu() -> None:
    if not ON_GPU:
        pytest.skip("needs a CUDA GPU")


def built_evaluator(config: EvalConfig) -> Evaluator:
    """An evaluator, or a skip where this machine cannot judge at all (root without bubblewrap in a
    folder the sandbox's user cannot enter): the reason is the judge's own words. Fails under CI."""
    try:
        return Evaluator(config)
    except EvalError as error:
        if error.exit_code != EXIT_ENVIRONMENT:
            raise
        if IN_CI:
            pytest.fail(f"CI must be able to judge (.ci/run installs bubblewrap): {error}")
        pytest.skip(f"this machine cannot judge here: {error}")


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kernelevo-cache")


def _timing() -> TimingPolicy:
    # Enough runs to exercise every timing path on a GPU without spending the lease on tiny tasks.
    return TimingPolicy(warmup=2, warmup_s=0.0, min_runs=10, max_runs=40, budget_s=0.2, spot_checks=2)


@pytest.fixture(scope="session")
def evaluator(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path):
    config = EvalConfig(timeout_s=180, memory="4g", workdir=tmp_path_factory.mktemp("ws"), cache_dir=cache_dir,
                        measure_compile=False, timing=_timing())
    with built_evaluator(config) as ev:
        yield ev


@pytest.fixture()
def make_evaluator(tmp_path: Path, cache_dir: Path):
    """An evaluator with custom limits (e.g. a short timeout), sharing the reference cache."""
    made: list[Evaluator] = []

    def make(**overrides: object) -> Evaluator:
        timing = overrides.pop("timing", _timing())
        config = EvalConfig(workdir=tmp_path / f"ws{len(made)}", cache_dir=cache_dir, measure_compile=False,
                            timing=timing, **overrides)
        ev = built_evaluator(config)
        made.append(ev)
        return ev

    yield make
    for ev in made:
        ev.close()
