/**
 * Records core/v1 Events about objects, aggregated as client-go's EventCorrelator does: the same
 * event (same object, type, reason, message, source) repeated is one Event object whose `count`
 * and `lastTimestamp` grow, not a new object each time. The name is derived from what makes the
 * event the same, so several recorders (or a restarted one) aggregate into one object too.
 * Recording never fails its caller: an event that cannot be written is dropped.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"

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

const EventRef: Client.ResourceRef = { apiVersion: "v1", kind: "Event" }

/** A recorder writing through `client`, reporting as `component` (on `host`, if given). */
export const make = (client: Client.Client, source: { readonly component: string; readonly host?: string }): EventRecorder => ({
  record: (object, type, reason, message) =>
    Effect.gen(function* () {
      const m = (object["metadata"] ?? {}) as Record<string, unknown>
      const name = String(m["name"] ?? "")
      const namespace = (m["namespace"] as string | undefined) ?? "default"
      const uid = String(m["uid"] ?? "")
      const eventName = `${name}.${fnv([source.component, source.host ?? "", object["kind"], namespace, name, uid, type, reason, message].join("\u0000"))}`
      const now = new Date(yield* Clock.currentTimeMillis).toISOString().replace(/\.\d+Z$/, "Z")
      const existing = yield* Effect.option(client.get(EventRef, namespace, eventName))
      if (existing._tag === "Some") {
        const count = Number(existing.value["count"] ?? 1) + 1
        yield* client.patch(EventRef, namespace, eventName, "merge", { count, lastTimestamp: now })
        return
      }
      yield* client.create({
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: eventName, namespace },
        involvedObject: {
          apiVersion: object["apiVersion"],
          kind: object["kind"],
          namespace: m["namespace"],
          name,
          uid,
          resourceVersion: m["resourceVersion"]
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
      })
    }).pipe(Effect.ignore)
})
