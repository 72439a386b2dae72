"""Seeded case: a hand-written launch template that still answers IMDSv1 (AIC-SEC-001)."""
import pulumi_aws as aws

aws.ec2.LaunchTemplate(
    "handmade-imdsv1",
    instance_type="p4d.24xlarge",
    image_id="ami-0123456789abcdef0",
    metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint="enabled", http_tokens="optional"),
    tags={"aicluster-cluster": "handmade", "aicluster-role": "compute"})
