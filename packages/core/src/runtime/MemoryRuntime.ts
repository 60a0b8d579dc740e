/**
 * An in-memory Runtime for the agent's unit tests: containers are simulated, not run, but go
 * through the same lifecycle a real runtime shows (created → running → exited, stop signal then
 * SIGKILL after the grace period, exec answers, logs with follow), on the Effect `Clock`, so
 * `TestClock` drives time. What each container does is programmed per spec by a `Behavior`
 * function the test gives; `Control` lets the test act from "outside the node" (a crash, an
 * OOM kill, output) and read what the agent asked for.
 */
import { Context, Effect, Layer } from "effect"
import { containers } from "./internal/memoryContainers.js"
import { images } from "./internal/memoryImages.js"
import { type Node, entryOf, makeNode } from "./internal/memoryNode.js"
import { finish, write } from "./internal/memoryProcess.js"
import { sandboxes } from "./internal/memorySandboxes.js"
import * as Runtime from "./Runtime.js"

/** What one simulated container does. Every field is optional: the default runs until stopped. */
export interface Behavior {
  /** Exit by itself this long after start; absent: run until stopped or killed. */
  readonly exitAfterMs?: number
  /** Exit code of that exit (default 0). */
  readonly exitCode?: number
  /** Reason of that exit (default from the code: `Completed` or `Error`). */
  readonly reason?: Runtime.ExitReason
  /** Fail to start: `start` succeeds but the container exits at once with `StartError`. */
  readonly startError?: string
  /** Lines written at start (to stdout unless given as chunks). */
  readonly output?: ReadonlyArray<string | { readonly stream: "stdout" | "stderr"; readonly line: string }>
  /** Ignore SIGTERM/SIGINT (and the stop signal): only SIGKILL at the end of a grace period ends it. */
  readonly ignoreStopSignal?: boolean
  /** Time the process takes to exit after the stop signal (default 0). */
  readonly shutdownMs?: number
  /** Exit code when the stop signal ends it (default 128 + the signal number, e.g. 143). */
  readonly stopExitCode?: number
  /** Answer of an exec (default exit 0, no output). */
  readonly exec?: (request: Runtime.ExecRequest, container: Runtime.Container) => Runtime.ExecResult
  /** Stats of the running container (default zeros). */
  readonly stats?: (container: Runtime.Container) => Pick<Runtime.Stats, "cpu" | "memory">
}

/** One call the runtime received, for tests to assert on (e.g. no duplicate create). */
export interface Call {
  readonly op:
    | "sandbox.create"
    | "sandbox.remove"
    | "container.create"
    | "container.start"
    | "container.stop"
    | "container.signal"
    | "container.exec"
    | "container.execStream"
    | "container.attach"
    | "container.remove"
    | "container.networkPolicy"
    | "image.pull"
  readonly id: string
  readonly detail?: string
}

/** Options of the memory runtime. */
export interface Options {
  /** Programs each container from its spec (called at create). */
  readonly behavior?: (spec: Runtime.ContainerSpec) => Behavior
  /** Overrides of the reported info (capabilities). */
  readonly info?: Partial<Runtime.Info>
  /**
   * The images a simulated registry holds, by reference (`NAME:TAG`), for `images.pull`; a
   * `password` makes one private (pulled only with that username and password).
   */
  readonly registry?: Readonly<Record<string, RegistryImage>>
}

/** An image of the memory runtime's simulated registry. */
export interface RegistryImage {
  readonly config?: Runtime.ImageConfig
  readonly username?: string
  readonly password?: string
  /** Make pulls of it fail `Unavailable` (a registry that cannot be reached). */
  readonly unreachable?: boolean
}

/** The test's hands on the simulated node. */
export interface ControlService {
  /** Make a running container exit now, as a crash or an outside kill would. */
  readonly exit: (
    id: string,
    exitCode: number,
    options?: { readonly reason?: Runtime.ExitReason; readonly signal?: string }
  ) => Effect.Effect<void, Runtime.NotFound>
  /** Append a line of output to a container's log. */
  readonly write: (id: string, line: string, stream?: "stdout" | "stderr") => Effect.Effect<void, Runtime.NotFound>
  /** Replace the behavior function for containers created from now on. */
  readonly setBehavior: (behavior: (spec: Runtime.ContainerSpec) => Behavior) => Effect.Effect<void>
  /** Every mutating call so far, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<Call>>
  /** The NetworkPolicy rules each sandbox was last given (only with `capabilities.networkPolicy`). */
  readonly networkPolicies: Effect.Effect<ReadonlyMap<string, Runtime.NetworkPolicyRules>>
}

/** Test control of a `MemoryRuntime`. */
export class Control extends Context.Tag("@koder/fleet-core/MemoryRuntime/Control")<Control, ControlService>() {}

/** What the memory runtime reports by default: a plain process runtime without isolation. */
export const defaultInfo: Runtime.Info = {
  name: "memory",
  version: "0.1.0",
  driver: "memory",
  capabilities: {
    isolation: "none",
    namespaces: [],
    cgroups: "none",
    limits: { cpu: false, memory: false, pids: false },
    bindMounts: false,
    runAsUser: false,
    podNetwork: false,
    checkpoint: false,
    networkPolicy: false,
    drivers: ["memory"]
  }
}

/** Normalise `"TERM"`, `"SIGTERM"` or `"15"` to `SIGTERM`; `undefined` for unknown names. */
export { signalName } from "./internal/memorySignals.js"

/** The test's hands on a node: exits, output, behavior, and what the runtime was asked. */
const controlOf = (node: Node): ControlService => ({
  exit: (id, exitCode, opts = {}) =>
    Effect.flatMap(entryOf(node, id), (e) => {
      const signal = opts.signal ?? (exitCode === 137 ? "SIGKILL" : undefined)
      return finish(e, exitCode, {
        ...(opts.reason === undefined ? {} : { reason: opts.reason }),
        ...(signal === undefined ? {} : { signal })
      })
    }),
  write: (id, line, stream = "stdout") => Effect.flatMap(entryOf(node, id), (e) => write(e, stream, line)),
  setBehavior: (behavior) => Effect.sync(() => void (node.behaviorOf = behavior)),
  calls: Effect.sync(() => node.calls.slice()),
  networkPolicies: Effect.sync(() => new Map(node.policies))
})

/** Build a memory runtime in the current scope (its timers stop when the scope closes). */
export const make = (options: Options = {}) =>
  Effect.map(makeNode(options, defaultInfo), (node) => {
    const runtime: Runtime.RuntimeService = {
      info: Effect.succeed(node.info),
      sandboxes: sandboxes(node),
      containers: containers(node),
      images: images(node)
    }
    return { runtime, control: controlOf(node) }
  })

/** The Runtime port and its `Control`, fresh per build of the layer. */
export const layer = (options: Options = {}): Layer.Layer<Runtime.Runtime | Control> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ control, runtime }) =>
      Context.make(Runtime.Runtime, runtime).pipe(Context.add(Control, control))
    )
  )
