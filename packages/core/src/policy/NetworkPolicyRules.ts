/**
 * NetworkPolicy evaluation (pure): which policies isolate a pod, whether a connection is allowed,
 * and the resolution of a pod's policies into the concrete rules its network namespace enforces
 * (`Runtime.NetworkPolicyRules`, the body of the box's `network-policy` call).
 *
 *   policies ─┐
 *   pods ─────┼─▶ selecting(pod, direction) ─▶ isolated? ─▶ rules of those policies ─▶ peers ─▶ CIDRs
 *   namespaces┘                                                                   └─▶ ports ─▶ numbers
 *
 * Kubernetes' semantics, as the NetworkPolicy concept page states them:
 * - A pod is isolated for a direction once some policy in its namespace selects it
 *   (`podSelector`) and lists that direction in `policyTypes` (defaulted: Ingress, plus Egress
 *   when the policy has egress rules). Until then everything is allowed in that direction.
 * - An isolated pod accepts what at least one rule of one selecting policy allows: policies are
 *   additive (a union), never subtractive. A connection needs both ends to allow it: the source's
 *   egress and the destination's ingress.
 * - A rule allows traffic from/to any of its peers (none listed: any peer) on any of its ports
 *   (none listed: every port). A peer is pods (`podSelector` in the policy's namespace,
 *   `namespaceSelector` for all pods of matching namespaces, both in one peer for "these pods in
 *   those namespaces") or an `ipBlock` CIDR minus its `except` holes.
 * - A named port is resolved against the container ports of the pod that receives the traffic:
 *   the selected pod for ingress, each destination pod for egress (so an egress rule with a named
 *   port only reaches pods that have a port of that name and protocol).
 * - Namespaces carry the immutable label `kubernetes.io/metadata.name` whether or not it was
 *   written on them, so a policy can select a namespace by name.
 *
 * Pods that share the host's network and pods that finished (Succeeded, Failed) are neither
 * selected nor peers: their address is the node's, or may already be another pod's. Loopback and
 * replies to allowed connections are the runtime's business (always allowed).
 */
import * as LabelSelector from "../model/LabelSelector.js"
import * as NetworkPolicyModel from "../model/NetworkPolicy.js"
import type * as Pod from "../model/Pod.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as IpRange from "../network/IpRange.js"

type Labels = Readonly<Record<string, string>>

/** A traffic direction, from the selected pod's point of view. */
export type Direction = NetworkPolicyModel.PolicyType

/** A transport protocol NetworkPolicy ports speak of. */
export type Protocol = "TCP" | "UDP" | "SCTP"

/** The label every namespace has, with its own name as the value. */
export const NamespaceNameLabel = "kubernetes.io/metadata.name"

/** What the engine needs of a pod: identity, labels, addresses and named ports. */
export interface PodView {
  readonly namespace: string
  readonly name: string
  readonly labels: Labels
  /** Its own addresses; empty while it has none (or shares the host's, or finished). */
  readonly ips: ReadonlyArray<string>
  /** Its containers' declared ports (named ports resolve against these). */
  readonly ports: ReadonlyArray<{ readonly name?: string; readonly port: number; readonly protocol: Protocol }>
}

/** The state a decision is made from: every policy, pod and namespace the node can see. */
export interface Cluster {
  readonly policies: ReadonlyArray<NetworkPolicyModel.NetworkPolicy>
  readonly pods: ReadonlyArray<PodView>
  /** Each namespace's labels (without the implied `kubernetes.io/metadata.name`). */
  readonly namespaces: ReadonlyMap<string, Labels>
}

/** One end of a connection: a pod, or an address outside the pods. */
export type Endpoint = { readonly pod: PodView } | { readonly ip: string }

/** A connection attempt: from an endpoint to a port of another. */
export interface Connection {
  readonly from: Endpoint
  readonly to: Endpoint
  readonly protocol: Protocol
  readonly port: number
}

/** The engine's view of a pod object. */
export const podView = (pod: Pod.Pod): PodView => {
  const phase = pod.status?.phase
  const own = pod.spec.hostNetwork !== true && phase !== "Succeeded" && phase !== "Failed"
  const ips = own ? [...new Set([...(pod.status?.podIPs ?? []).map((p) => p.ip), ...(pod.status?.podIP === undefined ? [] : [pod.status.podIP])])] : []
  return {
    namespace: pod.metadata.namespace ?? "",
    name: pod.metadata.name ?? "",
    labels: pod.metadata.labels ?? {},
    ips: ips.filter((ip) => ip !== ""),
    ports: [...(pod.spec.initContainers ?? []), ...pod.spec.containers].flatMap((c) =>
      (c.ports ?? []).map((p) => ({ ...(p.name === undefined ? {} : { name: p.name }), port: p.containerPort, protocol: p.protocol ?? "TCP" }))
    )
  }
}

/** A namespace's labels with the implied name label. */
export const namespaceLabels = (cluster: Cluster, namespace: string): Labels | undefined => {
  const labels = cluster.namespaces.get(namespace)
  return labels === undefined ? undefined : { ...labels, [NamespaceNameLabel]: namespace }
}

// ---- selection ---------------------------------------------------------------------------------

const policyNamespace = (p: NetworkPolicyModel.NetworkPolicy) => p.metadata.namespace ?? ""

/** Whether `policy` applies to `pod` (same namespace, podSelector matches; `{}` or absent: every pod). */
export const selects = (policy: NetworkPolicyModel.NetworkPolicy, pod: PodView): boolean =>
  policyNamespace(policy) === pod.namespace && LabelSelector.matches(policy.spec?.podSelector ?? {}, pod.labels)

/** The policies that select `pod` for `direction`, oldest name first for stable output. */
export const selecting = (cluster: Cluster, pod: PodView, direction: Direction): ReadonlyArray<NetworkPolicyModel.NetworkPolicy> =>
  cluster.policies
    .filter((p) => selects(p, pod) && NetworkPolicyModel.policyTypesOf(p.spec).includes(direction))
    .sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""))

/** Whether `pod` is isolated for `direction`: some policy selects it for that direction. */
export const isIsolated = (cluster: Cluster, pod: PodView, direction: Direction): boolean => selecting(cluster, pod, direction).length > 0

/** Whether `pod` is a pod that policies can select and peers can name (it has an address of its own). */
const addressable = (pod: PodView) => pod.ips.length > 0

/** Whether a pod is among a peer's pods (podSelector and/or namespaceSelector; not ipBlock). */
const peerHasPod = (cluster: Cluster, policy: NetworkPolicyModel.NetworkPolicy, peer: NetworkPolicyModel.NetworkPolicyPeer, pod: PodView): boolean => {
  if (peer.ipBlock !== undefined) return false
  if (peer.podSelector === undefined && peer.namespaceSelector === undefined) return false
  if (peer.namespaceSelector === undefined) {
    if (pod.namespace !== policyNamespace(policy)) return false
  } else {
    const labels = namespaceLabels(cluster, pod.namespace)
    if (labels === undefined || !LabelSelector.matches(peer.namespaceSelector, labels)) return false
  }
  return peer.podSelector === undefined || LabelSelector.matches(peer.podSelector, pod.labels)
}

/** The pods a peer names (with addresses). */
export const peerPods = (cluster: Cluster, policy: NetworkPolicyModel.NetworkPolicy, peer: NetworkPolicyModel.NetworkPolicyPeer): ReadonlyArray<PodView> =>
  cluster.pods.filter((p) => addressable(p) && peerHasPod(cluster, policy, peer, p))

const parseRange = (cidr: string): IpRange.IpRange | undefined => {
  const r = IpRange.parse(cidr)
  return r._tag === "Right" ? r.right : undefined
}

const inBlock = (block: NetworkPolicyModel.IPBlock, ip: string): boolean => {
  const range = parseRange(block.cidr)
  if (range === undefined || !IpRange.contains(range, ip)) return false
  return !(block.except ?? []).some((e) => {
    const hole = parseRange(e)
    return hole !== undefined && IpRange.contains(hole, ip)
  })
}

const endpointIps = (e: Endpoint): ReadonlyArray<string> => ("pod" in e ? e.pod.ips : [e.ip])

const peerMatches = (cluster: Cluster, policy: NetworkPolicyModel.NetworkPolicy, peer: NetworkPolicyModel.NetworkPolicyPeer, e: Endpoint): boolean => {
  if (peer.ipBlock !== undefined) return endpointIps(e).some((ip) => inBlock(peer.ipBlock!, ip))
  return "pod" in e && addressable(e.pod) && peerHasPod(cluster, policy, peer, e.pod)
}

// ---- ports -------------------------------------------------------------------------------------

/** The number a named port has on `pod` for `protocol`, if it declares it. */
export const namedPort = (pod: PodView, name: string, protocol: Protocol): number | undefined =>
  pod.ports.find((p) => p.name === name && p.protocol === protocol)?.port

const protocolOf = (p: NetworkPolicyModel.NetworkPolicyPort): Protocol => (p.protocol === "UDP" || p.protocol === "SCTP" ? p.protocol : "TCP")

const portMatches = (p: NetworkPolicyModel.NetworkPolicyPort, receiver: PodView | undefined, protocol: Protocol, port: number): boolean => {
  if (protocolOf(p) !== protocol) return false
  if (p.port === undefined) return true
  if (typeof p.port === "number") return p.endPort === undefined ? port === p.port : port >= p.port && port <= p.endPort
  return receiver !== undefined && namedPort(receiver, p.port, protocol) === port
}

const portsMatch = (ports: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPort> | undefined, receiver: PodView | undefined, protocol: Protocol, port: number) =>
  ports === undefined || ports.length === 0 || ports.some((p) => portMatches(p, receiver, protocol, port))

const peersMatch = (cluster: Cluster, policy: NetworkPolicyModel.NetworkPolicy, peers: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPeer> | undefined, e: Endpoint) =>
  peers === undefined || peers.length === 0 || peers.some((peer) => peerMatches(cluster, policy, peer, e))

// ---- evaluation --------------------------------------------------------------------------------

const receiverOf = (e: Endpoint) => ("pod" in e ? e.pod : undefined)

/** Whether `pod`'s policies let it send this connection (true when not isolated for egress). */
export const egressAllows = (cluster: Cluster, pod: PodView, c: Connection): boolean => {
  const policies = selecting(cluster, pod, "Egress")
  if (policies.length === 0) return true
  return policies.some((policy) =>
    (policy.spec?.egress ?? []).some((rule) => peersMatch(cluster, policy, rule.to, c.to) && portsMatch(rule.ports, receiverOf(c.to), c.protocol, c.port))
  )
}

/** Whether `pod`'s policies let it accept this connection (true when not isolated for ingress). */
export const ingressAllows = (cluster: Cluster, pod: PodView, c: Connection): boolean => {
  const policies = selecting(cluster, pod, "Ingress")
  if (policies.length === 0) return true
  return policies.some((policy) =>
    (policy.spec?.ingress ?? []).some((rule) => peersMatch(cluster, policy, rule.from, c.from) && portsMatch(rule.ports, pod, c.protocol, c.port))
  )
}

/** Whether the connection is allowed: by the source pod's egress and the destination pod's ingress. */
export const allows = (cluster: Cluster, c: Connection): boolean =>
  ("pod" in c.from ? egressAllows(cluster, c.from.pod, c) : true) && ("pod" in c.to ? ingressAllows(cluster, c.to.pod, c) : true)

// ---- resolution into runtime rules -------------------------------------------------------------

const hostCidr = (ip: string): string | undefined => {
  const canonical = IpRange.canonical(ip)
  if (canonical === undefined) return undefined
  return `${canonical}/${IpRange.familyOf(ip) === "IPv6" ? 128 : 32}`
}

const cidrsOf = (pods: ReadonlyArray<PodView>): ReadonlyArray<string> =>
  [...new Set(pods.flatMap((p) => p.ips.flatMap((ip) => hostCidr(ip) ?? [])))].sort()

const numericPort = (p: NetworkPolicyModel.NetworkPolicyPort, port: number | undefined): Runtime.PolicyPort => ({
  protocol: protocolOf(p),
  ...(port === undefined ? {} : { port }),
  ...(port !== undefined && p.endPort !== undefined && typeof p.port === "number" && p.endPort > port ? { endPort: p.endPort } : {})
})

/** A rule's ports on `receiver`: numbers as given, names resolved (dropped where it has none). */
const resolvePorts = (ports: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPort>, receiver: PodView | undefined): ReadonlyArray<Runtime.PolicyPort> =>
  ports.flatMap((p) => {
    if (typeof p.port !== "string") return [numericPort(p, p.port)]
    const n = receiver === undefined ? undefined : namedPort(receiver, p.port, protocolOf(p))
    return n === undefined ? [] : [numericPort(p, n)]
  })

type PeerSet =
  | { readonly _tag: "Any" }
  | { readonly _tag: "Block"; readonly cidr: string; readonly except: ReadonlyArray<string> }
  | { readonly _tag: "Pods"; readonly pods: ReadonlyArray<PodView> }

const peerSets = (cluster: Cluster, policy: NetworkPolicyModel.NetworkPolicy, peers: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPeer> | undefined): ReadonlyArray<PeerSet> => {
  if (peers === undefined || peers.length === 0) return [{ _tag: "Any" }]
  return peers.map((peer): PeerSet => {
    if (peer.ipBlock !== undefined) {
      const range = parseRange(peer.ipBlock.cidr)
      const except = (peer.ipBlock.except ?? []).flatMap((e) => parseRange(e)?.cidr ?? [])
      return range === undefined ? { _tag: "Pods", pods: [] } : { _tag: "Block", cidr: range.cidr, except }
    }
    return { _tag: "Pods", pods: peerPods(cluster, policy, peer) }
  })
}

const where = (set: PeerSet): Runtime.PolicyAllow | undefined => {
  switch (set._tag) {
    case "Any":
      return {}
    case "Block":
      return { cidrs: [set.cidr], ...(set.except.length === 0 ? {} : { except: set.except }) }
    case "Pods": {
      const cidrs = cidrsOf(set.pods)
      return cidrs.length === 0 ? undefined : { cidrs }
    }
  }
}

const withPorts = (allow: Runtime.PolicyAllow, ports: ReadonlyArray<Runtime.PolicyPort> | undefined): Runtime.PolicyAllow =>
  ports === undefined ? allow : { ...allow, ports }

/** The allow entries of one rule, for the pod `self` (the receiver of ingress). */
const ruleEntries = (
  cluster: Cluster,
  policy: NetworkPolicyModel.NetworkPolicy,
  direction: Direction,
  self: PodView,
  peers: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPeer> | undefined,
  ports: ReadonlyArray<NetworkPolicyModel.NetworkPolicyPort> | undefined
): ReadonlyArray<Runtime.PolicyAllow> => {
  const sets = peerSets(cluster, policy, peers)
  const all = ports === undefined || ports.length === 0
  if (all || direction === "Ingress") {
    // Ingress names resolve on the pod itself: one port list for every peer.
    const resolved = all ? undefined : resolvePorts(ports, self)
    if (resolved !== undefined && resolved.length === 0) return []
    return sets.flatMap((s) => {
      const w = where(s)
      return w === undefined ? [] : [withPorts(w, resolved)]
    })
  }
  // Egress: numbers apply to every peer; names resolve on each destination pod.
  const numbered = ports.filter((p) => typeof p.port !== "string")
  const named = ports.filter((p) => typeof p.port === "string")
  const out: Array<Runtime.PolicyAllow> = []
  for (const s of sets) {
    const w = where(s)
    if (w !== undefined && numbered.length > 0) out.push(withPorts(w, resolvePorts(numbered, undefined)))
    if (named.length === 0 || s._tag === "Block") continue
    const destinations = s._tag === "Any" ? cluster.pods.filter(addressable) : s.pods
    // Destinations whose names resolve to the same numbers share one entry.
    const byPorts = new Map<string, { ports: ReadonlyArray<Runtime.PolicyPort>; pods: Array<PodView> }>()
    for (const pod of destinations) {
      const resolved = resolvePorts(named, pod)
      if (resolved.length === 0) continue
      const key = JSON.stringify(resolved)
      const group = byPorts.get(key) ?? { ports: resolved, pods: [] }
      group.pods.push(pod)
      byPorts.set(key, group)
    }
    for (const group of byPorts.values()) {
      const cidrs = cidrsOf(group.pods)
      if (cidrs.length > 0) out.push({ cidrs, ports: group.ports })
    }
  }
  return out
}

const portKey = (p: Runtime.PolicyPort) => `${p.protocol}/${p.port ?? ""}/${p.endPort ?? ""}`

const normalise = (allow: Runtime.PolicyAllow): Runtime.PolicyAllow => {
  const ports = allow.ports === undefined ? undefined : [...new Map(allow.ports.map((p) => [portKey(p), p])).values()].sort((a, b) => portKey(a).localeCompare(portKey(b)))
  return {
    ...(allow.cidrs === undefined ? {} : { cidrs: [...new Set(allow.cidrs)].sort() }),
    ...(allow.except === undefined ? {} : { except: [...new Set(allow.except)].sort() }),
    ...(ports === undefined ? {} : { ports })
  }
}

/** One direction of `pod`'s rules: isolated or not, and what is allowed (deduplicated, in a stable order). */
export const resolveDirection = (cluster: Cluster, pod: PodView, direction: Direction): Runtime.PolicyDirection => {
  const policies = selecting(cluster, pod, direction)
  if (policies.length === 0) return { isolated: false, allow: [] }
  const entries = policies.flatMap((policy) =>
    direction === "Ingress"
      ? (policy.spec?.ingress ?? []).flatMap((r) => ruleEntries(cluster, policy, direction, pod, r.from, r.ports))
      : (policy.spec?.egress ?? []).flatMap((r) => ruleEntries(cluster, policy, direction, pod, r.to, r.ports))
  )
  const unique = new Map(entries.map(normalise).map((e) => [JSON.stringify(e), e]))
  return { isolated: true, allow: [...unique.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, e]) => e) }
}

/** Everything `pod`'s network namespace must enforce: the body of the box's `network-policy` call. */
export const resolve = (cluster: Cluster, pod: PodView): Runtime.NetworkPolicyRules => ({
  ingress: resolveDirection(cluster, pod, "Ingress"),
  egress: resolveDirection(cluster, pod, "Egress")
})

/** Whether any policy selects `pod` (in either direction): it then needs enforcement to be safe. */
export const isSelected = (cluster: Cluster, pod: PodView): boolean =>
  cluster.policies.some((p) => selects(p, pod) && NetworkPolicyModel.policyTypesOf(p.spec).length > 0)

// ---- the contract's meaning ----------------------------------------------------------------------

const portAllowed = (p: Runtime.PolicyPort, protocol: Protocol, port: number) =>
  p.protocol === protocol && (p.port === undefined || (p.endPort === undefined ? port === p.port : port >= p.port && port <= p.endPort))

/**
 * What a runtime enforcing `direction` lets through for `peerIp` (the other end) and a port: the
 * reference meaning of the `network-policy` body, which the box's nftables rules implement.
 */
export const permits = (direction: Runtime.PolicyDirection, peerIp: string, protocol: Protocol, port: number): boolean =>
  !direction.isolated ||
  direction.allow.some((a) => {
    const inCidrs = a.cidrs === undefined || a.cidrs.some((c) => {
      const r = parseRange(c)
      return r !== undefined && IpRange.contains(r, peerIp)
    })
    const inHoles = (a.except ?? []).some((c) => {
      const r = parseRange(c)
      return r !== undefined && IpRange.contains(r, peerIp)
    })
    return inCidrs && !inHoles && (a.ports === undefined || a.ports.some((p) => portAllowed(p, protocol, port)))
  })
