"""The head sync counts its throwaway slurmctld as up only when that process listens on the port it
was given. The port is free when chosen, but another process (another test slurmctld, a service on
the head) can take it first: a bare connect then counted a configuration slurmctld had refused as
accepted and installed it (seen in CI with parallel test workers: "select/nope" passed)."""
from __future__ import annotations

import socket
import subprocess
import sys

from aicluster.node import sync


def start(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdout=subprocess.PIPE, text=True)


def test_someone_elses_listener_on_the_port_is_not_the_throwaway_coming_up():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        refused = start("import time; time.sleep(1.5)")        # a slurmctld that exits without listening
        try:
            assert sync.wait_up(refused, port) is False
            assert refused.poll() is not None                   # it waited for the exit, not the listener
        finally:
            sync.stop(refused)


def test_the_throwaway_listening_on_its_port_is_up():
    port = sync.free_port()
    code = ("import socket, time\n"
            f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); print('ok', flush=True)\n"
            "time.sleep(30)\n")
    accepted = start(code)
    try:
        assert accepted.stdout.readline().strip() == "ok"
        assert sync.wait_up(accepted, port) is True
    finally:
        sync.stop(accepted)


def test_a_listener_in_a_child_of_the_throwaway_counts():
    """A wrapper (chroot, namespace) may run slurmctld as its child, in the throwaway's session."""
    port = sync.free_port()
    child = ("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', %d)); s.listen(); "
             "print('ok', flush=True); time.sleep(30)" % port)
    wrapper = start(f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])")
    try:
        assert wrapper.stdout.readline().strip() == "ok"
        assert sync.wait_up(wrapper, port) is True
    finally:
        sync.stop(wrapper)
