import { Effect, Fiber, TestClock } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ContainerIdentity from "../../src/agent/ContainerIdentity.js"
import * as HandlerRunner from "../../src/agent/HandlerRunner.js"
import * as Prober from "../../src/agent/Prober.js"
import type * as Pod from "../../src/model/Pod.js"
import * as MemoryRuntime from "../../src/runtime/MemoryRuntime.js"

const pod: Pod.Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: { containers: [{ name: "app", image: "node:20", ports: [{ name: "http", containerPort: 8080 }] }] }
}
const target: HandlerRunner.Target = { host: "10.0.0.7", hostPorts: [{ containerName: "app", name: "http", containerPort: 8080, protocol: "TCP", hostPort: 31000 }] }

// A memory runtime whose containers answer exec with the exit code in their command's last word.
const world = Effect.gen(function* () {
  const { runtime } = yield* MemoryRuntime.make({
    behavior: () => ({ exec: (r) => ({ exitCode: Number(r.command.at(-1)), stdout: "out", stderr: "", timedOut: r.command[0] === "slow" }) })
  })
  const sandbox = yield* runtime.sandboxes.create({ podUid: "u1", name: "web", namespace: "default", hostname: "web", network: "host", ports: [], labels: {} })
  const id = yield* runtime.containers.create({ sandboxId: sandbox.id, name: "app", attempt: 0, command: ["run"], env: {}, security: {}, mounts: [], labels: { [ContainerIdentity.Labels.podUid]: "u1" } })
  yield* runtime.containers.start(id)
  const prober = Prober.makeMemory()
  prober.set(31000, "success")
  const run = (handler: HandlerRunner.Handler, timeoutMs = 1000, containerId = id) => HandlerRunner.run(runtime, prober.service, pod, target, "app", containerId, handler, timeoutMs)
  return { run, prober }
})

describe("HandlerRunner", () => {
  const cases: ReadonlyArray<readonly [string, HandlerRunner.Handler, { readonly result: "success" | "failure"; readonly message?: string | RegExp }]> = [
    ["exec exiting 0", { exec: { command: ["check", "0"] } }, { result: "success", message: "" }],
    ["exec exiting 2", { exec: { command: ["check", "2"] } }, { result: "failure", message: "command exited with 2: out" }],
    ["exec timing out", { exec: { command: ["slow", "137"] } }, { result: "failure", message: "command timed out after 1000 ms" }],
    ["httpGet on a named port, through its host port", { httpGet: { port: "http", path: "/healthz" } }, { result: "success" }],
    ["httpGet on an unknown port", { httpGet: { port: "nope" } }, { result: "failure", message: "unknown port nope" }],
    ["tcpSocket on the container port", { tcpSocket: { port: 8080 } }, { result: "success" }],
    ["grpc as a TCP check", { grpc: { port: 8080 } }, { result: "success" }],
    ["tcpSocket on an unknown port", { tcpSocket: { port: "x" } }, { result: "failure", message: "unknown port" }],
    ["nothing to run", {}, { result: "failure", message: "missing probe handler" }]
  ]
  for (const [name, handler, want] of cases) {
    it.scoped(name, () =>
      Effect.gen(function* () {
        const { run } = yield* world
        const outcome = yield* run(handler)
        expect(outcome.result).toBe(want.result)
        if (want.message !== undefined) expect(outcome.message).toMatch(want.message)
      })
    )
  }

  it.scoped("probes reach the pod's address with the host port, path and scheme", () =>
    Effect.gen(function* () {
      const { run, prober } = yield* world
      yield* run({ httpGet: { port: 8080, path: "/ready", scheme: "HTTPS" } })
      yield* run({ tcpSocket: { port: 8080, host: "elsewhere" } })
      expect(prober.probed()).toEqual([
        { _tag: "HttpGet", scheme: "HTTPS", host: "10.0.0.7", port: 31000, path: "/ready", headers: [] },
        { _tag: "TcpSocket", host: "elsewhere", port: 31000 }
      ])
    })
  )

  it.scoped("exec in a container that is gone fails with the runtime's message", () =>
    Effect.gen(function* () {
      const { run } = yield* world
      const outcome = yield* run({ exec: { command: ["x", "0"] } }, 1000, "missing")
      expect(outcome.result).toBe("failure")
      expect(outcome.message).not.toBe("")
    })
  )

  it.scoped("sleep waits its seconds, at most the timeout", () =>
    Effect.gen(function* () {
      const { run } = yield* world
      const fiber = yield* Effect.fork(run({ sleep: { seconds: 5 } }, 2000))
      yield* TestClock.adjust("1999 millis")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect((yield* Fiber.join(fiber)).result).toBe("success")
    })
  )
})
