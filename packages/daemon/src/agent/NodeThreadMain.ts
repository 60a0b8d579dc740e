/**
 * The entry of dev mode's node thread (`NodeThread`): the box and the agent, the agent talking to
 * the main thread's API over the port it was given. It loads its modules, then waits for "start";
 * it answers "ready" once the agent runs (or "failed"), sends its metrics every second, and on
 * "stop" ends every workload, closes the box and answers "stopped".
 */
import { MetricRegistry } from "@koder/fleet-core"
import { Cause, Effect, Exit, LogLevel, Option } from "effect"
import { writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { parentPort, type MessagePort } from "node:worker_threads"
import * as Box from "../box/Box.js"
import * as EventLoopScheduler from "../v8/EventLoopScheduler.js"
import * as PortTransport from "../internal/PortTransport.js"
import * as Logging from "../observability/Logging.js"
import * as AgentProcess from "./AgentProcess.js"
import * as MemoryDir from "./MemoryDir.js"
import type { FromWorker, ToWorker, WorkerData } from "./NodeThread.js"

// Name this thread (Linux): `top -H`, `ps -L` and the agent benchmark then tell it from the main
// thread and from V8's and libuv's helpers, which are all called "node".
try {
  writeFileSync("/proc/thread-self/comm", "fleet-node")
} catch {
  // Not Linux, or no /proc: the name is only a convenience.
}

const control = parentPort!
const post = (message: FromWorker) => control.postMessage(message)
// The modules are loaded (the imports above): wait for what to run.
const { data, api } = await new Promise<{ readonly data: WorkerData; readonly api: MessagePort }>((resolve) => {
  const on = (m: ToWorker) => {
    if (m.t !== "start") return
    control.off("message", on)
    resolve(m)
  }
  control.on("message", on)
})

const stopAsked = Effect.async<void>((resume) => {
  const on = (m: ToWorker) => {
    if (m.t !== "stop") return
    control.off("message", on)
    resume(Effect.void)
  }
  control.on("message", on)
})

const node = Effect.gen(function* () {
  // The box's requests run on this thread's fiber scheduler too.
  const fibers = yield* EventLoopScheduler.defaultRuntime
  const boxConfig = Box.parseFlags(["--data-dir", data.boxDir, "--socket", join(data.boxDir, "box.sock"), "--shim", data.shim, "--cgroups", data.cgroups ?? "auto", "--driver", data.driver ?? "process", ...(data.registries === undefined ? [] : ["--registries", data.registries]), "--hide", dirname(data.boxDir), "--hide", data.agentDir, "--hide", MemoryDir.pathFor(data.agentDir)])
  if (typeof boxConfig === "string") return yield* Effect.fail({ message: boxConfig })
  const box = yield* Effect.acquireRelease(
    Effect.tryPromise({
      try: () => Box.start(boxConfig, fibers),
      catch: (e) => ({ message: `cannot start the box in ${data.boxDir}: ${e instanceof Error ? e.message : String(e)}` })
    }),
    (b) => Effect.promise(() => b.close())
  )
  const running = yield* AgentProcess.run({
    server: data.server,
    token: data.token,
    transport: PortTransport.transport(api),
    boxSocket: box.socketPath,
    // The agent drives the box of its own thread directly: no kbox HTTP round trip per call.
    runtime: box.runtime,
    nodeName: data.nodeName,
    dataDir: data.agentDir,
    reserved: data.reserved,
    ...(data.allowUnenforcedLimits === true ? { allowUnenforcedLimits: true } : {}),
    ...(data.region === undefined ? {} : { region: data.region }),
    ...(data.clusterDns === undefined ? {} : { clusterDns: data.clusterDns }),
    ...(data.stopGraceSeconds === undefined ? {} : { tuning: { stopGraceSeconds: data.stopGraceSeconds } })
  })
  // Runs before the box closes (finalizers run in reverse): a stop ends every workload.
  yield* Effect.addFinalizer(() => running.agent.stopAll)
  const metrics = setInterval(() => post({ t: "metrics", families: MetricRegistry.global.snapshot() }), 1000)
  yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(metrics)))
  post({ t: "ready", nodeName: running.nodeName, socketPath: box.socketPath, box: { name: box.info.name, version: box.info.version, shim: box.shim, limitsEnforced: box.info.capabilities.limits.cpu && box.info.capabilities.limits.memory } })
  yield* stopAsked
})

const level = LogLevel.allLevels.find((l) => l.label === data.logging?.level)
if (data.logging !== undefined && level !== undefined) Logging.configure({ format: data.logging.format, level })
// This thread's fibers, like the main thread's, leave the event loop a turn every few milliseconds.
const exit = await Effect.runPromiseExit(Logging.provide(Effect.scoped(node)).pipe(Effect.provide(EventLoopScheduler.layer())))
if (Exit.isFailure(exit)) {
  const failure = Cause.failureOption(exit.cause).pipe(Option.match({ onNone: () => Cause.pretty(exit.cause), onSome: (e) => e.message }))
  post({ t: "failed", message: failure })
} else post({ t: "stopped" })
api.close()
control.close()
