#!/usr/bin/env python3
"""Fetch a secret from AWS Secrets Manager or GCP Secret Manager into a file, never through argv
or the environment.

    aicluster-secret SECRET_ID DEST [--base64] [--mode 0400] [--owner USER[:GROUP]]

Installed by aicluster on the head node and on compute nodes (the munge key, the slurmdbd
password). AWS (an ARN or name): the instance role; the region comes from AWS_REGION or the
instance metadata. GCP (projects/<p>/secrets/<id>): the VM's service account, through
aicluster.node.gcp; the latest version.
"""
import argparse
import base64
import os
import shutil
import sys
import tempfile
import urllib.request

IMDS = "http://169.254.169.254/latest"


def imds_region() -> str:
    token_request = urllib.request.Request(
        f"{IMDS}/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    token = urllib.request.urlopen(token_request, timeout=5).read().decode()
    region_request = urllib.request.Request(
        f"{IMDS}/meta-data/placement/region", headers={"X-aws-ec2-metadata-token": token})
    return urllib.request.urlopen(region_request, timeout=5).read().decode()


def write_private(path: str, data: bytes, mode: int, owner: str | None) -> None:
    """Write atomically with the final mode from the start: the secret is never world-readable."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".aicluster-secret-")
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.close(fd)
        if owner:
            user, _, group = owner.partition(":")
            shutil.chown(tmp, user=user, group=group or None)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="aicluster-secret")
    parser.add_argument("secret_id")
    parser.add_argument("dest")
    parser.add_argument("--base64", action="store_true", help="the secret string is base64: write the bytes")
    parser.add_argument("--mode", default="0400")
    parser.add_argument("--owner")
    args = parser.parse_args(argv)
    if args.secret_id.startswith("projects/"):
        from aicluster.node.gcp import secret_value

        value = secret_value(args.secret_id).decode()
    else:
        import boto3

        region = os.environ.get("AWS_REGION") or imds_region()
        client = boto3.client("secretsmanager", region_name=region)
        value = client.get_secret_value(SecretId=args.secret_id)["SecretString"]
    data = base64.b64decode(value) if args.base64 else value.encode()
    write_private(args.dest, data, int(args.mode, 8), args.owner)
    print(f"aicluster-secret: wrote {args.dest} ({len(data)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
