import { describe, expect, it } from "vitest"
import type * as Authz from "../../src/api/Authz.js"
import * as MemberAuthorizer from "../../src/federation/MemberAuthorizer.js"
import * as MemberHealth from "../../src/federation/MemberHealth.js"
import * as MemberSigner from "../../src/federation/MemberSigner.js"
import * as MemberStatus from "../../src/federation/MemberStatus.js"
import * as WorkApply from "../../src/federation/WorkApply.js"
import * as Federation from "../../src/model/Federation.js"

type Json = Record<string, any>

const member = (name: string) => ({ name: `system:member:${name}`, uid: "", groups: ["system:members", "system:authenticated"] })
const attrs = (verb: string, apiGroup: string, resource: string, namespace: string, name: string, extra: Partial<Authz.Attributes> = {}): Authz.Attributes => ({
  user: member("east"),
  verb,
  resourceRequest: true,
  apiGroup,
  apiVersion: "v1",
  resource,
  subresource: "",
  namespace,
  name,
  path: "/",
  ...extra
})
const fed = Federation.Group

describe("MemberAuthorizer.decide", () => {
  const cases: ReadonlyArray<readonly [string, Authz.Attributes, boolean | undefined]> = [
    ["its own MemberCluster", attrs("get", fed, "memberclusters", "", "east"), true],
    ["its own status", attrs("patch", fed, "memberclusters", "", "east", { subresource: "status" }), true],
    ["another member's entry", attrs("get", fed, "memberclusters", "", "west"), false],
    ["listing every member", attrs("list", fed, "memberclusters", "", ""), false],
    ["deleting itself", attrs("delete", fed, "memberclusters", "", "east"), false],
    ["its Works", attrs("list", fed, "works", "fleet-member-east", ""), true],
    ["watching its Works", attrs("watch", fed, "works", "fleet-member-east", ""), true],
    ["its Work's status", attrs("update", fed, "works", "fleet-member-east", "web", { subresource: "status" }), true],
    ["changing its Work's spec", attrs("update", fed, "works", "fleet-member-east", "web"), false],
    ["another member's Works", attrs("list", fed, "works", "fleet-member-west", ""), false],
    ["its heartbeat lease", attrs("update", "coordination.k8s.io", "leases", "fleet-member-east", "member"), true],
    ["a lease elsewhere", attrs("update", "coordination.k8s.io", "leases", "kube-system", "x"), false],
    ["Secrets", attrs("get", "", "secrets", "fleet-member-east", "x"), false],
    ["a renewal request", attrs("create", "certificates.k8s.io", "certificatesigningrequests", "", ""), true],
    ["reading its own request", attrs("get", "certificates.k8s.io", "certificatesigningrequests", "", "member-east-ab12"), true],
    ["reading another's request", attrs("get", "certificates.k8s.io", "certificatesigningrequests", "", "member-west-ab12"), false],
    ["approving requests", attrs("update", "certificates.k8s.io", "certificatesigningrequests", "", "member-east-ab12", { subresource: "approval" }), false],
    ["a non-resource path", attrs("get", "", "", "", "", { resourceRequest: false, path: "/metrics" }), false],
    ["not a member", attrs("get", "", "secrets", "x", "y", { user: { name: "alice", uid: "", groups: ["system:authenticated"] } }), undefined],
    ["a member name without the members group", attrs("get", fed, "memberclusters", "", "east", { user: { name: "system:member:east", uid: "", groups: [] } }), undefined]
  ]
  for (const [name, a, want] of cases) it(name, () => expect(MemberAuthorizer.decide(a)?.allowed).toBe(want))
})

describe("MemberHealth.decide", () => {
  const now = Date.parse("2026-12-07T12:00:00Z")
  const mc = (over: Json = {}): Json => ({
    metadata: { name: "east", creationTimestamp: "2026-12-07T11:00:00Z" },
    spec: { syncMode: "Pull", taints: over["taints"] ?? [] },
    status: { conditions: over["conditions"] ?? [{ type: "Joined", status: "True" }, { type: "Ready", status: "True" }] }
  })
  const lease = (agoMs: number) => ({ spec: { renewTime: new Date(now - agoMs).toISOString() } })
  it("a fresh lease: nothing to change, look again when the grace period would end", () => {
    const d = MemberHealth.decide(mc(), lease(10_000), now, { gracePeriodMs: 40_000 })
    expect(d).toEqual({ ready: undefined, taints: undefined, requeueAfterMs: 30_050 })
  })
  it("a stale lease: Ready Unknown and the unreachable taint, NoSchedule only, other taints kept", () => {
    const d = MemberHealth.decide(mc({ taints: [{ key: "team", effect: "NoSchedule" }] }), lease(41_000), now, { gracePeriodMs: 40_000 })
    expect(d.ready).toMatchObject({ type: "Ready", status: "Unknown", reason: "MemberStatusUnknown" })
    expect(d.taints).toEqual([{ key: "team", effect: "NoSchedule" }, { key: Federation.UnreachableTaint, effect: "NoSchedule", timeAdded: "2026-12-07T12:00:00Z" }])
    expect(d.taints?.some((t) => t.effect === "NoExecute")).toBe(false)
  })
  it("already Unknown and tainted: nothing more", () => {
    const d = MemberHealth.decide(mc({ taints: [{ key: Federation.UnreachableTaint, effect: "NoSchedule" }], conditions: [{ type: "Joined", status: "True" }, { type: "Ready", status: "Unknown", reason: "MemberStatusUnknown" }] }), lease(60_000), now)
    expect(d.ready).toBeUndefined()
    expect(d.taints).toBeUndefined()
  })
  it("the lease moves again: the taint goes (Ready is the member's to report)", () => {
    const d = MemberHealth.decide(mc({ taints: [{ key: Federation.UnreachableTaint, effect: "NoSchedule" }] }), lease(1_000), now)
    expect(d.taints).toEqual([])
  })
  it("a member that reports not Ready is tainted not-ready", () => {
    const d = MemberHealth.decide(mc({ conditions: [{ type: "Joined", status: "True" }, { type: "Ready", status: "False" }] }), lease(1_000), now)
    expect(d.taints?.map((t) => t.key)).toEqual([Federation.NotReadyTaint])
  })
  it("a member never joined is not marked Unknown", () => {
    const d = MemberHealth.decide({ metadata: { name: "x", creationTimestamp: "2026-12-07T10:00:00Z" }, spec: { syncMode: "Push" }, status: {} }, undefined, now)
    expect(d.ready).toBeUndefined()
  })
})

describe("MemberSigner.decide", () => {
  const csr = (over: { groups?: ReadonlyArray<string>; username?: string; approved?: boolean; denied?: boolean; certificate?: string; signer?: string } = {}): Json => ({
    metadata: { name: "member-east-1" },
    spec: { signerName: over.signer ?? "federation.fleet.koder.dev/member", request: "", username: over.username ?? "system:bootstrap:abc", groups: over.groups ?? ["system:bootstrappers", "system:authenticated"] },
    status: {
      ...(over.certificate === undefined ? {} : { certificate: over.certificate }),
      conditions: [...(over.approved ? [{ type: "Approved", status: "True" }] : []), ...(over.denied ? [{ type: "Denied", status: "True" }] : [])]
    }
  })
  const good = { commonName: "system:member:east", organizations: ["system:members"] }
  const none = () => false
  const cases: ReadonlyArray<readonly [string, Json, typeof good | string, (n: string) => boolean, MemberSigner.Decision["_tag"]]> = [
    ["pending: wait for an administrator", csr(), good, none, "None"],
    ["approved: sign", csr({ approved: true }), good, none, "Sign"],
    ["another signer's request", csr({ approved: true, signer: "kubernetes.io/kube-apiserver-client" }), good, none, "None"],
    ["denied", csr({ denied: true }), good, none, "None"],
    ["already issued", csr({ approved: true, certificate: "x" }), good, none, "None"],
    ["a subject that is not a member's", csr({ approved: true }), { commonName: "admin", organizations: ["system:masters"] }, none, "Fail"],
    ["a member with extra groups", csr({ approved: true }), { commonName: "system:member:east", organizations: ["system:members", "system:masters"] }, none, "Fail"],
    ["asked by someone who is neither a join-token holder nor the member", csr({ approved: true, username: "bob", groups: ["system:authenticated"] }), good, none, "Fail"],
    ["an unreadable request", csr({ approved: true }), "bad signature", none, "Fail"],
    ["the member renewing its own: approved by the signer", csr({ username: "system:member:east", groups: ["system:members"] }), good, (n) => n === "east", "Approve"],
    ["a renewal for a member that is gone: left to an administrator", csr({ username: "system:member:east", groups: ["system:members"] }), good, none, "None"]
  ]
  for (const [name, c, subject, exists, tag] of cases) it(name, () => expect(MemberSigner.decide(c, subject, exists)._tag).toBe(tag))
  it("an administrator's rule approves matching new members asked with a join token, and no one else", () => {
    const rule = (m: string) => /^(?:east|lab-.*)$/.test(m)
    expect(MemberSigner.decide(csr(), good, none, rule)).toEqual({ _tag: "Approve", reason: "AutoApproveRule" })
    expect(MemberSigner.decide(csr(), { ...good, commonName: "system:member:west" }, none, rule)._tag).toBe("None")
    expect(MemberSigner.decide(csr({ username: "bob", groups: ["system:authenticated"] }), good, none, rule)._tag).toBe("Fail")
  })
})

describe("MemberStatus.summarize", () => {
  const node = (name: string, cpu: string, memory: string, ready = true): Json => ({
    metadata: { name },
    status: { capacity: { cpu, memory, pods: "110" }, allocatable: { cpu, memory, pods: "110" }, conditions: [{ type: "Ready", status: ready ? "True" : "False" }] }
  })
  const pod = (nodeName: string, cpu: string, phase = "Running"): Json => ({ spec: { nodeName, containers: [{ resources: { requests: { cpu } } }] }, status: { phase } })
  it("sums nodes, counts ready ones, adds the requests of live bound pods, and groups nodes by shape", () => {
    const s = MemberStatus.summarize([node("a", "4", "8Gi"), node("b", "4", "8Gi", false), node("c", "16", "64Gi")], [pod("a", "1"), pod("a", "500m"), pod("c", "2"), pod("c", "8", "Succeeded"), { spec: { containers: [] }, status: {} }])
    expect(s.nodeCount).toBe(3)
    expect(s.readyNodeCount).toBe(2)
    expect(s.resources.capacity).toEqual({ cpu: "24", memory: "80Gi", pods: "330" })
    expect(s.resources.allocated).toEqual({ cpu: "3500m" })
    expect(s.nodeModels).toEqual([
      { allocatable: { cpu: "4", memory: "8Gi" }, free: { cpu: "4", memory: "8Gi", pods: "110" }, count: 2 },
      { allocatable: { cpu: "16", memory: "64Gi" }, free: { cpu: "14", memory: "64Gi", pods: "108" }, count: 1 }
    ])
  })
})

describe("WorkApply", () => {
  it("stamps a manifest as the member's, keeping its own labels and dropping server fields", () => {
    const out = WorkApply.stamp({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", resourceVersion: "9", uid: "u", labels: { app: "x" } } }, { name: "web", generation: 3 }, { name: "east", region: "eu" })
    expect(out["metadata"]).toEqual({
      name: "c",
      labels: { app: "x", [WorkApply.WorkLabel]: "web", [Federation.MemberLabel]: "east", "fleet.koder.dev/region": "eu" },
      annotations: { [WorkApply.GenerationAnnotation]: "3" }
    })
  })
  const cases: ReadonlyArray<readonly [string, Json, boolean]> = [
    ["a Deployment with its replicas available", { kind: "Deployment", metadata: { generation: 2 }, spec: { replicas: 2 }, status: { observedGeneration: 2, availableReplicas: 2 } }, true],
    ["a Deployment short of replicas", { kind: "Deployment", metadata: { generation: 2 }, spec: { replicas: 2 }, status: { observedGeneration: 2, availableReplicas: 1 } }, false],
    ["a Deployment whose controller lags its spec", { kind: "Deployment", metadata: { generation: 3 }, spec: { replicas: 1 }, status: { observedGeneration: 2, availableReplicas: 1 } }, false],
    ["a StatefulSet with ready replicas", { kind: "StatefulSet", metadata: { generation: 1 }, spec: { replicas: 1 }, status: { observedGeneration: 1, readyReplicas: 1 } }, true],
    ["a failed Job", { kind: "Job", status: { conditions: [{ type: "Failed", status: "True", message: "BackoffLimitExceeded" }] } }, false],
    ["a ConfigMap (exists)", { kind: "ConfigMap" }, true]
  ]
  for (const [name, o, want] of cases) it(`availability: ${name}`, () => expect(WorkApply.availability(o).available).toBe(want))
  it("identifies manifests by group, kind, namespace and name", () => {
    const a = WorkApply.identify({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web", namespace: "default" } }, 0)
    expect(a).toEqual({ ordinal: 0, group: "apps", version: "v1", kind: "Deployment", namespace: "default", name: "web" })
    expect(WorkApply.sameObject(a, { ...a, ordinal: 4, version: "v2" })).toBe(true)
    expect(WorkApply.sameObject(a, { ...a, name: "api" })).toBe(false)
  })
})

describe("Federation validation", () => {
  it("Push members need an endpoint and a kubeconfig Secret; names fit a namespace", () => {
    const errors = Federation.validateMemberCluster({ apiVersion: Federation.ApiVersion, kind: "MemberCluster", metadata: { name: "Bad_Name" }, spec: { syncMode: "Push" } })
    expect(errors.map((e) => e.path)).toEqual(["metadata.name", "spec.apiEndpoint", "spec.secretRef"])
  })
  it("the co-located member (reached in-process) needs no Secret; it still needs an endpoint", () => {
    const colocated = (spec: Record<string, unknown>) =>
      Federation.validateMemberCluster({ apiVersion: Federation.ApiVersion, kind: "MemberCluster", metadata: { name: "solo", annotations: { [Federation.CoLocatedAnnotation]: "true" } }, spec: { syncMode: "Push", ...spec } })
    expect(colocated({ apiEndpoint: "https://127.0.0.1:9300" })).toEqual([])
    expect(colocated({}).map((e) => e.path)).toEqual(["spec.apiEndpoint"])
  })
  it("a Work lives in a member namespace and names each manifest once", () => {
    const m = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }
    const errors = Federation.validateWork({ apiVersion: Federation.ApiVersion, kind: "Work", metadata: { name: "w", namespace: "default" }, spec: { workload: { manifests: [m, m, { kind: "X" }] } } })
    expect(errors.map((e) => e.path)).toEqual(["metadata.namespace", "spec.workload.manifests[1]", "spec.workload.manifests[2].apiVersion", "spec.workload.manifests[2].metadata.name"])
  })
})
