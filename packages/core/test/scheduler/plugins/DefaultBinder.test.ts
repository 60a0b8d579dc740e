import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { CycleState, status, success, type Handle } from "../../../src/scheduler/Framework.js"
import * as DefaultBinder from "../../../src/scheduler/plugins/DefaultBinder.js"
import type { JsonObject } from "../../../src/informer/Informer.js"
import { pod } from "./fixtures.js"

describe("DefaultBinder", () => {
  it.effect("binds through the handle's bindPod, with the pod's object and the chosen node", () =>
    Effect.gen(function* () {
      const calls: Array<{ pod: JsonObject; node: string }> = []
      const handle: Handle = {
        schedulerName: "default-scheduler",
        bindPod: (p, node) => Effect.sync(() => (calls.push({ pod: p, node }), success))
      }
      const plugin = DefaultBinder.factory(undefined, handle) as ReturnType<typeof DefaultBinder.make>
      const p = pod({ name: "web" })
      const verdict = yield* plugin.bind(new CycleState(), p, "node-1")
      expect(verdict.code).toBe("Success")
      expect(calls).toEqual([{ pod: p.pod, node: "node-1" }])
    })
  )

  it.effect("answers the binder's verdict (a lost race is not a success)", () =>
    Effect.gen(function* () {
      const conflict = status("Error", "Operation cannot be fulfilled: pod is already assigned")
      const plugin = DefaultBinder.make({ schedulerName: "s", bindPod: () => Effect.succeed(conflict) })
      expect(yield* plugin.bind(new CycleState(), pod(), "n")).toBe(conflict)
    })
  )

  it.effect("answers Error without a binder in the handle", () =>
    Effect.gen(function* () {
      const verdict = yield* DefaultBinder.make({ schedulerName: "s" }).bind(new CycleState(), pod(), "n")
      expect(verdict.code).toBe("Error")
    })
  )

  it.effect("binds 5,000 pods", () =>
    Effect.gen(function* () {
      let bound = 0
      const plugin = DefaultBinder.make({ schedulerName: "s", bindPod: () => Effect.sync(() => (bound++, success)) })
      const pods = Array.from({ length: 5000 }, (_, i) => pod({ name: `p${i}` }))
      yield* Effect.forEach(pods, (p, i) => plugin.bind(new CycleState(), p, `node-${i}`), { discard: true })
      expect(bound).toBe(5000)
    })
  )
})
