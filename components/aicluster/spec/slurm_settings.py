"""Custom Slurm settings: `slurm.settings` (slurm.conf) and per pool `slurm_settings` (that pool's
partition line), checked here and merged into the rendered slurm.conf by slurm_config.

The semantics follow ParallelCluster's CustomSlurmSettings: cluster-level keys are slurm.conf
parameters, pool-level keys are partition parameters of the pool's PartitionName line. A key is
refused when it is not a parameter of slurm.conf(5) at all (with a close match), when aicluster
owns it (with the spec key that sets it instead, when there is one), or when its value could break
out of its line (a newline, whitespace or `#` would start another key or a comment).

Keys are matched case-sensitively, in slurm.conf(5)'s spelling: Slurm itself ignores case, so a
differently cased key would pass the deny-list and then override an owned key.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Mapping

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from aicluster.errors import Problem, close_match

# The spec's type of a settings mapping: slurm.conf keys to scalars (a YAML `yes` is written YES).
SettingValue = StrictStr | StrictBool | StrictInt | StrictFloat
SlurmSettings = Annotated[Mapping[Annotated[str, Field(strict=True, min_length=1, max_length=64)], SettingValue],
                          Field(max_length=200)]

# Every parameter of slurm.conf(5) of Slurm 24.11 (Debian trixie's slurm-client 24.11.5, its man page
# /usr/share/man/man5/slurm.conf.5.gz, section PARAMETERS: every top-level option; checked on
# 2026-11-24). Keys only a newer or an older release knows are refused: the cluster runs 22.05 to 24.11.
SLURM_CONF_KEYS = frozenset("""
AccountingStorageBackupHost AccountingStorageEnforce AccountingStorageExternalHost AccountingStorageHost
AccountingStorageParameters AccountingStoragePass AccountingStoragePort AccountingStorageTRES
AccountingStorageType AccountingStorageUser AccountingStoreFlags AcctGatherEnergyType
AcctGatherFilesystemType AcctGatherInterconnectType AcctGatherNodeFreq AcctGatherProfileType
AllowSpecResourcesUsage AuthAltParameters AuthAltTypes AuthInfo AuthType BackupAddr BackupController
BatchStartTimeout BcastExclude BcastParameters BurstBufferType CliFilterPlugins ClusterName
CommunicationParameters CompleteWait ControlAddr ControlMachine CpuFreqDef CpuFreqGovernors CredType
DataParserParameters DebugFlags DefCpuPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode DependencyParameters
DisableRootJobs EioTimeout EnforcePartLimits Epilog EpilogMsgTime EpilogSlurmctld FairShareDampeningFactor
FederationParameters FirstJobId GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce GroupUpdateTime
HashPlugin HealthCheckInterval HealthCheckNodeState HealthCheckProgram InactiveLimit InteractiveStepOptions
JobAcctGatherFrequency JobAcctGatherParams JobAcctGatherType JobCompHost JobCompLoc JobCompParams JobCompPass
JobCompPort JobCompType JobCompUser JobContainerType JobFileAppend JobRequeue JobSubmitPlugins KillOnBadExit
KillWait LaunchParameters Licenses LogTimeFormat MCSParameters MCSPlugin MailDomain MailProg MaxArraySize
MaxBatchRequeue MaxDBDMsgs MaxJobCount MaxJobId MaxMemPerCPU MaxMemPerNode MaxNodeCount MaxStepCount
MaxTasksPerNode MessageTimeout MinJobAge MpiDefault MpiParams NodeFeaturesPlugins OverTimeLimit
PlugStackConfig PluginDir PrEpParameters PrEpPlugins PreemptExemptTime PreemptMode PreemptParameters
PreemptType PriorityCalcPeriod PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge
PriorityParameters PrioritySiteFactorParameters PrioritySiteFactorPlugin PriorityType PriorityUsageResetPeriod
PriorityWeightAge PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition
PriorityWeightQOS PriorityWeightTRES PrivateData ProctrackType Prolog PrologEpilogTimeout PrologFlags
PrologSlurmctld PropagatePrioProcess PropagateResourceLimits PropagateResourceLimitsExcept RebootProgram
ReconfigFlags RequeueExit RequeueExitHold ResumeFailProgram ResumeProgram ResumeRate ResumeTimeout ResvEpilog
ResvOverRun ResvProlog ReturnToService SchedulerParameters SchedulerTimeSlice SchedulerType ScronParameters
SelectType SelectTypeParameters SlurmSchedLogFile SlurmSchedLogLevel SlurmUser SlurmctldAddr SlurmctldDebug
SlurmctldHost SlurmctldLogFile SlurmctldParameters SlurmctldPidFile SlurmctldPort SlurmctldPrimaryOffProg
SlurmctldPrimaryOnProg SlurmctldSyslogDebug SlurmctldTimeout SlurmdDebug SlurmdLogFile SlurmdParameters
SlurmdPidFile SlurmdPort SlurmdSpoolDir SlurmdSyslogDebug SlurmdTimeout SlurmdUser SrunEpilog SrunPortRange
SrunProlog StateSaveLocation SuspendExcNodes SuspendExcParts SuspendExcStates SuspendProgram SuspendRate
SuspendTime SuspendTimeout SwitchParameters SwitchType TCPTimeout TaskEpilog TaskPlugin TaskPluginParam
TaskProlog TmpFS TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepProgram UnkillableStepTimeout
UsePAM VSizeFactor WaitTime
""".split())

# The parameters of a PartitionName line (same man page, section PARTITION CONFIGURATION).
PARTITION_KEYS = frozenset("""
AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind DefCpuPerGPU DefMemPerCPU DefMemPerGPU
DefMemPerNode Default DefaultTime DenyAccounts DenyQos DisableRootJobs ExclusiveTopo ExclusiveUser GraceTime
Hidden LLN MaxCPUsPerNode MaxCPUsPerSocket MaxMemPerCPU MaxMemPerNode MaxNodes MaxTime MinNodes Nodes
OverSubscribe OverTimeLimit PartitionName PowerDownOnIdle PreemptMode PriorityJobFactor PriorityTier QOS
ReqResv ResumeTimeout RootOnly SelectTypeParameters Shared State SuspendTime SuspendTimeout TRESBillingWeights
""".split())

_HEAD = "aicluster (the head node and its daemons)"
_POWER = "aicluster (the resume/suspend programs power cloud nodes)"

# slurm.conf keys aicluster owns: the key -> what sets it instead. Changing one would break the
# cluster (a daemon that cannot find its controller, state or munge; nodes never powered) or
# contradict the spec key that already sets it.
OWNED: Mapping[str, str] = {
    "ClusterName": "the spec's `name`",
    "SlurmctldHost": _HEAD, "ControlMachine": _HEAD, "ControlAddr": _HEAD, "BackupController": _HEAD,
    "BackupAddr": _HEAD, "SlurmctldAddr": _HEAD,
    "SlurmUser": _HEAD, "SlurmdUser": _HEAD,
    "SlurmctldPort": _HEAD + ", its security group and firewall", "SlurmdPort": _HEAD + ", its security group and firewall",
    "SrunPortRange": _HEAD + ", its security group and firewall",
    "AuthType": _HEAD + ": munge, with its key in the secret store", "AuthInfo": _HEAD, "AuthAltTypes": _HEAD,
    "AuthAltParameters": _HEAD, "CredType": _HEAD,
    "StateSaveLocation": _HEAD + ": the protected state volume", "SlurmdSpoolDir": _HEAD,
    "SlurmctldPidFile": _HEAD, "SlurmdPidFile": _HEAD, "SlurmctldLogFile": _HEAD, "SlurmdLogFile": _HEAD,
    "PluginDir": _HEAD, "PlugStackConfig": "aicluster (plugstack.conf: pyxis)",
    "SlurmctldParameters": "aicluster (configless, cloud_dns, idle_on_node_suspend)",
    "CommunicationParameters": _HEAD,
    "Prolog": "aicluster (the GPU health check; with NVL72 pools also the IMEX node list)",
    "PrologFlags": "aicluster (Alloc,Contain: the health check; DeferBatch with NVL72 pools)",
    "HealthCheckProgram": "aicluster (the GPU health check)",
    "TaskProlog": "aicluster (the NCCL environment of every task)",
    "ResumeProgram": _POWER, "SuspendProgram": _POWER, "ResumeFailProgram": _POWER,
    "ResumeTimeout": "slurm.resume_timeout_min", "SuspendTime": "slurm.suspend_idle_min",
    "SuspendTimeout": _POWER, "SuspendExcNodes": "pools[].min_nodes (always-on nodes)",
    "SuspendExcParts": _POWER, "SuspendExcStates": _POWER,
    "SelectType": "aicluster (select/cons_tres: GPUs as TRES)",
    "ProctrackType": "aicluster (proctrack/cgroup)", "TaskPlugin": "aicluster (task/affinity,task/cgroup)",
    "JobAcctGatherType": "aicluster (jobacct_gather/cgroup)", "GresTypes": "aicluster (gpu, from the pools)",
    "TopologyPlugin": "aicluster (topology/tree: one switch per placement group; topology/block with NVL72 pools)",
    "SwitchType": "aicluster (switch/nvidia_imex with NVL72 pools: an IMEX channel per job)",
    "AccountingStorageType": "slurm.accounting", "AccountingStorageHost": "slurm.accounting",
    "AccountingStorageBackupHost": "slurm.accounting", "AccountingStoragePort": "slurm.accounting",
    "AccountingStorageUser": "slurm.accounting", "AccountingStoragePass": "slurm.accounting",
    "AccountingStorageTRES": "slurm.accounting",
    # Lines of their own, not parameters: the pools write them.
    "NodeName": "pools", "PartitionName": "pools", "NodeSet": "pools", "DownNodes": "pools",
    "FrontendName": "pools", "Include": "aicluster (one rendered slurm.conf)",
}

# Keys aicluster writes with a value of its own that a user may replace (the user's value wins).
OVERRIDABLE = frozenset({
    "PrivateData", "TreeWidth", "ReturnToService", "JobRequeue", "HealthCheckInterval", "HealthCheckNodeState",
    "BatchStartTimeout", "KillWait", "PropagateResourceLimitsExcept", "SelectTypeParameters", "ResumeRate",
    "SuspendRate",
    # With accounting on: the fairshare and QoS weights (a site tunes them; slurm.conf.j2 says why these)
    "PriorityType", "PriorityDecayHalfLife", "PriorityMaxAge", "PriorityWeightFairshare", "PriorityWeightQOS",
    "PriorityWeightAge", "PriorityWeightJobSize", "PriorityWeightPartition",
})
# Comma lists aicluster writes: the user's items are added to aicluster's, never replace them
# (SchedulerParameters=nohold_on_prolog_fail is what requeues a job whose prolog failed).
APPENDED = frozenset({"SchedulerParameters", "LaunchParameters"})

# Partition keys the pools own: the node list, the default partition (the first pool) and the state.
PARTITION_OWNED: Mapping[str, str] = {
    "PartitionName": "pools[].name (or pools[].partition)", "Nodes": "pools[].max_nodes", "Default": "the order of `pools` (the first is the default)",
    "State": "aicluster (UP)", "Shared": "OverSubscribe (Shared is its old name)", "ResumeTimeout": "slurm.resume_timeout_min", "SuspendTime": "slurm.suspend_idle_min",
    "SuspendTimeout": _POWER,
}

_BAD_VALUE = re.compile(r"[\s#]")


def settings_problems(settings: Mapping[str, Any], at: str, partition: bool = False) -> list[Problem]:
    """Problems of one settings mapping at YAML path `at` (slurm.settings or pools[i].slurm_settings)."""
    valid, owned = (PARTITION_KEYS, PARTITION_OWNED) if partition else (SLURM_CONF_KEYS, OWNED)
    what = "a partition parameter of slurm.conf(5)" if partition else "a slurm.conf(5) parameter"
    problems = []
    for key, value in settings.items():
        path = f"{at}.{key}"
        if key in owned:
            problems.append(Problem(path, key, f"aicluster sets {key}; it is set by {owned[key]}"))
            continue
        if key not in valid:
            exact = next((k for k in valid if k.lower() == str(key).lower()), None)
            hint = f"write it as {exact} (slurm.conf(5) spelling)" if exact else f"{what} (Slurm 24.11)"
            problems.append(Problem(path, key, f"unknown key; {hint}", exact or close_match(str(key), valid)))
            continue
        text = render_value(value)
        if not text or _BAD_VALUE.search(text):
            problems.append(Problem(path, value, "one non-empty value with no whitespace, newline or '#' "
                                                 "(Slurm would read the rest as another key or a comment)"))
    return problems


def render_value(value: Any) -> str:
    """A YAML scalar as slurm.conf writes it."""
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return str(value)


def rendered_settings(settings: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A checked settings mapping as (key, slurm.conf value) pairs, in the spec's order."""
    return tuple((key, render_value(value)) for key, value in settings.items())


def merge_line_settings(line: str, settings: tuple[tuple[str, str], ...]) -> str:
    """One `Key=value Key=value` line (a PartitionName line) with `settings` merged in: a key the
    line has gets the setting's value in place, others are appended."""
    if not settings:
        return line
    parts = line.split(" ")
    index = {p.split("=", 1)[0]: i for i, p in enumerate(parts) if "=" in p}
    for key, value in settings:
        if key in index:
            parts[index[key]] = f"{key}={value}"
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def merge_conf_settings(text: str, settings: tuple[tuple[str, str], ...]) -> str:
    """slurm.conf with slurm.settings merged: an OVERRIDABLE key aicluster wrote gets the user's
    value on its own line; an APPENDED key gets the user's items after aicluster's; any other key
    goes into a section of its own at the end. Owned keys never get here (settings_problems)."""
    if not settings:
        return text
    lines = text.split("\n")
    extra = []
    for key, value in settings:
        at = next((i for i, ln in enumerate(lines) if ln.startswith(f"{key}=")), None)
        if at is None:
            extra.append(f"{key}={value}")
        elif key in APPENDED:
            items = lines[at].split("=", 1)[1].split(",")
            items += [v for v in value.split(",") if v not in items]
            lines[at] = f"{key}={','.join(items)}"
        else:
            lines[at] = f"{key}={value}"
    out = "\n".join(lines).rstrip("\n") + "\n"
    if extra:
        out += ("\n# --- custom settings: slurm.settings of the cluster spec -------------------------------------\n"
                + "\n".join(extra) + "\n")
    return out
