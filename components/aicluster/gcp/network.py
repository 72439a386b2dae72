"""aicluster:gcp:Network - the system VPC (or an existing one) with its subnet, Cloud NAT and
internal-only firewall rules, private service access for Managed Lustre and Filestore, and every GPU
NIC network the design's pools need.

The GPU NIC networks come from the design (design.gcp_nics and NetworkDesign.fabric_networks), never
from a per-stack list: A3 High gets 4 extra VPCs, A3 Mega 8, A3 Ultra and A4 a second gVNIC network
plus one RDMA VPC created with the zone's RoCE network profile and holding one subnet per MRDMA NIC.
Networks are keyed by role (tcpxo-3, rdma, ...), so pools of the same family share them, and the
GKE node pools of a later stack can attach to exactly the same networks.

Firewall rules allow traffic only between the cluster's own nodes (network tag `<cluster>-node`),
from the Lustre servers, SSH from the spec's CIDRs to the head node, and SSH through IAP; RoCE
networks take no firewall rules. Nodes get no external IP; egress goes through Cloud NAT.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from aicluster.design.model import ClusterContext
from aicluster.design.parts import GcpNetwork, NetworkDesign, PoolDesign
from aicluster.gcp.common import head_tag, node_tag, project

# Where Identity-Aware Proxy's TCP forwarding connects from (cloud.google.com/iap/docs/using-tcp-forwarding):
# SSH through IAP needs it, as SSH through SSM needs nothing on AWS.
IAP_RANGE = "35.235.240.0/20"
LUSTRE_PORT = 988          # LNet (Lustre); the same port FSx uses
LUSTRE_GKE_PORT = 6988     # LNet of a Managed Lustre instance that serves GKE clients
SERVICE_NETWORKING = "servicenetworking.googleapis.com"


@dataclass(frozen=True)
class NetworkArgs:
    """The system VPC (or an existing one), its firewall rules, private service access and the GPU
    NIC networks.

    context: the cluster's name (every resource's name and the node and head network tags), region
        (subnets, router) and zone (the RDMA VPC's RoCE network profile): `ClusterDesign.context`,
        or a `ClusterContext` of your own.
    network: the network's design (`ClusterDesign.network`): create a VPC or use an existing one
        and subnet, the CIDRs, the MTU, the SSH ingress CIDRs, the private service access range and
        every GPU NIC network the pools need.
    private_service_access: reserve `network.service_cidr` and peer it into the VPC (Managed Lustre
        and Filestore take their addresses from it) and let the Lustre servers reach the nodes.
        Default True; the cluster turns it off when it has no filesystem.
    gke_lustre: the Lustre servers also use LNet port 6988 (a Managed Lustre instance serving GKE
        clients). Default False.
    """
    context: ClusterContext
    network: NetworkDesign
    private_service_access: bool = True
    gke_lustre: bool = False


@dataclass
class FabricNetwork:
    """One GPU NIC network as built: the network and its subnetworks, in design order."""

    design: GcpNetwork
    network: gcp.compute.Network
    subnetworks: list[gcp.compute.Subnetwork] = field(default_factory=list)


class Network(pulumi.ComponentResource):
    network_id: pulumi.Output[str]            # projects/<p>/global/networks/<name>
    network_name: pulumi.Output[str]
    subnetwork_self_link: pulumi.Output[str]
    fabric: dict[str, FabricNetwork]
    service_access: gcp.servicenetworking.Connection | None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aicluster:gcp:Network", name, None, opts)
        design, net = args.context, args.network
        child = pulumi.ResourceOptions(parent=self)

        if net.create_vpc:
            vpc = gcp.compute.Network(
                f"{name}-vpc", name=design.name, auto_create_subnetworks=False, routing_mode="REGIONAL",
                mtu=net.mtu, description=f"aicluster {design.name}: system VPC (hosts, Slurm, storage)", opts=child)
            subnet = gcp.compute.Subnetwork(
                f"{name}-subnet", name=f"{design.name}-subnet", network=vpc.id, region=design.region,
                ip_cidr_range=net.private_subnet_cidr, private_ip_google_access=True,
                # VPC flow logs of the nodes' subnet (spec network.flow_logs; CIS GCP 3.8), at the
                # API's defaults: 5-second aggregation, half the flows sampled, all metadata.
                log_config=gcp.compute.SubnetworkLogConfigArgs(
                    aggregation_interval="INTERVAL_5_SEC", flow_sampling=0.5, metadata="INCLUDE_ALL_METADATA",
                ) if net.flow_logs else None,
                description=f"aicluster {design.name}: nodes", opts=child)
            router = gcp.compute.Router(f"{name}-router", name=f"{design.name}-router", network=vpc.id,
                                        region=design.region, opts=child)
            gcp.compute.RouterNat(
                f"{name}-nat", name=f"{design.name}-nat", router=router.name, region=design.region,
                nat_ip_allocate_option="AUTO_ONLY", source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
                subnetworks=[gcp.compute.RouterNatSubnetworkArgs(name=subnet.id,
                                                                 source_ip_ranges_to_nats=["ALL_IP_RANGES"])],
                log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"), opts=child)
            self.network_id, self.network_name = vpc.id, vpc.name
            self.subnetwork_self_link = subnet.self_link
            firewall_network = vpc.id
        else:
            self.network_id = pulumi.Output.from_input(network_id(net.existing_vpc_id))
            self.network_name = pulumi.Output.from_input(net.existing_vpc_id.rstrip("/").split("/")[-1])
            self.subnetwork_self_link = pulumi.Output.from_input(net.existing_subnet_id)
            firewall_network = self.network_id

        self._firewalls(name, args, firewall_network, child)

        # Private service access: Managed Lustre and Filestore get addresses from this range, peered
        # into the system VPC. Only on a VPC aicluster creates: an existing VPC has its own (a second
        # connection would overwrite its reserved ranges).
        self.service_access = None
        if args.private_service_access and net.create_vpc and net.service_cidr:
            block = ipaddress.ip_network(net.service_cidr)
            address = gcp.compute.GlobalAddress(
                f"{name}-services", name=f"{design.name}-services", purpose="VPC_PEERING", address_type="INTERNAL",
                address=str(block.network_address), prefix_length=block.prefixlen, network=self.network_id,
                description=f"aicluster {design.name}: private service access (Managed Lustre, Filestore)",
                opts=child)
            self.service_access = gcp.servicenetworking.Connection(
                f"{name}-services-peering", network=self.network_id, service=SERVICE_NETWORKING,
                reserved_peering_ranges=[address.name], opts=child)

        self.fabric = {n.key: self._fabric_network(name, design, n, child) for n in net.fabric_networks}
        self.register_outputs({
            "network_id": self.network_id,
            "subnetwork": self.subnetwork_self_link,
            "fabric_networks": {k: f.network.self_link for k, f in self.fabric.items()},
        })

    def _firewalls(self, name: str, args: NetworkArgs, network: pulumi.Input[str], child) -> None:
        design, net = args.context, args.network
        nodes, head = node_tag(design), head_tag(design)
        all_traffic = [gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")]
        gcp.compute.Firewall(
            f"{name}-internal", name=f"{design.name}-internal", network=network, direction="INGRESS",
            allows=all_traffic, source_tags=[nodes], target_tags=[nodes],
            description=f"aicluster {design.name}: node to node (Slurm, munge, NCCL bootstrap)", opts=child)
        if args.private_service_access and net.service_cidr:
            ports = [str(LUSTRE_PORT)] + ([str(LUSTRE_GKE_PORT)] if args.gke_lustre else [])
            gcp.compute.Firewall(
                f"{name}-lustre", name=f"{design.name}-lustre", network=network, direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=ports)],
                source_ranges=[net.service_cidr], target_tags=[nodes],
                description=f"aicluster {design.name}: Managed Lustre servers to clients (LNet)", opts=child)
        gcp.compute.Firewall(
            f"{name}-iap-ssh", name=f"{design.name}-iap-ssh", network=network, direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            source_ranges=[IAP_RANGE], target_tags=[nodes],
            description=f"aicluster {design.name}: SSH through Identity-Aware Proxy only", opts=child)
        if net.ssh_ingress_cidrs:
            gcp.compute.Firewall(
                f"{name}-ssh", name=f"{design.name}-ssh", network=network, direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                source_ranges=list(net.ssh_ingress_cidrs), target_tags=[head],
                description=f"aicluster {design.name}: SSH to the head node (network.ssh_ingress_cidrs)", opts=child)

    def _fabric_network(self, name: str, design: ClusterContext, net: GcpNetwork, child) -> FabricNetwork:
        profile = f"projects/{project()}/global/networkProfiles/{design.zone}-vpc-roce" if net.roce else None
        what = ("RDMA VPC (RoCE network profile), one subnet per MRDMA NIC" if net.roce
                else "GPU NIC network" if net.key != "gvnic-1" else "second gVNIC network")
        network = gcp.compute.Network(
            f"{name}-{net.key}", name=net.name, auto_create_subnetworks=False, routing_mode="REGIONAL",
            mtu=net.mtu, network_profile=profile, description=f"aicluster {design.name}: {what}", opts=child)
        built = FabricNetwork(net, network)
        for i, sub in enumerate(net.subnets):
            built.subnetworks.append(gcp.compute.Subnetwork(
                f"{name}-{net.key}-sub-{i}", name=sub.name, network=network.id, region=design.region,
                ip_cidr_range=sub.cidr, opts=child))
        if net.firewall:
            gcp.compute.Firewall(
                f"{name}-{net.key}-internal", name=f"{net.name}-internal", network=network.id, direction="INGRESS",
                allows=[gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")],
                source_ranges=[s.cidr for s in net.subnets],
                description=f"aicluster {design.name}: GPU traffic inside {net.name}", opts=child)
        return built

    def nic_subnetworks(self, pool: PoolDesign) -> list[pulumi.Output[str]]:
        """The subnetwork of each of the pool's NICs, in the design's NIC order."""
        out = []
        for nic in pool.nics:
            if nic.network == "system":
                out.append(self.subnetwork_self_link)
            else:
                out.append(self.fabric[nic.network].subnetworks[nic.subnet].self_link)
        return out


def network_id(ref: str) -> str:
    """A network name or self link -> projects/<p>/global/networks/<name>, the form Managed Lustre,
    Filestore peering and private service access take."""
    if "projects/" in ref:
        return "projects/" + ref.split("projects/", 1)[1]
    return f"projects/{project()}/global/networks/{ref}"
