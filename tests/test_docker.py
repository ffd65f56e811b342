"""The Docker sandbox, on a real engine: honest candidates are judged inside containers; candidate
code reaches no network, no host files, no secrets; memory, process and time limits hold; no
container is left behind. Skips without an engine on a developer's machine; fails under CI=true,
where .ci/run starts one."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from conftest import IN_CI, candidate
from kernelevo.sandbox import wire
from kernelevo.sandbox.isolation.namespaces import scrubbed_env
from kernelevo.sandbox.isolation.process import RunSpec
from kernelevo.tasks import load_task


@pytest.fixture(scope="module")
def docker_sandbox():
    from kernelevo.sandbox.isolation import docker as ds

    try:
        ds.client()
        if not ds.image_present():
            ds.build_image()
        sandbox = ds.DockerSandbox()
    except ds.DockerUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI must provide a Docker engine (.ci/run starts one): {exc}")
        pytest.skip(str(exc))
    yield sandbox
    # this process's containers, and those of processes that ended; the other test worker's live ones
    # (a CLI test choosing Docker by itself) are its own to remove
    owners = {c.name: c.labels.get("org.kernelevo.owner", "")
              for c in sandbox.client.containers.list(all=True, filters={"label": ds.LABEL})}
    leftovers = [name for name, owner in owners.items()
                 if owner == str(os.getpid()) or not (owner.isdigit() and Path(f"/proc/{owner}").exists())]
    assert not leftovers, f"containers left behind: {leftovers}"


def run(sandbox, tmp_path: Path, code: str, **limits: object):
    script = tmp_path / "job" / "script.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(code)
    spec = RunSpec(cmd=[sys.executable, str(script)], job_dir=script.parent, env=scrubbed_env({}),
                   timeout_s=limits.pop("timeout_s", 60), **limits)
    return sandbox.run(spec)


def test_an_honest_candidate_is_accepted_in_a_container(docker_sandbox, tmp_path: Path, cache_dir: Path) -> None:
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    config = EvalConfig(timeout_s=180, memory="4g", workdir=tmp_path / "ws", cache_dir=cache_dir)
    with Evaluator(config, sandbox=docker_sandbox) as ev:
        verdict, code = ev.evaluate(load_task("relu", "small"), candidate("ok_relu_empty"))
        assert code == 0, verdict.reason
        assert verdict.isolation["sandbox"] == "docker" and verdict.isolation["network"] == "none"
        assert verdict.isolation["uid"] == 65534 and verdict.isolation["capabilities"] == "0000000000000000"
        escape = tmp_path / "escape.py"
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        secret = Path.home() / ".kernelevo-docker-secret"
        secret.write_text("top secret")
        source = candidate("bad_escape").read_text().replace("PORT = 0", f"PORT = {listener.getsockname()[1]}")
        escape.write_text(source.replace('SECRET_FILE = ""', f'SECRET_FILE = "{secret}"'))
        try:
            verdict = ev.run_in_sandbox(load_task("relu", "small"), escape, [])
        finally:
            listener.close()
            secret.unlink()
        assert verdict.correct, verdict.reason  # any successful probe poisons its output
        # the judge's folders, the run's compile cache and other candidates' caches stay out of reach
        verdict = ev.run_in_sandbox(load_task("relu", "small"), candidate("bad_reaches_the_judge"), [])
        assert verdict.correct, verdict.reason
        assert (tmp_path / "ws" / "cache").stat().st_uid == os.geteuid()  # not handed to the container's user


def test_no_network_no_host_files_no_secrets(docker_sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    outside = Path.home() / "kernelevo-docker-write-probe"
    outside.unlink(missing_ok=True)
    home_listing = sorted(os.listdir(Path.home()))[:3]
    code = ("import os, socket, pathlib\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), timeout=2)\n"
            "    print('NET open')\nexcept OSError:\n    print('NET closed')\n"
            f"for target in ['{outside}', '/tmp/kernelevo-docker-probe', 'inside.txt', '/usr/probe']:\n"
            "    try:\n        pathlib.Path(target).write_text('x')\n        print('WROTE', target)\n"
            "    except OSError:\n        print('DENIED', target)\n"
            f"print('HOME', os.path.exists('{Path.home()}') and sorted(os.listdir('{Path.home()}'))[:3] == "
            f"{home_listing!r})\n"
            "print('KEYS', [k for k in os.environ if 'KEY' in k])\n"
            "print('UID', os.getuid())\n")
    try:
        outcome = run(docker_sandbox, tmp_path, code)
    finally:
        listener.close()
    log = outcome.log_tail
    assert "NET closed" in log and "DENIED /usr/probe" in log, log
    assert not outside.exists() and not Path("/tmp/kernelevo-docker-probe").exists()
    assert (tmp_path / "job" / "inside.txt").exists()  # its own folder is writable
    assert "HOME False" in log and "KEYS []" in log and "UID 65534" in log, log
    assert outcome.isolation.read_only_root and outcome.isolation.sandbox == "docker"


def test_memory_limit_kills_and_says_out_of_memory(docker_sandbox, tmp_path: Path) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n"
    outcome = run(docker_sandbox, tmp_path, code, memory_bytes=256 * 1024**2, memory_text="256m")
    assert outcome.out_of_memory and not outcome.timed_out, outcome


def test_a_hang_is_killed_at_the_timeout(docker_sandbox, tmp_path: Path) -> None:
    outcome = run(docker_sandbox, tmp_path, "import time\ntime.sleep(300)\n", timeout_s=4)
    assert outcome.timed_out and outcome.wall_s < 60


def test_process_burst_stops_at_the_pids_limit(docker_sandbox, tmp_path: Path) -> None:
    code = ("import subprocess\nprocs = []\nfailed = 0\n"
            "for _ in range(200):\n"
            "    try:\n        procs.append(subprocess.Popen(['sleep', '30']))\n"
            "    except OSError:\n        failed += 1\n"
            "print('started', len(procs), 'failed', failed, flush=True)\n")
    outcome = run(docker_sandbox, tmp_path, code, pids_limit=32)
    started = int(outcome.log_tail.split("started")[1].split()[0]) if "started" in outcome.log_tail else 0
    assert started < 32, outcome.log_tail


def test_a_container_talks_over_the_socket_in_its_job_folder(docker_sandbox, tmp_path: Path) -> None:
    script = tmp_path / "job" / "script.py"
    script.parent.mkdir(parents=True)
    script.write_text("from kernelevo.sandbox import wire\nc = wire.connect()\nc.send({'n': c.recv()['n'] + 1})\n")
    job = docker_sandbox.start(RunSpec(cmd=[sys.executable, str(script)], job_dir=script.parent, env=scrubbed_env({}),
                                       timeout_s=60, channel=True))
    assert job.channel(60).request({"n": 41}, timeout=30) == {"n": 42}
    assert job.wait().returncode == 0
    assert wire.CHANNEL_ENV  # the socket path travels in the environment


def test_optimize_model_on_a_private_run_folder_under_docker(docker_sandbox, tmp_path: Path, cache_dir: Path) -> None:
    """Class 14 of the judge review: a run folder made by ``mktemp -d`` (mode 0700, root's) and kernel
    files the parent writes there must be readable by the container's user."""
    import subprocess
    import tempfile

    run_dir = Path(tempfile.mkdtemp(prefix="kernelevo-docker-run-"))
    try:
        env = dict(os.environ, KERNELEVO_CACHE=str(cache_dir))
        done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "optimize-model",
                               str(Path(__file__).resolve().parents[1] / "tasks" / "examples" / "transformer_block.py"),
                               "--size", "small", "--max-evals", "2", "--run-dir", str(run_dir / "run"),
                               "--sandbox", "docker"], capture_output=True, text=True, env=env, timeout=1500)
        assert done.returncode in (0, 1), done.stderr[-3000:]
        assert "PermissionError" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
        assert "end to end:" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
        assert "FAILED" not in (done.stdout + done.stderr).split("end to end:")[-1], (done.stdout + done.stderr)[-2000:]
    finally:
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)


def test_leftovers_of_a_killed_run_are_removed_at_the_next_start(docker_sandbox) -> None:
    from kernelevo.sandbox.isolation import docker as ds

    dead_owner = "999999999"  # no such process
    stale = docker_sandbox.client.containers.create(ds.IMAGE, command=["/bin/true"],
                                                    labels={ds.LABEL: "1", "org.kernelevo.owner": dead_owner})
    ds.DockerSandbox()  # a new run starts
    remaining = [c.id for c in docker_sandbox.client.containers.list(all=True, filters={"label": ds.LABEL})]
    assert stale.id not in remaining


def test_docker_asked_for_without_an_engine_is_exit_code_3(tmp_path: Path) -> None:
    import subprocess

    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    done = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "eval", "relu", str(candidate("ok_relu_empty")),
                           "--sandbox", "docker"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 3
    assert "no Docker engine is reachable" in done.stderr and "Traceback" not in done.stderr
    auto = subprocess.run([sys.executable, "-m", "kernelevo.agent.cli", "eval", "relu", str(candidate("ok_relu_empty")),
                           "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert auto.returncode == 0, auto.stderr  # auto falls back to the process sandbox ...
    assert "using the process sandbox" in auto.stderr  # ... and says so


def test_sandbox_build_from_a_dockerfile(docker_sandbox, tmp_path: Path) -> None:
    """`kernelevo sandbox build --dockerfile`: the path users with a registry take, exercised here with a
    base image built from local files (no registry reachable); a broken Dockerfile is one clear line."""
    from typer.testing import CliRunner

    from kernelevo.agent.cli import app
    from kernelevo.sandbox.isolation import docker as ds

    (tmp_path / "Dockerfile").write_text(f"FROM {ds.IMAGE}\nLABEL org.kernelevo.test=dockerfile\n")
    runner = CliRunner()
    done = runner.invoke(app, ["sandbox", "build", "--dockerfile", str(tmp_path / "Dockerfile"),
                               "--tag", "kernelevo-sandbox:dockerfile-test"])
    try:
        assert done.exit_code == 0, done.output
        image = docker_sandbox.client.images.get("kernelevo-sandbox:dockerfile-test")
        assert image.labels.get("org.kernelevo.test") == "dockerfile"
    finally:
        docker_sandbox.client.images.remove("kernelevo-sandbox:dockerfile-test", force=True)
    (tmp_path / "Dockerfile").write_text("FROM kernelevo-no-such-base:never\n")
    broken = runner.invoke(app, ["sandbox", "build", "--dockerfile", str(tmp_path / "Dockerfile"),
                                 "--tag", "kernelevo-sandbox:broken-test"])
    assert broken.exit_code == 3 and "could not be built" in broken.output
    assert len(broken.output.strip().splitlines()) <= 2


def test_rebuilding_the_image_removes_the_one_it_replaces(docker_sandbox) -> None:
    """`kernelevo sandbox build` twice leaves one image, not a trail of untagged ones."""
    from kernelevo.sandbox.isolation import docker as ds

    tag = "kernelevo-sandbox:rebuild-test"
    first = ds.build_image(tag)
    second = ds.build_image(tag)
    try:
        ids = {image.id for image in docker_sandbox.client.images.list(all=True)}
        assert second in ids and (first == second or first not in ids)
    finally:
        docker_sandbox.client.images.remove(tag, force=True)


def test_a_paused_container_runs_nothing_until_resumed(docker_sandbox, tmp_path: Path) -> None:
    """``DockerJob.pause``: the engine's freezer stops the container's every process while the oracle
    re-times the reference."""
    import time

    script = tmp_path / "job" / "script.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("import os, threading, time\n"
                      "def spin():\n"
                      "    n = 0\n"
                      "    while True:\n"
                      "        n += 1\n"
                      "        open('t.tmp', 'w').write(str(n))\n"
                      "        os.replace('t.tmp', 'thread')\n"
                      "        time.sleep(0.01)\n"
                      "threading.Thread(target=spin, daemon=True).start()\n"
                      "time.sleep(300)\n")
    job = docker_sandbox.start(RunSpec(cmd=[sys.executable, str(script)], job_dir=script.parent,
                                       env=scrubbed_env({}), timeout_s=60))
    tick = script.parent / "thread"
    try:
        deadline = time.monotonic() + 30
        while not (tick.exists() and tick.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tick.exists(), "the container never started ticking"
        job.pause()
        time.sleep(0.1)
        before = tick.read_text()
        time.sleep(0.4)
        assert tick.read_text() == before
        job.resume()
        time.sleep(0.4)
        assert tick.read_text() != before
    finally:
        job.resume()
        job.kill()
        job.wait(20)


def test_a_paused_container_still_meets_its_deadline(docker_sandbox, tmp_path: Path) -> None:
    """Paused past its deadline, a container is killed and said to have timed out, as a running one is."""
    import time

    script = tmp_path / "job" / "script.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text("import time\ntime.sleep(300)\n")
    job = docker_sandbox.start(RunSpec(cmd=[sys.executable, str(script)], job_dir=script.parent,
                                       env=scrubbed_env({}), timeout_s=3))
    time.sleep(1.0)
    job.pause()
    assert job.alive()
    began = time.monotonic()
    outcome = job.wait(30)
    assert outcome.timed_out and time.monotonic() - began < 15
