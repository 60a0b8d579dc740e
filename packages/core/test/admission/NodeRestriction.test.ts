import { describe, expect, it } from "vitest"
import * as NodeRestriction from "../../src/admission/NodeRestriction.js"
import { admin, nodeUser, request } from "./requests.js"

const n1 = nodeUser("n1")
const boundTo = (node: string) => ({ spec: { nodeName: node } })

describe("NodeRestriction.decide", () => {
  const cases: ReadonlyArray<[string, ReturnType<typeof request>, string | undefined]> = [
    ["a non-node user", request("UPDATE", "", "nodes", { name: "n2" }), undefined],
    ["own node", request("UPDATE", "", "nodes", { user: n1, name: "n1" }), undefined],
    ["other node", request("UPDATE", "", "nodes", { user: n1, name: "n2" }), 'node "n1" is not allowed to modify node "n2"'],
    ["delete other node", request("DELETE", "", "nodes", { user: n1, name: "n2" }), 'node "n1" is not allowed to modify node "n2"'],
    [
      "reserved label",
      request("UPDATE", "", "nodes", { user: n1, name: "n1", object: { metadata: { labels: { "node-restriction.kubernetes.io/x": "y" } } }, oldObject: { metadata: {} } }),
      "is not allowed to modify labels: node-restriction.kubernetes.io/x"
    ],
    ["unchanged reserved label", request("UPDATE", "", "nodes", { user: n1, name: "n1", object: { metadata: { labels: { "a.node-restriction.kubernetes.io/x": "y" } } }, oldObject: { metadata: { labels: { "a.node-restriction.kubernetes.io/x": "y" } } } }), undefined],
    [
      "own taints",
      request("UPDATE", "", "nodes", { user: n1, name: "n1", object: { spec: {} }, oldObject: { spec: { taints: [{ key: "dedicated", value: "db", effect: "NoSchedule" }] } } }),
      'node "n1" is not allowed to modify taints'
    ],
    ["unchanged taints", request("UPDATE", "", "nodes", { user: n1, name: "n1", object: { spec: { taints: [{ key: "k", effect: "NoSchedule" }] } }, oldObject: { spec: { taints: [{ effect: "NoSchedule", key: "k" }] } } }), undefined],
    ["registering with taints", request("CREATE", "", "nodes", { user: n1, name: "n1", object: { spec: { taints: [{ key: "k", effect: "NoSchedule" }] } } }), undefined],
    ["create a pod", request("CREATE", "", "pods", { user: n1, namespace: "a", name: "p", object: boundTo("n1") }), 'pod does not have "kubernetes.io/config.mirror" annotation, node "n1" can only create mirror pods'],
    ["own pod status", request("UPDATE", "", "pods", { user: n1, subresource: "status", name: "p", object: boundTo("n1"), oldObject: boundTo("n1") }), undefined],
    ["own pod spec", request("UPDATE", "", "pods", { user: n1, name: "p", object: boundTo("n1"), oldObject: boundTo("n1") }), 'node "n1" can only update pod status'],
    ["other pod status", request("UPDATE", "", "pods", { user: n1, subresource: "status", name: "p", object: boundTo("n2"), oldObject: boundTo("n2") }), 'node "n1" can only update pod status for pods with spec.nodeName set to itself'],
    ["delete own pod", request("DELETE", "", "pods", { user: n1, name: "p", object: boundTo("n1"), oldObject: boundTo("n1") }), undefined],
    ["delete other pod", request("DELETE", "", "pods", { user: n1, name: "p", object: boundTo("n2"), oldObject: boundTo("n2") }), 'node "n1" can only delete pods with spec.nodeName set to itself'],
    ["own lease", request("UPDATE", "coordination.k8s.io", "leases", { user: n1, namespace: "kube-node-lease", name: "n1" }), undefined],
    ["other lease", request("UPDATE", "coordination.k8s.io", "leases", { user: n1, namespace: "kube-node-lease", name: "n2" }), "can only access node lease with the same name as the requesting node"],
    ["lease elsewhere", request("CREATE", "coordination.k8s.io", "leases", { user: n1, namespace: "default", name: "n1" }), 'can only access leases in the "kube-node-lease" namespace'],
    ["other resources are RBAC's", request("CREATE", "", "configmaps", { user: n1, namespace: "a", name: "c" }), undefined],
    [
      "a volume's finalizer removed",
      request("UPDATE", "", "persistentvolumes", { user: n1, name: "pv", object: { metadata: { name: "pv", finalizers: [], resourceVersion: "2" }, spec: { a: 1 } }, oldObject: { metadata: { name: "pv", finalizers: ["x"], resourceVersion: "1" }, spec: { a: 1 } } }),
      undefined
    ],
    [
      "a volume's spec changed",
      request("UPDATE", "", "persistentvolumes", { user: n1, name: "pv", object: { metadata: { name: "pv" }, spec: { claimRef: { name: "mine" } } }, oldObject: { metadata: { name: "pv" }, spec: {} } }),
      'node "n1" can only remove finalizers of persistentvolumes'
    ]
  ]
  it.each(cases)("%s", (_what, req, message) => expect(NodeRestriction.decide(req)).toBe(message))

  it("recognises node identities only with the system:nodes group", () => {
    expect(NodeRestriction.nodeOf(n1)).toBe("n1")
    expect(NodeRestriction.nodeOf({ ...n1, groups: [] })).toBeUndefined()
    expect(NodeRestriction.nodeOf(admin)).toBeUndefined()
    expect(NodeRestriction.nodeOf({ name: "system:node:", uid: "", groups: ["system:nodes"] })).toBeUndefined()
  })
})
