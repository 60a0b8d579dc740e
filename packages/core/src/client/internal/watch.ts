/**
 * Watches: one connection decoded into events (`watchOnce`), and the recovering watch the
 * informers use, which lists first, reconnects from the last seen resourceVersion, and after a
 * 410 re-lists and emits what changed meanwhile, so a consumer never misses a state.
 */
import { Effect, Option, Schedule, Stream } from "effect"
import * as ApiError from "../../api/ApiError.js"
import * as Status from "../../model/Status.js"
import type { JsonObject } from "../../object/Json.js"
import { keyOf, metadataOf, resourceVersionOf } from "../../object/Metadata.js"
import type { ResourceRef } from "../../object/ResourceRefs.js"
import type { ListOptions, WatchEvent, WatchOptions } from "../Client.js"
import { listAll } from "./list.js"
import { type Rest, failure, headers, messageOf, path, query, send, transportFailure, warn } from "./rest.js"

/** A watch event as it arrives, BOOKMARK and ERROR included. */
type WireEvent = { type: string; object: JsonObject }

/**
 * Watch lines (bytes) into events; an ERROR event ends the stream as an `ApiError`, after the
 * events before it. Chunk by chunk, without an effect per event: an informer's watch carries
 * every change of its resource.
 */
const decodeEvents = <E>(bytes: Stream.Stream<Uint8Array, E>) => {
  const decoder = new TextDecoder()
  let buffer = ""
  let error: Status.Status | undefined
  return bytes.pipe(
    Stream.mapConcat((chunk) => {
      buffer += decoder.decode(chunk, { stream: true })
      const lines = buffer.split("\n")
      buffer = lines.pop()!
      return lines.filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as WireEvent)
    }),
    Stream.takeUntil((e) => e.type === "ERROR"),
    Stream.filter((e) => {
      if (e.type !== "ERROR") return true
      error = e.object as unknown as Status.Status
      return false
    }),
    Stream.concat(Stream.suspend(() => (error === undefined ? Stream.empty : Stream.fail(ApiError.of(error)))))
  )
}

/** The URL (path and query) of one watch connection. */
const watchUrl = (ref: ResourceRef, options: ListOptions): string =>
  `${path(ref, options.namespace)}${query({ ...options, watch: true, allowWatchBookmarks: true })}`

/** One watch connection through fetch, aborted when the stream ends. */
const watchOnceByFetch = (rest: Rest, ref: ResourceRef, options: ListOptions) =>
  Stream.unwrapScoped(
    Effect.gen(function* () {
      const controller = new AbortController()
      yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
      const url = `${rest.server}${watchUrl(ref, options)}`
      const doFetch = rest.fetch
      const response = yield* Effect.tryPromise({
        try: () => doFetch(url, { headers: headers(rest), signal: controller.signal }),
        catch: (e) => ApiError.of(Status.serviceUnavailable(`watch failed: ${messageOf(e)}`))
      })
      warn(rest, response.headers.get("warning"))
      if (!response.ok || response.body === null) return yield* failure(response)
      return decodeEvents(
        Stream.fromReadableStream({
          evaluate: () => response.body!,
          onError: (e) => ApiError.of(Status.serviceUnavailable(`watch stream broke: ${messageOf(e)}`))
        })
      )
    })
  )

/** One watch connection: events until the server ends it; 410 arrives as an `ApiError`. */
export const watchOnce = (
  rest: Rest,
  ref: ResourceRef,
  options: ListOptions
): Stream.Stream<WireEvent, ApiError.ApiError> => {
  const transport = rest.transport
  if (transport === undefined) return watchOnceByFetch(rest, ref, options)
  return Stream.unwrap(
    Effect.flatMap(send(transport, "GET", watchUrl(ref, options), headers(rest)), (response) => {
      warn(rest, response.headers["warning"])
      return response.status >= 400 || response._tag !== "Stream"
        ? transportFailure(response)
        : Effect.succeed(decodeEvents(response.body))
    })
  )
}

/** What a recovering watch knows between connections: the objects it emitted, and where to resume. */
interface Known {
  readonly objects: Map<string, JsonObject>
  /** Resume from here; undefined: (re-)list first. */
  resourceVersion: string | undefined
}

/** List afresh and answer the events that turn the known objects into the listed ones. */
const relist = (rest: Rest, ref: ResourceRef, options: ListOptions, known: Known) =>
  Effect.gen(function* () {
    const { items, resourceVersion: rv } = yield* listAll(rest, ref, { ...options, resourceVersion: "" })
    const events: Array<WatchEvent> = []
    const seen = new Set<string>()
    for (const o of items) {
      const k = keyOf(o)
      seen.add(k)
      const before = known.objects.get(k)
      if (!before) events.push({ type: "ADDED", object: o })
      else if (resourceVersionOf(before) !== resourceVersionOf(o)) events.push({ type: "MODIFIED", object: o })
      known.objects.set(k, o)
    }
    for (const [k, o] of known.objects)
      if (!seen.has(k)) {
        known.objects.delete(k)
        events.push({ type: "DELETED", object: o })
      }
    known.resourceVersion = rv
    return events
  })

/** A connection's events as the client delivers them: bookmarks dropped, each one remembered. */
const follow = (known: Known, e: WireEvent): Option.Option<WatchEvent> => {
  const rv = metadataOf(e.object)["resourceVersion"]
  if (typeof rv === "string" && rv !== "") known.resourceVersion = rv
  if (e.type === "BOOKMARK") return Option.none()
  const type = e.type as WatchEvent["type"]
  if (type === "DELETED") known.objects.delete(keyOf(e.object))
  else known.objects.set(keyOf(e.object), e.object)
  return Option.some({ type, object: e.object })
}

/** One connection of a recovering watch: the (re-)list when it has no resourceVersion, then live events. */
const connection = (
  rest: Rest,
  ref: ResourceRef,
  options: ListOptions,
  onSynced: WatchOptions["onSynced"],
  known: Known
): Stream.Stream<WatchEvent, ApiError.ApiError> =>
  Stream.unwrap(
    Effect.gen(function* () {
      const listed = known.resourceVersion === undefined
      const initial = listed ? yield* relist(rest, ref, options, known) : []
      const synced =
        listed && onSynced !== undefined
          ? Stream.fromEffect(Effect.sync(() => onSynced(known.resourceVersion ?? ""))).pipe(Stream.drain)
          : Stream.empty
      const live = watchOnce(rest, ref, { ...options, resourceVersion: known.resourceVersion ?? "" }).pipe(
        Stream.filterMap((e) => follow(known, e))
      )
      return Stream.concat(Stream.concat(Stream.fromIterable(initial), synced), live)
    })
  )

/**
 * Watch with recovery: start from a list (or `resourceVersion`), reconnect from the last seen
 * resourceVersion when a connection ends, and on 410 re-list and emit what changed meanwhile.
 */
export const watch = (
  rest: Rest,
  ref: ResourceRef,
  options: WatchOptions = {}
): Stream.Stream<WatchEvent, ApiError.ApiError> =>
  Stream.unwrap(
    Effect.sync(() => {
      const { onSynced, ...listOptions } = options
      const known: Known = { objects: new Map(), resourceVersion: options.resourceVersion }
      const recovering = connection(rest, ref, listOptions, onSynced, known).pipe(
        Stream.catchAll((e) =>
          e.status.code === 410
            ? Stream.flatMap(
                Stream.fromEffect(Effect.sync(() => (known.resourceVersion = undefined))),
                () => Stream.empty
              )
            : Stream.fail(e)
        )
      )
      // A connection that ends (server timeout) or is gone (410) starts the next one.
      return Stream.repeat(recovering, Schedule.spaced("200 millis")).pipe(
        Stream.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))))
      )
    })
  )
