/**
 * The core/v1 `Event` kind: a record that something happened to an object (scheduled,
 * pulled, backed off), deduplicated by bumping `count` and `lastTimestamp`.
 */
import { Schema } from "effect"
import { optional } from "./internal/fields.js"
import { ObjectMeta, ObjectReference } from "./Meta.js"
import { Int32, MicroTime, Time } from "./Scalars.js"

/** The severity of an event. */
export const EventType = Schema.Literal("Normal", "Warning")

/** The severity of an event. */
export type EventType = typeof EventType.Type

/** The component (and host) that reported an event. */
export const EventSource = Schema.Struct({
  component: optional(Schema.String),
  host: optional(Schema.String)
})

/** Repetitions of an event in the newer, series-based deduplication. */
export const EventSeries = Schema.Struct({
  count: optional(Int32),
  lastObservedTime: optional(MicroTime)
})

/** The `Event` kind (core/v1). */
export const Event = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Event"),
  metadata: ObjectMeta,
  involvedObject: ObjectReference,
  reason: optional(Schema.String),
  message: optional(Schema.String),
  source: optional(EventSource),
  firstTimestamp: optional(Time),
  lastTimestamp: optional(Time),
  count: optional(Int32),
  type: optional(EventType),
  eventTime: optional(MicroTime),
  series: optional(EventSeries),
  action: optional(Schema.String),
  related: optional(ObjectReference),
  reportingComponent: optional(Schema.String),
  reportingInstance: optional(Schema.String)
})

/** An Event object. */
export type Event = typeof Event.Type
