import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { Timer } from "../../src/informer/WorkQueue.js"
import * as Queue from "../../src/scheduler/Queue.js"
import type { PodInfo, Resources } from "../../src/scheduler/Snapshot.js"

const none: Resources = { milliCpu: 0, memory: 0, ephemeralStorage: 0, pods: 1, scalar: {} }

/** A pending pod as the scheduler reads it (local fixture). */
const pod = (name: string, priority = 0, extra: { spec?: Record<string, unknown>; status?: Record<string, unknown>; labels?: Record<string, string>; nodeName?: string } = {}): PodInfo => ({
  pod: {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default", uid: `uid-${name}`, labels: extra.labels ?? {} },
    spec: { containers: [{ name: "c", image: "x" }], ...extra.spec },
    status: extra.status ?? {}
  },
  namespace: "default",
  name,
  uid: `uid-${name}`,
  labels: extra.labels ?? {},
  requests: none,
  priority,
  nodeName: extra.nodeName
})

/** A clock and timer driven by hand. */
const manual = () => {
  let now = 0
  const timers: Array<{ at: number; run: () => void; live: boolean }> = []
  const timer: Timer = (ms, run) => {
    const t = { at: now + ms, run, live: true }
    timers.push(t)
    return () => void (t.live = false)
  }
  const advance = (ms: number) => {
    const end = now + ms
    for (;;) {
      const due = timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      now = Math.max(now, due.at)
      due.live = false
      due.run()
    }
    now = end
  }
  return { now: () => now, timer, advance, live: () => timers.filter((t) => t.live).length }
}

const setup = (options: Queue.Options = {}) => {
  const clock = manual()
  const q = Queue.make({ now: clock.now, timer: clock.timer, ...options })
  return { q, clock }
}

const node = (action: Queue.EventAction, what?: Queue.EventAspect): Queue.ClusterEvent => (what === undefined ? { resource: "Node", action } : { resource: "Node", action, what })

const names = (q: Queue.SchedulingQueue, n: number) =>
  Effect.gen(function* () {
    const out: Array<string> = []
    for (let i = 0; i < n; i++) out.push((yield* q.pop).pod.name)
    return out
  })

describe("activeQ", () => {
  it.effect("pops by priority, then by queue time (PrioritySort)", () =>
    Effect.gen(function* () {
      const { q, clock } = setup()
      q.add(pod("low", 1))
      clock.advance(1)
      q.add(pod("high", 100))
      clock.advance(1)
      q.add(pod("mid-late", 50))
      q.add(pod("high-late", 100))
      expect(yield* names(q, 4)).toEqual(["high", "high-late", "mid-late", "low"])
      expect(q.lengths()).toEqual({ active: 0, backoff: 0, unschedulable: 0, inFlight: 4 })
    })
  )

  it.effect("follows the profile's QueueSort", () =>
    Effect.gen(function* () {
      const { q } = setup({ less: (a, b) => a.pod.name < b.pod.name })
      for (const n of ["c", "a", "b"]) q.add(pod(n, n === "c" ? 9 : 0))
      expect(yield* names(q, 3)).toEqual(["a", "b", "c"])
    })
  )

  it.effect("pop waits for a pod; an interrupted waiter loses nothing", () =>
    Effect.gen(function* () {
      const { q } = setup()
      const lost = yield* Effect.fork(q.pop)
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(lost)
      const waiting = yield* Effect.fork(q.pop)
      yield* Effect.yieldNow()
      expect(waiting.unsafePoll()).toBeNull()
      q.add(pod("a"))
      const got = yield* Fiber.join(waiting)
      expect([got.pod.name, got.attempts]).toEqual(["a", 1])
    })
  )

  it.effect("a known pod added again is updated in place, not queued twice", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a", 1))
      q.add(pod("b", 5))
      q.add(pod("a", 9))
      expect(q.lengths().active).toBe(2)
      expect(yield* names(q, 2)).toEqual(["a", "b"])
    })
  )
})

describe("backoff", () => {
  it.each<[number, number]>([
    [1, 1000],
    [2, 2000],
    [3, 4000],
    [4, 8000],
    [5, 10_000],
    [40, 10_000]
  ])("after %i attempts: %i ms", (attempts, ms) => expect(Queue.backoffMs(attempts, 1000, 10_000)).toBe(ms))

  it.effect("a pod failing with an error (no plugin) backs off, then is active again", () =>
    Effect.gen(function* () {
      const { q, clock } = setup()
      q.add(pod("a"))
      const first = yield* q.pop
      q.addUnschedulable(first, [])
      expect(q.where("uid-a")).toBe("backoff")
      clock.advance(999)
      expect(q.where("uid-a")).toBe("backoff")
      clock.advance(1)
      expect(q.where("uid-a")).toBe("active")
      const second = yield* q.pop
      q.addUnschedulable(second, [])
      clock.advance(1999)
      expect(q.where("uid-a")).toBe("backoff")
      clock.advance(1)
      expect(q.where("uid-a")).toBe("active")
      expect((yield* q.pop).attempts).toBe(3)
    })
  )
})

describe("unschedulable pods and cluster events", () => {
  const cases: ReadonlyArray<[string, ReadonlyArray<string>, Queue.ClusterEvent, boolean]> = [
    ["NodeResourcesFit: a node joins", ["NodeResourcesFit"], node("Add"), true],
    ["NodeResourcesFit: a node's allocatable grows", ["NodeResourcesFit"], node("Update", "Allocatable"), true],
    ["NodeResourcesFit: a bound pod is deleted", ["NodeResourcesFit"], { resource: "Pod", action: "Delete" }, true],
    ["NodeResourcesFit: a node label changes", ["NodeResourcesFit"], node("Update", "Label"), false],
    ["NodeResourcesFit: a pod is added", ["NodeResourcesFit"], { resource: "Pod", action: "Add" }, false],
    ["TaintToleration: a taint changes", ["TaintToleration"], node("Update", "Taint"), true],
    ["TaintToleration: a label changes", ["TaintToleration"], node("Update", "Label"), false],
    ["NodeAffinity: a label changes", ["NodeAffinity"], node("Update", "Label"), true],
    ["NodeAffinity: a bound pod is deleted", ["NodeAffinity"], { resource: "Pod", action: "Delete" }, false],
    ["NodeAffinity: a node is deleted", ["NodeAffinity"], node("Delete"), false],
    ["either of two rejecting plugins", ["NodeAffinity", "TaintToleration"], node("Update", "Taint"), true],
    ["an update whose aspect is unknown", ["NodeAffinity"], node("Update"), true],
    ["VolumeBinding: a claim is added", ["VolumeBinding"], { resource: "PersistentVolumeClaim", action: "Add" }, true],
    ["InterPodAffinity: a bound pod's labels change", ["InterPodAffinity"], { resource: "Pod", action: "Update", what: "Label" }, true],
    ["a plugin that registered nothing: any event", ["SomeOutOfTreePlugin"], { resource: "StorageClass", action: "Delete" }, true],
    ["the catch-all event", ["NodeAffinity"], Queue.anyEvent, true]
  ]
  it.each(cases)("%s → moved: %s", (_what, rejectedBy, event, moved) =>
    Effect.runPromise(
      Effect.gen(function* () {
        const { q } = setup()
        q.add(pod("a"))
        q.addUnschedulable(yield* q.pop, rejectedBy)
        expect(q.where("uid-a")).toBe("unschedulable")
        expect(q.moveOnEvent(event)).toBe(moved ? 1 : 0)
        expect(q.where("uid-a")).toBe(moved ? "backoff" : "unschedulable")
      })
    )
  )

  it.effect("a pod moved after its backoff is over goes straight to activeQ; a plugin's own events override the defaults", () =>
    Effect.gen(function* () {
      const { q, clock } = setup({ pluginEvents: { NodeAffinity: [{ resource: "Pod", action: "Delete" }] } })
      q.add(pod("a"))
      q.addUnschedulable(yield* q.pop, ["NodeAffinity"])
      clock.advance(5000)
      expect(q.moveOnEvent(node("Update", "Label"))).toBe(0)
      expect(q.moveOnEvent([node("Add"), { resource: "Pod", action: "Delete" }])).toBe(1)
      expect(q.where("uid-a")).toBe("active")
    })
  )

  it.effect("an event during the scheduling cycle is not missed; an unrelated one is", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a"))
      q.add(pod("b"))
      const a = yield* q.pop
      const b = yield* q.pop
      q.moveOnEvent(node("Add"))
      q.addUnschedulable(a, ["NodeResourcesFit"])
      q.addUnschedulable(b, ["NodeAffinity", "TaintToleration"])
      expect([q.where("uid-a"), q.where("uid-b")]).toEqual(["backoff", "backoff"])
      q.add(pod("c"))
      const c = yield* q.pop
      q.moveOnEvent({ resource: "Pod", action: "Delete" })
      q.addUnschedulable(c, ["TaintToleration"])
      expect(q.where("uid-c")).toBe("unschedulable")
      // Events seen before the pod was popped do not count for it.
      q.add(pod("d"))
      q.moveOnEvent(node("Add"))
      q.addUnschedulable(yield* q.pop, ["NodeAffinity"])
      expect(q.where("uid-d")).toBe("unschedulable")
    })
  )

  it.effect("a parked pod goes back when its spec or labels change, not on a status update", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a"))
      q.addUnschedulable(yield* q.pop, ["NodeAffinity"])
      q.update(pod("a", 0, { status: { conditions: [{ type: "PodScheduled", status: "False" }] } }))
      expect(q.where("uid-a")).toBe("unschedulable")
      q.update(pod("a", 0, { labels: { tier: "web" } }))
      expect(q.where("uid-a")).toBe("backoff")
    })
  )

  it.effect("an update during the scheduling cycle sends the pod back instead of parking it", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a"))
      const a = yield* q.pop
      q.update(pod("a", 0, { spec: { nodeSelector: { zone: "b" } } }))
      q.addUnschedulable(a, ["NodeAffinity"])
      expect(q.where("uid-a")).toBe("backoff")
    })
  )

  it.effect("a pod parked longer than the limit is flushed; no timer runs while nothing is parked", () =>
    Effect.gen(function* () {
      const { q, clock } = setup({ maxInUnschedulableMs: 300_000 })
      q.add(pod("a"))
      q.add(pod("b"))
      const a = yield* q.pop
      const b = yield* q.pop
      expect(clock.live()).toBe(0)
      q.addUnschedulable(a, ["NodeAffinity"])
      clock.advance(100_000)
      q.addUnschedulable(b, ["NodeAffinity"])
      clock.advance(199_999)
      expect([q.where("uid-a"), q.where("uid-b")]).toEqual(["unschedulable", "unschedulable"])
      clock.advance(1)
      expect([q.where("uid-a"), q.where("uid-b")]).toEqual(["active", "unschedulable"])
      clock.advance(100_000)
      expect(q.where("uid-b")).toBe("active")
      expect(clock.live()).toBe(0)
    })
  )
})

describe("lifecycle", () => {
  it.effect("delete takes a pod out of wherever it is; a deleted in-flight pod is not re-queued", () =>
    Effect.gen(function* () {
      const { q } = setup()
      for (const n of ["a", "b", "c", "d"]) q.add(pod(n))
      const [a, b, c] = [yield* q.pop, yield* q.pop, yield* q.pop]
      q.addUnschedulable(a, ["NodeAffinity"])
      q.addUnschedulable(b, [])
      for (const n of ["a", "b", "c", "d"]) q.delete(`uid-${n}`)
      q.addUnschedulable(c, ["NodeAffinity"])
      q.done("uid-c")
      expect(q.lengths()).toEqual({ active: 0, backoff: 0, unschedulable: 0, inFlight: 0 })
    })
  )

  it.effect("a scheduled pod is not queued again by a stale update; a bound pod leaves the queue", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a"))
      q.add(pod("b"))
      yield* q.pop
      q.done("uid-a")
      q.update(pod("a", 0, { status: { conditions: [] } }))
      expect(q.where("uid-a")).toBeUndefined()
      q.update(pod("b", 0, { nodeName: "n1" }))
      expect(q.lengths().active).toBe(0)
      // Once bound and seen, the pod is forgotten: a later unbound version is a new pending pod.
      q.update(pod("a", 0, { nodeName: "n1" }))
      q.update(pod("a"))
      expect(q.where("uid-a")).toBe("active")
    })
  )

  it.effect("a binding that fails after done still re-queues the pod", () =>
    Effect.gen(function* () {
      const { q } = setup()
      q.add(pod("a"))
      const a = yield* q.pop
      q.done("uid-a")
      q.addUnschedulable(a, [])
      expect(q.where("uid-a")).toBe("backoff")
    })
  )

  it("gated pods wait until an update lifts their gates; events and flushes leave them", () => {
    const { q, clock } = setup()
    q.add(pod("a", 0, { spec: { schedulingGates: [{ name: "wait" }] } }))
    expect(q.where("uid-a")).toBe("unschedulable")
    expect(q.moveOnEvent(Queue.anyEvent)).toBe(0)
    clock.advance(600_000)
    expect(q.where("uid-a")).toBe("unschedulable")
    q.update(pod("a", 0, { spec: { schedulingGates: [{ name: "wait" }], nodeSelector: { a: "b" } } }))
    expect(q.where("uid-a")).toBe("unschedulable")
    q.update(pod("a"))
    expect(q.where("uid-a")).toBe("active")
  })
})

describe("nominations", () => {
  it("lists pods nominated to a node, from the API or from memory", () => {
    const { q } = setup()
    q.add(pod("a", 10, { status: { nominatedNodeName: "n1" } }))
    q.add(pod("b", 5))
    q.nominate(pod("b", 5), "n1")
    expect(q.nominated("n1").map((p) => p.name)).toEqual(["a", "b"])
    expect(q.nominatedNode("uid-b")).toBe("n1")
    // The API has not caught up with b's nomination yet: an update without it keeps it.
    q.update(pod("b", 5, { labels: { x: "y" } }))
    expect(q.nominatedNode("uid-b")).toBe("n1")
    // a's nomination is removed in the API: it goes.
    q.update(pod("a", 10))
    expect(q.nominatedNode("uid-a")).toBeUndefined()
    q.nominate(pod("b", 5), "n2")
    expect([q.nominated("n1"), q.nominated("n2").map((p) => p.name)]).toEqual([[], ["b"]])
    q.delete("uid-b")
    expect(q.nominated("n2")).toEqual([])
  })
})

describe("event helpers", () => {
  const base = {
    metadata: { name: "n", labels: { zone: "a" }, annotations: {} },
    spec: { taints: [] },
    status: { allocatable: { cpu: "4" }, conditions: [{ type: "Ready", status: "True", lastHeartbeatTime: "t1" }] }
  }
  it.each<[string, Record<string, unknown>, ReadonlyArray<string>]>([
    ["nothing the scheduler reads (a heartbeat)", { status: { ...base.status, conditions: [{ type: "Ready", status: "True", lastHeartbeatTime: "t2" }] } }, []],
    ["labels", { metadata: { ...base.metadata, labels: { zone: "b" } } }, ["Label"]],
    ["taints", { spec: { taints: [{ key: "k", effect: "NoSchedule" }] } }, ["Taint"]],
    ["cordon", { spec: { taints: [], unschedulable: true } }, ["Taint"]],
    ["allocatable and readiness", { status: { allocatable: { cpu: "8" }, conditions: [{ type: "Ready", status: "False" }] } }, ["Allocatable", "Condition"]]
  ])("a node update of %s", (_what, change, aspects) => {
    expect(Queue.nodeUpdateEvents(base, { ...base, ...change }).map((e) => e.what)).toEqual(aspects)
  })

  it("an assigned pod's labels and requests", () => {
    const p = pod("a").pod
    const relabelled = pod("a", 0, { labels: { app: "x" } }).pod
    expect(Queue.podUpdateEvents(p, relabelled)).toEqual([{ resource: "Pod", action: "Update", what: "Label" }])
    const resized = { ...p, spec: { containers: [{ name: "c", image: "x", resources: { requests: { cpu: "1" } } }] } }
    expect(Queue.podUpdateEvents(p, resized)).toEqual([{ resource: "Pod", action: "Update", what: "Request" }])
  })

  it("builds the interest map from plugins' own declarations over the defaults", () => {
    const map = Queue.eventsOf([{ name: "NodeAffinity", events: [node("Delete")] }, { name: "Custom" }])
    expect(map["NodeAffinity"]).toEqual([node("Delete")])
    expect(map["TaintToleration"]).toEqual(Queue.pluginEvents["TaintToleration"])
    expect(map["Custom"]).toBeUndefined()
  })
})
