import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as RuntimeCapabilities from "../../src/agent/RuntimeCapabilities.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"

describe("RuntimeCapabilities", () => {
  it.effect("asks the runtime once it answers, and remembers the answer", () =>
    Effect.gen(function* () {
      let asked = 0
      let up = false
      const runtime = {
        info: Effect.suspend(() => {
          asked++
          return up ? Effect.succeed(MemoryRuntime.defaultInfo) : Effect.fail(new Runtime.Unavailable({ message: "down" }))
        })
      } as unknown as Runtime.RuntimeService
      const caps = RuntimeCapabilities.make(runtime)
      expect((yield* Effect.either(caps.get))._tag).toBe("Left")
      expect(caps.last()).toBeUndefined()
      up = true
      expect(yield* caps.get).toEqual(MemoryRuntime.defaultInfo.capabilities)
      up = false
      expect(yield* caps.get).toEqual(MemoryRuntime.defaultInfo.capabilities)
      expect(caps.last()).toEqual(MemoryRuntime.defaultInfo.capabilities)
      expect(asked).toBe(2)
    })
  )
})
