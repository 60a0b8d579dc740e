/**
 * Admission: the plugins a write passes after authorization and before the store (DESIGN §5).
 * Mutating plugins run first, in order, and may change the object; validating plugins run next
 * and may refuse it, or contribute store operations that must commit atomically with the write
 * (ResourceQuota reserves usage this way, so concurrent creates cannot overshoot).
 *
 *   decode ─▶ defaults ─▶ mutate(plugin…) ─▶ strategy validation ─▶ validate(plugin…) ─▶ store.txn([write, …ops])
 */
import { Effect, FiberRef } from "effect"
import type { TxnOp } from "../store/Store.js"
import type { ApiError } from "./ApiError.js"
import type { UserInfo } from "./Http.js"
import type { JsonObject, Resource } from "./Registry.js"

/** The operation being admitted. */
export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT"

/** What a plugin sees. */
export interface Request {
  readonly operation: Operation
  readonly user: UserInfo
  readonly resource: Resource
  readonly subresource: string
  readonly namespace: string
  readonly name: string
  /** The object to be stored (CREATE, UPDATE); the object being deleted (DELETE). */
  readonly object: JsonObject
  /** The stored object (UPDATE, DELETE). */
  readonly oldObject: JsonObject | undefined
  readonly dryRun: boolean
}

/** One admission plugin. */
export interface Plugin {
  readonly name: string
  /** Change the object (or fail). */
  readonly mutate?: (request: Request) => Effect.Effect<JsonObject, ApiError>
  /** Refuse the object (fail), or name store operations to commit atomically with the write. */
  readonly validate?: (request: Request) => Effect.Effect<ReadonlyArray<TxnOp>, ApiError>
}

/** Run the mutating plugins in order. */
export const mutate = (plugins: ReadonlyArray<Plugin>, request: Request): Effect.Effect<JsonObject, ApiError> =>
  Effect.reduce(plugins, request.object, (object, plugin) => (plugin.mutate ? plugin.mutate({ ...request, object }) : Effect.succeed(object)))

/** Run the validating plugins; the store operations they contribute, in plugin order. */
export const validate = (plugins: ReadonlyArray<Plugin>, request: Request): Effect.Effect<ReadonlyArray<TxnOp>, ApiError> =>
  Effect.map(
    Effect.forEach(plugins, (plugin) => (plugin.validate ? plugin.validate(request) : Effect.succeed([] as ReadonlyArray<TxnOp>))),
    (ops) => ops.flat()
  )

/**
 * What admission says of one request besides its verdict: warnings for the client (the API
 * server sends them as `Warning: 299 - "…"` headers, as kube-apiserver does) and annotations
 * for the request's audit record (`pod-security.kubernetes.io/audit-violations`, …).
 */
export interface Notes {
  readonly warnings: Array<string>
  readonly annotations: Record<string, string>
}

/** A fresh, empty set of notes. */
export const emptyNotes = (): Notes => ({ warnings: [], annotations: {} })

/**
 * The notes of the request a fiber serves: set by the API server around each request, absent
 * elsewhere (a plugin run outside a request notes nothing). A FiberRef rather than a return
 * value, so a plugin that warns needs no change to the verdict types every plugin shares.
 */
export const currentNotes = FiberRef.unsafeMake<Notes | undefined>(undefined)

/** Add a warning for the client (once: admission may run again after a lost compare-and-swap). */
export const warn = (message: string): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentNotes), (notes) =>
    Effect.sync(() => {
      if (notes !== undefined && !notes.warnings.includes(message)) notes.warnings.push(message)
    })
  )

/** Add an annotation to the request's audit record. */
export const annotate = (key: string, value: string): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(currentNotes), (notes) =>
    Effect.sync(() => {
      if (notes !== undefined) notes.annotations[key] = value
    })
  )
