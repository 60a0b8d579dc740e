import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ContainerIdentity from "../../src/agent/ContainerIdentity.js"
import * as Relist from "../../src/agent/Relist.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import type * as Runtime from "../../src/runtime/Runtime.js"

const spec = (sandboxId: string, uid: string | undefined, name: string): Runtime.ContainerSpec => ({
  sandboxId,
  name,
  attempt: 0,
  command: ["run"],
  env: {},
  security: {},
  mounts: [],
  labels: uid === undefined ? {} : { [ContainerIdentity.Labels.podUid]: uid }
})

const world = Effect.gen(function* () {
  const { runtime, control } = yield* MemoryRuntime.make()
  const sandbox = yield* runtime.sandboxes.create({ podUid: "p1", name: "p1", namespace: "default", hostname: "p1", network: "host", ports: [], labels: {} })
  const queued: Array<string> = []
  const relist = Relist.make(runtime, (uid) => void queued.push(uid))
  const take = () => queued.splice(0).sort()
  return { runtime, control, sandbox, relist, take }
})

describe("Relist", () => {
  it.scoped("queues a pod when its container appears, changes state or goes; not again for what is unchanged", () =>
    Effect.gen(function* () {
      const { runtime, control, sandbox, relist, take } = yield* world
      yield* relist.relist
      expect(relist.state.done).toBe(true)
      expect(take()).toEqual([])
      const a = yield* runtime.containers.create(spec(sandbox.id, "p1", "a"))
      yield* runtime.containers.create(spec(sandbox.id, "p2", "b"))
      yield* runtime.containers.create(spec(sandbox.id, undefined, "not-a-pod"))
      yield* relist.relist
      expect(take()).toEqual(["p1", "p2"])
      expect([relist.hasContainers("p1"), relist.hasContainers("p3")]).toEqual([true, false])
      yield* relist.relist
      expect(take()).toEqual([])
      yield* runtime.containers.start(a)
      yield* relist.relist
      expect(take()).toEqual(["p1"])
      yield* control.exit(a, 3)
      yield* relist.relist
      expect(take()).toEqual(["p1"])
      yield* runtime.containers.remove(a)
      yield* relist.relist
      expect(take()).toEqual(["p1"])
      expect(relist.hasContainers("p1")).toBe(false)
    })
  )

  it.scoped("a sync's own changes, noted, do not queue the pod again", () =>
    Effect.gen(function* () {
      const { runtime, sandbox, relist, take } = yield* world
      const a = yield* runtime.containers.create(spec(sandbox.id, "p1", "a"))
      yield* runtime.containers.start(a)
      relist.noteSeen("p1", yield* runtime.containers.list())
      expect(relist.hasContainers("p1")).toBe(true)
      yield* relist.relist
      expect(take()).toEqual([])
    })
  )

  it("signature: pod, state and exit code", () => {
    const c = { id: "c", spec: spec("s", "p", "a"), status: { state: "exited", exitCode: 1 } } as unknown as Runtime.Container
    expect(Relist.signature("p", c)).toBe("p|exited|1")
  })
})
