"""aicluster-node-metrics, run as its timer runs it, against a fake sysfs (EFA and mlx5 devices), a
fake /proc/mounts and a fake lctl: the counters the catalog names, summed per mounted Lustre
filesystem, written atomically, the previous file kept when a source fails; the text passes
`promtool check metrics`; --install writes the timer at the catalog's scrape interval."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aicluster.catalog import observability as catalog
from tests.support.prometheus import program

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-node-metrics"

# `lctl get_param llite.*.stats` as a Lustre 2.15 client prints it: two mounts of fsx (two
# superblocks: counted together), one of scratch that has never written, one of an unmounted fs.
LLITE_STATS = """\
llite.fsx-ffff9a41c2d3e800.stats=
snapshot_time             1732428000.123456789 secs.nsecs
start_time                1732420000.000000000 secs.nsecs
elapsed_time              8000.123456789 secs.nsecs
read_bytes                17 samples [bytes] 0 4194304 30439424 53687091200
write_bytes               9 samples [bytes] 2 4194304 31457282 55834574852
open                      12 samples [usecs] 3 41 160 2914
llite.fsx-ffff9a41c2d3f000.stats=
snapshot_time             1732428000.123456789 secs.nsecs
read_bytes                1 samples [bytes] 576 576 576 331776
write_bytes               2 samples [bytes] 1000 1000 2000 2000000
llite.scratch-ffff9a41c0000000.stats=
snapshot_time             1732428000.123456789 secs.nsecs
read_bytes                3 samples [bytes] 4096 4096 12288 50331648
llite.gone-ffff9a41c1111111.stats=
snapshot_time             1732428000.123456789 secs.nsecs
read_bytes                5 samples [bytes] 1 1 5 5
"""

MOUNTS = """\
/dev/nvme0n1p1 / ext4 rw,relatime 0 0
fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/fsx /fsx lustre rw,flock,lazystatfs 0 0
10.0.0.5@tcp:/scratch /mnt/my\\040scratch lustre rw,flock 0 0
fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/fsx /home/shared lustre rw,flock,lazystatfs 0 0
/dev/md127 /scratch ext4 rw,noatime 0 0
"""


class Node:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.infiniband = tmp / "sys/class/infiniband"
        self.infiniband.mkdir(parents=True)
        self.mounts = tmp / "mounts"
        self.mounts.write_text("/dev/nvme0n1p1 / ext4 rw 0 0\n")
        self.textfile = tmp / "textfile"
        self.lctl = tmp / "lctl"
        self.set_lctl(LLITE_STATS)

    def device(self, name: str, driver: str, counters: dict[str, int], port: str = "1") -> None:
        drivers = self.tmp / "sys/bus/pci/drivers" / driver
        drivers.mkdir(parents=True, exist_ok=True)
        dev = self.infiniband / name
        (dev / "device").mkdir(parents=True, exist_ok=True)
        if not (dev / "device/driver").is_symlink():
            (dev / "device/driver").symlink_to(drivers)
        hw = dev / "ports" / port / "hw_counters"
        hw.mkdir(parents=True)
        for counter, value in counters.items():
            (hw / counter).write_text(f"{value}\n")

    def set_lctl(self, stdout: str, rc: int = 0) -> None:
        (self.tmp / "lctl.out").write_text(stdout)
        self.lctl.write_text(f'#!/bin/sh\necho "$@" >> "{self.tmp}/lctl.calls"\n'
                             f'cat "{self.tmp}/lctl.out"\n'
                             f'[ {rc} = 0 ] || echo "error: get_param: llite/*/stats: Input/output error" >&2\n'
                             f"exit {rc}\n")
        self.lctl.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, AICLUSTER_INFINIBAND_DIR=str(self.infiniband), AICLUSTER_MOUNTS=str(self.mounts),
                   AICLUSTER_LCTL=str(self.lctl), AICLUSTER_ROOT=str(self.tmp / "root"))
        return subprocess.run([sys.executable, str(SCRIPT), "--textfile-dir", str(self.textfile), *args],
                              env=env, capture_output=True, text=True, timeout=60)

    @property
    def output(self) -> Path:
        return self.textfile / "aicluster-node-metrics.prom"

    def samples(self) -> dict[str, int]:
        return {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1])
                for line in self.output.read_text().splitlines() if line and not line.startswith("#")}


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_efa_counters_of_efa_devices_only(node):
    node.device("rdmap79s0", "efa", {"rx_bytes": 123456789012, "tx_bytes": 98765, "rdma_read_bytes": 5})
    node.device("rdmap80s0", "efa", {"rx_bytes": 1, "tx_bytes": 2})
    # A ConnectX port has hw_counters too, but not EFA's: never labelled as EFA traffic.
    node.device("mlx5_0", "mlx5_core", {"rx_bytes": 777, "out_of_buffer": 0})
    result = node.run()
    assert result.returncode == 0, result.stderr
    efa = catalog.fabric("efa")
    assert node.samples() == {
        f'{efa.rx}{{device="rdmap79s0",port="1"}}': 123456789012,
        f'{efa.rx}{{device="rdmap80s0",port="1"}}': 1,
        f'{efa.tx}{{device="rdmap79s0",port="1"}}': 98765,
        f'{efa.tx}{{device="rdmap80s0",port="1"}}': 2,
    }
    assert not (node.tmp / "lctl.calls").exists()      # no Lustre mounted: lctl is never run


def test_lustre_counters_summed_per_mounted_filesystem(node):
    node.mounts.write_text(MOUNTS)
    assert node.run().returncode == 0
    read, write = catalog.contract("lustre_read").name, catalog.contract("lustre_write").name
    assert node.samples() == {
        f'{read}{{mount="/fsx"}}': 30439424 + 576,
        f'{write}{{mount="/fsx"}}': 31457282 + 2000,
        f'{read}{{mount="/mnt/my scratch"}}': 12288,
        f'{write}{{mount="/mnt/my scratch"}}': 0,          # mounted, never written: 0, not absent
    }
    assert (node.tmp / "lctl.calls").read_text() == "get_param llite.*.stats\n"


def test_output_is_valid_exposition_text_with_the_catalog_names(node):
    node.device("rdmap79s0", "efa", {"rx_bytes": 10, "tx_bytes": 20})
    node.mounts.write_text(MOUNTS)
    assert node.run().returncode == 0
    text = node.output.read_text()
    check = subprocess.run([program("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    typed = set(re.findall(r"^# TYPE (\S+) counter$", text, re.M))
    efa = catalog.fabric("efa")
    assert typed == {efa.rx, efa.tx, catalog.contract("lustre_read").name, catalog.contract("lustre_write").name}
    assert efa.exporter == "textfile"
    assert oct(node.output.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in node.textfile.iterdir()] == ["aicluster-node-metrics.prom"]   # no temp file left


def test_failed_source_keeps_previous_file_and_fails(node):
    node.mounts.write_text(MOUNTS)
    assert node.run().returncode == 0
    before = node.output.read_text()
    node.set_lctl("", rc=5)
    result = node.run()
    assert result.returncode == 1
    assert "lctl get_param llite.*.stats exited 5" in result.stderr
    assert node.output.read_text() == before
    node.set_lctl("llite.fsx-ffff9a41c2d3e800.stats=\nread_bytes 3 samples\n")
    result = node.run()
    assert result.returncode == 1 and "unexpected stats line" in result.stderr
    assert node.output.read_text() == before
    assert [p.name for p in node.textfile.iterdir()] == ["aicluster-node-metrics.prom"]


def test_lustre_mounted_without_lctl_fails(node):
    node.mounts.write_text(MOUNTS)
    node.lctl.unlink()
    result = node.run()
    assert result.returncode == 1 and "lctl get_param" in result.stderr
    assert not node.output.exists()


def test_node_without_efa_or_lustre_writes_no_samples(node):
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert node.samples() == {}


def test_defaults_are_the_catalogs():
    text = SCRIPT.read_text()
    directory = re.search(r'^TEXTFILE_DIR = "([^"]+)"', text, re.M).group(1)
    interval = int(re.search(r"^INTERVAL_S = (\d+)", text, re.M).group(1))
    assert directory == catalog.textfile_directory()
    assert interval == catalog.scrape().interval_s
    # The catalog names this script as the writer of the series it writes.
    for key in ("lustre_read", "lustre_write"):
        assert re.match(rf"{re.escape(SCRIPT.name)}[ ,]", catalog.contract(key).writer)


def test_install_writes_enabled_timer_at_the_scrape_interval(node):
    result = node.run("--install")
    assert result.returncode == 0, result.stderr
    units = node.tmp / "root/etc/systemd/system"
    timer = (units / "aicluster-node-metrics.timer").read_text()
    assert f"OnUnitActiveSec={catalog.scrape().interval_s}s" in timer
    assert "WantedBy=timers.target" in timer
    service = (units / "aicluster-node-metrics.service").read_text()
    assert f"ExecStart={SCRIPT.resolve()} --textfile-dir {node.textfile}\n" in service
    assert os.readlink(units / "timers.target.wants/aicluster-node-metrics.timer") == "../aicluster-node-metrics.timer"
    assert not node.output.exists()        # --install only installs; the timer runs the passes
