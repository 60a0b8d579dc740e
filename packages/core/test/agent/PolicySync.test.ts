import { describe, expect, it } from "@effect/vitest"
import * as PolicySync from "../../src/agent/PolicySync.js"
import type * as NetworkPolicyModel from "../../src/model/NetworkPolicy.js"
import type * as Pod from "../../src/model/Pod.js"
import type * as NetworkPolicy from "../../src/policy/NetworkPolicyRules.js"

const pod = (name: string, labels: Record<string, string>, ip: string): Pod.Pod =>
  ({ metadata: { name, namespace: "default", uid: `uid-${name}`, labels }, spec: { containers: [{ name: "c", image: "x" }] }, status: { phase: "Running", podIP: ip } }) as unknown as Pod.Pod

const policy: NetworkPolicyModel.NetworkPolicy = {
  apiVersion: "networking.k8s.io/v1",
  kind: "NetworkPolicy",
  metadata: { name: "p", namespace: "default" },
  spec: { podSelector: { matchLabels: { app: "b" } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: "a" } } }] }] }
}

const a = pod("a", { role: "a" }, "10.0.0.1")
const b = pod("b", { app: "b" }, "10.0.0.2")
const c = pod("c", {}, "10.0.0.3")
const cluster = (policies: ReadonlyArray<NetworkPolicyModel.NetworkPolicy>, pods: ReadonlyArray<Pod.Pod>): NetworkPolicy.Cluster => ({
  policies,
  pods: pods.map((p) => ({ namespace: "default", name: p.metadata.name!, labels: p.metadata.labels ?? {}, ips: [p.status!.podIP!], ports: [] })),
  namespaces: new Map([["default", {}]])
})
const local = [a, b, c].map((p) => ({ uid: p.metadata.uid!, pod: p }))
const keyOf = (cl: NetworkPolicy.Cluster, p: Pod.Pod) => PolicySync.desired(cl, p).key

describe("PolicySync.decide", () => {
  const withPolicy = cluster([policy], [a, b, c])
  const open = cluster([], [a, b, c])
  it.each([
    ["no policy, nothing applied: no call", open, new Map<string, string>(), [], []],
    ["a policy selects b: only b", withPolicy, new Map<string, string>(), ["uid-b"], []],
    ["b already has these rules: nothing", withPolicy, new Map([["uid-b", keyOf(withPolicy, b)]]), [], []],
    ["b's rules changed (c got the label)", cluster([policy], [a, b, { ...c, metadata: { ...c.metadata, labels: { role: "a" } } }]), new Map([["uid-b", keyOf(withPolicy, b)]]), ["uid-b"], []],
    ["the policy went: b is opened again", open, new Map([["uid-b", keyOf(withPolicy, b)]]), ["uid-b"], []],
    ["a pod gone from the node is forgotten", open, new Map([["uid-gone", "{}"]]), [], ["uid-gone"]]
  ])("%s", (_name, cl, applied, apply, forget) => {
    const d = PolicySync.decide(cl, local, applied)
    expect(d.apply.map((x) => x.uid)).toEqual(apply)
    expect(d.forget).toEqual(forget)
  })

  it("strict blocks only selected pods", () => {
    expect(PolicySync.onFailure(PolicySync.desired(withPolicy, b), true)).toBe("block")
    expect(PolicySync.onFailure(PolicySync.desired(withPolicy, c), true)).toBe("warn")
    expect(PolicySync.onFailure(PolicySync.desired(withPolicy, b), false)).toBe("warn")
  })
})
