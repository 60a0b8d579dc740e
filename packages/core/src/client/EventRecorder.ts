/**
 * Records core/v1 Events about objects, aggregated as client-go's EventCorrelator does: the same
 * event (same object, type, reason, message, source) repeated is one Event object whose `count`
 * and `lastTimestamp` grow, not a new object each time. The name is derived from what makes the
 * event the same, so several recorders (or a restarted one) aggregate into one object too.
 * Recording never fails its caller: an event that cannot be written is dropped.
 *
 * Like client-go's correlator, the recorder remembers the counts of the events it wrote lately, so
 * a first occurrence is one create and a repeat one patch — no read before every write. Another
 * recorder's (or an earlier process's) event of the same name makes the create answer
 * AlreadyExists; only then is it read to continue its count.
 */
import { Clock, Effect } from "effect"
import type * as Client from "./Client.js"
import * as ApiError from "../api/ApiError.js"
import { metadataOf, nameOf, namespaceOrUndefined, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"

/** Records events. */
export interface EventRecorder {
  /** Record that `reason` happened to `object` (a Warning when `type` says so). */
  readonly record: (object: Client.JsonObject, type: "Normal" | "Warning", reason: string, message: string) => Effect.Effect<void>
}

// FNV-1a, 32 bits: a short stable suffix; collisions only merge two events' counts.
const fnv = (text: string): string => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0).toString(16).padStart(8, "0")
}


// How many recent events' counts a recorder keeps (client-go's correlator keeps 4,096 too).
const remembered = 4096

/** How a recorder writes. */
export interface Options {
  /**
   * One write at a time, in the order recorded, as client-go's broadcaster sends a kubelet's
   * events from one goroutine: callers that fork `record` then never put a burst of event writes
   * ahead of their own work on the server (a node starting 100 pods at once).
   */
  readonly serial?: boolean
  /**
   * Wait for this before writing an event recorded at `recordedAtMs` (ms since the epoch): events
   * as background work, written once their recorder's owner is idle. The agent waits until no pod
   * is being synced (at most a few seconds), so a node starting 100 pods writes their Started
   * events after starting them, not in between: each write is a whole API create, and in a burst
   * they took a seventh of the machine's CPU. The event keeps the time it was recorded at.
   */
  readonly whenIdle?: (recordedAtMs: number) => Effect.Effect<void>
}

/** A recorder writing through `client`, reporting as `component` (on `host`, if given). */
export const make = (client: Client.Client, source: { readonly component: string; readonly host?: string }, options: Options = {}): EventRecorder => {
  const one = options.serial === true ? Effect.unsafeMakeSemaphore(1).withPermits(1) : <A, E, R>(effect: Effect.Effect<A, E, R>) => effect
  // Event name → the count last written; insertion order makes it an LRU.
  const counts = new Map<string, number>()
  const remember = (name: string, count: number) => {
    counts.delete(name)
    counts.set(name, count)
    if (counts.size > remembered) counts.delete(counts.keys().next().value!)
  }
  const bump = (namespace: string, name: string, count: number, now: string) =>
    client.patch(ResourceRefs.Event, namespace, name, "merge", { count, lastTimestamp: now }).pipe(Effect.tap(() => remember(name, count)))
  return {
  record: (object, type, reason, message) =>
    Effect.flatMap(Clock.currentTimeMillis, (recordedAt) => one(Effect.gen(function* () {
      if (options.whenIdle !== undefined) yield* options.whenIdle(recordedAt)
      const name = nameOf(object)
      const namespace = namespaceOrUndefined(object) ?? "default"
      const uid = uidOf(object)
      const eventName = `${name}.${fnv([source.component, source.host ?? "", object["kind"], namespace, name, uid, type, reason, message].join("\u0000"))}`
      const now = new Date(recordedAt).toISOString().replace(/\.\d+Z$/, "Z")
      const known = counts.get(eventName)
      if (known !== undefined) {
        // Expired meanwhile (the event TTL): write it anew below.
        const bumped = yield* Effect.either(bump(namespace, eventName, known + 1, now))
        if (bumped._tag === "Right") return
        counts.delete(eventName)
      }
      const created = yield* Effect.either(client.create({
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: eventName, namespace },
        involvedObject: {
          apiVersion: object["apiVersion"],
          kind: object["kind"],
          namespace: metadataOf(object)["namespace"],
          name,
          uid,
          resourceVersion: metadataOf(object)["resourceVersion"]
        },
        reason,
        message,
        type,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: source.host === undefined ? { component: source.component } : { component: source.component, host: source.host },
        reportingComponent: source.component,
        reportingInstance: source.host ?? ""
      }))
      if (created._tag === "Right") return remember(eventName, 1)
      if (!(created.left instanceof ApiError.ApiError && created.left.status.reason === "AlreadyExists")) return yield* created.left
      const existing = yield* client.get(ResourceRefs.Event, namespace, eventName)
      yield* bump(namespace, eventName, Number(existing["count"] ?? 1) + 1, now)
    }))).pipe(Effect.ignore)
  }
}
