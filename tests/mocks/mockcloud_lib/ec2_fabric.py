"""EC2 rules for gangs that sit close together and on the fabric: cluster placement
groups, EFA network interfaces, the instance types that support them, and the
security-group rule EFA needs. ec2.py calls check_placement/check_interfaces from
RunInstances and registers the actions below.

References (the rule beside its code cites one of these):
  [PG]   EC2 User Guide, "Placement groups" / "Placement group rules and limitations"
         https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups.html
         https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups-limitations.html
  [CPG]  EC2 API Reference, CreatePlacementGroup / DeletePlacementGroup / DescribePlacementGroups
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html
  [ERR]  EC2 API Reference, "Error codes" (InvalidPlacementGroup.Duplicate/.InUse/.Unknown,
         InvalidParameterCombination, InvalidGroup.NotFound)
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html
  [EFA]  EC2 User Guide, "Elastic Fabric Adapter" (supported instance types, limitations,
         "Prepare an EFA-enabled security group")
         https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html
         https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html
  [EFAI] EC2 User Guide, "EFA interfaces per instance type" / DescribeInstanceTypes
         NetworkInfo.EfaInfo.MaximumEfaInterfaces
         (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_EfaInfo.html)
  [SUB]  Amazon VPC User Guide, "Subnets for your VPC" / "Subnet CIDR blocks" / "Default
         subnets" (a subnet lives in one zone; IPv4 blocks /16 to /28 inside the VPC's block,
         not overlapping another subnet; a default VPC 172.31.0.0/16 has one /20 default
         subnet per zone) and EC2 API Reference CreateSubnet / DescribeSubnets
         (InvalidSubnetID.NotFound, InvalidSubnet.Range, InvalidSubnet.Conflict)
         https://docs.aws.amazon.com/vpc/latest/userguide/configure-subnets.html
         https://docs.aws.amazon.com/vpc/latest/userguide/default-vpc.html
  [SG]   EC2 API Reference, CreateSecurityGroup (GroupName: up to 255 characters, cannot
         start with sg-; unique per VPC: InvalidGroup.Duplicate; TagSpecification
         ResourceType security-group), AuthorizeSecurityGroupIngress (IpPermissions.N
         IpProtocol/FromPort/ToPort/IpRanges.M.CidrIp/Groups.M.GroupId; a rule already
         there: InvalidPermission.Duplicate; a source group that does not exist:
         InvalidGroup.NotFound), DeleteSecurityGroup (GroupId or GroupName; "If you attempt
         to delete a security group that is associated with an instance ... the operation
         fails with DependencyViolation"), DescribeSecurityGroups (filters group-id,
         group-name, vpc-id, description, tag:KEY, tag-key; reply tagSet)
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeleteSecurityGroup.html
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSecurityGroups.html
         and EC2 User Guide, "Security group rules" (rules only allow; a rule whose source
         is a security group admits the instances associated with it; all inbound traffic
         not allowed is dropped), enforced on the nodes through netpolicy.py
  [RI]   EC2 API Reference, RunInstances / InstanceNetworkInterfaceSpecification
         (InterfaceType interface | efa | efa-only; AssociatePublicIpAddress only with one
         interface)
"""

import hashlib
import ipaddress
import re

from .cloud import log
from .xmlout import el, items, t

# instance type -> (MaximumEfaInterfaces, MaximumNetworkCards) [EFA][EFAI]. A type not listed
# here is answered as one without EFA support and with one network card.
EFA_TYPES = {
    "p3dn.24xlarge": (1, 1),
    "p4d.24xlarge": (4, 4),
    "p4de.24xlarge": (4, 4),
    "p5.48xlarge": (32, 32),
    "p5e.48xlarge": (32, 32),
    "p5en.48xlarge": (16, 16),
    "trn1.32xlarge": (8, 8),
    "trn1n.32xlarge": (16, 16),
    "trn2.48xlarge": (16, 16),
    "g4dn.8xlarge": (1, 1), "g4dn.12xlarge": (1, 1), "g4dn.16xlarge": (1, 1), "g4dn.metal": (1, 1),
    "g5.8xlarge": (1, 1), "g5.12xlarge": (1, 1), "g5.16xlarge": (1, 1), "g5.24xlarge": (1, 1),
    "g5.48xlarge": (1, 1),
    "g6.8xlarge": (1, 1), "g6.12xlarge": (1, 1), "g6.16xlarge": (1, 1), "g6.24xlarge": (1, 1),
    "g6.48xlarge": (1, 1),
    "c5n.18xlarge": (1, 1), "c5n.metal": (1, 1),
}

# Families that cannot join a cluster placement group [PG] "Cluster placement groups":
# burstable performance instances (T2...) and Mac instances.
NO_CLUSTER_PG = re.compile(r"^(t[0-9][a-z]*|mac[0-9a-z-]*)\.")

PG_STRATEGIES = ("cluster", "spread", "partition")  # [CPG] Strategy


def _api_error(code, message, status=400):
    from .ec2 import ApiError
    return ApiError(code, message, status)


def _acct(cloud):
    from .ec2 import account_of
    return account_of(cloud)


def _pgs(cloud):
    return cloud.extra.setdefault("ec2_placement_groups", {})


def _sgs(cloud):
    return cloud.extra.setdefault("ec2_security_groups", {})


def _pg_key(cloud, region, name):
    # Names are unique per account and region [PG] "The name that you specify for a
    # placement group must be unique within your AWS account for the Region".
    return "%s|%s|%s" % (_acct(cloud), region, name)


def _pg_members(cloud, region, name, live_only=True):
    acct = _acct(cloud)
    return [i for i in cloud.instances.values()
            if i.get("placement_group") == name and i["region"] == region
            and i.get("account", cloud.cfg.account_id) == acct
            and (not live_only or i["state"] != "terminated")]


def _tags_of(p, rtype):
    from .ec2 import pstructs
    tags = {}
    for ts in pstructs(p, "TagSpecification"):
        if ts.get("ResourceType") != rtype:
            raise _api_error("InvalidParameterValue", "'%s' is not a valid taggable resource type "
                             "for this operation." % ts.get("ResourceType"))
        for tg in pstructs(ts, "Tag"):
            if "Key" not in tg or tg["Key"].startswith("aws:") or len(tg["Key"]) > 128:
                raise _api_error("InvalidParameterValue", "Invalid tag key")
            tags[tg["Key"]] = tg.get("Value", "")
    if len(tags) > 50:
        raise _api_error("TagLimitExceeded", "The maximum number of tags per resource is 50")
    return tags


def _pg_xml(g):
    return (t("groupName", g["name"]) + t("state", g["state"]) + t("strategy", g["strategy"]) +
            (t("partitionCount", g["partition_count"]) if g.get("partition_count") else "") +
            t("groupId", g["id"]) +
            items("tagSet", [t("key", k) + t("value", v) for k, v in g["tags"].items()]) +
            t("groupArn", "arn:aws:ec2:%s:%s:placement-group/%s" % (g["region"], g["account"], g["name"])))


# ------------------------------------------------------------------ placement groups
def create_placement_group(cloud, p, region):
    name = p.get("GroupName")
    if not name:
        # [CPG] GroupName: "Constraints: Up to 255 ASCII characters"; the mock asks for one.
        raise _api_error("MissingParameter", "The request must contain the parameter GroupName")
    if len(name) > 255 or not name.isascii():
        raise _api_error("InvalidParameterValue", "Placement group names are up to 255 ASCII characters")
    strategy = p.get("Strategy", "")
    if strategy not in PG_STRATEGIES:
        raise _api_error("InvalidParameterValue", "Value (%s) for parameter strategy is invalid. "
                         "Valid values: cluster, spread, partition" % strategy)
    pc = p.get("PartitionCount")
    if pc is not None and strategy != "partition":
        # [CPG] PartitionCount: "Valid only when Strategy is set to partition."
        raise _api_error("InvalidParameterCombination", "PartitionCount is valid only for the "
                         "partition strategy")
    tags = _tags_of(p, "placement-group")
    with cloud.lock:
        k = _pg_key(cloud, region, name)
        old = _pgs(cloud).get(k)
        if old and old["state"] != "deleted":
            # [ERR] InvalidPlacementGroup.Duplicate: "The specified placement group already exists."
            raise _api_error("InvalidPlacementGroup.Duplicate",
                             "The placement group '%s' already exists." % name)
        g = {"name": name, "strategy": strategy, "state": "available", "tags": tags,
             "id": "pg-" + hashlib.sha256(k.encode()).hexdigest()[:17], "region": region,
             "account": _acct(cloud), "zone": None,
             "partition_count": int(pc) if pc else None}
        _pgs(cloud)[k] = g
        cloud.save()
    log("CreatePlacementGroup %s (%s)" % (name, strategy))
    return el("placementGroup", _pg_xml(g)) + t("return", True)


def delete_placement_group(cloud, p, region):
    name = p.get("GroupName")
    if not name:
        raise _api_error("MissingParameter", "The request must contain the parameter GroupName")
    with cloud.lock:
        g = _pgs(cloud).get(_pg_key(cloud, region, name))
        if not g or g["state"] == "deleted":
            # [ERR] InvalidPlacementGroup.Unknown: "The specified placement group cannot be found."
            raise _api_error("InvalidPlacementGroup.Unknown",
                             "The Placement Group '%s' is unknown." % name)
        if _pg_members(cloud, region, name):
            # [PG] "you must terminate or move all instances out of the placement group before
            # you can delete it"; [ERR] InvalidPlacementGroup.InUse.
            raise _api_error("InvalidPlacementGroup.InUse",
                             "The placement group '%s' is in use and may not be deleted." % name)
        del _pgs(cloud)[_pg_key(cloud, region, name)]
        cloud.save()
    log("DeletePlacementGroup %s" % name)
    return t("return", True)


def describe_placement_groups(cloud, p, region):
    from .ec2 import filters, plist, vmatch
    names = plist(p, "GroupName")
    ids = plist(p, "GroupId")
    flts = filters(p)
    with cloud.lock:
        acct = _acct(cloud)
        gs = [g for g in _pgs(cloud).values() if g["region"] == region and g["account"] == acct]
        gs.sort(key=lambda g: g["name"])
        for n in names:
            if n not in {g["name"] for g in gs}:
                raise _api_error("InvalidPlacementGroup.Unknown",
                                 "The Placement Group '%s' is unknown." % n)
        if names or ids:
            gs = [g for g in gs if g["name"] in names or g["id"] in ids]
        sel = []
        for g in gs:
            ok = True
            for fname, vals in flts:
                # [CPG] DescribePlacementGroups filters: group-name, group-arn, spread-level,
                # state, strategy, tag:<key>, tag-key.
                if fname.startswith("tag:"):
                    ok = vmatch(g["tags"].get(fname[4:]), vals)
                elif fname == "tag-key":
                    ok = any(vmatch(k, vals) for k in g["tags"])
                elif fname in ("group-name", "state", "strategy"):
                    ok = vmatch(g[{"group-name": "name"}.get(fname, fname)], vals)
                else:
                    raise _api_error("InvalidParameterValue", "The filter '%s' is invalid" % fname)
                if not ok:
                    break
            if ok:
                sel.append(g)
        return items("placementGroupSet", [_pg_xml(g) for g in sel])


def check_placement(cloud, region, zone, itype, pgroup, spot_behaviour):
    """RunInstances with Placement.GroupName: called with cloud.lock held, before any
    capacity check. Fixes the group's zone with its first instance."""
    if not pgroup:
        return
    g = _pgs(cloud).get(_pg_key(cloud, region, pgroup))
    if not g or g["state"] != "available":
        raise _api_error("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown." % pgroup)
    if spot_behaviour in ("stop", "hibernate"):
        # [PG] / facts: a Spot instance that stops or hibernates cannot be in a placement group.
        raise _api_error("InvalidParameterCombination", "Spot instances with an interruption "
                         "behavior of stop or hibernate cannot be launched into a placement group")
    if g["strategy"] == "cluster":
        if NO_CLUSTER_PG.match(itype):
            # [PG] "burstable performance instances ... and Mac instances" cannot join one.
            raise _api_error("InvalidParameterCombination", "Instance type %s is not supported "
                             "in a cluster placement group" % itype)
        live = _pg_members(cloud, region, pgroup)
        in_zone = {i["zone"] for i in live}
        if in_zone and zone not in in_zone:
            # [PG] "A cluster placement group is a logical grouping of instances within a
            # single Availability Zone"; a launch elsewhere is refused (InvalidPlacementGroup.InUse,
            # the code users report; facts "Gangs close together").
            raise _api_error("InvalidPlacementGroup.InUse", "The placement group '%s' is in use "
                             "in another availability zone: %s" % (pgroup, sorted(in_zone)[0]))


def pin_placement(cloud, region, zone, pgroup):
    """After a launch: the group now lives in the zone of its instances."""
    if pgroup:
        g = _pgs(cloud).get(_pg_key(cloud, region, pgroup))
        if g is not None and g["strategy"] == "cluster":
            g["zone"] = zone


# ------------------------------------------------------------------ EFA interfaces
def check_interfaces(itype, nis):
    """[RI][EFA] The NetworkInterface.N specs of a RunInstances: returns the interface type
    of each (by position) after checking them against the instance type."""
    efa_max, cards = EFA_TYPES.get(itype, (0, 1))
    types, seen = [], set()
    for ni in nis:
        it = ni.get("InterfaceType", "interface")
        if it not in ("interface", "efa", "efa-only"):
            raise _api_error("InvalidParameterValue", "Invalid value '%s' for InterfaceType" % it)
        card = int(ni.get("NetworkCardIndex", "0"))
        dev = int(ni.get("DeviceIndex", "-1"))
        if dev < 0:
            raise _api_error("InvalidParameterValue", "Each network interface needs a DeviceIndex")
        if card >= cards:
            # [EFAI] MaximumNetworkCards
            raise _api_error("InvalidParameterValue", "Network card index %d is out of range for "
                             "%s (%d network card(s))" % (card, itype, cards))
        if (card, dev) in seen:
            raise _api_error("InvalidParameterValue", "Duplicate device index %d on network card %d"
                             % (dev, card))
        seen.add((card, dev))
        if it != "interface" and efa_max == 0:
            # [EFA] "Supported instance types"; EC2 names the type that lacks EFA.
            raise _api_error("InvalidParameterCombination", "EFA interfaces are not supported on "
                             "%s" % itype)
        if it == "efa-only" and card == 0 and dev == 0:
            # [RI] an EFA-only interface has no IP address and cannot be the primary interface.
            raise _api_error("InvalidParameterCombination", "An EFA-only interface cannot be the "
                             "primary network interface")
        if ni.get("AssociatePublicIpAddress") == "true" and len(nis) > 1:
            # [RI] "You cannot specify more than one network interface in the request" with a
            # public IPv4 address.
            raise _api_error("InvalidParameterCombination", "The associatePublicIPAddress "
                             "parameter cannot be specified when launching with multiple network "
                             "interfaces.")
        types.append(it)
    n_efa = sum(1 for x in types if x != "interface")
    if n_efa > efa_max > 0:
        raise _api_error("InvalidParameterValue", "%s supports at most %d EFA interface(s); %d "
                         "requested" % (itype, efa_max, n_efa))
    if len({ni.get("SubnetId") for ni in nis if ni.get("SubnetId")}) > 1 and n_efa:
        # [EFA] "EFA OS-bypass traffic is limited to a single subnet".
        raise _api_error("InvalidParameterCombination", "All EFA interfaces must be in one subnet")
    return types


# ------------------------------------------------------------------ instance types
def _itype_xml(name):
    efa_max, cards = EFA_TYPES.get(name, (0, 1))
    net = [t("maximumNetworkInterfaces", max(2, cards * 2)), t("maximumNetworkCards", cards),
           t("defaultNetworkCardIndex", 0),
           items("networkCards", [t("networkCardIndex", i) + t("maximumNetworkInterfaces", 2)
                                  for i in range(cards)]),
           t("ipv4AddressesPerInterface", 50), t("enaSupport", "required"),
           t("efaSupported", efa_max > 0)]
    if efa_max:
        net.append(el("efaInfo", t("maximumEfaInterfaces", efa_max)))
    return (t("instanceType", name) + t("currentGeneration", True) +
            el("placementGroupInfo", el("supportedStrategies", *[
                t("item", x) for x in (("partition", "spread") if NO_CLUSTER_PG.match(name)
                                       else PG_STRATEGIES)])) +
            el("networkInfo", *net))


def describe_instance_types(cloud, p, region):
    from .ec2 import filters, plist, vmatch
    names = plist(p, "InstanceType")
    for n in names:
        if not re.match(r"^[a-z0-9-]+\.[a-z0-9-]+$", n):
            raise _api_error("InvalidInstanceType", "The following supplied instance types do not "
                             "exist: [%s]" % n)
    if not names:
        names = sorted(EFA_TYPES)
    sel = []
    for n in names:
        ok = True
        for fname, vals in filters(p):
            efa_max, _ = EFA_TYPES.get(n, (0, 1))
            if fname == "network-info.efa-supported":
                ok = vmatch("true" if efa_max else "false", vals)
            elif fname == "instance-type":
                ok = vmatch(n, vals)
            elif fname == "network-info.efa-info.maximum-efa-interfaces":
                ok = vmatch(str(efa_max), vals)
            else:
                raise _api_error("InvalidParameterValue", "The filter '%s' is invalid" % fname)
            if not ok:
                break
        if ok:
            sel.append(n)
    return items("instanceTypeSet", [_itype_xml(n) for n in sel])


# ------------------------------------------------------------------ security groups
def _perm_list(p, prefix):
    from .ec2 import pstructs
    out = []
    for perm in pstructs(p, prefix):
        proto = perm.get("IpProtocol")
        if proto is None:
            raise _api_error("MissingParameter", "The request must contain the parameter IpProtocol")
        groups = [v for k, v in sorted(perm.items()) if re.match(r"^Groups\.\d+\.GroupId$", k)]
        cidrs = [v for k, v in sorted(perm.items()) if re.match(r"^IpRanges\.\d+\.CidrIp$", k)]
        out.append({"proto": "-1" if proto in ("-1", "all") else proto,
                    "from": perm.get("FromPort"), "to": perm.get("ToPort"),
                    "groups": groups, "cidrs": cidrs})
    return out


def _perm_xml(perm, owner):
    parts = [t("ipProtocol", perm["proto"])]
    if perm["proto"] != "-1":
        parts += [t("fromPort", perm["from"]), t("toPort", perm["to"])]
    parts += [items("groups", [t("userId", owner) + t("groupId", g) for g in perm["groups"]]),
              items("ipRanges", [t("cidrIp", c) for c in perm["cidrs"]]),
              el("ipv6Ranges"), el("prefixListIds")]
    return "".join(parts)


def create_security_group(cloud, p, region):
    from .ec2 import need
    name = need(p, "GroupName")
    desc = need(p, "GroupDescription")
    if len(name) > 255 or name.lower().startswith("sg-"):
        # [SG] GroupName constraints
        raise _api_error("InvalidParameterValue", "Invalid value '%s' for GroupName. Group names "
                         "may not be longer than 255 characters and may not start with sg-" % name)
    tags = _tags_of(p, "security-group")
    vpc = p.get("VpcId") or "vpc-mock"
    with cloud.lock:
        acct = _acct(cloud)
        if any(g["name"] == name and g["region"] == region and g["account"] == acct
               and g["vpc_id"] == vpc for g in _sgs(cloud).values()):
            raise _api_error("InvalidGroup.Duplicate", "The security group '%s' already exists "
                             "for VPC '%s'" % (name, vpc))
        gid = "sg-" + hashlib.sha256(("%s|%s|%s" % (acct, region, name)).encode()).hexdigest()[:17]
        # A new VPC security group allows all outbound traffic and no inbound traffic
        # (EC2 User Guide, "Security group rules", default rules).
        _sgs(cloud)[gid] = {"id": gid, "name": name, "description": desc, "region": region,
                            "account": acct, "vpc_id": vpc, "tags": tags,
                            "ingress": [], "egress": [{"proto": "-1", "from": None, "to": None,
                                                       "groups": [], "cidrs": ["0.0.0.0/0"]}]}
        cloud.save()
    return t("return", True) + t("groupId", gid)


def _authorize(cloud, p, region, direction):
    from .ec2 import need
    gid = need(p, "GroupId")
    perms = _perm_list(p, "IpPermissions")
    if not perms:
        raise _api_error("MissingParameter", "The request must contain the parameter IpPermissions")
    with cloud.lock:
        g = _sgs(cloud).get(gid)
        if not g or g["region"] != region or g["account"] != _acct(cloud):
            raise _api_error("InvalidGroup.NotFound", "The security group '%s' does not exist" % gid)
        for perm in perms:
            for ref in perm["groups"]:
                r = _sgs(cloud).get(ref)
                if not r or r["region"] != region or r["account"] != _acct(cloud):
                    raise _api_error("InvalidGroup.NotFound",
                                     "The security group '%s' does not exist" % ref)
            if _perm_key(perm) in {_perm_key(x) for x in g[direction]}:
                # [SG] the same rule twice
                raise _api_error("InvalidPermission.Duplicate", "the specified rule \"peer: %s, "
                                 "%s, ALLOW\" already exists" % (
                                     ",".join(perm["cidrs"] + perm["groups"]), perm["proto"]))
        g[direction].extend(perms)
        cloud.save()
    return t("return", True)


def _perm_key(perm):
    return (perm["proto"], str(perm["from"]), str(perm["to"]), tuple(sorted(perm["cidrs"])),
            tuple(sorted(perm["groups"])))


def sg_check_launch(cloud, region, sgs):
    """RunInstances with SecurityGroupId.N: a group the mock made must be the caller's, in
    this region [SG]. Ids the mock never made (placeholders of older tests) pass, and their
    instances are not governed by the network rules (netpolicy.py)."""
    for gid in sgs:
        g = _sgs(cloud).get(gid)
        if g is not None and (g["region"] != region or g["account"] != _acct(cloud)):
            raise _api_error("InvalidGroup.NotFound", "The security group '%s' does not exist" % gid)


def delete_security_group(cloud, p, region):
    gid, name = p.get("GroupId"), p.get("GroupName")
    if not gid and not name:
        raise _api_error("MissingParameter", "The request must contain the parameter GroupId")
    with cloud.lock:
        acct = _acct(cloud)
        mine = [g for g in _sgs(cloud).values() if g["region"] == region and g["account"] == acct]
        g = next((x for x in mine if (gid and x["id"] == gid) or (not gid and x["name"] == name)), None)
        if g is None:
            raise _api_error("InvalidGroup.NotFound", "The security group '%s' does not exist"
                             % (gid or name))
        # [SG] DependencyViolation while an instance (any state but terminated) has it, or
        # another group's rule names it
        users = [i["id"] for i in cloud.instances.values()
                 if g["id"] in (i.get("security_groups") or []) and i["state"] != "terminated"]
        refs = [x["id"] for x in mine if x is not g
                for perm in x["ingress"] + x["egress"] if g["id"] in perm["groups"]]
        if users or refs:
            raise _api_error("DependencyViolation", "resource %s has a dependent object" % g["id"])
        del _sgs(cloud)[g["id"]]
        cloud.save()
    log("DeleteSecurityGroup %s (%s)" % (g["id"], g["name"]))
    return t("return", True) + t("groupId", g["id"])


def authorize_security_group_ingress(cloud, p, region):
    return _authorize(cloud, p, region, "ingress")


def authorize_security_group_egress(cloud, p, region):
    return _authorize(cloud, p, region, "egress")


def _sg_match(g, flts):
    from .ec2 import vmatch
    for name, vals in flts:
        tags = g.get("tags") or {}
        if name == "group-id":
            v = g["id"]
        elif name == "group-name":
            v = g["name"]
        elif name == "vpc-id":
            v = g["vpc_id"]
        elif name == "description":
            v = g["description"]
        elif name.startswith("tag:"):
            v = tags.get(name[4:])
        elif name == "tag-key":
            if not any(vmatch(k, vals) for k in tags):
                return False
            continue
        else:
            raise _api_error("InvalidParameterValue", "The filter '%s' is invalid" % name)
        if not vmatch(v, vals):
            return False
    return True


def describe_security_groups(cloud, p, region):
    from .ec2 import plist, filters
    ids = plist(p, "GroupId")
    names = plist(p, "GroupName")
    flts = filters(p)
    with cloud.lock:
        acct = _acct(cloud)
        gs = [g for g in _sgs(cloud).values() if g["region"] == region and g["account"] == acct]
        for i in ids:
            if i not in {g["id"] for g in gs}:
                # [ERR] InvalidGroup.NotFound
                raise _api_error("InvalidGroup.NotFound", "The security group '%s' does not exist" % i)
        for n in names:
            if n not in {g["name"] for g in gs}:
                raise _api_error("InvalidGroup.NotFound", "The security group '%s' does not exist" % n)
        if ids:
            gs = [g for g in gs if g["id"] in ids]
        if names:
            gs = [g for g in gs if g["name"] in names]
        gs = [g for g in gs if _sg_match(g, flts)]
        return items("securityGroupInfo", [
            t("ownerId", acct) + t("groupId", g["id"]) + t("groupName", g["name"]) +
            t("groupDescription", g["description"]) + t("vpcId", g["vpc_id"]) +
            items("ipPermissions", [_perm_xml(x, acct) for x in g["ingress"]]) +
            items("ipPermissionsEgress", [_perm_xml(x, acct) for x in g["egress"]]) +
            items("tagSet", [t("key", k) + t("value", v) for k, v in (g.get("tags") or {}).items()])
            for g in sorted(gs, key=lambda g: g["id"])])


# ------------------------------------------------------------------ subnets [SUB]
DEFAULT_VPC_CIDR = "172.31.0.0/16"


def _zones(region):
    from .ec2 import zones
    return zones(region)


def _vpc_of(region):
    from .ec2 import stable_id
    return stable_id("vpc", region)


def _subnets(cloud, region):
    """The account's subnets in region: the default VPC's one per zone, then those created."""
    from .ec2 import stable_id
    acct = _acct(cloud)
    out = [{"id": stable_id("subnet", z), "zone": z, "region": region, "account": acct,
            "vpc_id": _vpc_of(region), "default": True,
            "cidr": str(list(ipaddress.ip_network(DEFAULT_VPC_CIDR).subnets(new_prefix=20))[i])}
           for i, z in enumerate(_zones(region))]
    made = cloud.extra.setdefault("ec2_subnets", {})
    out += [x for x in made.values() if x["region"] == region and x["account"] == acct]
    return out


def subnet_zone(cloud, region, subnet_id, zone):
    """The zone a launch into subnet_id lands in; zone (Placement.AvailabilityZone) must be
    the subnet's when given [SUB] [RI]."""
    sub = next((x for x in _subnets(cloud, region) if x["id"] == subnet_id), None)
    if sub is None:
        raise _api_error("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist" % subnet_id)
    if zone and zone != sub["zone"]:
        raise _api_error("InvalidParameterValue",
                         "Value (%s) for parameter availabilityZone is invalid. Subnet '%s' is "
                         "in the availability zone %s" % (zone, subnet_id, sub["zone"]))
    return sub["zone"]


def create_subnet(cloud, p, region):
    from .ec2 import need
    vpc = need(p, "VpcId")
    block = need(p, "CidrBlock")
    zone = p.get("AvailabilityZone") or _zones(region)[0]
    if zone not in _zones(region):
        raise _api_error("InvalidParameterValue", "Value (%s) for parameter availabilityZone is "
                         "invalid. Subnets can currently only be created in the following "
                         "availability zones: %s." % (zone, ", ".join(_zones(region))))
    try:
        net = ipaddress.ip_network(block)
    except ValueError:
        raise _api_error("InvalidParameterValue", "Value (%s) for parameter cidrBlock is invalid. "
                         "This is not a valid CIDR block." % block)
    if vpc != _vpc_of(region):
        raise _api_error("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist" % vpc)
    # The mock has one VPC per region, the default one, with its default block.
    if not (16 <= net.prefixlen <= 28) or not net.subnet_of(ipaddress.ip_network(DEFAULT_VPC_CIDR)):
        raise _api_error("InvalidSubnet.Range", "The CIDR '%s' is invalid." % block)
    with cloud.lock:
        for x in _subnets(cloud, region):
            if x["vpc_id"] == vpc and net.overlaps(ipaddress.ip_network(x["cidr"])):
                raise _api_error("InvalidSubnet.Conflict",
                                 "The CIDR '%s' conflicts with another subnet" % block)
        sid = "subnet-" + hashlib.sha256(("%s|%s|%s" % (_acct(cloud), region, block)).encode()).hexdigest()[:17]
        sub = {"id": sid, "zone": zone, "region": region, "account": _acct(cloud), "vpc_id": vpc,
               "default": False, "cidr": str(net)}
        cloud.extra.setdefault("ec2_subnets", {})[sid] = sub
        cloud.save()
    return el("subnet", _subnet_xml(sub))


def _subnet_xml(x):
    net = ipaddress.ip_network(x["cidr"])
    return (t("subnetId", x["id"]) + t("state", "available") + t("vpcId", x["vpc_id"]) +
            t("cidrBlock", x["cidr"]) + t("availableIpAddressCount", net.num_addresses - 5) +
            t("availabilityZone", x["zone"]) + t("defaultForAz", x["default"]) +
            t("mapPublicIpOnLaunch", x["default"]) + t("ownerId", x["account"]))


def describe_subnets(cloud, p, region):
    from .ec2 import plist
    ids = plist(p, "SubnetId")
    with cloud.lock:
        subs = _subnets(cloud, region)
    for i in ids:
        if i not in {x["id"] for x in subs}:
            raise _api_error("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist" % i)
    if ids:
        subs = [x for x in subs if x["id"] in ids]
    return items("subnetSet", [_subnet_xml(x) for x in subs])


ACTIONS = {
    "CreatePlacementGroup": create_placement_group,
    "DeletePlacementGroup": delete_placement_group,
    "DescribePlacementGroups": describe_placement_groups,
    "DescribeInstanceTypes": describe_instance_types,
    "CreateSecurityGroup": create_security_group,
    "AuthorizeSecurityGroupIngress": authorize_security_group_ingress,
    "AuthorizeSecurityGroupEgress": authorize_security_group_egress,
    "DescribeSecurityGroups": describe_security_groups,
    "DeleteSecurityGroup": delete_security_group,
    "CreateSubnet": create_subnet,
    "DescribeSubnets": describe_subnets,
}


# ------------------------------------------------------------------ images and root volumes
# [IMG]  EC2 API Reference, DescribeImages (imagesSet: rootDeviceName, blockDeviceMapping)
#        https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeImages.html
# [BDM]  EC2 User Guide, "Block device mappings" (the AMI's root device name in a mapping
#        changes the root volume; any other name adds a volume) and "Amazon EBS volume
#        types" (gp2/gp3 1-16,384 GiB); error InvalidBlockDeviceMapping for a volume
#        smaller than its snapshot.
ROOT_DEVICE = "/dev/xvda"
ROOT_SNAPSHOT_GB = 8
EBS_SIZES = {"gp2": (1, 16384), "gp3": (1, 16384), "io1": (4, 16384), "io2": (4, 65536),
             "st1": (125, 16384), "sc1": (125, 16384), "standard": (1, 1024)}


def describe_images(cloud, p, region):
    from .ec2 import plist
    ids = plist(p, "ImageId")
    for i in ids:
        if not re.match(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$", i):
            raise _api_error("InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")" % i)
    snap = lambda i: "snap-" + hashlib.sha256(i.encode()).hexdigest()[:17]  # noqa: E731
    return items("imagesSet", [
        t("imageId", i) + t("imageLocation", "mock/" + i) + t("imageState", "available") +
        t("isPublic", True) + t("architecture", "x86_64") + t("imageType", "machine") +
        t("rootDeviceType", "ebs") + t("rootDeviceName", ROOT_DEVICE) +
        items("blockDeviceMapping", [t("deviceName", ROOT_DEVICE) + el(
            "ebs", t("snapshotId", snap(i)), t("volumeSize", ROOT_SNAPSHOT_GB),
            t("deleteOnTermination", True), t("volumeType", "gp3"))]) +
        t("virtualizationType", "hvm") + t("enaSupport", True) for i in ids])


def check_block_devices(p):
    """RunInstances BlockDeviceMapping.N: returns the root volume's size in GiB."""
    from .ec2 import pstructs
    root_gb = ROOT_SNAPSHOT_GB
    for m in pstructs(p, "BlockDeviceMapping"):
        dev = m.get("DeviceName")
        if not dev:
            raise _api_error("MissingParameter", "The request must contain the parameter "
                             "BlockDeviceMapping.DeviceName")
        vtype = m.get("Ebs.VolumeType", "gp2")
        if vtype not in EBS_SIZES:
            raise _api_error("InvalidParameterValue", "Value (%s) for parameter volumeType is "
                             "invalid." % vtype)
        size = m.get("Ebs.VolumeSize")
        if size is None:
            continue
        try:
            gb = int(size)
        except ValueError:
            raise _api_error("InvalidParameterValue", "Invalid value '%s' for VolumeSize" % size)
        lo, hi = EBS_SIZES[vtype]
        if gb < lo or gb > hi:
            # [BDM] "Amazon EBS volume types": size limits per type
            raise _api_error("InvalidParameterValue", "Volume size %d GiB is outside %d-%d for %s"
                             % (gb, lo, hi, vtype))
        if dev == ROOT_DEVICE:
            if gb < ROOT_SNAPSHOT_GB:
                # [BDM] a volume is never smaller than its snapshot
                raise _api_error("InvalidBlockDeviceMapping", "Volume of size %dGB is smaller than "
                                 "snapshot, expect size >= %dGB" % (gb, ROOT_SNAPSHOT_GB))
            root_gb = gb
    return root_gb


ACTIONS["DescribeImages"] = describe_images
