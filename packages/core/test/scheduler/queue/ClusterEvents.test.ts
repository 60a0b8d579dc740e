import { describe, expect, it } from "@effect/vitest"
import * as ClusterEvents from "../../../src/scheduler/queue/ClusterEvents.js"

const { event } = ClusterEvents

describe("ClusterEvents.matches", () => {
  it.each([
    { interest: event("Node", "Add"), event: event("Node", "Add"), yes: true },
    { interest: event("Node", "Add"), event: event("Node", "Delete"), yes: false },
    { interest: event("Node", "Update", "Taint"), event: event("Node", "Update", "Label"), yes: false },
    { interest: event("Node", "Update", "Taint"), event: event("Node", "Update"), yes: true },
    { interest: event("Node", "Update"), event: event("Node", "Update", "Label"), yes: true },
    { interest: event("Pod", "Delete"), event: ClusterEvents.anyEvent, yes: true },
    { interest: event("*", "*"), event: event("PersistentVolume", "Add"), yes: true }
  ])("$interest.resource/$interest.action/$interest.what ← $event.resource/$event.action/$event.what: $yes", ({ interest, event: e, yes }) => {
    expect(ClusterEvents.matches(interest, e)).toBe(yes)
  })
})

describe("ClusterEvents of updates", () => {
  const node = (extra: { labels?: object; annotations?: object; spec?: object; status?: object }) => ({
    metadata: { name: "n", labels: extra.labels, annotations: extra.annotations },
    spec: extra.spec ?? {},
    status: extra.status ?? {}
  })
  it.each([
    { name: "nothing", next: node({}), what: [] },
    { name: "labels", next: node({ labels: { a: "b" } }), what: ["Label"] },
    { name: "taints", next: node({ spec: { taints: [{ key: "k", effect: "NoSchedule" }] } }), what: ["Taint"] },
    { name: "cordon", next: node({ spec: { unschedulable: true } }), what: ["Taint"] },
    { name: "allocatable", next: node({ status: { allocatable: { cpu: "2" } } }), what: ["Allocatable"] },
    { name: "a condition's status", next: node({ status: { conditions: [{ type: "Ready", status: "True" }] } }), what: ["Condition"] },
    { name: "annotations and labels", next: node({ labels: { a: "b" }, annotations: { x: "y" } }), what: ["Label", "Annotation"] }
  ])("a node's $name", ({ next, what }) => {
    expect(ClusterEvents.nodeUpdateEvents(node({}), next).map((e) => e.what)).toEqual(what)
  })

  it("a pod's labels and container requests", () => {
    const pod = (labels: object, cpu: string) => ({ metadata: { labels }, spec: { containers: [{ name: "c", resources: { requests: { cpu } } }] } })
    expect(ClusterEvents.podUpdateEvents(pod({}, "1"), pod({}, "1"))).toEqual([])
    expect(ClusterEvents.podUpdateEvents(pod({}, "1"), pod({ a: "b" }, "500m")).map((e) => e.what)).toEqual(["Label", "Request"])
  })
})
