import { describe, expect, it } from "@effect/vitest"
import type * as Informer from "../../src/informer/Informer.js"
import { Decisions } from "../../src/scheduler/Decisions.js"
import * as EventHandlers from "../../src/scheduler/EventHandlers.js"
import type * as Queue from "../../src/scheduler/Queue.js"
import * as Snapshot from "../../src/scheduler/Snapshot.js"
import { nodeJson, podJson } from "./plugins/fixtures.js"

/** A queue that records what the handlers asked of it. */
const recordingQueue = () => {
  const calls: Array<string> = []
  const queue = {
    add: (p: Snapshot.PodInfo) => void calls.push(`add ${p.name}`),
    update: (p: Snapshot.PodInfo) => void calls.push(`update ${p.name}`),
    delete: (uid: string) => void calls.push(`delete ${uid}`),
    moveOnEvent: (e: Queue.ClusterEvent | ReadonlyArray<Queue.ClusterEvent>) => {
      for (const x of Array.isArray(e) ? e : [e as Queue.ClusterEvent]) calls.push(`event ${x.resource}/${x.action}${x.what === undefined ? "" : `/${x.what}`}`)
      return 0
    }
  } as unknown as Queue.SchedulingQueue // only the methods the handlers call
  return { calls, queue }
}

const setup = () => {
  const { calls, queue } = recordingQueue()
  const cache = Snapshot.Cache.make()
  const nominatedNodes = new Set<string>()
  const deps: EventHandlers.Deps = { cache, queue, decisions: new Decisions(10), names: new Set(["default-scheduler"]), nominatedNodes }
  return { calls, cache, nominatedNodes, onNode: EventHandlers.onNode(deps), onPod: EventHandlers.onPod(deps) }
}
const change = (type: Informer.Change["type"], object: Record<string, unknown>, old?: Record<string, unknown>): Informer.Change => ({ type, object, old })
const withName = (p: Record<string, unknown>, uid: string) => ({ ...p, metadata: { ...(p["metadata"] as object), uid } })

describe("EventHandlers.onNode", () => {
  it("feeds the cache and tells the queue what changed", () => {
    const { calls, cache, onNode } = setup()
    const n = nodeJson({ name: "n1" })
    onNode(change("ADDED", n))
    expect(cache.snapshot().get("n1")?.name).toBe("n1")
    onNode(change("MODIFIED", { ...n, spec: { unschedulable: true } }, n))
    onNode(change("DELETED", n, n))
    expect(cache.snapshot().get("n1")).toBeUndefined()
    expect(calls).toEqual(["event Node/Add", "event Node/Update/Taint", "event Node/Delete"])
  })
})

describe("EventHandlers.onPod", () => {
  const pending = withName(podJson({ name: "p" }), "uid-p")
  const bound = withName(podJson({ name: "b", spec: { nodeName: "n1" } }), "uid-b")
  it.each([
    { name: "a pending pod of ours is queued", c: change("ADDED", pending), calls: ["add p"] },
    { name: "a pending pod's update updates it", c: change("MODIFIED", pending, pending), calls: ["update p"] },
    {
      name: "a pod of another scheduler is not ours",
      c: change("ADDED", withName(podJson({ name: "o", spec: { schedulerName: "other" } }), "uid-o")),
      calls: ["delete uid-o"]
    },
    { name: "an assigned pod appearing is a Pod Add", c: change("ADDED", bound), calls: ["delete uid-b", "event Pod/Add"] },
    { name: "a pod becoming assigned is a Pod Add", c: change("MODIFIED", bound, withName(podJson({ name: "b" }), "uid-b")), calls: ["delete uid-b", "event Pod/Add"] },
    {
      name: "an assigned pod's label change",
      c: change("MODIFIED", { ...bound, metadata: { ...(bound["metadata"] as object), labels: { a: "b" } } }, bound),
      calls: ["delete uid-b", "event Pod/Update/Label"]
    },
    { name: "an assigned pod finishing frees its room", c: change("MODIFIED", { ...bound, status: { phase: "Succeeded" } }, bound), calls: ["delete uid-b", "event Pod/Delete"] },
    { name: "an assigned pod deleted frees its room", c: change("DELETED", bound, bound), calls: ["delete uid-b", "event Pod/Delete"] },
    { name: "a pending pod deleted leaves the queue", c: change("DELETED", pending, pending), calls: ["delete uid-p"] }
  ])("$name", ({ c, calls: expected }) => {
    const { calls, onPod } = setup()
    onPod(c)
    expect(calls).toEqual(expected)
  })

  it("a bound pod is counted in the cache; a pending pod's nomination marks its node", () => {
    const { cache, nominatedNodes, onNode, onPod } = setup()
    onNode(change("ADDED", nodeJson({ name: "n1" })))
    onPod(change("ADDED", bound))
    expect(cache.snapshot().get("n1")?.pods.map((p) => p.name)).toEqual(["b"])
    onPod(change("ADDED", { ...withName(podJson({ name: "q" }), "uid-q"), status: { nominatedNodeName: "n2" } }))
    expect([...nominatedNodes]).toEqual(["n2"])
  })
})
