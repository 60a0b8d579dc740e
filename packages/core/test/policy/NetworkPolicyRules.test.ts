import { describe, expect, it } from "@effect/vitest"
import type * as NetworkPolicyModel from "../../src/model/NetworkPolicy.js"
import type * as Pod from "../../src/model/Pod.js"
import * as NetworkPolicy from "../../src/policy/NetworkPolicyRules.js"

type PodView = NetworkPolicy.PodView

const pod = (namespace: string, name: string, ip: string, labels: Record<string, string> = {}, ports: PodView["ports"] = []): PodView => ({
  namespace,
  name,
  labels,
  ips: [ip],
  ports
})

const policy = (namespace: string, name: string, spec: Record<string, unknown>): NetworkPolicyModel.NetworkPolicy =>
  ({ apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { namespace, name }, spec }) as NetworkPolicyModel.NetworkPolicy

// The cluster of the Kubernetes NetworkPolicy concept page, plus a few more pods.
const db = pod("default", "db", "10.1.0.10", { role: "db" }, [{ name: "redis", port: 6379, protocol: "TCP" }])
const frontend = pod("default", "frontend", "10.1.0.11", { role: "frontend" })
const other = pod("default", "other", "10.1.0.12", { role: "other" })
const myproject = pod("myproject", "anything", "10.1.1.5", { app: "x" })
const client = pod("alice", "client", "10.1.2.5", { role: "client" })
const aliceServer = pod("alice", "server", "10.1.2.6", { role: "server" })
const bobClient = pod("bob", "client", "10.1.3.5", { role: "client" })
const web = pod("default", "web", "10.1.0.20", { app: "web" }, [{ name: "http", port: 8080, protocol: "TCP" }, { name: "dns", port: 5353, protocol: "UDP" }])
const web2 = pod("default", "web2", "10.1.0.21", { app: "web" }, [{ name: "http", port: 9090, protocol: "TCP" }])
const pods = [db, frontend, other, myproject, client, aliceServer, bobClient, web, web2]
const namespaces = new Map<string, Record<string, string>>([
  ["default", {}],
  ["myproject", { project: "myproject" }],
  ["alice", { user: "alice" }],
  ["bob", { user: "bob" }]
])
const cluster = (...policies: ReadonlyArray<NetworkPolicyModel.NetworkPolicy>): NetworkPolicy.Cluster => ({ policies, pods, namespaces })

const fromPod = (p: PodView) => ({ pod: p })
const fromIp = (ip: string) => ({ ip })
const tcp = (from: NetworkPolicy.Endpoint, to: NetworkPolicy.Endpoint, port: number): NetworkPolicy.Connection => ({ from, to, protocol: "TCP", port })
const udp = (from: NetworkPolicy.Endpoint, to: NetworkPolicy.Endpoint, port: number): NetworkPolicy.Connection => ({ from, to, protocol: "UDP", port })

const testNetworkPolicy = policy("default", "test-network-policy", {
  podSelector: { matchLabels: { role: "db" } },
  policyTypes: ["Ingress", "Egress"],
  ingress: [
    {
      from: [
        { ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } },
        { namespaceSelector: { matchLabels: { project: "myproject" } } },
        { podSelector: { matchLabels: { role: "frontend" } } }
      ],
      ports: [{ protocol: "TCP", port: 6379 }]
    }
  ],
  egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/24" } }], ports: [{ protocol: "TCP", port: 5978 }] }]
})

const denyIngress = policy("default", "default-deny-ingress", { podSelector: {}, policyTypes: ["Ingress"] })
const allowAllIngress = policy("default", "allow-all-ingress", { podSelector: {}, ingress: [{}], policyTypes: ["Ingress"] })
const denyEgress = policy("default", "default-deny-egress", { podSelector: {}, policyTypes: ["Egress"] })
const allowAllEgress = policy("default", "allow-all-egress", { podSelector: {}, egress: [{}], policyTypes: ["Egress"] })
const denyAll = policy("default", "default-deny-all", { podSelector: {}, policyTypes: ["Ingress", "Egress"] })
const aliceAnd = policy("alice", "and", {
  podSelector: { matchLabels: { role: "server" } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { user: "alice" } }, podSelector: { matchLabels: { role: "client" } } }] }]
})
const aliceOr = policy("alice", "or", {
  podSelector: { matchLabels: { role: "server" } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { user: "bob" } } }, { podSelector: { matchLabels: { role: "client" } } }] }]
})
const portRange = policy("default", "multi-port-egress", {
  podSelector: { matchLabels: { role: "db" } },
  policyTypes: ["Egress"],
  egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/24" } }], ports: [{ protocol: "TCP", port: 32000, endPort: 32768 }] }]
})
const byNamespaceName = policy("default", "from-alice", {
  podSelector: { matchLabels: { role: "db" } },
  ingress: [{ from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "alice" } } }] }]
})
const namedIngress = policy("default", "web-http", { podSelector: { matchLabels: { app: "web" } }, ingress: [{ ports: [{ port: "http" }] }] })
const namedEgress = policy("default", "to-http", {
  podSelector: { matchLabels: { role: "frontend" } },
  policyTypes: ["Egress"],
  egress: [{ ports: [{ port: "http" }, { protocol: "UDP", port: 53 }] }]
})

describe("NetworkPolicy.allows", () => {
  it.each([
    // Nothing selects a pod: everything is allowed.
    ["no policy: any pod to any pod", cluster(), tcp(fromPod(other), fromPod(db), 1), true],
    ["no policy: outside to a pod", cluster(), tcp(fromIp("8.8.8.8"), fromPod(db), 80), true],
    // The concept page's test-network-policy.
    ["test-network-policy: frontend to db:6379", cluster(testNetworkPolicy), tcp(fromPod(frontend), fromPod(db), 6379), true],
    ["test-network-policy: frontend to db on another port", cluster(testNetworkPolicy), tcp(fromPod(frontend), fromPod(db), 6380), false],
    ["test-network-policy: UDP 6379 is another port", cluster(testNetworkPolicy), udp(fromPod(frontend), fromPod(db), 6379), false],
    ["test-network-policy: a pod of a myproject-labelled namespace", cluster(testNetworkPolicy), tcp(fromPod(myproject), fromPod(db), 6379), true],
    ["test-network-policy: an unlabelled pod of db's namespace", cluster(testNetworkPolicy), tcp(fromPod(other), fromPod(db), 6379), false],
    ["test-network-policy: an address in the ipBlock", cluster(testNetworkPolicy), tcp(fromIp("172.17.0.9"), fromPod(db), 6379), true],
    ["test-network-policy: an address in the except hole", cluster(testNetworkPolicy), tcp(fromIp("172.17.1.9"), fromPod(db), 6379), false],
    ["test-network-policy: db egress to 10.0.0.0/24:5978", cluster(testNetworkPolicy), tcp(fromPod(db), fromIp("10.0.0.7"), 5978), true],
    ["test-network-policy: db egress elsewhere", cluster(testNetworkPolicy), tcp(fromPod(db), fromIp("10.0.1.7"), 5978), false],
    ["test-network-policy: pods it does not select are untouched", cluster(testNetworkPolicy), tcp(fromPod(other), fromPod(frontend), 80), true],
    // Defaults.
    ["default-deny-ingress: denies into every pod of the namespace", cluster(denyIngress), tcp(fromPod(frontend), fromPod(db), 6379), false],
    ["default-deny-ingress: not other namespaces", cluster(denyIngress), tcp(fromPod(frontend), fromPod(client), 80), true],
    ["default-deny-ingress: egress stays open", cluster(denyIngress), tcp(fromPod(db), fromIp("1.1.1.1"), 443), true],
    ["allow-all-ingress", cluster(denyIngress, allowAllIngress), tcp(fromIp("1.1.1.1"), fromPod(db), 1), true],
    ["default-deny-egress", cluster(denyEgress), tcp(fromPod(db), fromIp("1.1.1.1"), 443), false],
    ["default-deny-egress: ingress stays open", cluster(denyEgress), tcp(fromPod(client), fromPod(db), 443), true],
    ["allow-all-egress", cluster(denyEgress, allowAllEgress), tcp(fromPod(db), fromIp("1.1.1.1"), 443), true],
    ["default-deny-all: in", cluster(denyAll), tcp(fromPod(client), fromPod(db), 1), false],
    ["default-deny-all: out", cluster(denyAll), tcp(fromPod(db), fromPod(client), 1), false],
    ["both ends: the source's egress can deny what the destination allows", cluster(denyEgress), tcp(fromPod(frontend), fromPod(web), 8080), false],
    // Policies add up.
    ["union: test-network-policy plus deny-ingress still lets frontend in", cluster(denyIngress, testNetworkPolicy), tcp(fromPod(frontend), fromPod(db), 6379), true],
    // namespaceSelector and podSelector together (AND) or apart (OR).
    ["AND: a client of alice", cluster(aliceAnd), tcp(fromPod(client), fromPod(aliceServer), 80), true],
    ["AND: a client of bob is not in alice", cluster(aliceAnd), tcp(fromPod(bobClient), fromPod(aliceServer), 80), false],
    ["OR: any pod of bob", cluster(aliceOr), tcp(fromPod(bobClient), fromPod(aliceServer), 80), true],
    ["OR: a client in the policy's own namespace", cluster(aliceOr), tcp(fromPod(client), fromPod(aliceServer), 80), true],
    ["OR: default's frontend matches neither", cluster(aliceOr), tcp(fromPod(frontend), fromPod(aliceServer), 80), false],
    ["a podSelector peer only names the policy's namespace", cluster(aliceOr), tcp(fromPod(pod("default", "c", "10.1.0.99", { role: "client" })), fromPod(aliceServer), 80), false],
    // Port ranges.
    ["endPort: the first port of the range", cluster(portRange), tcp(fromPod(db), fromIp("10.0.0.1"), 32000), true],
    ["endPort: the last port of the range", cluster(portRange), tcp(fromPod(db), fromIp("10.0.0.1"), 32768), true],
    ["endPort: one past the range", cluster(portRange), tcp(fromPod(db), fromIp("10.0.0.1"), 32769), false],
    // The name label every namespace has.
    ["kubernetes.io/metadata.name selects a namespace by name", cluster(byNamespaceName), tcp(fromPod(bobClient), fromPod(db), 6379), false],
    ["kubernetes.io/metadata.name: alice's pods", cluster(byNamespaceName), tcp(fromPod(client), fromPod(db), 6379), true],
    // Named ports.
    ["named ingress port: resolved on the receiving pod", cluster(namedIngress), tcp(fromPod(other), fromPod(web), 8080), true],
    ["named ingress port: each pod its own number", cluster(namedIngress), tcp(fromPod(other), fromPod(web2), 9090), true],
    ["named ingress port: not another pod's number", cluster(namedIngress), tcp(fromPod(other), fromPod(web2), 8080), false],
    ["named egress port: the destination's number", cluster(namedEgress), tcp(fromPod(frontend), fromPod(web2), 9090), true],
    ["named egress port: a pod without that name", cluster(namedEgress), tcp(fromPod(frontend), fromPod(db), 8080), false],
    ["named egress port: never an outside address", cluster(namedEgress), tcp(fromPod(frontend), fromIp("1.1.1.1"), 8080), false],
    ["numbered egress port beside a named one: any destination", cluster(namedEgress), udp(fromPod(frontend), fromIp("1.1.1.1"), 53), true]
  ])("%s", (_name, c, connection, expected) => {
    expect(NetworkPolicy.allows(c, connection)).toBe(expected)
  })

  it("policyTypes default: a policy without them governs ingress, and egress only with egress rules", () => {
    const ingressOnly = policy("default", "p", { podSelector: {} })
    expect(NetworkPolicy.isIsolated(cluster(ingressOnly), db, "Ingress")).toBe(true)
    expect(NetworkPolicy.isIsolated(cluster(ingressOnly), db, "Egress")).toBe(false)
    const withEgress = policy("default", "p", { podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/8" } }] }] })
    expect(NetworkPolicy.isIsolated(cluster(withEgress), db, "Egress")).toBe(true)
    const egressOnly = policy("default", "p", { podSelector: {}, policyTypes: ["Egress"], ingress: [{}] })
    expect(NetworkPolicy.isIsolated(cluster(egressOnly), db, "Ingress")).toBe(false)
  })
})

describe("NetworkPolicy.resolve", () => {
  it("a pod no policy selects is open both ways", () => {
    expect(NetworkPolicy.resolve(cluster(testNetworkPolicy), frontend)).toEqual({ ingress: { isolated: false, allow: [] }, egress: { isolated: false, allow: [] } })
  })

  it("test-network-policy as concrete CIDRs: the ipBlock with its hole, the namespace's pods and the frontend as /32s", () => {
    const tcp6379 = [{ protocol: "TCP", port: 6379 }]
    expect(NetworkPolicy.resolve(cluster(testNetworkPolicy), db)).toEqual({
      ingress: {
        isolated: true,
        allow: [
          { cidrs: ["10.1.0.11/32"], ports: tcp6379 },
          { cidrs: ["10.1.1.5/32"], ports: tcp6379 },
          { cidrs: ["172.17.0.0/16"], except: ["172.17.1.0/24"], ports: tcp6379 }
        ]
      },
      egress: { isolated: true, allow: [{ cidrs: ["10.0.0.0/24"], ports: [{ protocol: "TCP", port: 5978 }] }] }
    })
  })

  it("deny-all is isolated with nothing allowed; allow-all is one entry without cidrs or ports", () => {
    expect(NetworkPolicy.resolve(cluster(denyAll), db)).toEqual({ ingress: { isolated: true, allow: [] }, egress: { isolated: true, allow: [] } })
    expect(NetworkPolicy.resolve(cluster(denyIngress, allowAllIngress), db).ingress).toEqual({ isolated: true, allow: [{}] })
  })

  it("a peer selector that matches no pod allows nothing (not everyone)", () => {
    const nobody = policy("default", "nobody", { podSelector: { matchLabels: { role: "db" } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: "ghost" } } }] }] })
    expect(NetworkPolicy.resolve(cluster(nobody), db).ingress).toEqual({ isolated: true, allow: [] })
  })

  it("port ranges, named ports and IPv6 peers", () => {
    expect(NetworkPolicy.resolve(cluster(portRange), db).egress.allow).toEqual([{ cidrs: ["10.0.0.0/24"], ports: [{ protocol: "TCP", port: 32000, endPort: 32768 }] }])
    expect(NetworkPolicy.resolve(cluster(namedIngress), web).ingress.allow).toEqual([{ ports: [{ protocol: "TCP", port: 8080 }] }])
    expect(NetworkPolicy.resolve(cluster(namedEgress), frontend).egress.allow).toEqual([
      { cidrs: ["10.1.0.20/32"], ports: [{ protocol: "TCP", port: 8080 }] },
      { cidrs: ["10.1.0.21/32"], ports: [{ protocol: "TCP", port: 9090 }] },
      { ports: [{ protocol: "UDP", port: 53 }] }
    ])
    const v6 = pod("default", "v6", "fd00::0:1", { role: "frontend" })
    const c: NetworkPolicy.Cluster = { policies: [testNetworkPolicy], pods: [db, v6], namespaces }
    expect(NetworkPolicy.resolve(c, db).ingress.allow).toContainEqual({ cidrs: ["fd00::1/128"], ports: [{ protocol: "TCP", port: 6379 }] })
  })

  it("the same rules come out in the same order whatever order the inputs are in (so the agent can compare)", () => {
    const a = NetworkPolicy.resolve(cluster(testNetworkPolicy, denyIngress, namedIngress), db)
    const b = NetworkPolicy.resolve({ policies: [namedIngress, denyIngress, testNetworkPolicy], pods: [...pods].reverse(), namespaces }, db)
    expect(JSON.stringify(b)).toBe(JSON.stringify(a))
  })

  it("a peer pod's new label or address changes the rules", () => {
    const c = cluster(testNetworkPolicy)
    const before = NetworkPolicy.resolve(c, db)
    const relabelled = { ...c, pods: c.pods.map((p) => (p === other ? { ...p, labels: { role: "frontend" } } : p)) }
    expect(NetworkPolicy.resolve(relabelled, db).ingress.allow[0]).toEqual({ cidrs: ["10.1.0.11/32", "10.1.0.12/32"], ports: [{ protocol: "TCP", port: 6379 }] })
    const moved = { ...c, pods: c.pods.map((p) => (p === frontend ? { ...p, ips: ["10.1.0.77"] } : p)) }
    expect(NetworkPolicy.resolve(moved, db)).not.toEqual(before)
  })

  // The resolution must mean exactly what the policies say: for every pair of endpoints and a few
  // ports, the runtime's reading of the resolved rules (`permits`) agrees with `allows`.
  it.each([
    ["test-network-policy", [testNetworkPolicy]],
    ["deny all", [denyAll]],
    ["deny ingress + allow all ingress", [denyIngress, allowAllIngress]],
    ["AND", [aliceAnd]],
    ["OR", [aliceOr]],
    ["port range", [portRange]],
    ["namespace by name", [byNamespaceName]],
    ["named ports", [namedIngress, namedEgress]],
    ["everything at once", [testNetworkPolicy, aliceAnd, aliceOr, portRange, byNamespaceName, namedIngress, namedEgress, denyEgress]]
  ])("resolution agrees with evaluation: %s", (_name, policies) => {
    const c = cluster(...policies)
    const outside = ["172.17.0.9", "172.17.1.9", "10.0.0.7", "8.8.8.8"].map(fromIp)
    const ends: ReadonlyArray<NetworkPolicy.Endpoint> = [...pods.map(fromPod), ...outside]
    const ports = [53, 5978, 6379, 8080, 9090, 32000, 32768, 40000]
    const rules = new Map(pods.map((p) => [p, NetworkPolicy.resolve(c, p)]))
    let checked = 0
    for (const from of ends)
      for (const to of ends) {
        if (from === to || (!("pod" in from) && !("pod" in to))) continue
        for (const port of ports)
          for (const protocol of ["TCP", "UDP"] as const) {
            const conn = { from, to, protocol, port }
            const fromIpOf = "pod" in from ? from.pod.ips[0]! : from.ip
            const toIpOf = "pod" in to ? to.pod.ips[0]! : to.ip
            const egress = "pod" in from ? NetworkPolicy.permits(rules.get(from.pod)!.egress, toIpOf, protocol, port) : true
            const ingress = "pod" in to ? NetworkPolicy.permits(rules.get(to.pod)!.ingress, fromIpOf, protocol, port) : true
            if ((egress && ingress) !== NetworkPolicy.allows(c, conn)) {
              expect.fail(`${fromIpOf} -> ${toIpOf} ${protocol}/${port}: resolved rules say ${egress && ingress}`)
            }
            checked++
          }
      }
    expect(checked).toBeGreaterThan(1000)
  })
})

describe("NetworkPolicy.podView", () => {
  const base = {
    metadata: { namespace: "default", name: "p", labels: { a: "b" } },
    spec: { containers: [{ name: "c", image: "x", ports: [{ name: "http", containerPort: 80 }, { containerPort: 53, protocol: "UDP" }] }] },
    status: { phase: "Running", podIP: "10.1.0.5", podIPs: [{ ip: "10.1.0.5" }, { ip: "fd00::5" }] }
  } as unknown as Pod.Pod
  it("takes addresses, labels and ports (TCP by default)", () => {
    expect(NetworkPolicy.podView(base)).toEqual({
      namespace: "default",
      name: "p",
      labels: { a: "b" },
      ips: ["10.1.0.5", "fd00::5"],
      ports: [{ name: "http", port: 80, protocol: "TCP" }, { port: 53, protocol: "UDP" }]
    })
  })
  it("host-network and finished pods have no address of their own", () => {
    expect(NetworkPolicy.podView({ ...base, spec: { ...base.spec, hostNetwork: true } }).ips).toEqual([])
    expect(NetworkPolicy.podView({ ...base, status: { ...base.status, phase: "Succeeded" } }).ips).toEqual([])
  })
})
