"""Seeded case: a hand-written EFS home left unencrypted at rest (AIC-SEC-003); protected, so only
the encryption rule fails."""
import pulumi
import pulumi_aws as aws

tags = {"aicluster-cluster": "handmade", "aicluster-role": "storage"}
aws.efs.FileSystem(
    "handmade-home", creation_token="handmade-home", encrypted=False, throughput_mode="elastic", tags=tags,
    opts=pulumi.ResourceOptions(protect=True, retain_on_delete=True))
