"""Stopping the emulator: it saves its services' state on SIGTERM and, with runs in flight, does
not exit once it has; it is killed once the state is written, never before."""
import subprocess
import sys
import time

from localstack import services

# A stand-in that, like the emulator, writes its state a while after SIGTERM and then lingers.
LINGERER = """
import signal, sys, time
def save(*_):
    time.sleep(float(sys.argv[2]))
    open(sys.argv[1], "w").write("saved")
    time.sleep(600)
signal.signal(signal.SIGTERM, save)
time.sleep(600)
"""


def start(tmp_path, save_after: float):
    state = tmp_path / "state.json"
    process = subprocess.Popen([sys.executable, "-c", LINGERER, str(state), str(save_after)], start_new_session=True)
    pid_file = tmp_path / "emulator.pid"
    pid_file.write_text(str(process.pid))
    time.sleep(0.5)  # its handler in place
    return process, pid_file, state


def test_the_emulator_is_killed_once_its_state_is_saved_not_before(tmp_path):
    process, pid_file, state = start(tmp_path, save_after=2)
    started = time.monotonic()
    assert services._stop_pid(pid_file, group=True, timeout=30, done=state.exists)
    assert state.read_text() == "saved"
    assert process.wait(timeout=5) == -9 and time.monotonic() - started < 10
    assert not pid_file.exists()


def test_without_a_sign_of_saving_it_is_killed_at_the_timeout(tmp_path):
    process, pid_file, state = start(tmp_path, save_after=5)
    assert services._stop_pid(pid_file, group=True, timeout=1)
    assert process.wait(timeout=5) == -9 and not state.exists()


def test_the_state_counts_as_saved_once_the_stacks_services_and_every_earlier_file_are_written(tmp_path):
    """A fresh clone's first stop has no state files yet: the first file written is not the end."""
    import os

    since = time.time()
    assert not services.state_saved(tmp_path, since)
    (tmp_path / "acm.json").write_text("{}")
    assert not services.state_saved(tmp_path, since)  # the first file of a first save
    for name in services.STACK_SERVICES:
        (tmp_path / f"{name}.json").write_text("{}")
    assert services.state_saved(tmp_path, since)
    old = tmp_path / "kinesis.json"  # a file of an earlier save, not written again yet
    old.write_text("{}")
    os.utime(old, (since - 3600, since - 3600))
    assert not services.state_saved(tmp_path, since)
    old.write_text("{}")
    assert services.state_saved(tmp_path, since)
