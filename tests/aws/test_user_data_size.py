"""EC2's user data limit, on every example stack: the head node's and every pool's user data, as
`aicluster plan` renders them (the real program under mocks), fit in 16 KB.

Source: Amazon EC2 User Guide, "Run commands when you launch an EC2 instance with user data input"
(and "Instance metadata and user data"): user data is limited to 16 KB (16384 bytes) in raw form,
before it is base64-encoded. A launch template stores larger user data without complaint; every
instance launched from it is then refused. The compute nodes' user data was 27.5 KB before the
programs moved to the configuration bucket (every GPU node failed to launch).
"""
from __future__ import annotations

import base64

import pytest

from tests.support import STACK_NAMES, stack_spec
from tests.support.stack_plans import stack_result

from aicluster.catalog import load_limits

EC2_USER_DATA_MAX_BYTES = load_limits()["ec2_user_data_bytes"].value   # EC2 User Guide: 16 KB, raw, before base64
# Room kept for what later features add to the bootstrap itself (settings, not programs: those go
# to the bucket). Today both are ~7.2 KB.
HEADROOM_BYTES = 6 * 1024

AWS_STACKS = [s for s in STACK_NAMES if stack_spec(s)["cloud"] == "aws"]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"


def user_data_of(stack: str) -> dict[str, bytes]:
    """Resource name -> raw user data bytes (what EC2 counts), for every launch template and
    instance of the stack's plan."""
    out = {}
    for r in stack_result(stack).plan.custom_resources():
        value = r.inputs.get("userData")
        if r.type == LT and value is not None:
            out[r.name] = base64.b64decode(value)        # launch templates carry it base64-encoded
        elif r.type == INSTANCE and value is not None:
            out[r.name] = value.encode()                 # instances take the text
    return out


def test_every_aws_stack_is_checked():
    assert {"aws-p5-slurm", "aws-p4d-small", "aws-p5-eks"} <= set(AWS_STACKS)


@pytest.mark.parametrize("stack", STACK_NAMES)
def test_head_and_compute_user_data_fit_in_16_kb_with_headroom(stack):
    sizes = {name: len(raw) for name, raw in user_data_of(stack).items()}
    result = stack_result(stack)
    if result.design.cloud != "aws":
        # GCE metadata values have their own limit (tests/contracts); no EC2 user data here.
        assert sizes == {}, f"{stack} is a {result.design.cloud} stack with EC2 user data: {sorted(sizes)}"
        return
    pools = {f"{result.design.name}-{p.name}-template" for p in result.design.pools}
    assert pools <= set(sizes), f"every pool's launch template has user data: {sorted(sizes)}"
    if result.design.slurm:
        assert f"{result.design.name}-slurm-head" in sizes
    for name, size in sizes.items():
        assert size <= EC2_USER_DATA_MAX_BYTES, f"{stack} {name}: {size} bytes > {EC2_USER_DATA_MAX_BYTES}"
        assert size <= EC2_USER_DATA_MAX_BYTES - HEADROOM_BYTES, \
            f"{stack} {name}: {size} bytes leaves less than {HEADROOM_BYTES} bytes for later features"
