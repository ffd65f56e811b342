"""The process sandbox on its own: limits, kills, isolation, the unprivileged user and the channel,
with small scripts instead of candidates."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from conftest import require_bwrap
from kernelevo.sandbox import tensor_files, wire
from kernelevo.sandbox.isolation import cgroups, file_watch, namespaces
from kernelevo.sandbox.isolation.process import ProcessSandbox, RunSpec
from kernelevo.sandbox.judge.verdict import process_failure


def spec_for(tmp_path: Path, code: str, name: str = "job", **limits: object) -> RunSpec:
    script = tmp_path / name / "script.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(code)
    return RunSpec(cmd=[sys.executable, str(script)], job_dir=script.parent, env=namespaces.scrubbed_env({}),
                   timeout_s=limits.pop("timeout_s", 30), **limits)


def run(tmp_path: Path, code: str, **limits: object):
    return ProcessSandbox().run(spec_for(tmp_path, code, **limits))


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    # Durations no one else on the machine is likely to sleep for: the check below scans all of /proc
    # (a developer's own `sleep 300` in a shell once failed this test).
    code = ("import subprocess, time\n"
            "subprocess.Popen(['sleep', '7301'])\n"
            "subprocess.Popen(['setsid', 'sleep', '7302'])\n"
            "time.sleep(300)\n")
    began = time.monotonic()
    outcome = run(tmp_path, code, timeout_s=3)
    assert outcome.timed_out and time.monotonic() - began < 20
    # SIGKILL to a process group, a pid namespace or a cgroup is delivered asynchronously: on a busy
    # machine the last of them can take a moment to go. Poll (5 s at most), then say who is left.
    deadline = time.monotonic() + 5
    while True:
        leftovers = [p for p in Path("/proc").iterdir()
                     if p.name.isdigit() and _cmdline(p) in ("sleep 7301", "sleep 7302")]
        if not leftovers or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not leftovers, [(p.name, _cmdline(p), _status(p)) for p in leftovers]


def _status(proc: Path) -> str:
    try:
        lines = (proc / "status").read_text().splitlines()
        cgroup = (proc / "cgroup").read_text().strip()
    except OSError:
        return "gone"
    return "; ".join(line for line in lines if line.startswith(("State", "PPid", "NSpid"))) + f"; {cgroup}"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_segfault_is_reported_as_a_signal(tmp_path: Path) -> None:
    outcome = run(tmp_path, "import ctypes\nctypes.string_at(1)\n")
    assert outcome.signal and outcome.signal.startswith("SIGSEGV")


def test_abort_is_reported_as_a_signal(tmp_path: Path) -> None:
    outcome = run(tmp_path, "import os\nos.abort()\n")
    assert outcome.signal and outcome.signal.startswith("SIGABRT")


def test_memory_limit_kills_and_says_out_of_memory(tmp_path: Path) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n"
    outcome = run(tmp_path, code, memory_bytes=256 * 1024**2, memory_text="256m", timeout_s=60)
    assert outcome.out_of_memory, outcome
    assert not outcome.timed_out


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm", "/var/tmp"])
def test_a_private_tmpfs_cannot_hold_more_than_a_share_of_the_memory_limit(tmp_path: Path, folder: str) -> None:
    """Files in a tmpfs are memory no resident size shows: where the limit is polled they would escape it."""
    require_bwrap()
    code = (f"import os\nwritten = 0\ntry:\n    with open({folder!r} + '/fill', 'wb') as f:\n"
            "        while written < 400 << 20:\n            f.write(bytes(16 << 20)); f.flush(); written += 16 << 20\n"
            "except OSError as exc:\n    print('stopped', written >> 20, exc.errno, flush=True)\n")
    outcome = run(tmp_path, code, memory_bytes=256 * 1024**2, memory_text="256m", timeout_s=60)
    assert "stopped" in outcome.log_tail, outcome
    megabytes, errno = map(int, outcome.log_tail.split("stopped")[1].split()[:2])
    assert errno == 28 and megabytes <= 256 // namespaces.TMPFS_SHARE_OF_MEMORY, outcome.log_tail


def test_counting_a_folders_entries_stops_past_the_limit(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / "a" / str(i % 3)).mkdir(parents=True, exist_ok=True)
        (tmp_path / "a" / str(i % 3) / f"f{i}").touch()
    (tmp_path / "link").symlink_to("/usr")  # never followed
    assert file_watch.count_entries([tmp_path], 1000) == (1 + 3 + 30 + 1, None)
    assert file_watch.count_entries([tmp_path], 10) == (11, None)
    assert file_watch.count_entries([tmp_path / "gone"], 10) == (0, None)
    # deeper than a path may be long, and than the open-file limit: each folder opened from its parent
    deep = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1100):
        os.mkdir("d" * 240, dir_fd=deep)
        inner = os.open("d" * 240, os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep)
        os.close(deep)
        deep = inner
    for k in range(50):
        os.close(os.open(f"f{k}", os.O_CREAT | os.O_WRONLY, dir_fd=deep))
    os.close(deep)
    assert file_watch.count_entries([tmp_path], 10_000) == (35 + 1100 + 50, None)
    namespaces.remove_tree(tmp_path)  # deeper than shutil.rmtree (pytest's clean-up) can recurse


def test_a_job_that_floods_its_folders_with_files_is_killed_and_says_so(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Millions of small files would make every later step that measures or removes them wait out its
    time limit: the job is killed once it passes the limit, with the reason in its verdict's words."""
    monkeypatch.setattr(file_watch, "FILES_LIMIT", 3000)
    code = ("import os, time\nos.makedirs('many', exist_ok=True)\n"
            "for i in range(10 ** 6):\n    open(f'many/{i}', 'w').close()\n")
    outcome = run(tmp_path, code, timeout_s=60)
    assert outcome.too_many_files and not outcome.timed_out, outcome
    assert "created more than 3,000 files" in process_failure(outcome, None)
    written = len(list((tmp_path / "job" / "many").iterdir()))
    assert 3000 < written < 10 ** 6
    honest = run(tmp_path, "open('out', 'w').write('x')\n", name="honest")
    assert not honest.too_many_files and honest.returncode == 0


def test_a_polled_memory_limit_counts_memory_no_process_maps(tmp_path: Path) -> None:
    """Without cgroups the limit is polled: a memfd buffer that nothing maps shows in no process's
    resident size, only in the host's shared memory, and it counts."""
    import subprocess

    from kernelevo.sandbox.isolation.process import _Watch

    code = ("import os, time\nfd = os.memfd_create('hold')\nfor _ in range(24):\n"
            "    os.write(fd, bytes(16 << 20))\nprint('held', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    watch = _Watch(RunSpec(cmd=[], job_dir=tmp_path, timeout_s=30, memory_bytes=256 << 20), None)
    watch.start(proc.pid)
    try:
        proc.wait(timeout=30)
    finally:
        watch.stop()
        proc.kill()
    assert watch.over_memory and proc.returncode != 0


def test_process_burst_stops_at_the_pids_limit(tmp_path: Path) -> None:
    code = ("import subprocess, time\nprocs = []\nfailed = 0\n"
            "for _ in range(200):\n"
            "    try:\n        procs.append(subprocess.Popen(['sleep', '30']))\n"
            "    except OSError:\n        failed += 1\n"
            "print('started', len(procs), 'failed', failed, flush=True)\n")
    outcome = run(tmp_path, code, pids_limit=32, timeout_s=60)
    started = int(outcome.log_tail.split("started")[1].split()[0]) if "started" in outcome.log_tail else 0
    assert outcome.too_many_processes or started < 32, outcome.log_tail


def test_environment_is_scrubbed_and_the_parent_is_invisible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    code = ("import os\n"
            "seen = [k for k in os.environ if 'KEY' in k or 'SECRET' in k]\n"
            "try:\n    parent = open(f'/proc/{os.getppid()}/environ', 'rb').read()\n"
            "except OSError:\n    parent = b''\n"
            "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "print('SEEN', seen, b'sk-should-not-leak' in parent, len(pids), flush=True)\n")
    outcome = run(tmp_path, code)
    assert "SEEN [] False" in outcome.log_tail
    assert int(outcome.log_tail.split("SEEN [] False")[1].split()[0]) <= 3  # only the sandbox's own processes


def test_no_network_and_no_writes_outside_the_job_folder(tmp_path: Path) -> None:
    require_bwrap()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    outside = Path.home() / "kernelevo-sandbox-write-probe"
    outside.unlink(missing_ok=True)
    code = ("import socket, pathlib\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {listener.getsockname()[1]}), timeout=2)\n"
            "    print('NET open')\nexcept OSError:\n    print('NET closed')\n"
            f"for target in ['{outside}', '/tmp/kernelevo-probe', 'inside.txt']:\n"
            "    try:\n        pathlib.Path(target).write_text('x')\n        print('WROTE', target)\n"
            "    except OSError:\n        print('DENIED', target)\n")
    try:
        outcome = run(tmp_path, code)
    finally:
        listener.close()
    assert "NET closed" in outcome.log_tail
    assert not outside.exists()
    assert not Path("/tmp/kernelevo-probe").exists()
    assert (tmp_path / "job" / "inside.txt").exists()  # its own folder is writable
    assert outcome.isolation.read_only_root and outcome.isolation.network == "none"


def test_a_job_talks_over_its_channel_and_its_identity_is_read_from_outside(tmp_path: Path) -> None:
    code = ("import os, time\nfrom kernelevo.sandbox import wire\nc = wire.connect()\n"
            "c.send({'hello': os.getuid()})\nmsg = c.recv()\nc.send({'echo': msg['x'] * 2})\ntime.sleep(0.5)\n")
    sandbox = ProcessSandbox()
    job = sandbox.start(spec_for(tmp_path, code, channel=True))
    channel = job.channel(60)
    hello = channel.recv(timeout=60)
    uid, caps = job.identity()
    assert channel.request({"x": 21}, timeout=10) == {"echo": 42}
    outcome = job.wait()
    assert outcome.returncode == 0 and not outcome.timed_out
    assert uid == hello["hello"] or namespaces.tier() == "bwrap"  # inside a user namespace it reads 65534 too
    if os.geteuid() == 0 and namespaces.tier() == "bwrap":
        assert uid == namespaces.SANDBOX_UID and caps == "0000000000000000"


def test_a_malformed_or_oversized_message_is_refused(tmp_path: Path) -> None:
    import struct

    left, right = socket.socketpair()
    a, b = wire.Channel(left), wire.Channel(right)
    left.sendall(struct.pack(">I", 5) + b"nope!")
    with pytest.raises(wire.ChannelError, match="not JSON"):
        b.recv(timeout=2)
    left.sendall(struct.pack(">I", wire.MAX_MESSAGE + 1))
    with pytest.raises(wire.ChannelError, match="over the limit"):
        b.recv(timeout=2)
    with pytest.raises(wire.ChannelTimeout):
        b.recv(timeout=0.2)
    a.close()
    with pytest.raises(wire.ChannelError):
        b.recv(timeout=2)


def test_the_sandbox_user_has_no_privilege_no_host_sockets_and_no_host_files(tmp_path: Path) -> None:
    """Class 12 of the judge review, from a plain script: what a root-run sandbox once let through."""
    require_bwrap()
    probe_socket = Path("/var/tmp") / f"kernelevo-probe-{os.getpid()}.sock"
    probe_socket.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(probe_socket))
    server.listen()
    os.chmod(probe_socket, 0o777)
    markers = [Path("/tmp") / f"kernelevo-host-{os.getpid()}", Path("/var/tmp") / f"kernelevo-host-{os.getpid()}"]
    for marker in markers:
        marker.write_text("host")
    code = ("import ctypes, os, socket\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def unix(p):\n    s = socket.socket(socket.AF_UNIX)\n    s.settimeout(1)\n"
            "    try:\n        s.connect(p)\n        return True\n    except OSError:\n        return False\n"
            "status = open('/proc/self/status').read()\n"
            "found = {\n"
            "  'root': os.getuid() == 0,\n"
            "  'caps': 'CapEff:\\t0000000000000000' not in status,\n"
            "  'umount': libc.umount2(b'/proc', 2) == 0,\n"
            "  'remount': libc.mount(None, b'/', None, 32 | 4096, None) == 0,\n"
            "  'run': os.path.exists('/run') and bool(os.listdir('/run')),\n"
            f"  'host socket': unix('{probe_socket}'),\n"
            "  'docker': unix('/var/run/docker.sock') or unix('/run/docker.sock'),\n"
            f"  'host tmp': any(os.path.exists(p) for p in {[str(m) for m in markers]}),\n"
            "}\n"
            "print('FOUND', sorted(k for k, v in found.items() if v), flush=True)\n")
    try:
        outcome = run(tmp_path, code)
    finally:
        server.close()
        probe_socket.unlink(missing_ok=True)
        for marker in markers:
            marker.unlink()
    assert outcome.log_tail.split("FOUND")[-1].strip() == "[]", outcome.log_tail


def test_isolation_report_names_what_was_enforced(tmp_path: Path) -> None:
    outcome = run(tmp_path, "print('hi')\n", memory_bytes=512 * 1024**2, memory_text="512m")
    iso = outcome.isolation
    assert iso.memory_limit == "512m" and iso.memory_enforced_by
    assert iso.env == "scrubbed" and iso.timeout_s == 30
    if namespaces.tier() == "bwrap":
        assert {"net", "pid", "mount"} <= set(iso.namespaces)


def test_no_cgroups_are_left_behind(tmp_path: Path) -> None:
    root = cgroups.CGROUP_ROOT

    def mine() -> set[Path]:  # this process's (kept processes of other tests' evaluators have theirs)
        return {p for p in list((root / "memory").glob("kernelevo-*")) + list((root / "kernelevo").glob("kernelevo-*"))
                if p.name.split("-")[1] == str(os.getpid())}

    before = mine()
    run(tmp_path, "print('hi')\n", memory_bytes=256 * 1024**2, memory_text="256m")
    assert not mine() - before


def test_jobs_sharing_a_device_lock_never_overlap_and_the_wait_is_not_timed(tmp_path: Path) -> None:
    """Three jobs on one GPU lock: each starts at once, runs only while it holds the lock, and the
    time spent waiting for it counts neither in its timeout (1.8 s here, for 1 s of work each) nor
    in its wall time."""
    import threading

    code = ("import time\n"
            "t0 = time.time(); time.sleep(1.0)\n"
            "open('span.txt', 'w').write(f'{t0} {time.time()}')\n")
    lock = tmp_path / "locks" / "gpu-0.lock"
    outcomes = {}

    def job(n: int) -> None:
        outcomes[n] = ProcessSandbox().run(spec_for(tmp_path, code, name=f"job{n}", timeout_s=1.8, device_lock=lock))

    threads = [threading.Thread(target=job, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not any(o.timed_out for o in outcomes.values())
    for n, o in outcomes.items():
        assert (tmp_path / f"job{n}" / "span.txt").exists(), (o.returncode, o.signal, o.log_tail, o.isolation)
    spans = sorted(tuple(map(float, (tmp_path / f"job{n}" / "span.txt").read_text().split())) for n in range(3))
    assert all(a[1] <= b[0] + 0.01 for a, b in zip(spans, spans[1:]))  # one after another, never together
    waits = sorted(o.isolation.device_lock_wait_s for o in outcomes.values())
    assert waits[-1] > 1.5 and all(o.wall_s < 1.8 + 1.5 for o in outcomes.values())
    assert {o.isolation.device_lock for o in outcomes.values()} == {str(lock)}


def test_a_job_killed_while_waiting_for_the_device_lock_frees_its_thread(tmp_path: Path) -> None:
    import fcntl
    import threading

    lock = tmp_path / "gpu.lock"
    holder = open(lock, "a+")  # another job holds the GPU
    fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
    sandbox = ProcessSandbox()
    spec = spec_for(tmp_path, "print('started')\n", timeout_s=30, device_lock=lock)
    done = []
    thread = threading.Thread(target=lambda: done.append(sandbox.run(spec)))
    thread.start()
    time.sleep(1.0)
    sandbox.kill_all()  # a stop (SIGINT/SIGTERM) while the job waits
    thread.join(timeout=10)
    holder.close()
    assert done and done[0].returncode is not None and done[0].returncode != 0


def test_a_fifo_named_as_an_output_is_refused_at_once(tmp_path: Path) -> None:
    """A reader must never block on a file the candidate's process named: a FIFO fails at once."""
    os.mkfifo(tmp_path / "out.bin")
    meta = tensor_files.TensorFile(file="out.bin", dtype="float32", shape=[4], strides=[1])
    began = time.monotonic()
    with pytest.raises(ValueError, match="not a plain file"):
        tensor_files.read_tensor(meta, tmp_path, "cpu", 1 << 20)
    assert time.monotonic() - began < 5


def test_an_output_hard_linked_to_another_file_is_refused(tmp_path: Path) -> None:
    """A reader that may run as root never reads, as a candidate's output, a file linked in from
    elsewhere (protected_hardlinks can be off)."""
    elsewhere = tmp_path / "secret"
    elsewhere.write_bytes(b"\0" * 16)
    os.link(elsewhere, tmp_path / "out.bin")
    meta = tensor_files.TensorFile(file="out.bin", dtype="float32", shape=[4], strides=[1])
    with pytest.raises(ValueError, match="linked elsewhere"):
        tensor_files.read_tensor(meta, tmp_path, "cpu", 1 << 20)


def test_toolchain_folders_never_include_a_home_or_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    """A compiler under ~/.local/bin, or a relative LD_LIBRARY_PATH entry, must not bind a home folder
    or the working folder into the sandbox."""
    home_tool = Path.home() / ".local" / "kernelevo-test-tool"
    (home_tool / "bin").mkdir(parents=True, exist_ok=True)
    try:
        monkeypatch.setenv("CC", str(home_tool / "bin" / "cc"))
        monkeypatch.setenv("LD_LIBRARY_PATH", f".:{tmp_path}")
        found = namespaces.toolchain_paths()
        assert tmp_path.resolve() in found  # an absolute library folder outside any home is kept
        assert not any(p == Path.cwd().resolve() for p in found)
        assert not any(p.is_relative_to(Path.home().resolve()) for p in found)
    finally:
        import shutil
        shutil.rmtree(home_tool, ignore_errors=True)


def test_the_trusted_side_never_follows_a_link_planted_in_a_sandboxed_users_folder(tmp_path: Path) -> None:
    """Folders handed to the sandbox's user are theirs to shape, and another job of the same user may
    plant links in them (without bubblewrap every job sees the others' folders): writing the task, the
    candidate or a log there, or handing the folder over again, must not touch what a link points to."""
    victim = tmp_path / "host"
    victim.mkdir()
    (victim / "root_only.conf").write_text("keep")
    os.chmod(victim / "root_only.conf", 0o600)
    before = os.stat(victim).st_uid
    job = tmp_path / "job"
    job.mkdir()
    (job / "candidate.py").symlink_to(victim / "root_only.conf")
    (job / "process.log").symlink_to(victim / "root_only.conf")
    namespaces.write_into(job, "candidate.py", b"class ModelNew: ...")
    os.close(namespaces.open_log(job / "process.log"))
    assert (victim / "root_only.conf").read_text() == "keep"
    assert (job / "candidate.py").read_bytes() == b"class ModelNew: ..." and not (job / "candidate.py").is_symlink()
    outbox = tmp_path / "outbox"
    outbox.symlink_to(victim)  # an outbox swapped for a link, then handed over again
    namespaces.hand_over(outbox)
    assert outbox.is_dir() and not outbox.is_symlink()
    assert os.stat(victim).st_uid == before and os.stat(victim / "root_only.conf").st_uid == before
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "escape").symlink_to(victim)  # a link inside the folder: its target keeps its owner
    namespaces.hand_over(linked)
    assert os.stat(victim).st_uid == before
    (tmp_path / "folder-link").symlink_to(victim)
    with pytest.raises(OSError):  # a folder that is a link is refused, not written through
        namespaces.write_into(tmp_path / "folder-link", "root_only.conf", b"")
    assert (victim / "root_only.conf").read_text() == "keep"


def test_the_trusted_side_reads_a_jobs_files_without_following_links(tmp_path: Path) -> None:
    """A job's log, ncu's CSV and its result files sit in folders the sandboxed user may write: the
    trusted side (root, perhaps) reads them only as plain files of their own, never through a link,
    a hard link or a FIFO, so nothing else ends up in a verdict."""
    secret = tmp_path / "secret"
    secret.write_text("root only")
    (tmp_path / "linked.log").symlink_to(secret)
    os.link(secret, tmp_path / "hard.log")
    os.mkfifo(tmp_path / "fifo.log")
    (tmp_path / "own.log").write_text("0123456789")
    assert namespaces.read_no_follow(tmp_path / "linked.log") == ""
    assert namespaces.read_no_follow(tmp_path / "hard.log") == ""
    assert namespaces.read_no_follow(tmp_path / "fifo.log") == ""
    assert namespaces.read_no_follow(tmp_path / "missing.log") == ""
    assert namespaces.read_no_follow(tmp_path / "own.log") == "0123456789"
    assert namespaces.read_no_follow(tmp_path / "own.log", 4) == "6789"


def test_folders_above_a_bind_are_traversable_but_not_listed(tmp_path: Path) -> None:
    """A job handed a folder deep in a tree reaches it by its path, but cannot list the folders above
    it: their listings would name what else is bound beside it (an oracle's outbox, another job's)."""
    require_bwrap()
    shared = tmp_path / "above" / "shared"
    shared.mkdir(parents=True)
    (shared / "data.txt").write_text("handed over")
    (tmp_path / "above" / "beside").mkdir()
    code = ("import os\n"
            f"print('READ', open('{shared / 'data.txt'}').read(), flush=True)\n"
            f"for folder in ['{tmp_path / 'above'}', '{tmp_path}']:\n"
            "    try:\n        print('LISTED', folder, os.listdir(folder), flush=True)\n"
            "    except OSError:\n        print('CLOSED', folder, flush=True)\n")
    spec = spec_for(tmp_path, code)
    spec.readable = [shared]
    outcome = ProcessSandbox().run(spec)
    assert "READ handed over" in outcome.log_tail, outcome.log_tail
    assert "LISTED" not in outcome.log_tail and outcome.log_tail.count("CLOSED") == 2, outcome.log_tail


def test_the_working_folder_and_pythonpath_are_not_bound_into_a_job(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m kernelevo ...`` puts the working folder on ``sys.path``, ``python /somewhere/run.py``
    puts the driver script's folder there, and PYTHONPATH adds more: none of them (a project's checkout
    with its ``.env`` and run folders, or all of /tmp) may become readable by a job. Package folders,
    and a folder a ``.pth`` file in one adds (a source build), are what a job needs, and are bound."""
    project, chosen, driver = tmp_path / "project", tmp_path / "chosen", tmp_path / "driver"
    from_pth, packages = tmp_path / "built-from-source", tmp_path / "extra" / "site-packages"
    for folder in (project, chosen, driver, from_pth, packages):
        folder.mkdir(parents=True)
    (project / ".env").write_text("OPENAI_API_KEY=sk-not-for-candidates\n")
    (driver / "secret.txt").write_text("the driver's neighbour\n")
    (packages / "source_build.pth").write_text(f"# a source build\nimport os\n{from_pth}\n")
    monkeypatch.setenv("PYTHONPATH", f"{chosen}:{packages}")
    monkeypatch.setattr(sys, "path", [str(driver), str(project), "", str(chosen), *sys.path, str(packages),
                                      str(from_pth)])
    monkeypatch.chdir(project)
    bound = namespaces.python_paths()
    for hidden in (project, chosen, driver):
        assert not any(hidden == p or hidden.is_relative_to(p) for p in bound), (hidden, bound)
    for needed in (packages, from_pth):
        assert any(needed == p or needed.is_relative_to(p) for p in bound), (needed, bound)
    if namespaces.bwrap_path() is None:
        return
    code = (f"import os\nprint('SEES', os.path.exists('{project / '.env'}'), "
            f"os.path.exists('{driver / 'secret.txt'}'), flush=True)\n")
    outcome = run(tmp_path, code)
    assert "SEES False False" in outcome.log_tail, outcome.log_tail


@pytest.mark.parametrize("body", [b'{"t": NaN}', b'{"t": -Infinity}', b'{"t": 1e999}', b"[" * 100000 + b"]" * 100000])
def test_a_candidates_message_carries_only_finite_numbers_and_bounded_nesting(body: bytes) -> None:
    left, right = socket.socketpair()
    try:
        left.sendall(len(body).to_bytes(4, "big") + body)
        with pytest.raises(wire.ChannelError):
            wire.Channel(right).recv(timeout=5, finite=True)
    finally:
        left.close()
        right.close()


@pytest.mark.parametrize(("body", "read"), [
    (b'{"e": "\xed\xa0\x80"}', None),  # a surrogate encoded as UTF-8 bytes: not UTF-8
    ('{"e": "\ud800"}'.encode("utf-16-le", "surrogatepass"), None),  # JSON's reader would guess UTF-16
    (b'{"e\\udfff": ["a\\ud800", "\\ud83d\\ude00"]}', {"e\ufffd": ["a\ufffd", "\U0001f600"]}),
])
def test_a_message_is_utf8_text_with_no_lone_surrogate(body: bytes, read: dict | None) -> None:
    """A string holding a lone surrogate cannot be written as UTF-8: in a verdict it would stop the store
    and the console. A message that is not UTF-8 is refused; an escaped lone surrogate is read as U+FFFD
    (a pair stays the character it encodes)."""
    left, right = socket.socketpair()
    try:
        left.sendall(len(body).to_bytes(4, "big") + body)
        if read is None:
            with pytest.raises(wire.ChannelError, match="not UTF-8"):
                wire.Channel(right).recv(timeout=5, finite=True)
        else:
            assert wire.Channel(right).recv(timeout=5, finite=True) == read
    finally:
        left.close()
        right.close()


@pytest.mark.parametrize("tier", ["bwrap", "unshare", "none"])
def test_a_candidates_job_writes_only_where_it_may_and_its_launcher_writes_what_it_cannot(
        tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Landlock confines a candidate's job to its writable folders, whoever owns the rest: a folder its
    own user may write (open to all here) stays closed to it, and so does the launcher's (ncu's trace),
    which the launcher, outside the confinement, writes; processes the job starts inherit it. The run
    folder lies in /tmp here: where /tmp is the host's (no bubblewrap), the job gets a temporary folder
    of its own instead, and neither the host's /tmp nor /dev/shm."""
    import shutil
    import tempfile

    from kernelevo.sandbox.child import confine

    if confine.abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    if tier == "bwrap":
        require_bwrap()
    elif tier == "unshare" and not namespaces.unshare_works():
        pytest.skip("unshare does not work here")
    else:
        root = Path(__file__).resolve().parents[1]
        closed = [namespaces.closed_ancestor(p) for p in (root, Path(sys.executable).resolve().parent)]
        if os.geteuid() == 0 and any(closed):  # without bubblewrap the sandbox's user runs Python from the host
            pytest.skip(f"without bubblewrap uid {namespaces.SANDBOX_UID} must reach Python and the checkout; "
                        f"{next(c for c in closed if c)} is closed to it")
    monkeypatch.setenv("KERNELEVO_ISOLATION", tier)
    base = Path(tempfile.mkdtemp(prefix="kernelevo-confine-"))
    base.chmod(0o755)  # the sandbox's user must reach the job's folders without bubblewrap's binds
    try:
        _check_confinement(base, tier)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _check_confinement(base: Path, tier: str) -> None:
    from kernelevo.sandbox.child import confine
    from kernelevo.sandbox.isolation.confinement import LAUNCHER_FOLDER, private_tmp_for

    job = base / "job"
    cache, trace, open_to_all = base / "cache", base / "trace", base / "open"
    for folder in (cache, open_to_all):
        folder.mkdir()
        folder.chmod(0o777)
    host_tmp, shm = Path(f"/tmp/kernelevo-confine-probe-{os.getpid()}"), Path(f"/dev/shm/kernelevo-probe-{os.getpid()}")
    code = ("import os, pathlib, subprocess\n"
            "trace = os.environ['TRACE']\n"
            f"for target in ['{cache}/kept', '{open_to_all}/planted', trace + '/ncu.csv', 'own.txt',\n"
            f"               os.environ['TMPDIR'] + '/scratch', '{host_tmp}', '{shm}']:\n"
            "    try:\n        pathlib.Path(target).write_text('forged')\n        print('WROTE', target)\n"
            "    except OSError:\n        print('DENIED', target)\n"
            "subprocess.run(['/bin/sh', '-c', f'echo forged > {trace}/ncu.csv'])\n"
            "print('CONFINED', os.environ.get('KERNELEVO_CONFINED'))\n"
            # the CUDA driver names its threads through /proc as it starts: the job's own /proc stays open
            "import threading\n"
            "pathlib.Path(f'/proc/self/task/{threading.get_native_id()}/comm').write_text('probe')\n"
            "print('NAMED', pathlib.Path('/proc/self/comm').read_text().strip())\n"
            f"judges = pathlib.Path('/proc/{os.getpid()}/oom_score_adj')\n"
            "try:\n    judges.write_text(judges.read_text())\n    print('WROTE the judge', judges)\n"
            "except OSError:\n    print('DENIED the judge', judges)\n"
            # the process that started it (bubblewrap's own, as the job's user), ncu's place in a forensic pass
            "parent = pathlib.Path(f'/proc/{os.getppid()}/oom_score_adj')\n"
            "if os.getppid() > 0 and parent.exists():\n"
            "    try:\n        parent.write_text(parent.read_text())\n        print('WROTE the parent', parent)\n"
            "    except OSError:\n        print('DENIED the parent', parent)\n"
            f"try:\n    os.kill({os.getpid()}, 0)\n    print('SIGNALLED the judge')\n"
            "except OSError:\n    print('could not signal the judge')\n")
    spec = spec_for(base, code, writable=[cache], readable=[open_to_all], folder_writable=False,
                    launcher=["/bin/sh", "-c", 'echo traced > "$0/ncu.csv" && TRACE="$0" TMPDIR="${TMPDIR:-/tmp}" '
                              '"$@"; exit $?', LAUNCHER_FOLDER], launcher_folder=trace)  # stays, as ncu does
    try:
        outcome = ProcessSandbox().run(spec)
        log = outcome.log_tail
        assert f"WROTE {cache}/kept" in log and (cache / "kept").exists(), log
        assert "CONFINED landlock ABI" in log
        assert (trace / "ncu.csv").read_text() == "traced\n", log
        assert "/ncu.csv" in log and "WROTE" not in [line.split()[0] for line in log.splitlines()
                                                     if line.endswith("/ncu.csv")], log
        assert f"DENIED {open_to_all}/planted" in log  # open to its user, yet not its to write
        assert "DENIED own.txt" in log  # a candidate's job may not write its own folder
        assert "/scratch" in log and "DENIED" not in [line.split()[0] for line in log.splitlines()
                                                      if line.endswith("/scratch")], log
        assert not host_tmp.exists() and not shm.exists(), log
        assert "NAMED probe" in log, log
        assert "WROTE the judge" not in log, log  # where /proc is the host's, only the job's own process
        assert "WROTE the parent" not in log, log  # nor, in a PID namespace of its own, its launcher's entries
        if tier == "none" and confine.abi_version() >= 6:  # no PID namespace: the judge is in sight, not in reach
            assert "signals and abstract sockets only within the job" in log
            assert "could not signal the judge" in log
        assert not (open_to_all / "planted").exists() and not (job / "own.txt").exists()
        # where /tmp is the host's, the job's own folder of it (its scratch written above) ends with it
        assert not private_tmp_for(spec.job_dir).exists()
    finally:
        host_tmp.unlink(missing_ok=True)
        shm.unlink(missing_ok=True)


def test_a_file_the_launcher_left_open_for_writing_is_closed_before_the_job_runs(tmp_path: Path) -> None:
    """Landlock checks a path when it is opened: a log the launcher opened and let the job inherit would
    still write outside the job's folders, so the confiner closes such descriptors first."""
    import subprocess

    from kernelevo.sandbox.child import confine

    if confine.abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    mine, launchers = tmp_path / "mine", tmp_path / "launcher"
    mine.mkdir()
    launchers.mkdir()
    probe = ("import os\n"
             "for fd in (7, 8):\n"
             "    try:\n        os.write(fd, b'forged')\n        print(fd, 'WROTE')\n"
             "    except OSError:\n        print(fd, 'CLOSED')\n")
    script = (f'exec 7>>"{launchers}/log" 8>>"{mine}/kept"; exec "{sys.executable}" -m kernelevo.sandbox.child.confine '
              f'"{sys.executable}" -c "$0"')
    done = subprocess.run(["/bin/sh", "-c", script, probe], capture_output=True, text=True, timeout=60,
                          env={**os.environ, confine.WRITABLE_ENV: str(mine)})
    assert "7 CLOSED" in done.stdout and "8 WROTE" in done.stdout, done.stdout + done.stderr
    assert (launchers / "log").read_text() == "" and (mine / "kept").read_text() == "forged"


def test_a_channel_refuses_a_process_that_is_not_its_jobs(tmp_path: Path) -> None:
    """Without bubblewrap another job's candidate can reach a job's channel socket by name and connect
    first, to pose as that job's process: the listener asks the kernel who connected and keeps
    waiting for its own job."""
    code = ("import time\nfrom kernelevo.sandbox import wire\ntime.sleep(1.0)\nc = wire.connect()\n"
            "c.send({'hello': 'mine'})\ntime.sleep(0.5)\n")
    job = ProcessSandbox().start(spec_for(tmp_path, code, channel=True))
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(tmp_path / "job", os.O_RDONLY | os.O_DIRECTORY)
    try:
        stranger.connect(f"/proc/self/fd/{fd}/{wire.Listener.NAME}")
    finally:
        os.close(fd)
    channel = job.channel(60)
    assert channel.recv(timeout=60) == {"hello": "mine"}
    assert job.listener.strangers == 1
    stranger.settimeout(5)
    assert stranger.recv(1) == b""  # closed without a word
    stranger.close()
    job.wait()


@pytest.mark.parametrize("tier", ["bwrap", "none"])
def test_a_launchers_folder_the_job_may_write_is_reported_as_within_its_reach(
        tier: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the launcher's folder lies beneath one the job may write, confinement cannot keep the job
    out of it: the job's isolation says so, in the words the forensic pass looks for. Bubblewrap mounts
    it apart, out of reach."""
    from kernelevo.sandbox.isolation.confinement import LAUNCHER_FOLDER
    from kernelevo.sandbox.judge.forensic import exposure
    from kernelevo.sandbox.models import Isolation

    if tier == "bwrap":
        require_bwrap()
    monkeypatch.setenv("KERNELEVO_ISOLATION", tier)
    cache = tmp_path / "cache"
    cache.mkdir()
    spec = spec_for(tmp_path, "print('ran')\n", writable=[cache], launcher_folder=cache / "trace",
                    launcher=["/bin/sh", "-c", 'exec "$@"', LAUNCHER_FOLDER])
    outcome = ProcessSandbox().run(spec)
    confined = Isolation(writes="landlock ABI 7: ...", warnings=outcome.isolation.warnings)
    assert (exposure(confined) is None) == (tier == "bwrap"), outcome.isolation.warnings


def test_a_job_may_write_its_own_proc_even_after_memory_pressure_evicts_it() -> None:
    """Where /proc is the host's, the job may write its own process's part of it (the CUDA driver
    does, as it starts). The rule holds the inode of /proc/<pid>, which procfs replaces once its cache
    is dropped: the confiner keeps it open across the exec, so the rule still matches afterwards."""
    import subprocess

    from kernelevo.sandbox.child import confine

    if confine.abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    if os.geteuid() != 0:
        pytest.skip("dropping the kernel's caches needs root")
    code = ("import sys, threading, pathlib\n"
            "sys.stdin.readline()\n"
            "pathlib.Path(f'/proc/self/task/{threading.get_native_id()}/comm').write_text('probe')\n"
            "print('NAMED', pathlib.Path('/proc/self/comm').read_text().strip())\n")
    env = {**os.environ, confine.WRITABLE_ENV: os.pathsep.join(["/proc/self", "/dev/null"])}
    proc = subprocess.Popen([sys.executable, "-m", "kernelevo.sandbox.child.confine", sys.executable, "-c", code],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(1.0)  # confined and waiting
    try:
        Path("/proc/sys/vm/drop_caches").write_text("2\n")
    except OSError as exc:  # a container's read-only /proc/sys
        proc.kill()
        proc.communicate()
        pytest.skip(f"the kernel's caches cannot be dropped here ({exc})")
    out, err = proc.communicate("go\n", timeout=60)
    assert "NAMED probe" in out, err


def test_a_jobs_log_keeps_only_its_end_once_the_job_has_ended(tmp_path: Path) -> None:
    """A candidate may print gigabytes: its log must not hold the disk for the verdicts after its own.
    The end (what a person reads) stays; a link put in the log's place is never followed."""
    log = tmp_path / "process.log"
    log.write_bytes(b"a" * 5000 + b"the end\n")
    namespaces.keep_tail(log, 1000)
    text = log.read_bytes()
    assert text.endswith(b"a" * 992 + b"the end\n") and b"was 5008 bytes" in text and len(text) < 1100
    victim = tmp_path / "victim"
    victim.write_bytes(b"v" * 5000)
    (tmp_path / "link.log").symlink_to(victim)
    namespaces.keep_tail(tmp_path / "link.log", 10)
    assert victim.read_bytes() == b"v" * 5000


def test_the_gpu_lock_is_one_per_machine_whatever_the_cache_folder(tmp_path: Path, monkeypatch) -> None:
    """Two runs with different cache folders (a benchmark beside the tests) take turns on a GPU: the
    lock's folder does not follow the cache. A folder in /tmp that is not this user's own is not
    trusted with the lock."""
    from kernelevo.sandbox.judge import cache
    from kernelevo.sandbox.judge.evaluate import EvalConfig, Evaluator

    monkeypatch.delenv("KERNELEVO_LOCK_DIR", raising=False)
    monkeypatch.setattr(cache, "LOCK_ROOT", tmp_path)
    paths = set()
    for folder in ("one", "two"):
        evaluator = Evaluator(EvalConfig(cache_dir=tmp_path / folder, workdir=tmp_path / folder / "work"))
        evaluator.device = "cuda"  # the lock's path alone: no GPU is used
        paths.add(evaluator.device_lock_path())
    assert paths == {tmp_path / f"kernelevo-locks-{os.getuid()}" / "gpu-0.lock"}
    assert oct((tmp_path / f"kernelevo-locks-{os.getuid()}").stat().st_mode & 0o777) == "0o700"

    mine = tmp_path / f"kernelevo-locks-{os.getuid()}"
    mine.chmod(0o777)  # others may write it: not trusted
    monkeypatch.setenv("KERNELEVO_CACHE", str(tmp_path / "cache"))
    assert cache.default_lock_dir() == tmp_path / "cache" / "locks"
    planted = tmp_path / "elsewhere"
    planted.mkdir()
    (tmp_path / f"kernelevo-locks-{os.getuid()}").rmdir()
    (tmp_path / f"kernelevo-locks-{os.getuid()}").symlink_to(planted)
    monkeypatch.setenv("KERNELEVO_CACHE", str(tmp_path / "cache"))
    assert cache.default_lock_dir() == tmp_path / "cache" / "locks"
    monkeypatch.setenv("KERNELEVO_LOCK_DIR", str(tmp_path / "chosen"))
    assert cache.default_lock_dir() == tmp_path / "chosen"


TICKING_THREAD = ("def spin():\n"
                  "    n = 0\n"
                  "    while True:\n"
                  "        n += 1\n"
                  "        open('t.tmp', 'w').write(str(n))\n"
                  "        os.replace('t.tmp', 'thread')  # whole, never read half written\n"
                  "        time.sleep(0.01)\n"
                  "threading.Thread(target=spin, daemon=True).start()\n")
"""A job's thread that counts in its folder's file ``thread`` every 10 ms (os and threading imported)."""


@pytest.mark.parametrize("how", ["freezer", "signals"])
def test_a_paused_job_runs_nothing_until_resumed(tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge pauses the candidate's process while the oracle re-times the reference: no thread of
    it, and no process it started (one in a session of its own included), may run meanwhile; by the
    cgroup freezer where there is one, else by SIGSTOP to each process."""
    if how == "signals":
        monkeypatch.setattr(cgroups.Cgroup, "freeze", lambda self, timeout_s=0.0: False)
    code = ("import os, subprocess, sys, threading, time\n"
            "tick = 'import os, time\\nn = 0\\nwhile True:\\n    n += 1\\n    open(\"c.tmp\", \"w\").write(str(n))\\n"
            "    os.replace(\"c.tmp\", \"child\")\\n"
            "    time.sleep(0.01)\\n'\n"
            "subprocess.Popen(['setsid', sys.executable, '-c', tick])\n"
            + TICKING_THREAD
            + "time.sleep(300)\n")
    spec = spec_for(tmp_path, code, timeout_s=60)
    job = ProcessSandbox().start(spec)
    ticks = [spec.job_dir / "child", spec.job_dir / "thread"]

    def counts() -> list[str]:
        return [p.read_text() if p.exists() else "" for p in ticks]

    try:
        deadline = time.monotonic() + 20
        while not all(counts()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(counts()), "the job never started ticking"
        job.pause()
        time.sleep(0.1)
        before = counts()
        time.sleep(0.4)
        assert counts() == before
        assert job.resume()
        time.sleep(0.4)
        after = counts()
        assert all(int(a) > int(b) for a, b in zip(after, before) if a and b)
    finally:
        job.resume()
        job.kill()
        job.wait(10)


WALKER = r"""
#include <signal.h>
#include <time.h>
#include <unistd.h>
/* fork, the parent leaves at once, the child goes on under a new pid every ~0.1 ms, waking the job */
int main(void) {
    for (;;) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        do clock_gettime(CLOCK_MONOTONIC, &b); while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 1e5);
        pid_t p = fork();
        if (p > 0) _exit(0);
        if (p == 0) killpg(0, SIGCONT);
    }
}
"""


@pytest.mark.parametrize("walker", ["python", "c"])
@pytest.mark.parametrize("how", ["freezer", "signals"])
def test_a_job_that_wakes_itself_is_never_reported_as_held(tmp_path: Path, how: str, walker: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose processes fork without end, each sending SIGCONT to the others: a pause either holds
    it (the freezer: SIGCONT does not thaw), or says it could not (PauseFailed), or says after the
    fact that something ran (``resume`` False); never a pause reported whole while the job ticked."""
    from kernelevo.sandbox.isolation.pausing import PauseFailed

    if how == "signals":
        monkeypatch.setattr(cgroups.Cgroup, "freeze", lambda self, timeout_s=0.0: False)
    code = ("import os, signal, threading, time\n"
            + TICKING_THREAD
            + "def reap():\n"
            "    while True:\n"
            "        try:\n"
            "            os.wait()\n"
            "        except ChildProcessError:\n"
            "            time.sleep(0.01)\n"
            "threading.Thread(target=reap, daemon=True).start()\n"
            "time.sleep(0.5)\n"
            + ("import subprocess\nsubprocess.Popen(['./walker'])\n" if walker == "c" else
               "if os.fork() == 0:\n"
               "    while True:\n"
               "        if os.fork():\n"
               "            os._exit(0)\n"
               "        os.killpg(0, signal.SIGCONT)\n")
            + "time.sleep(300)\n")
    spec = spec_for(tmp_path, code, timeout_s=60, pids_limit=4096)
    if walker == "c":
        import shutil
        import subprocess

        if shutil.which("cc") is None:
            pytest.skip("no C compiler for the fast walker")
        (tmp_path / "walker.c").write_text(WALKER)
        subprocess.run(["cc", "-O2", "-o", str(spec.job_dir / "walker"), str(tmp_path / "walker.c")], check=True)
    job = ProcessSandbox().start(spec)
    tick = spec.job_dir / "thread"
    try:
        deadline = time.monotonic() + 20
        while not (tick.exists() and tick.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the walker under way
        for _ in range(3):
            try:
                job.pause()
            except PauseFailed:
                continue
            time.sleep(0.1)
            before = tick.read_text()
            time.sleep(0.3)
            ticked = tick.read_text() != before
            held = job.resume()
            assert not (held and ticked), "a pause reported whole while the job ran"
            time.sleep(0.2)
    finally:
        job.resume()
        job.kill()
        job.wait(20)



@pytest.mark.parametrize("how", ["freezer", "signals"])
def test_a_paused_job_still_meets_its_deadline(tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paused past its deadline (frozen, or stopped), a job is killed, reaped and said to have timed out."""
    if how == "signals":
        monkeypatch.setattr(cgroups.Cgroup, "freeze", lambda self, timeout_s=0.0: False)
    job = ProcessSandbox().start(spec_for(tmp_path, "import time\ntime.sleep(300)\n", timeout_s=3))
    time.sleep(1.0)
    job.pause()
    began = time.monotonic()
    outcome = job.wait(30)
    assert outcome.timed_out and time.monotonic() - began < 15 and not job.alive()
