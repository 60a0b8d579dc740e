/**
 * The runtime layer's failures: the Runtime port's tagged errors. They cross the wire (the box
 * returns them as JSON), hence Schema.TaggedError. The tags carry a `Runtime` prefix so that an
 * agent effect that can fail with both a Store/API `NotFound` and a runtime one can still tell
 * them apart with `catchTag`.
 */
import { Schema } from "effect"

/** What an error is about: a sandbox, a container or an image. */
export const ObjectKind = Schema.Literal("sandbox", "container", "image")
/** What an error is about. */
export type ObjectKind = typeof ObjectKind.Type

/** The sandbox, container or image does not exist (HTTP 404). */
export class NotFound extends Schema.TaggedError<NotFound>()("RuntimeNotFound", {
  kind: ObjectKind,
  id: Schema.String,
  message: Schema.String
}) {}

/** A sandbox for this pod uid, or a container with this (sandbox, name, attempt), exists (409). */
export class AlreadyExists extends Schema.TaggedError<AlreadyExists>()("RuntimeAlreadyExists", {
  kind: ObjectKind,
  /** The id of the object that is already there, so the caller can adopt it. */
  id: Schema.String,
  message: Schema.String
}) {}

/**
 * The request is malformed, asks for something this runtime cannot do (a limit without cgroups
 * is *not* this: it is reported by `info` and ignored), or does not fit the object's state
 * (start of a container that already ran, exec in one that is not running) (HTTP 400/409).
 */
export class Invalid extends Schema.TaggedError<Invalid>()("RuntimeInvalid", {
  message: Schema.String
}) {}

/** The runtime cannot be reached or failed doing its job: socket gone, spawn failed (503/500). */
export class Unavailable extends Schema.TaggedError<Unavailable>()("RuntimeUnavailable", {
  message: Schema.String
}) {}

/**
 * The runtime cannot do this at all with its driver or network mode (NetworkPolicy enforcement
 * without pod network namespaces) (HTTP 501). Unlike `Unavailable`, retrying will not help.
 */
export class Unsupported extends Schema.TaggedError<Unsupported>()("RuntimeUnsupported", {
  message: Schema.String
}) {}

/** Every failure of the port. */
export type RuntimeError = NotFound | AlreadyExists | Invalid | Unavailable | Unsupported
