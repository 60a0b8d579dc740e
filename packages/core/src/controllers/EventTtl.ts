/**
 * The event TTL controller: deletes core/v1 Events not touched for `ttlMs` (default 1 hour),
 * which kube-apiserver does with an etcd lease on every event write (`--event-ttl`). An event's
 * age counts from its last occurrence — `lastTimestamp`, else `series.lastObservedTime`, else
 * `eventTime`, else `firstTimestamp`, else its creation — so an aggregated event that keeps
 * recurring stays. Resync-based: every `resyncMs` (default 1 minute) the events past the TTL in
 * the informer are queued, and each is deleted with its resourceVersion as a precondition, so an
 * event bumped meanwhile by a recorder survives until it is old again.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import type * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import { type JsonObject, asObject } from "../object/Json.js"
import { metadataOf, timeMs } from "../object/Metadata.js"


/** The Event resource. */
export const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }

/** The default time to live (kube-apiserver's `--event-ttl`). */
export const defaultTtlMs = 60 * 60 * 1000


/** When the event last happened (ms since the epoch), or undefined when it carries no time. */
export const lastSeenMs = (event: JsonObject): number | undefined =>
  timeMs(event["lastTimestamp"]) ??
  timeMs(asObject(event["series"])["lastObservedTime"]) ??
  timeMs(event["eventTime"]) ??
  timeMs(event["firstTimestamp"]) ??
  timeMs(metadataOf(event)["creationTimestamp"])

/** Whether the event has outlived `ttlMs` at `nowMs` (pure). */
export const decide = (event: JsonObject, nowMs: number, ttlMs: number = defaultTtlMs): boolean => {
  const seen = lastSeenMs(event)
  return seen !== undefined && seen + ttlMs <= nowMs
}

/** Options of the controller. */
export interface Options {
  /** How long an event lives after its last occurrence (default 1 hour). */
  readonly ttlMs?: number
  /** How often expired events are looked for (default 60 000 ms). */
  readonly resyncMs?: number
}

/** The event TTL reconciler (keys: `namespace/name` of expired events). */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const ttlMs = options.ttlMs ?? defaultTtlMs
  return {
    name: "event-ttl",
    primary: EventRef,
    // Events change all the time; only the resync's expired ones are worth a look.
    reactToPrimary: false,
    resync: {
      everyMs: options.resyncMs ?? 60_000,
      keys: (informers) => {
        const now = Date.now()
        return informers
          .for(EventRef)
          .list()
          .filter((e) => decide(e, now, ttlMs))
          .map(Informer.keyOf)
      }
    },
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        const { namespace, name } = Informer.splitKey(key)
        const event = ctx.informers.for(EventRef).get(namespace, name)
        if (event === undefined || !decide(event, yield* Clock.currentTimeMillis, ttlMs)) return
        yield* ctx.client
          .delete(EventRef, namespace, name, { preconditions: { uid: metadataOf(event)["uid"], resourceVersion: metadataOf(event)["resourceVersion"] } })
          .pipe(Effect.catchIf((e) => e.status.code === 404 || e.status.code === 409, () => Effect.void))
      })
  }
}
