import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Queue, Stream, TestClock } from "effect"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"
import * as Runtime from "../../src/runtime/Runtime.js"

const sandboxSpec = (podUid = "uid-1"): Runtime.SandboxSpec => ({
  podUid,
  name: "web-0",
  namespace: "default",
  network: "host",
  labels: { [Runtime.Labels.podUid]: podUid }
})

const containerSpec = (sandboxId: string, name = "app", attempt = 0): Runtime.ContainerSpec => ({
  sandboxId,
  name,
  attempt,
  command: ["/bin/app"],
  labels: { [Runtime.Labels.containerName]: name }
})

/** Runs a test against a fresh memory runtime whose containers follow `behavior`. */
const withRuntime = <A, E>(
  behavior: (spec: Runtime.ContainerSpec) => MemoryRuntime.Behavior,
  body: (rt: Runtime.RuntimeService, control: MemoryRuntime.ControlService) => Effect.Effect<A, E>
) =>
  Effect.gen(function* () {
    const rt = yield* Runtime.Runtime
    const control = yield* MemoryRuntime.Control
    return yield* body(rt, control)
  }).pipe(Effect.provide(MemoryRuntime.layer({ behavior })))

const started = (rt: Runtime.RuntimeService, name = "app") =>
  Effect.gen(function* () {
    const sb = yield* rt.sandboxes.create(sandboxSpec())
    const id = yield* rt.containers.create(containerSpec(sb.id, name))
    yield* rt.containers.start(id)
    return { sandboxId: sb.id, id }
  })

describe("MemoryRuntime", () => {
  it.effect("runs a container from created to running to exited at the programmed time and code", () =>
    withRuntime(
      () => ({ exitAfterMs: 5_000, exitCode: 3 }),
      (rt) =>
        Effect.gen(function* () {
          const sb = yield* rt.sandboxes.create(sandboxSpec())
          const id = yield* rt.containers.create(containerSpec(sb.id))
          expect((yield* rt.containers.inspect(id)).status.state).toBe("created")
          yield* rt.containers.start(id)
          const running = (yield* rt.containers.inspect(id)).status
          expect(running.state).toBe("running")
          expect(running.pid).toBeGreaterThan(0)
          yield* TestClock.adjust(4_999)
          expect((yield* rt.containers.inspect(id)).status.state).toBe("running")
          yield* TestClock.adjust(1)
          const exited = (yield* rt.containers.inspect(id)).status
          expect(exited).toMatchObject({ state: "exited", exitCode: 3, reason: "Error" })
          expect(exited.pid).toBeUndefined()
          expect(Date.parse(exited.finishedAt!) - Date.parse(exited.startedAt!)).toBe(5_000)
          // A container runs once: a second start is refused.
          const again = yield* Effect.flip(rt.containers.start(id))
          expect(again._tag).toBe("RuntimeInvalid")
        })
    ))

  it.effect("stop sends SIGTERM and returns once the process has shut down within the grace", () =>
    withRuntime(
      () => ({ shutdownMs: 2_000 }),
      (rt) =>
        Effect.gen(function* () {
          const { id } = yield* started(rt)
          const stop = yield* Effect.fork(rt.containers.stop(id, { gracePeriodMs: 30_000 }))
          yield* TestClock.adjust(2_000)
          const status = yield* Fiber.join(stop)
          expect(status).toMatchObject({ state: "exited", exitCode: 143, signal: "SIGTERM", reason: "Error" })
        })
    ))

  it.effect("stop SIGKILLs a container that ignores SIGTERM when the grace period ends", () =>
    withRuntime(
      () => ({ ignoreStopSignal: true }),
      (rt) =>
        Effect.gen(function* () {
          const { id } = yield* started(rt)
          const stop = yield* Effect.fork(rt.containers.stop(id, { gracePeriodMs: 10_000 }))
          yield* TestClock.adjust(9_999)
          expect((yield* rt.containers.inspect(id)).status.state).toBe("running")
          yield* TestClock.adjust(1)
          expect(yield* Fiber.join(stop)).toMatchObject({ state: "exited", exitCode: 137, signal: "SIGKILL" })
          // Stop is idempotent: a second one returns the same final status.
          expect((yield* rt.containers.stop(id, { gracePeriodMs: 10_000 })).exitCode).toBe(137)
        })
    ))

  it.effect("signals: SIGHUP is survived, SIGKILL ends it; non-running containers refuse signals", () =>
    withRuntime(
      () => ({}),
      (rt) =>
        Effect.gen(function* () {
          const { id } = yield* started(rt)
          yield* rt.containers.signal(id, "HUP")
          expect((yield* rt.containers.inspect(id)).status.state).toBe("running")
          yield* rt.containers.signal(id, "9")
          expect((yield* rt.containers.inspect(id)).status).toMatchObject({ exitCode: 137, signal: "SIGKILL" })
          expect((yield* Effect.flip(rt.containers.signal(id, "SIGTERM")))._tag).toBe("RuntimeInvalid")
        })
    ))

  it.effect("exec answers as programmed, only while running", () =>
    withRuntime(
      () => ({
        exec: (req) =>
          req.command[0] === "healthy"
            ? { exitCode: 0, stdout: "ok\n", stderr: "", timedOut: false }
            : { exitCode: 1, stdout: "", stderr: "no\n", timedOut: false }
      }),
      (rt) =>
        Effect.gen(function* () {
          const { id } = yield* started(rt)
          expect(yield* rt.containers.exec(id, { command: ["healthy"] })).toEqual({
            exitCode: 0,
            stdout: "ok\n",
            stderr: "",
            timedOut: false
          })
          expect((yield* rt.containers.exec(id, { command: ["sick"] })).exitCode).toBe(1)
          yield* rt.containers.stop(id, { gracePeriodMs: 0 })
          expect((yield* Effect.flip(rt.containers.exec(id, { command: ["healthy"] })))._tag).toBe("RuntimeInvalid")
        })
    ))

  it.effect("logs: tail, since, timestamps, and follow that delivers live lines and ends at exit", () =>
    withRuntime(
      () => ({ output: ["one", { stream: "stderr", line: "two" }] }),
      (rt, control) =>
        Effect.gen(function* () {
          const { id } = yield* started(rt)
          yield* TestClock.adjust(60_000)
          yield* control.write(id, "three")
          const all = yield* Stream.runCollect(rt.containers.logs(id))
          expect(Chunk.toArray(all)).toEqual([
            { stream: "stdout", line: "one\n" },
            { stream: "stderr", line: "two\n" },
            { stream: "stdout", line: "three\n" }
          ])
          const tail = yield* Stream.runCollect(rt.containers.logs(id, { tailLines: 1, timestamps: true }))
          expect(Chunk.toArray(tail)).toEqual([
            { stream: "stdout", line: "three\n", timestamp: new Date(60_000).toISOString() }
          ])
          const recent = yield* Stream.runCollect(rt.containers.logs(id, { sinceSeconds: 30 }))
          expect(Chunk.toArray(recent).map((c) => c.line)).toEqual(["three\n"])

          const seen = yield* Queue.unbounded<string>()
          const follow = yield* Effect.fork(
            Stream.runForEach(rt.containers.logs(id, { follow: true, tailLines: 1 }), (c) => Queue.offer(seen, c.line))
          )
          expect(yield* Queue.take(seen)).toBe("three\n")
          yield* control.write(id, "four")
          expect(yield* Queue.take(seen)).toBe("four\n")
          yield* control.exit(id, 0)
          yield* Fiber.join(follow)
        })
    ))

  it.effect("re-adoption: containers are found again by labels; a second create of the same attempt is refused", () =>
    withRuntime(
      () => ({}),
      (rt, control) =>
        Effect.gen(function* () {
          const { sandboxId, id } = yield* started(rt)
          const dup = yield* Effect.flip(rt.containers.create(containerSpec(sandboxId)))
          expect(dup).toMatchObject({ _tag: "RuntimeAlreadyExists", id })
          const dupSandbox = yield* Effect.flip(rt.sandboxes.create(sandboxSpec()))
          expect(dupSandbox).toMatchObject({ _tag: "RuntimeAlreadyExists", id: sandboxId })
          const next = yield* rt.containers.create(containerSpec(sandboxId, "app", 1))
          const found = yield* rt.containers.list({ labels: { [Runtime.Labels.containerName]: "app" } })
          expect(found.map((c) => c.id).sort()).toEqual([id, next].sort())
          expect((yield* rt.containers.list({ state: "running" })).map((c) => c.id)).toEqual([id])
          expect((yield* rt.sandboxes.list({ podUid: "uid-1" })).map((s) => s.id)).toEqual([sandboxId])
          expect((yield* control.calls).filter((c) => c.op === "container.create")).toHaveLength(2)
        })
    ))

  it.effect("an outside kill and a start error show as Kubernetes would report them", () =>
    withRuntime(
      (spec) => (spec.name === "broken" ? { startError: "exec: /bin/app: not found" } : {}),
      (rt, control) =>
        Effect.gen(function* () {
          const { sandboxId, id } = yield* started(rt)
          yield* control.exit(id, 137, { reason: "OOMKilled" })
          expect((yield* rt.containers.inspect(id)).status).toMatchObject({
            state: "exited",
            exitCode: 137,
            reason: "OOMKilled",
            signal: "SIGKILL"
          })
          const broken = yield* rt.containers.create(containerSpec(sandboxId, "broken"))
          yield* rt.containers.start(broken)
          expect((yield* rt.containers.inspect(broken)).status).toMatchObject({
            state: "exited",
            reason: "StartError",
            message: "exec: /bin/app: not found"
          })
        })
    ))

  it.effect("removing a sandbox kills and removes its containers; removes are idempotent", () =>
    withRuntime(
      () => ({}),
      (rt) =>
        Effect.gen(function* () {
          const { sandboxId, id } = yield* started(rt)
          yield* rt.sandboxes.remove(sandboxId)
          yield* rt.sandboxes.remove(sandboxId)
          yield* rt.containers.remove(id)
          expect((yield* Effect.flip(rt.containers.inspect(id)))._tag).toBe("RuntimeNotFound")
          expect(yield* rt.containers.list()).toEqual([])
          expect((yield* Effect.flip(rt.containers.create(containerSpec(sandboxId))))._tag).toBe("RuntimeNotFound")
        })
    ))
})

describe("Runtime filters", () => {
  it.each([
    [{}, { a: "1" }, true],
    [{ a: "1" }, { a: "1", b: "2" }, true],
    [{ a: "1" }, { a: "2" }, false],
    [{ a: "1" }, undefined, false]
  ] as const)("matchesLabels(%j on %j) = %s", (selector, labels, expected) => {
    expect(Runtime.matchesLabels(labels, selector)).toBe(expected)
  })
})
