/**
 * The typed Fleet API client for TypeScript consumers (the CLI, the hub, embedding services).
 * It speaks the Kubernetes REST conventions over an injected `fetch` (so core stays free of HTTP
 * libraries; the caller supplies one that trusts the cluster CA), maps every error Status to an
 * `ApiError`, and offers `watch` as a Stream that reconnects from the last resourceVersion and,
 * after a 410, re-lists and emits the difference, so a consumer never misses a state.
 */
import { Effect, Option, Schedule, Stream } from "effect"
import * as Kinds from "../model/Kinds.js"
import * as Status from "../model/Status.js"
import * as ApiError from "../api/ApiError.js"
import type { JsonObject } from "../object/Json.js"
import type { ResourceRef } from "../object/ResourceRefs.js"
import type { ApiRequest, ApiResponse } from "../api/Http.js"
import * as Warnings from "./Warnings.js"
import { metadataOf } from "../object/Metadata.js"

/** A JSON object from the API. */
export type { JsonObject } from "../object/Json.js"

/** How to reach a server. */
export interface Config {
  /** Base URL, e.g. `https://127.0.0.1:9300`. */
  readonly server: string
  /** Bearer token. */
  readonly token?: string
  /** The fetch to use (one that trusts the cluster CA). Defaults to the global fetch. */
  readonly fetch?: typeof globalThis.fetch
  /** Instead of fetch: hand requests to an API handler in the same process (`InProcess.transport`). */
  readonly transport?: Transport
  /**
   * Called with the text of each `Warning: 299` the server answers (admission, deprecations,
   * unknown fields), on successes and failures alike; kubectl prints them as `Warning: <text>`.
   */
  readonly onWarning?: (text: string) => void
}

/**
 * Sends a request as the API handler takes it and answers as the handler does, without HTTP: the
 * in-process client of controllers and the scheduler, which would otherwise spend more on building
 * and reading WHATWG Requests, Responses and streams than the server spends on the request.
 */
export type Transport = (request: Omit<ApiRequest, "user" | "client">) => Effect.Effect<ApiResponse>

/** Names a resource: apiVersion plus kind (built-in) or plural (any, incl. CRDs). */
export type { ResourceRef } from "../object/ResourceRefs.js"

/** A watch event as the client delivers it. */
export interface WatchEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED"
  readonly object: JsonObject
}

/** List and watch options. */
export interface ListOptions {
  readonly namespace?: string
  readonly labelSelector?: string
  readonly fieldSelector?: string
  readonly limit?: number
  readonly continue?: string
  readonly resourceVersion?: string
  /** For watches: ask the server to end each connection after this long (the client reconnects). */
  readonly timeoutSeconds?: number
}

/** Watch options. */
export interface WatchOptions extends ListOptions {
  /**
   * Called after each (re)list has been emitted, with the list's resourceVersion: from then on the
   * consumer's view is complete (informers use it for "has synced").
   */
  readonly onSynced?: (resourceVersion: string) => void
}

/** The patch flavours the API accepts. */
export type PatchType = "json" | "merge" | "strategic"

const patchTypes: Record<PatchType, string> = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json"
}


/** The path of a collection or object. */
export const path = (ref: ResourceRef, namespace: string | undefined, name?: string, subresource?: string): string => {
  const info = ref.kind ? Option.getOrUndefined(Kinds.kindFor(ref.apiVersion, ref.kind)) : undefined
  const plural = ref.plural ?? info?.plural ?? `${(ref.kind ?? "").toLowerCase()}s`
  const namespaced = ref.namespaced ?? info?.namespaced ?? true
  const base = ref.apiVersion.includes("/") ? `/apis/${ref.apiVersion}` : `/api/${ref.apiVersion}`
  const ns = namespaced && namespace !== undefined ? `/namespaces/${encodeURIComponent(namespace)}` : ""
  return `${base}${ns}/${plural}${name !== undefined ? `/${encodeURIComponent(name)}` : ""}${subresource ? `/${subresource}` : ""}`
}

const query = (options: ListOptions & { readonly watch?: boolean; readonly allowWatchBookmarks?: boolean }) => {
  const q = new URLSearchParams()
  if (options.labelSelector) q.set("labelSelector", options.labelSelector)
  if (options.fieldSelector) q.set("fieldSelector", options.fieldSelector)
  if (options.limit) q.set("limit", String(options.limit))
  if (options.continue) q.set("continue", options.continue)
  if (options.resourceVersion !== undefined) q.set("resourceVersion", options.resourceVersion)
  if (options.watch) q.set("watch", "true")
  if (options.watch && options.timeoutSeconds) q.set("timeoutSeconds", String(options.timeoutSeconds))
  if (options.allowWatchBookmarks) q.set("allowWatchBookmarks", "true")
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

/** A client. */
export const make = (config: Config) => {
  const doFetch = config.fetch ?? globalThis.fetch
  const headers = (extra: Record<string, string> = {}): Record<string, string> => ({
    accept: "application/json",
    ...(config.token ? { authorization: `Bearer ${config.token}` } : {}),
    ...extra
  })

  /** Hand a response's `Warning` header to `onWarning`, text by text. */
  const warn = (value: string | null | undefined): void => {
    if (config.onWarning === undefined || value === null || value === undefined) return
    for (const text of Warnings.messages(value)) config.onWarning(text)
  }

  const failure = (response: Response) =>
    Effect.flatMap(
      Effect.promise(() => response.text()),
      (text) => {
        try {
          const body = JSON.parse(text) as Status.Status
          if (body && body.kind === "Status") return Effect.fail(ApiError.of(body))
        } catch {
          // not a Status: fall through
        }
        return Effect.fail(ApiError.of({ ...Status.internalError(text.slice(0, 200)), code: response.status }))
      }
    )

  const transport = config.transport
  const encoder = new TextEncoder()
  /** `url` (path and query) through the transport; a JSON body comes back as its own copy. */
  const send = (via: Transport, method: string, url: string, headers: Record<string, string>, body?: Uint8Array) => {
    const q = url.indexOf("?")
    return via({
      method,
      path: decodeURIComponent(q < 0 ? url : url.slice(0, q)),
      query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)),
      headers,
      body
    })
  }
  /** A JSON response's body, parsed anew: the handler's object may be shared with its caches. */
  const copy = (body: unknown): unknown => JSON.parse(typeof body === "string" ? body : JSON.stringify(body))
  const transportFailure = (response: ApiResponse) => {
    const body = response._tag === "Json" ? copy(response.body) : undefined
    const status = body as Status.Status | undefined
    return Effect.fail(status?.kind === "Status" ? ApiError.of(status) : ApiError.of({ ...Status.internalError(`status ${response.status}`), code: response.status }))
  }

  const request = (method: string, url: string, body?: unknown, contentType = "application/json") =>
    transport !== undefined
      ? Effect.flatMap(
          send(transport, method, url, headers(body === undefined ? {} : { "content-type": contentType }), body === undefined ? undefined : encoder.encode(JSON.stringify(body))),
          (response) => {
            warn(response.headers["warning"])
            return response.status >= 400 || response._tag !== "Json" ? transportFailure(response) : Effect.succeed(copy(response.body) as JsonObject)
          }
        )
      : requestByFetch(method, url, body, contentType)

  const requestByFetch = (method: string, url: string, body?: unknown, contentType = "application/json") =>
    Effect.gen(function* () {
      const response = yield* Effect.tryPromise({
        try: (signal) =>
          doFetch(`${config.server}${url}`, {
            method,
            headers: headers(body === undefined ? {} : { "content-type": contentType }),
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
            signal
          }),
        catch: (e) => ApiError.of(Status.serviceUnavailable(`cannot reach ${config.server}: ${e instanceof Error ? e.message : String(e)}`))
      })
      warn(response.headers.get("warning"))
      if (!response.ok) return yield* failure(response)
      return (yield* Effect.promise(() => response.json())) as JsonObject
    })

  const refOf = (o: JsonObject): ResourceRef => ({ apiVersion: String(o["apiVersion"]), kind: String(o["kind"]) })

  const list = (ref: ResourceRef, options: ListOptions = {}) => request("GET", `${path(ref, options.namespace)}${query(options)}`)

  /** Every item across pages (following `continue`). */
  const listAll = (ref: ResourceRef, options: ListOptions = {}) =>
    Effect.gen(function* () {
      const items: Array<JsonObject> = []
      let token: string | undefined
      let resourceVersion = ""
      do {
        const page = yield* list(ref, { ...options, ...(token ? { continue: token } : {}) })
        items.push(...((page["items"] as Array<JsonObject> | undefined) ?? []))
        const m = metadataOf(page)
        token = (m["continue"] as string | undefined) || undefined
        resourceVersion = String(m["resourceVersion"] ?? "")
      } while (token)
      return { items, resourceVersion }
    })

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
        return lines.filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as { type: string; object: JsonObject })
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

  /** One watch connection: events until the server ends it; 410 arrives as an `ApiError`. */
  const watchOnce = (ref: ResourceRef, options: ListOptions) =>
    transport !== undefined
      ? Stream.unwrap(
          Effect.flatMap(
            send(transport, "GET", `${path(ref, options.namespace)}${query({ ...options, watch: true, allowWatchBookmarks: true })}`, headers()),
            (response) => {
              warn(response.headers["warning"])
              return response.status >= 400 || response._tag !== "Stream" ? transportFailure(response) : Effect.succeed(decodeEvents(response.body))
            }
          )
        )
      : watchOnceByFetch(ref, options)

  const watchOnceByFetch = (ref: ResourceRef, options: ListOptions) =>
    Stream.unwrapScoped(
      Effect.gen(function* () {
        const controller = new AbortController()
        yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
        const url = `${config.server}${path(ref, options.namespace)}${query({ ...options, watch: true, allowWatchBookmarks: true })}`
        const response = yield* Effect.tryPromise({
          try: () => doFetch(url, { headers: headers(), signal: controller.signal }),
          catch: (e) => ApiError.of(Status.serviceUnavailable(`watch failed: ${e instanceof Error ? e.message : String(e)}`))
        })
        warn(response.headers.get("warning"))
        if (!response.ok || response.body === null) return yield* failure(response)
        return decodeEvents(
          Stream.fromReadableStream({
            evaluate: () => response.body!,
            onError: (e) => ApiError.of(Status.serviceUnavailable(`watch stream broke: ${e instanceof Error ? e.message : String(e)}`))
          })
        )
      })
    )

  /**
   * Watch with recovery: start from a list (or `resourceVersion`), reconnect from the last seen
   * resourceVersion when a connection ends, and on 410 re-list and emit what changed meanwhile.
   */
  const watch = (ref: ResourceRef, options: WatchOptions = {}): Stream.Stream<WatchEvent, ApiError.ApiError> =>
    Stream.unwrap(
      Effect.sync(() => {
        const { onSynced, ...listOptions } = options
        const known = new Map<string, JsonObject>()
        const id = (o: JsonObject) => `${String(metadataOf(o)["namespace"] ?? "")}/${String(metadataOf(o)["name"])}`
        let resourceVersion = options.resourceVersion
        const relist = Effect.gen(function* () {
          const { items, resourceVersion: rv } = yield* listAll(ref, { ...listOptions, resourceVersion: "" })
          const events: Array<WatchEvent> = []
          const seen = new Set<string>()
          for (const o of items) {
            const k = id(o)
            seen.add(k)
            const before = known.get(k)
            if (!before) events.push({ type: "ADDED", object: o })
            else if (metadataOf(before)["resourceVersion"] !== metadataOf(o)["resourceVersion"]) events.push({ type: "MODIFIED", object: o })
            known.set(k, o)
          }
          for (const [k, o] of known) if (!seen.has(k)) {
            known.delete(k)
            events.push({ type: "DELETED", object: o })
          }
          resourceVersion = rv
          return events
        })
        const connection: Stream.Stream<WatchEvent, ApiError.ApiError> = Stream.unwrap(
          Effect.gen(function* () {
            const listed = resourceVersion === undefined
            const initial = listed ? yield* relist : []
            const synced = listed && onSynced !== undefined
              ? Stream.fromEffect(Effect.sync(() => onSynced(resourceVersion ?? ""))).pipe(Stream.drain)
              : Stream.empty
            const live = watchOnce(ref, { ...listOptions, resourceVersion: resourceVersion ?? "" }).pipe(
              Stream.filterMap((e) => {
                const rv = metadataOf(e.object)["resourceVersion"]
                if (typeof rv === "string" && rv !== "") resourceVersion = rv
                if (e.type === "BOOKMARK") return Option.none()
                const type = e.type as WatchEvent["type"]
                if (type === "DELETED") known.delete(id(e.object))
                else known.set(id(e.object), e.object)
                return Option.some({ type, object: e.object })
              })
            )
            return Stream.concat(Stream.concat(Stream.fromIterable(initial), synced), live)
          })
        )
        const recovering = connection.pipe(
          Stream.catchAll((e) =>
            e.status.code === 410
              ? Stream.flatMap(Stream.fromEffect(Effect.sync(() => (resourceVersion = undefined))), () => Stream.empty)
              : Stream.fail(e)
          )
        )
        // A connection that ends (server timeout) or is gone (410) starts the next one.
        return Stream.repeat(recovering, Schedule.spaced("200 millis")).pipe(
          Stream.retry(Schedule.exponential("200 millis").pipe(Schedule.union(Schedule.spaced("5 seconds"))))
        )
      })
    )

  return {
    /** GET one object. */
    get: (ref: ResourceRef, namespace: string | undefined, name: string) => request("GET", path(ref, namespace, name)),
    /** LIST one page. */
    list,
    /** LIST every page. */
    listAll,
    /** CREATE an object (its own apiVersion/kind/namespace say where). */
    create: (o: JsonObject) => request("POST", path(refOf(o), metadataOf(o)["namespace"] as string | undefined), o),
    /** POST to a subresource of an object (`pods/binding`, `pods/eviction`, `serviceaccounts/token`). */
    createSubresource: (ref: ResourceRef, namespace: string | undefined, name: string, subresource: string, body: JsonObject) =>
      request("POST", path(ref, namespace, name, subresource), body),
    /** UPDATE (PUT) an object; its resourceVersion makes it a compare-and-swap. */
    update: (o: JsonObject, subresource?: "status") =>
      request("PUT", path(refOf(o), metadataOf(o)["namespace"] as string | undefined, String(metadataOf(o)["name"]), subresource), o),
    /** PATCH an object. */
    patch: (ref: ResourceRef, namespace: string | undefined, name: string, type: PatchType, body: unknown, subresource?: string) =>
      request("PATCH", path(ref, namespace, name, subresource), body, patchTypes[type]),
    /** DELETE an object; answers the object (pending deletion) or a Status. */
    delete: (ref: ResourceRef, namespace: string | undefined, name: string, options: JsonObject = {}) =>
      request("DELETE", path(ref, namespace, name), { kind: "DeleteOptions", apiVersion: "v1", ...options }),
    /** A raw watch connection (no recovery). */
    watchOnce,
    /** A recovering watch. */
    watch
  }
}

/** A client. */
export type Client = ReturnType<typeof make>
