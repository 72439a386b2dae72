"""Seeded case: a hand-written security group that opens SSH to the whole internet (AIC-SEC-004)."""
import pulumi_aws as aws

tags = {"aicluster-cluster": "handmade", "aicluster-role": "head"}
vpc = aws.ec2.Vpc("handmade", cidr_block="10.30.0.0/16", tags=tags)
aws.ec2.SecurityGroup(
    "handmade-bastion", vpc_id=vpc.id, description="ssh",
    ingress=[aws.ec2.SecurityGroupIngressArgs(protocol="tcp", from_port=22, to_port=22, cidr_blocks=["0.0.0.0/0"])],
    tags=tags)
