"""What an image builder receives, the same on both clouds (aws/image.py, gcp/image.py): the bake
files of render/node_image.py in one tar, and the shell lines that unpack it and run the bake.

One tar at one key (AWS) or in one run of metadata values (GCP), so the builder's instructions
(Image Builder's component document, the GCP builder's startup script) name only the image's
contents key: a new on-node archive changes the tar, never the recipe, and so never rebuilds the
image (nodes fetch the cluster's current archive at boot anyway). Deterministic: sorted entries,
owner root, mtime 0, so the same files give the same bytes.
"""
from __future__ import annotations

import io
import shlex
import tarfile

from aicluster.render import node_image

TAR_PATH = "/var/tmp/aicluster-bake.tar"


def bake_tar(cloud: str) -> bytes:
    """The bake files as a tar of paths relative to /, each with its mode (programs 0755)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, content in sorted(node_image.bake_files(cloud).items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mtime, info.uid, info.gid = len(content), 0, 0, 0
            info.uname = info.gname = "root"
            info.mode = 0o755 if "/bin/" in path or content[:2] == b"#!" else 0o644
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def bake_lines(cloud: str, tar_path: str = TAR_PATH, root: str = "/") -> list[str]:
    """Shell lines, run as root on the builder once the tar is at `tar_path`: unpack it at `root`
    (/ on a builder; a scratch tree in the tests) and bake."""
    return [f"tar -xpf {shlex.quote(tar_path)} -C {shlex.quote(root)} --no-same-owner",
            " ".join(shlex.quote(word) for word in node_image.bake_command(cloud))]
