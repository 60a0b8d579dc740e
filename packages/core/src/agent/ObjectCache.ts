/**
 * The objects a pod refers to (ConfigMaps, Secrets, claims, volumes), read with GET (what a node
 * identity may do) and reused for a short time: the kubelet's TTL cache strategy. A pod's first
 * sync reads each once; periodic resyncs re-read them, so projected files follow changes.
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type { JsonObject } from "../object/Json.js"

/** A cached answer: the object, or `undefined` when the API said 404. */
export interface Entry {
  readonly at: number
  readonly value: JsonObject | undefined
}

/** The cache's state: answers by `kind/namespace/name`. */
export interface State {
  readonly entries: Map<string, Entry>
}

/** An object cache over one client. */
export interface ObjectCache {
  readonly state: State
  /** The object (`undefined` when absent), from the cache while younger than the TTL. */
  readonly get: (ref: Client.ResourceRef, namespace: string | undefined, name: string) => Effect.Effect<JsonObject | undefined, ApiError.ApiError>
}

const isNotFound = (e: ApiError.ApiError) => e.status.code === 404

/** A cache reading through `client`, reusing an answer for `ttlMs`. */
export const make = (client: Client.Client, ttlMs: number, state: State = { entries: new Map() }): ObjectCache => ({
  state,
  get: (ref, namespace, name) =>
    Effect.gen(function* () {
      const key = `${ref.kind}/${namespace ?? ""}/${name}`
      const now = yield* Clock.currentTimeMillis
      const hit = state.entries.get(key)
      if (hit !== undefined && now - hit.at < ttlMs) return hit.value
      const value = yield* client.get(ref, namespace, name).pipe(
        Effect.map((o): JsonObject | undefined => o),
        Effect.catchIf(isNotFound, () => Effect.succeed(undefined))
      )
      state.entries.set(key, { at: now, value })
      return value
    })
})
