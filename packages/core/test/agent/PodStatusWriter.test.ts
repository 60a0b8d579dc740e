import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as PodStates from "../../src/agent/PodStates.js"
import * as PodStatusWriter from "../../src/agent/PodStatusWriter.js"
import type * as Client from "../../src/client/Client.js"
import type * as Pod from "../../src/model/Pod.js"

const pod = (status?: Pod.PodStatus): Pod.Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "app", image: "node:20" }] },
  ...(status === undefined ? {} : { status })
})

const cond = (type: string, status: "True" | "False", at = "2026-12-03T12:00:00Z") => ({ type, status, lastTransitionTime: at })

// A client recording the patches it is asked for (the only call `write` makes).
const recording = () => {
  const patches: Array<{ readonly name: string; readonly body: unknown; readonly subresource: string | undefined }> = []
  const client = {
    patch: (_ref: unknown, _ns: unknown, name: string, _type: unknown, body: unknown, subresource?: string) =>
      Effect.sync(() => {
        patches.push({ name, body, subresource })
        return {}
      })
  } as unknown as Client.Client
  return { client, patches }
}

describe("PodStatusWriter", () => {
  it("withOwnConditions: the kubelet's conditions as last written, everyone else's as the API has them", () => {
    const api = pod({ conditions: [cond("Ready", "False"), cond("DisruptionTarget", "True")] })
    const written: Pod.PodStatus = { conditions: [cond("Ready", "True", "2026-12-03T12:01:00Z"), cond("Custom", "True")] }
    expect(PodStatusWriter.withOwnConditions(api, undefined)).toBe(api)
    expect(PodStatusWriter.withOwnConditions(api, written).status?.conditions).toEqual([cond("DisruptionTarget", "True"), cond("Ready", "True", "2026-12-03T12:01:00Z")])
  })

  const sameCases: ReadonlyArray<readonly [string, Record<string, unknown>, Record<string, unknown>, boolean]> = [
    ["status only", { metadata: { name: "a", resourceVersion: "1" }, spec: { x: 1 }, status: { phase: "Pending" } }, { metadata: { name: "a", resourceVersion: "2" }, spec: { x: 1 }, status: { phase: "Running" } }, true],
    ["managed fields only", { metadata: { name: "a", managedFields: [1] }, spec: {} }, { metadata: { name: "a", managedFields: [2] }, spec: {} }, true],
    ["keys in another order", { metadata: { name: "a", uid: "u" }, spec: { a: 1, b: 2 } }, { metadata: { uid: "u", name: "a" }, spec: { b: 2, a: 1 } }, true],
    ["a label", { metadata: { name: "a", labels: { x: "1" } }, spec: {} }, { metadata: { name: "a", labels: { x: "2" } }, spec: {} }, false],
    ["the spec", { metadata: { name: "a" }, spec: { nodeName: "n1" } }, { metadata: { name: "a" }, spec: { nodeName: "n2" } }, false],
    ["a deletion", { metadata: { name: "a" }, spec: {} }, { metadata: { name: "a", deletionTimestamp: "t" }, spec: {} }, false]
  ]
  for (const [name, a, b, same] of sameCases) {
    it(`sameButStatus: ${name}`, () => expect(PodStatusWriter.sameButStatus(a, b)).toBe(same))
  }

  it("patchOf clears the kubelet's fields the status lacks", () => {
    expect(PodStatusWriter.patchOf({ phase: "Running", podIP: "10.0.0.1" })).toEqual({
      status: { reason: null, message: null, podIPs: null, initContainerStatuses: null, hostPorts: null, phase: "Running", podIP: "10.0.0.1" }
    })
  })

  it.effect("write: one patch of the status subresource, none when the agent or the API has it; the start latency once", () =>
    Effect.gen(function* () {
      const { client, patches } = recording()
      const started: Array<number> = []
      const deps: PodStatusWriter.Deps = { client, observeStart: (s) => void started.push(s) }
      const state = PodStates.stateOf(new Map(), "u1")
      state.startTimeMs = 0
      const running: Pod.PodStatus = { phase: "Running" }
      yield* PodStatusWriter.write(deps, state, pod({ phase: "Pending" }), running)
      expect(patches).toHaveLength(1)
      expect(patches[0]).toMatchObject({ name: "web", subresource: "status" })
      expect(state.lastStatus).toBe(running)
      expect(started).toHaveLength(1)
      // Written already (the informer has not caught up): nothing.
      yield* PodStatusWriter.write(deps, state, pod({ phase: "Pending" }), { phase: "Running" })
      // The API has it (after an agent restart): nothing either.
      const fresh = PodStates.stateOf(new Map(), "u1")
      yield* PodStatusWriter.write(deps, fresh, pod({ phase: "Running" }), { phase: "Running" })
      expect(patches).toHaveLength(1)
      // Running again after another phase is not a new start.
      yield* PodStatusWriter.write(deps, state, pod({ phase: "Running" }), { phase: "Running", message: "m" })
      expect(patches).toHaveLength(2)
      expect(started).toHaveLength(1)
    })
  )
})
