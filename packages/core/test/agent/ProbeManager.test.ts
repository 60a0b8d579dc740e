import { Effect, TestClock } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as PodStates from "../../src/agent/PodStates.js"
import type * as PodSync from "../../src/agent/PodSync.js"
import * as ProbeManager from "../../src/agent/ProbeManager.js"
import type * as Prober from "../../src/agent/Prober.js"
import type * as Pod from "../../src/model/Pod.js"

const pod = (probes: Partial<Pod.Container>, meta: Partial<Pod.Pod["metadata"]> = {}): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1", ...meta },
  spec: { containers: [{ name: "app", image: "node:20", ...probes }, { name: "side", image: "node:20" }] }
})
const running = (id: string, name = "app", o: Partial<PodSync.ObservedContainer> = {}): PodSync.ObservedContainer => ({
  id,
  name,
  attempt: 0,
  init: false,
  hash: "h",
  state: "running",
  createdAtMs: 0,
  startedAtMs: 0,
  ...o
})

const readiness = { readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 1 } }

// Probe workers whose handler answers `answer.result`, recording Events and verdict changes.
const world = Effect.gen(function* () {
  const answer: { result: Prober.Outcome["result"] } = { result: "failure" }
  const runs: Array<string> = []
  const events: Array<string> = []
  const changed: Array<string> = []
  const manager = yield* ProbeManager.make({
    run: (_pod, _state, name, id) => Effect.sync(() => (runs.push(`${name}/${id}`), { result: answer.result, message: "refused" })),
    emit: (_pod, type, reason, message) => Effect.sync(() => void events.push(`${type} ${reason} ${message}`)),
    onChange: (uid) => void changed.push(uid)
  })
  return { manager, answer, runs, events, changed, state: PodStates.stateOf(new Map(), "u1") }
})

describe("ProbeManager", () => {
  it("label", () => expect(["liveness", "readiness", "startup"].map((k) => ProbeManager.label(k as "liveness"))).toEqual(["Liveness", "Readiness", "Startup"]))

  it.scoped("runs a worker per running container with probes; a verdict change queues the pod; failures are Events", () =>
    Effect.gen(function* () {
      const { manager, answer, runs, events, changed, state } = yield* world
      const p = pod(readiness)
      yield* manager.sync("u1", p, state, [running("c1"), running("c2", "side"), running("c3", "app", { state: "exited" }), running("c4", "app", { init: true })])
      expect([...manager.state.workers.keys()]).toEqual(["c1"])
      expect(manager.verdicts("u1").get("c1")?.ready).toBe(false)
      yield* TestClock.adjust("1 millis")
      expect(runs).toEqual(["app/c1"])
      expect(events).toEqual(["Warning Unhealthy Readiness probe failed: refused"])
      expect(changed).toEqual([])
      answer.result = "success"
      yield* TestClock.adjust("1 second")
      expect(runs).toHaveLength(2)
      expect(changed).toEqual(["u1"])
      expect(manager.verdicts("u1").get("c1")?.ready).toBe(true)
      expect(manager.verdicts("other").size).toBe(0)
      // Syncing again keeps the running worker.
      yield* manager.sync("u1", p, state, [running("c1")])
      yield* TestClock.adjust("1 second")
      expect(runs).toHaveLength(3)
    })
  )

  it.scoped("stops the workers of containers that went, of a deleting pod, and of a pod gone", () =>
    Effect.gen(function* () {
      const { manager, runs, state } = yield* world
      const p = pod(readiness)
      yield* manager.sync("u1", p, state, [running("c1")])
      yield* manager.sync("u2", pod(readiness, { uid: "u2" }), state, [running("d1")])
      yield* manager.sync("u1", p, state, [running("c2")])
      expect([...manager.state.workers.keys()].sort()).toEqual(["c2", "d1"])
      yield* manager.sync("u1", pod(readiness, { deletionTimestamp: "2026-12-03T12:00:00Z" }), state, [running("c2")])
      expect([...manager.state.workers.keys()]).toEqual(["d1"])
      yield* manager.sync("u2", undefined, state, [])
      expect(manager.state.workers.size).toBe(0)
      const before = runs.length
      yield* TestClock.adjust("10 seconds")
      expect(runs).toHaveLength(before)
    })
  )
})
