"""aicluster-scratch (issue 15, deliverable 4): the node's local NVMe as /scratch, run for real on
loop devices: real losetup, mkfs.ext4, blkid, mount, mdadm. The device globs override discovery
(AICLUSTER_SCRATCH_DEVICES) and the fstab is the test's own (AICLUSTER_FSTAB); the mount point is
a temporary directory, so nothing of this machine's /scratch or /etc/fstab is touched.

Root is required (CI runs as root): loop devices and mount need it. Without root, or without
losetup, mkfs.ext4, blkid or mdadm (.ci/install-system-deps installs mdadm), these tests FAIL;
they do not skip. The one exception is the two-device RAID0 test on a kernel without the md
driver (no /proc/mdstat: a kernel feature, not a program anything here can install); that test
then skips and says so. The RAID0 branch still runs everywhere against a stand-in mdadm (the last
test), and the single-device tests run the whole script for real.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "components" / "aicluster" / "node" / "bin" / "aicluster-scratch"
LABEL = "aic-scratch"


def _tool(name: str) -> str:
    path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    assert path, f"{name} is required by the /scratch tests (.ci/install-system-deps installs it)"
    return path


@pytest.fixture(autouse=True)
def _root_and_tools():
    assert os.geteuid() == 0, "the /scratch tests need root (loop devices, mount): CI runs them as root"
    for name in ("losetup", "mkfs.ext4", "blkid", "wipefs", "mdadm", "findmnt", "lsblk"):
        _tool(name)


@pytest.fixture
def loops(tmp_path):
    """make(n, size_mb) -> n loop devices on sparse files; detached (and unmounted) afterwards."""
    made: list[str] = []
    mounts: list[Path] = []

    def make(n: int, size_mb: int = 96) -> list[str]:
        devices = []
        for i in range(n):
            image = tmp_path / f"disk{len(made) + i}.img"
            with open(image, "wb") as f:
                f.truncate(size_mb * 1024 * 1024)
            out = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                                 capture_output=True, text=True)
            devices.append(out.stdout.strip())
        made.extend(devices)
        return devices

    make.mounts = mounts
    yield make
    for mp in reversed(mounts):
        subprocess.run(["umount", "-l", str(mp)], capture_output=True)
    if Path("/dev/md/aicluster-scratch").exists():
        subprocess.run(["mdadm", "--stop", "/dev/md/aicluster-scratch"], capture_output=True)
    for dev in made:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def run(tmp_path, devices: list[str], *args: str, mount_point: Path | None = None):
    env = dict(os.environ, AICLUSTER_SCRATCH_DEVICES=" ".join(devices), AICLUSTER_FSTAB=str(tmp_path / "fstab"),
               AICLUSTER_ROOT=str(tmp_path / "root"))
    mp = mount_point or tmp_path / "scratch"
    return subprocess.run(["bash", str(SCRIPT), "--mount-point", str(mp), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def uuid(dev: str) -> str:
    return subprocess.run(["blkid", "-p", "-o", "value", "-s", "UUID", dev], capture_output=True, text=True).stdout.strip()


def source_of(mp: Path) -> str:
    return subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(mp)], capture_output=True, text=True).stdout.strip()


def is_mounted(mp: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(mp)]).returncode == 0


def test_one_device_is_formatted_mounted_and_recorded(tmp_path, loops):
    (dev,) = loops(1)
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    r = run(tmp_path, [dev])
    assert r.returncode == 0, r.stderr
    assert is_mounted(mp) and source_of(mp) == dev
    assert subprocess.run(["blkid", "-p", "-o", "value", "-s", "LABEL", dev], capture_output=True,
                          text=True).stdout.strip() == LABEL
    fstab = (tmp_path / "fstab").read_text().splitlines()
    assert fstab == [f"LABEL={LABEL} {mp} ext4 defaults,noatime,nofail,x-systemd.device-timeout=10s 0 2"]
    assert oct(mp.stat().st_mode & 0o7777) == "0o1777"
    # Every boot runs it again (a stop/start keeps the instance, wipes the disks; runcmd runs once).
    units = tmp_path / "root" / "etc" / "systemd" / "system"
    unit = (units / "aicluster-scratch.service").read_text()
    assert f"ExecStart={SCRIPT} --mount-point {mp}\n" in unit and "Before=slurmd.service" in unit
    assert (units / "multi-user.target.wants" / "aicluster-scratch.service").resolve() == units / "aicluster-scratch.service"


def test_a_reboot_keeps_the_data_and_a_rerun_changes_nothing(tmp_path, loops):
    (dev,) = loops(1)
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    assert run(tmp_path, [dev]).returncode == 0
    first = uuid(dev)
    (mp / "kept").write_text("checkpoint shard")
    # Already mounted: nothing to do.
    again = run(tmp_path, [dev])
    assert again.returncode == 0 and "already mounted" in again.stderr
    # A reboot: unmounted, the device keeps its filesystem; it is mounted again, not reformatted.
    subprocess.run(["umount", str(mp)], check=True)
    r = run(tmp_path, [dev])
    assert r.returncode == 0, r.stderr
    assert "making" not in r.stderr and uuid(dev) == first
    assert (mp / "kept").read_text() == "checkpoint shard"
    assert len((tmp_path / "fstab").read_text().splitlines()) == 1


def test_a_stop_start_that_wiped_the_device_makes_a_new_filesystem(tmp_path, loops):
    (dev,) = loops(1)
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    assert run(tmp_path, [dev]).returncode == 0
    first = uuid(dev)
    subprocess.run(["umount", str(mp)], check=True)
    subprocess.run(["wipefs", "-a", "-q", dev], check=True)   # instance store after stop/start
    r = run(tmp_path, [dev])
    assert r.returncode == 0, r.stderr
    assert "making ext4" in r.stderr and is_mounted(mp) and uuid(dev) not in ("", first)


def test_a_mounted_device_is_never_touched(tmp_path, loops):
    """The image mounted the device itself (the DLAMI's /opt/dlami/nvme): it is skipped, kept as it
    is, and /scratch binds its filesystem."""
    (dev,) = loops(1)
    other = tmp_path / "image-mount"
    other.mkdir()
    subprocess.run(["mkfs.ext4", "-q", "-L", "image-owned", dev], check=True)
    before = uuid(dev)
    subprocess.run(["mount", dev, str(other)], check=True)
    mp = tmp_path / "scratch"
    loops.mounts.extend([other, mp])
    r = run(tmp_path, [dev], "--require")
    assert r.returncode == 0, r.stderr
    assert f"skipping {dev}: mounted at {other}" in r.stderr
    assert uuid(dev) == before
    assert is_mounted(mp)
    (mp / "via-bind").write_text("x")
    assert (other / "via-bind").exists()
    assert (tmp_path / "fstab").read_text() == f"{other} {mp} none bind,nofail 0 0\n"


def test_no_device_fails_only_when_required(tmp_path):
    missing = str(tmp_path / "no-such-device*")
    r = run(tmp_path, [missing])
    assert r.returncode == 0 and "no local NVMe device" in r.stderr
    assert not is_mounted(tmp_path / "scratch")
    r = run(tmp_path, [missing], "--require")
    assert r.returncode == 1 and "no local NVMe device found" in r.stderr


def test_fewer_devices_than_the_catalog_says_fail_the_node(tmp_path, loops):
    """node.env names the instance type's device count (catalog/node_local.yaml): a node that finds
    fewer (one did not attach) fails, so its bootstrap reports it, instead of a smaller /scratch."""
    (dev,) = loops(1)
    env_dir = tmp_path / "root" / "etc" / "aicluster"
    env_dir.mkdir(parents=True)
    (env_dir / "node.env").write_text("AICLUSTER_GPUS=8\nAICLUSTER_LOCAL_NVME_DEVICES=2\n")
    r = run(tmp_path, [dev])
    assert r.returncode == 1 and "expected 2 local NVMe devices, found 1" in r.stderr
    assert not is_mounted(tmp_path / "scratch")
    (env_dir / "node.env").write_text("AICLUSTER_LOCAL_NVME_DEVICES=1\n")
    loops.mounts.append(tmp_path / "scratch")
    assert run(tmp_path, [dev]).returncode == 0
    unit = (tmp_path / "root" / "etc" / "systemd" / "system" / "aicluster-scratch.service").read_text()
    assert " --require --mount-point " in unit        # implied by the device count


def test_xfs_when_asked(tmp_path, loops):
    _tool("mkfs.xfs")
    (dev,) = loops(1, size_mb=320)       # mkfs.xfs wants at least 300 MB
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    env_fs = dict(os.environ, AICLUSTER_SCRATCH_FS="xfs")
    r = subprocess.run(["bash", str(SCRIPT), "--mount-point", str(mp)], capture_output=True, text=True,
                       env=dict(env_fs, AICLUSTER_SCRATCH_DEVICES=dev, AICLUSTER_FSTAB=str(tmp_path / "fstab"),
                                AICLUSTER_ROOT=str(tmp_path / "root")))
    assert r.returncode == 0, r.stderr
    assert subprocess.run(["findmnt", "-n", "-o", "FSTYPE", str(mp)], capture_output=True,
                          text=True).stdout.strip() == "xfs"


def test_two_devices_are_one_raid0_reassembled_after_a_reboot(tmp_path, loops):
    if not Path("/proc/mdstat").exists():
        pytest.skip("this kernel has no md driver (/proc/mdstat missing): RAID0 cannot be assembled "
                    "here; the single-device tests ran the script for real")
    devs = loops(2)
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    r = run(tmp_path, devs)
    assert r.returncode == 0, r.stderr
    md = os.path.realpath("/dev/md/aicluster-scratch")
    assert source_of(mp) == md
    level = Path(f"/sys/block/{Path(md).name}/md/level").read_text().strip()
    assert level == "raid0"
    first = uuid("/dev/md/aicluster-scratch")
    (mp / "kept").write_text("x")
    # A reboot: array stopped, members keep their superblocks; assembled and mounted, not rebuilt.
    subprocess.run(["umount", str(mp)], check=True)
    subprocess.run(["mdadm", "--stop", "/dev/md/aicluster-scratch"], check=True, capture_output=True)
    r = run(tmp_path, devs)
    assert r.returncode == 0, r.stderr
    assert "creating RAID0" not in r.stderr and uuid("/dev/md/aicluster-scratch") == first
    assert (mp / "kept").exists()


def test_the_script_passes_shellcheck():
    shellcheck = _tool("shellcheck")
    r = subprocess.run([shellcheck, "-x", str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


# The RAID0 branch on a kernel without md: a stand-in mdadm that keeps the script's whole flow real
# (blkid, mkfs.ext4, mount, fstab) and plays the array with a loop device whose block node it
# makes at /dev/md<N> (and /dev/md/aicluster-scratch), as the md driver would. It records every
# call, so the test sees the exact `mdadm --create` a node runs, and that a reboot reassembles the
# array instead of creating a new one. The real-md test above runs where the kernel has md.
FAKE_MDADM = r'''#!/bin/bash
state=${FAKE_MD_STATE:?}
echo "mdadm $*" >> "$state/calls"
md_node=/dev/md${FAKE_MD_NUM:?}
make_node() {   # the array's block device: the backing loop device's major:minor at /dev/mdN
  local loop
  loop=$(cat "$state/loop")
  mknod "$md_node" b "$(stat -c %t "$loop" | xargs printf '%d')" "$(stat -c %T "$loop" | xargs printf '%d')"
  mkdir -p /dev/md && ln -sf "$md_node" /dev/md/aicluster-scratch
}
case $1 in
  --examine) [[ -e $state/superblocks ]] ;;
  --detail) [[ $3 == "$md_node" && -e $state/superblocks ]] && echo "MD_NAME=any:aicluster-scratch" ;;
  --zero-superblock) rm -f "$state/superblocks" ;;
  --stop) rm -f "$md_node" /dev/md/aicluster-scratch ;;
  --assemble) [[ -e $state/superblocks ]] || exit 1; make_node ;;
  --create)
    [[ -e $state/loop ]] || losetup --find --show "$state/array.img" > "$state/loop"
    touch "$state/superblocks"; make_node ;;
  *) exit 2 ;;
esac
'''


def test_two_devices_make_one_raid0_with_a_stand_in_mdadm(tmp_path, loops):
    devs = loops(2)
    state = tmp_path / "md"
    state.mkdir()
    with open(state / "array.img", "wb") as f:
        f.truncate(192 * 1024 * 1024)
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "mdadm").write_text(FAKE_MDADM)
    (fake_bin / "mdadm").chmod(0o755)
    num = next(n for n in range(120, 250) if not Path(f"/dev/md{n}").exists())
    mp = tmp_path / "scratch"
    loops.mounts.append(mp)
    env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", FAKE_MD_STATE=str(state), FAKE_MD_NUM=str(num),
               AICLUSTER_SCRATCH_DEVICES=" ".join(devs), AICLUSTER_FSTAB=str(tmp_path / "fstab"),
               AICLUSTER_ROOT=str(tmp_path / "root"))

    def run():
        return subprocess.run(["bash", str(SCRIPT), "--mount-point", str(mp)], env=env, capture_output=True,
                              text=True, timeout=120)

    try:
        r = run()
        assert r.returncode == 0, r.stderr
        calls = (state / "calls").read_text()
        assert (f"mdadm --create /dev/md/aicluster-scratch --run --level=0 --raid-devices=2 --name=aicluster-scratch "
                f"--homehost=any --metadata=1.2 {devs[0]} {devs[1]}") in calls
        assert source_of(mp) == f"/dev/md{num}" and "making ext4 on /dev/md/aicluster-scratch" in r.stderr
        first = uuid(f"/dev/md{num}")
        (mp / "kept").write_text("x")
        # A reboot: unmounted, array stopped; the members keep their superblocks.
        subprocess.run(["umount", str(mp)], check=True)
        subprocess.run([str(fake_bin / "mdadm"), "--stop", f"/dev/md{num}"], env=env, check=True)
        (state / "calls").write_text("")
        r = run()
        assert r.returncode == 0, r.stderr
        calls = (state / "calls").read_text()
        assert "--assemble /dev/md/aicluster-scratch" in calls and "--create" not in calls, calls
        assert uuid(f"/dev/md{num}") == first and (mp / "kept").exists()
    finally:
        subprocess.run(["umount", "-l", str(mp)], capture_output=True)
        for node in (Path(f"/dev/md{num}"), Path("/dev/md/aicluster-scratch")):
            if node.is_symlink() or node.exists():
                node.unlink()
        if (state / "loop").exists():
            subprocess.run(["losetup", "-d", (state / "loop").read_text().strip()], capture_output=True)
        if Path("/dev/md").is_dir() and not any(Path("/dev/md").iterdir()):
            Path("/dev/md").rmdir()
