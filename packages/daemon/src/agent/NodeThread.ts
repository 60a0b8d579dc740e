/**
 * Dev mode's node (the box and the agent) in a worker thread of the dev process. On one thread,
 * the node's work (runtime calls, /proc and cgroup files, pod syncs, their Effect fibers) took
 * turns with the API's, and a burst of pods waited on both; in its own thread it runs on the
 * second core, as a kubelet runs beside its API server. The agent still reaches the API through
 * the main thread's in-process handler (authenticated as its node, every check applied), over a
 * `MessagePort` (`PortTransport`); the main thread reaches the box over its Unix socket, as a
 * server reaches a remote node's box.
 *
 *   main: NodeThread.start ─▶ Worker(NodeThreadMain) ─▶ Box.start + AgentProcess.run ─▶ "ready"
 *         PortTransport.serve(api port) ◀── the agent's requests
 *         scope close ─▶ "stop" ─▶ agent.stopAll (every workload ends), box closes ─▶ "stopped"
 *
 * Metrics the node records (pod start latency, syncs) are sent to the main thread every second
 * and served with the process's own (`registry.register`).
 */
import type { InProcess, MetricRegistry } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads"
import * as PortTransport from "../internal/PortTransport.js"
import type * as ShimFlag from "../box/ShimFlag.js"

/** What the worker is started with (structured-cloneable). */
export interface WorkerData {
  readonly server: string
  readonly token: string
  readonly nodeName: string
  readonly boxDir: string
  /** How the box starts containers (`koder-fleet box --shim`). */
  readonly shim: ShimFlag.Shim
  /** The box's cgroups (`koder-fleet box --cgroups`; default auto). */
  readonly cgroups?: "auto" | "none"
  /** The box's driver (`koder-fleet box --driver`; default process). */
  readonly driver?: "process" | "runc"
  /** The runc driver's registries.yaml. */
  readonly registries?: string
  /** Pods with limits the box cannot enforce run anyway (`--allow-unenforced-limits`). */
  readonly allowUnenforcedLimits?: boolean
  readonly agentDir: string
  readonly reserved: Readonly<Record<string, string>>
  readonly region: string | undefined
  readonly clusterDns: string | undefined
  /** The log settings main was given; the level by its label (`INFO`). */
  readonly logging: { readonly format: "json" | "text"; readonly level: string } | undefined
  /** The longest grace a pod gets when the node stops (`--shutdown-grace`, seconds; undefined: its own). */
  readonly stopGraceSeconds?: number
}

/** Messages from the worker. */
export type FromWorker =
  | { readonly t: "ready"; readonly nodeName: string; readonly socketPath: string; readonly box: Running["box"] }
  | { readonly t: "failed"; readonly message: string }
  | { readonly t: "metrics"; readonly families: ReadonlyArray<MetricRegistry.Family> }
  | { readonly t: "stopped" }

/** Messages to the worker. */
export type ToWorker = { readonly t: "start"; readonly data: WorkerData; readonly api: MessagePort } | { readonly t: "stop" }

/** A node running in its worker. */
export interface Running {
  readonly nodeName: string
  readonly socketPath: string
  /** The box's name and version, and how it starts containers (Box.shim). */
  readonly box: { readonly name: string; readonly version: string; readonly shim: string | undefined; readonly limitsEnforced?: boolean }
}

/** Stopping waits this long (by default) for the node to end its workloads before the thread is ended. */
const defaultStopTimeoutMs = 60_000

// Built, the worker is its own entry beside main.js; from source (tests, benchmarks, tsx), the
// worker registers tsx itself: a worker thread does not inherit the main thread's loader hooks.
const entry = (): URL => {
  if (!import.meta.url.endsWith(".ts")) return new URL("./nodeThread.js", import.meta.url)
  const source = new URL("./NodeThreadMain.ts", import.meta.url).href
  const code = `import { register } from ${JSON.stringify(import.meta.resolve("tsx/esm/api"))}; register(); await import(${JSON.stringify(source)})`
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`)
}

/**
 * Create the node's thread now, to load its modules while the server starts (its first start
 * would otherwise add their loading to dev's); it waits for `start`, and does not keep the process
 * alive until then.
 */
export const spawn = (): Worker => {
  // The box hands descriptors it opened to sockets (a container's FIFOs: ContainerLogs), which
  // close them without fs.close. A tracking worker kept each such number as its own, warned
  // "opened in unmanaged mode twice" once the number was reused, and would close whatever held
  // the numbers when the thread exits: the process's other descriptors among them. The node
  // closes its own on stop (box.close), so nothing is tracked.
  const worker = new Worker(entry(), { trackUnmanagedFds: false })
  worker.unref()
  return worker
}

/**
 * Start the node in `worker` (from `spawn`), answering its API requests with `handle`, and wait
 * until its agent runs. The scope's close ends every workload and then the thread. A thread that
 * fails or exits on its own later is reported to `onLost` (its workloads stay under their shims;
 * the next start adopts them).
 */
export const start = (options: {
  readonly worker: Worker
  readonly handle: InProcess.Handle
  readonly data: WorkerData
  readonly registry: MetricRegistry.Registry
  /** Told when the thread fails or exits on its own after its start (the process should stop). */
  readonly onLost: (message: string) => void
  /** How long a stop may take before the thread is ended (default 60 s). */
  readonly stopTimeoutMs?: number
  /** Run (synchronously) when a stop timed out, before the thread is ended: what it did not stop must not outlive it. */
  readonly hardStop?: () => void
}): Effect.Effect<Running, { readonly message: string }, Scope.Scope> =>
  Effect.gen(function* () {
    const channel = new MessageChannel()
    yield* PortTransport.serve(channel.port1, options.handle, `system:node:${options.data.nodeName}`)
    let families: ReadonlyArray<MetricRegistry.Family> = []
    const unregister = options.registry.register(() => families)
    yield* Effect.addFinalizer(() => Effect.sync(unregister))
    let stopping = false
    let onStopped: () => void = () => {}
    const worker = options.worker
    worker.ref()
    // Whatever happens below, the thread does not outlive the scope (a graceful stop comes first).
    yield* Effect.addFinalizer(() => Effect.promise(() => worker.terminate()))
    const running = yield* Effect.async<Running, { readonly message: string }>((resume) => {
      let started = false
      worker.on("message", (m: FromWorker) => {
        if (m.t === "metrics") families = m.families
        else if (m.t === "ready") {
          started = true
          resume(Effect.succeed({ nodeName: m.nodeName, socketPath: m.socketPath, box: m.box }))
        } else if (m.t === "failed") resume(Effect.fail({ message: m.message }))
        else if (m.t === "stopped") onStopped()
      })
      worker.on("error", (e) => {
        if (!started) return resume(Effect.fail({ message: `the node thread failed: ${e.message}` }))
        options.onLost(`the node thread failed: ${e.stack ?? e.message}`)
      })
      worker.postMessage({ t: "start", data: options.data, api: channel.port2 } satisfies ToWorker, [channel.port2])
      worker.on("exit", (code) => {
        onStopped()
        if (!started) return resume(Effect.fail({ message: `the node thread exited (${code}) before its agent ran` }))
        if (stopping) return
        options.onLost(`the node thread exited (${code}); its workloads are adopted on the next start`)
      })
    })
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        stopping = true
        const timer = setTimeout(() => {
          options.hardStop?.()
          void worker.terminate()
        }, options.stopTimeoutMs ?? defaultStopTimeoutMs)
        onStopped = () => {
          onStopped = () => {}
          clearTimeout(timer)
          resume(Effect.void)
        }
        worker.postMessage({ t: "stop" } satisfies ToWorker)
      })
    )
    return running
  })
