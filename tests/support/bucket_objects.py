"""What a planned bucket object holds, as the cloud will store it: text from `content`, bytes from
`content_base64` (S3) or a file asset's `source` (GCS). The archive of aicluster.node
(render/node_programs.py) is the one object of bytes."""
from __future__ import annotations

import base64
from pathlib import Path

from aicluster.offline.capture import reveal

S3_OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
GCS_OBJECT = "gcp:storage/bucketObject:BucketObject"


def body(resource) -> str | bytes:
    inputs = resource.inputs
    if "contentBase64" in inputs:
        return base64.b64decode(reveal(inputs["contentBase64"]))
    source = reveal(inputs.get("source"))
    if isinstance(source, dict) and "path" in source.get("asset", {}):
        return Path(source["asset"]["path"]).read_bytes()
    return reveal(inputs["content"])


def as_bytes(content: str | bytes) -> bytes:
    return content if isinstance(content, bytes) else content.encode()


def s3_objects(plan) -> dict[str, str | bytes]:
    """key -> body of every S3 object in the plan."""
    return {r.inputs["key"]: body(r) for r in plan.of_type(S3_OBJECT)}
