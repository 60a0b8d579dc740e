import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FiberRef } from "effect"
import type * as ApiError from "../../src/api/ApiError.js"
import type * as Authz from "../../src/api/Authz.js"
import * as FlowControl from "../../src/api/FlowControl.js"
import type { UserInfo } from "../../src/api/Http.js"
import * as MetricRegistry from "../../src/observability/MetricRegistry.js"

const user = (name: string, groups: ReadonlyArray<string> = ["system:authenticated"]): UserInfo => ({ name, uid: name, groups })
const admin = user("alice", ["system:masters", "system:authenticated"])
const bob = user("bob")
const node = user("system:node:n1", ["system:nodes", "system:authenticated"])
const controllers = user("system:kube-controller-manager", ["system:masters", "system:authenticated"])

const attributes = (u: UserInfo, verb = "create", subresource = ""): Authz.Attributes => ({
  user: u,
  verb,
  resourceRequest: true,
  apiGroup: "",
  apiVersion: "v1",
  resource: "pods",
  subresource,
  namespace: "default",
  name: "",
  path: "/api/v1/namespaces/default/pods"
})

/** A handler that runs until its gate opens, recording that it started. */
const gated = (log: Array<string>, name: string) =>
  Effect.gen(function* () {
    const gate = yield* Deferred.make<void>()
    const run = Effect.zipRight(
      Effect.sync(() => log.push(name)),
      Deferred.await(gate)
    )
    return { run, open: Deferred.succeed(gate, undefined) }
  })

/** Let forked fibers reach their waits. */
const settle = Effect.yieldNow().pipe(Effect.repeatN(20))

const gauge = (registry: MetricRegistry.Registry, name: string) => {
  const family = registry.snapshot().find((f) => f.name === name)
  return family === undefined || family.type === "histogram" ? undefined : family.series.find((s) => s.labels.some(([k, v]) => k === "priority_level" && v === "workload"))?.value
}

describe("FlowControl.levelOf", () => {
  it.each<[string, UserInfo, FlowControl.Level]>([
    ["a node", node, "system"],
    ["the controller manager", controllers, "system"],
    ["the scheduler", user("system:kube-scheduler"), "system"],
    ["a cluster administrator (unlike Kubernetes, not exempt)", admin, "workload"],
    ["a user", bob, "workload"],
    ["a service account", user("system:serviceaccount:default:app", ["system:serviceaccounts", "system:authenticated"]), "workload"],
    ["a bootstrap token", user("system:bootstrap:abcdef", ["system:bootstrappers", "system:authenticated"]), "workload"]
  ])("%s", (_what, u, level) => {
    expect(FlowControl.levelOf(u)).toBe(level)
  })
})

describe("FlowControl.isLongRunning", () => {
  it.each<[string, string, boolean]>([
    ["watch", "", true],
    ["get", "log", true],
    ["create", "exec", true],
    ["create", "attach", true],
    ["create", "portforward", true],
    ["get", "proxy", true],
    ["create", "", false],
    ["list", "", false],
    ["update", "status", false],
    ["create", "eviction", false]
  ])("%s %s → %s", (verb, subresource, expected) => {
    expect(FlowControl.isLongRunning(attributes(bob, verb, subresource))).toBe(expected)
  })
})

describe("FlowControl.serve", () => {
  it.live("queues users' writes beyond the seats, and serves reads and the cluster's own writes at once", () =>
    Effect.gen(function* () {
      const registry = MetricRegistry.make()
      const flow = FlowControl.make({ seats: 1 }, registry)
      const log: Array<string> = []
      const first = yield* gated(log, "alice create")
      const second = yield* gated(log, "bob create")
      const a = yield* Effect.fork(flow.serve(attributes(admin), first.run))
      const b = yield* Effect.fork(flow.serve(attributes(bob), second.run))
      yield* settle
      expect(log).toEqual(["alice create"])
      expect(gauge(registry, "apiserver_flowcontrol_current_inqueue_requests")).toBe(1)
      expect(gauge(registry, "apiserver_flowcontrol_current_executing_requests")).toBe(1)
      // Nothing of these waits for the seat alice holds.
      yield* flow.serve(attributes(bob, "get"), Effect.sync(() => log.push("bob get")))
      yield* flow.serve(attributes(bob, "watch"), Effect.sync(() => log.push("bob watch")))
      yield* flow.serve(attributes(node, "update", "status"), Effect.sync(() => log.push("node status")))
      yield* flow.serve(attributes(controllers, "create", "binding"), Effect.sync(() => log.push("binding")))
      expect(log).toEqual(["alice create", "bob get", "bob watch", "node status", "binding"])
      yield* first.open
      yield* Fiber.join(a)
      yield* settle
      expect(log.at(-1)).toBe("bob create")
      yield* second.open
      yield* Fiber.join(b)
      expect([flow.workload!.executing(), flow.workload!.queued()]).toEqual([0, 0])
    })
  )

  it.live("answers 429 with Retry-After after waiting maxWait, and when the queue is full", () =>
    Effect.gen(function* () {
      const registry = MetricRegistry.make()
      const flow = FlowControl.make({ seats: 1, queueLimit: 1, maxWait: "500 millis" }, registry)
      const log: Array<string> = []
      const held = yield* gated(log, "held")
      const holder = yield* Effect.fork(flow.serve(attributes(admin), held.run))
      yield* settle
      const waiting = yield* Effect.fork(Effect.exit(flow.serve(attributes(bob), Effect.sync(() => log.push("never")))))
      yield* settle
      const full = yield* Effect.exit(flow.serve(attributes(bob), Effect.void))
      const timedOut = yield* Fiber.join(waiting)
      const statusOf = (exit: Exit.Exit<unknown, unknown>) => (Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as ApiError.ApiError) : undefined)
      expect(statusOf(full)?.status).toMatchObject({ code: 429, reason: "TooManyRequests", message: "Too many requests: 1 requests already wait for the workload priority level's 1 seats, please try again later.", details: { retryAfterSeconds: 1 } })
      expect(statusOf(timedOut)?.status).toMatchObject({ code: 429, reason: "TooManyRequests", message: "Too many requests: waited 0.5 s for one of the workload priority level's 1 seats, please try again later." })
      expect(statusOf(timedOut)?.headers).toEqual({ "retry-after": "1" })
      expect(log).toEqual(["held"])
      const rejected = registry.snapshot().find((f) => f.name === "apiserver_flowcontrol_rejected_requests_total")
      expect(rejected?.type === "counter" ? rejected.series.map((s) => [Object.fromEntries(s.labels).reason, s.value]) : []).toEqual([
        ["queue-full", 1],
        ["time-out", 1]
      ])
      yield* held.open
      yield* Fiber.join(holder)
      expect([flow.workload!.executing(), flow.workload!.queued()]).toEqual([0, 0])
    })
  )

  it.effect("runs the system level's requests at its scheduling priority, everyone else's at the default", () =>
    Effect.gen(function* () {
      const flow = FlowControl.make({ seats: 1 }, MetricRegistry.make())
      const priority = FiberRef.get(FiberRef.currentSchedulingPriority)
      expect(yield* flow.serve(attributes(node, "patch", "status"), priority)).toBe(FlowControl.systemSchedulingPriority)
      expect(yield* flow.serve(attributes(controllers, "get"), priority)).toBe(FlowControl.systemSchedulingPriority)
      expect(yield* flow.serve(attributes(bob, "create"), priority)).toBe(0)
      expect(yield* flow.serve(attributes(admin, "get"), priority)).toBe(0)
      expect(FlowControl.systemSchedulingPriority).toBeLessThan(0)
      expect(FlowControl.schedulingPriorityOf(node)).toBe(FlowControl.systemSchedulingPriority)
      expect(FlowControl.schedulingPriorityOf(admin)).toBe(0)
    })
  )

  it.live("gives the seat back when its request is interrupted, waiting or executing", () =>
    Effect.gen(function* () {
      const flow = FlowControl.make({ seats: 1 }, MetricRegistry.make())
      const log: Array<string> = []
      const held = yield* gated(log, "held")
      const executing = yield* Effect.fork(flow.serve(attributes(admin), held.run))
      yield* settle
      const waiting = yield* Effect.fork(flow.serve(attributes(bob), Effect.sync(() => log.push("never"))))
      yield* settle
      expect(flow.workload!.queued()).toBe(1)
      yield* Fiber.interrupt(waiting)
      expect(flow.workload!.queued()).toBe(0)
      yield* Fiber.interrupt(executing)
      expect(flow.workload!.executing()).toBe(0)
      yield* flow.serve(attributes(bob), Effect.sync(() => log.push("next")))
      expect(log).toEqual(["held", "next"])
    })
  )

  it.live("awayFromSeat frees the seat while its request waits elsewhere: a webhook calling back does not wait for its caller", () =>
    Effect.gen(function* () {
      const flow = FlowControl.make({ seats: 1, maxWait: "2 seconds" }, MetricRegistry.make())
      const log: Array<string> = []
      // alice's create calls a "webhook" that itself writes through the API as bob, and waits for it.
      const webhook = flow.serve(attributes(bob), Effect.sync(() => log.push("webhook's write")))
      const create = Effect.gen(function* () {
        log.push("create starts")
        yield* FlowControl.awayFromSeat(webhook)
        expect(flow.workload!.executing()).toBe(1)
        log.push("create ends")
      })
      yield* flow.serve(attributes(admin), create)
      expect(log).toEqual(["create starts", "webhook's write", "create ends"])
      expect([flow.workload!.executing(), flow.workload!.queued()]).toEqual([0, 0])
      // Outside a request that took a seat it only runs the effect.
      expect(yield* FlowControl.awayFromSeat(Effect.succeed(7))).toBe(7)
    })
  )

  it.live("overlapping fibers of one request step away and back once: the seat stays free until the last is back", () =>
    Effect.gen(function* () {
      const flow = FlowControl.make({ seats: 1, maxWait: "1 second" }, MetricRegistry.make())
      // Two webhooks called at once; the second writes through the API after the first has answered.
      // Were the seat taken back when the first came back, that write would wait for it (429 after 1 s).
      const first = Effect.as(Effect.sleep("5 millis"), "first")
      const second = Effect.zipRight(Effect.sleep("40 millis"), flow.serve(attributes(bob), Effect.succeed("second's write")))
      const request = Effect.all([FlowControl.awayFromSeat(first), FlowControl.awayFromSeat(second)], { concurrency: "unbounded" })
      expect(yield* flow.serve(attributes(admin), request)).toEqual(["first", "second's write"])
      expect([flow.workload!.executing(), flow.workload!.queued()]).toEqual([0, 0])
    })
  )

  it.live("seats 0 serves everyone at once", () =>
    Effect.gen(function* () {
      const flow = FlowControl.make({ seats: 0 }, MetricRegistry.make())
      const log: Array<string> = []
      const held = yield* gated(log, "held")
      const fiber = yield* Effect.fork(flow.serve(attributes(admin), held.run))
      yield* settle
      yield* flow.serve(attributes(admin), Effect.sync(() => log.push("second")))
      expect(log).toEqual(["held", "second"])
      expect(flow.workload).toBeUndefined()
      yield* held.open
      yield* Fiber.join(fiber)
    })
  )
})
