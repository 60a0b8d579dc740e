/**
 * What a box driver is (`process`, `runc`): the kbox API's operations as plain promises that throw
 * the port's errors, and their adapter to core's Runtime service (`toRuntime`), the one place a
 * driver's calls become Effects.
 */
import { Runtime, type StreamSession } from "@koder/fleet-core"
import { Effect, type Stream } from "effect"

/** `kind id not found`. */
export const notFound = (kind: Runtime.ObjectKind, id: string): Runtime.NotFound =>
  new Runtime.NotFound({ kind, id, message: `${kind} ${id} not found` })
/** A request the driver refuses. */
export const invalid = (message: string): Runtime.Invalid => new Runtime.Invalid({ message })
/** A failure of the driver itself. */
export const unavailable = (message: string): Runtime.Unavailable => new Runtime.Unavailable({ message })

/** What every driver records of a sandbox. */
export interface SandboxRecord {
  readonly id: string
  readonly spec: Runtime.SandboxSpec
  readonly createdAt: string
  readonly bootId: string
}

/** The container reads a driver's ContainerTable answers alike for every driver. */
export interface ContainerReads {
  list(filter?: Runtime.ContainerFilter): Promise<Array<Runtime.Container>>
  logs(id: string, options?: Runtime.LogOptions): Stream.Stream<Runtime.LogChunk, Runtime.NotFound>
  stats(id: string): Runtime.Stats
  processes(id: string): Promise<Array<Runtime.Process>>
}

/** A driver's operations; each may throw (or reject with) the port's errors. */
export interface Driver {
  /** Its containers' table, which answers the reads. */
  readonly table: ContainerReads
  readonly info: Runtime.Info
  createSandbox(spec: Runtime.SandboxSpec): Promise<Runtime.Sandbox>
  getSandbox(id: string): Runtime.Sandbox
  listSandboxes(filter?: Runtime.SandboxFilter): Array<Runtime.Sandbox>
  removeSandbox(id: string): Promise<void>
  createContainer(spec: Runtime.ContainerSpec): Promise<Runtime.Container>
  startContainer(id: string): Promise<Runtime.Container>
  stopContainer(id: string, gracePeriodMs: number): Promise<Runtime.Container>
  signalContainer(id: string, signal: string): Promise<void>
  execContainer(id: string, request: Runtime.ExecRequest): Promise<Runtime.ExecResult>
  /** A streaming exec (see core's StreamSession). */
  execSession(id: string, request: StreamSession.ExecStreamRequest): Promise<StreamSession.StreamSession>
  /** Attach to the main process's output (and stdin, if it was created with one). */
  attachSession(id: string, request: StreamSession.AttachRequest): Promise<StreamSession.StreamSession>
  removeContainer(id: string): Promise<void>
  inspectContainer(id: string): Promise<Runtime.Container>
  applyNetworkPolicy(id: string, rules: Runtime.NetworkPolicyRules): Promise<Runtime.NetworkPolicyApplied>
}

const isRuntimeError = (e: unknown): e is Runtime.RuntimeError =>
  e instanceof Runtime.NotFound ||
  e instanceof Runtime.AlreadyExists ||
  e instanceof Runtime.Invalid ||
  e instanceof Runtime.Unavailable ||
  e instanceof Runtime.Unsupported

/** Run a driver call as an Effect; anything unexpected it throws is `Unavailable`. */
export const call = <A, E extends Runtime.RuntimeError>(f: () => A | Promise<A>): Effect.Effect<A, E> =>
  Effect.tryPromise({
    try: async () => f(),
    catch: (e) => (isRuntimeError(e) ? e : unavailable(e instanceof Error ? e.message : String(e))) as E
  })

/** A driver as core's Runtime service, with its image operations. */
export const toRuntime = (d: Driver, images: Runtime.Images): Runtime.RuntimeService => ({
  info: Effect.succeed(d.info),
  sandboxes: {
    create: (spec) => call(() => d.createSandbox(spec)),
    get: (id) => call(() => d.getSandbox(id)),
    list: (filter) => call(() => d.listSandboxes(filter)),
    remove: (id) => call(() => d.removeSandbox(id))
  },
  containers: {
    create: (spec) => call(() => d.createContainer(spec).then((c) => c.id)),
    start: (id) => call(() => d.startContainer(id).then(() => undefined)),
    stop: (id, { gracePeriodMs }) => call(() => d.stopContainer(id, gracePeriodMs).then((c) => c.status)),
    signal: (id, signal) => call(() => d.signalContainer(id, signal)),
    exec: (id, request) => call(() => d.execContainer(id, request)),
    execStream: (id, request) => call(() => d.execSession(id, request)),
    attach: (id, request) => call(() => d.attachSession(id, request)),
    remove: (id) => call(() => d.removeContainer(id)),
    list: (filter) => call(() => d.table.list(filter)),
    inspect: (id) => call(() => d.inspectContainer(id)),
    logs: (id, options) => d.table.logs(id, options),
    stats: (id) => call(() => d.table.stats(id)),
    processes: (id) => call(() => d.table.processes(id)),
    applyNetworkPolicy: (id, rules) => call(() => d.applyNetworkPolicy(id, rules))
  },
  images
})
