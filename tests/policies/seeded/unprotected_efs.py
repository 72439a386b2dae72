"""Seeded case: a hand-written, encrypted EFS home without protect or retainOnDelete (AIC-STO-005):
a replacing change or `pulumi destroy` would delete every user's home."""
import pulumi_aws as aws

tags = {"aicluster-cluster": "handmade", "aicluster-role": "storage"}
aws.efs.FileSystem("handmade-home", creation_token="handmade-home", encrypted=True, throughput_mode="elastic",
                   tags=tags)
