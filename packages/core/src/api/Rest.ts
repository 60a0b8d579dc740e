/**
 * The REST verbs on a resource, as kube-apiserver implements them: get, list (from the watch
 * cache, or paged from the store), watch, create, update (compare-and-swap on resourceVersion),
 * patch (JSON, merge, strategic), delete (grace, finalizers, propagation, preconditions) and
 * delete-collection, with the `status` and `scale` subresources and `dryRun=All`. Every failure
 * is an `ApiError` carrying the Status kube-apiserver would send.
 */
import { Chunk, Clock, Duration, Effect, Either, Stream } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as LabelSelector from "../model/LabelSelector.js"
import * as Scalars from "../model/Scalars.js"
import * as Status from "../model/Status.js"
import { asObject } from "../object/Json.js"
import * as Views from "../object/Views.js"
import * as ContinueToken from "../store/ContinueToken.js"
import * as Keys from "../store/Keys.js"
import type { KeyValue, StoreService, TxnOp, TxnResult } from "../store/Store.js"
import type { StoreError } from "../store/StoreError.js"
import * as Admission from "./Admission.js"
import * as ApiError from "./ApiError.js"
import * as Body from "./Body.js"
import * as FieldSelector from "./FieldSelector.js"
import { json, type ApiRequest, type ApiResponse } from "./Http.js"
import * as Objects from "./Objects.js"
import * as Patch from "./Patch.js"
import * as Query from "./Query.js"
import * as ServerSideApply from "./ServerSideApply.js"
import type { JsonObject, Registry, Resource } from "./Registry.js"
import type { ResourceRoute } from "./Router.js"
import * as Table from "./Table.js"
import type { Transformer } from "./Transformer.js"
import * as WatchCache from "./WatchCache.js"

/** What the verbs need. */
export interface Context {
  readonly store: StoreService
  readonly registry: Registry
  /** The region label every new object gets unless it names one (DESIGN §3). */
  readonly region: string
  /** The watch cache of a resource (created on first use, one per resource). */
  readonly cache: (resource: Resource) => Effect.Effect<WatchCache.WatchCache, ApiError.ApiError>
  /** How long a list or watch waits for a resourceVersion the cache has not seen yet. */
  readonly waitForRevision: Duration.Duration
  /** Randomness for generateName (injectable for tests). */
  readonly random: () => number
  /** Admission plugins, in order (mutating ones run before validating ones). */
  readonly admission: ReadonlyArray<Admission.Plugin>
  /** Encoding of stored values (encryption at rest). */
  readonly transformer: Transformer
}

type Req = { readonly ctx: Context; readonly resource: Resource; readonly route: ResourceRoute; readonly request: ApiRequest }

const subject = (r: Resource, name: string): ApiError.Subject => ({ resource: { group: r.group, resource: r.plural }, name })

const keyOf = (r: Resource, namespace: string | undefined, name: string) =>
  Keys.object({ group: r.group, resource: r.plural, namespace: r.namespaced ? namespace : undefined, name })

const storeError = (r: Resource, name: string) => (e: StoreError) => ApiError.fromStore(e, subject(r, name))

const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

const warningHeader = (warnings: ReadonlyArray<string>): Record<string, string> =>
  warnings.length === 0 ? {} : { warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(", ") }

/** A stored value as the API serves it (decoded by the transformer, resourceVersion filled in). */
const read = (q: Req, kv: Pick<KeyValue, "value" | "modRevision">): JsonObject =>
  Objects.fromStored({ value: q.ctx.transformer.fromStore(q.resource, kv.value), modRevision: kv.modRevision })

/** An object as the store keeps it (size-checked, then encoded by the transformer). */
const write = (q: Req, o: JsonObject) =>
  Effect.map(fromEither(Objects.toStored(o)), (text) => q.ctx.transformer.toStore(q.resource, text))

/** Read the current object (404 when absent). */
const current = (q: Req, name: string) =>
  q.ctx.store.get(keyOf(q.resource, q.route.namespace, name)).pipe(
    Effect.mapError(storeError(q.resource, name)),
    Effect.map((kv) => ({ kv, object: read(q, kv) }))
  )

/** The admission request of a write. */
const admissionRequest = (q: Req, operation: Admission.Operation, object: JsonObject, oldObject: JsonObject | undefined, dryRun: boolean): Admission.Request => ({
  operation,
  user: q.request.user,
  resource: q.resource,
  subresource: q.route.subresource ?? "",
  namespace: q.resource.namespaced ? (q.route.namespace ?? String(Objects.meta(object)["namespace"] ?? "")) : "",
  name: String(Objects.meta(object)["name"] ?? ""),
  object,
  oldObject,
  dryRun
})

/**
 * Commit a write together with the operations validating admission contributed; when one of
 * those (not the object itself) lost a compare-and-swap, admission runs again on fresh state.
 */
const commitAdmitted = <A>(
  q: Req,
  request: Admission.Request,
  key: string,
  main: TxnOp,
  after: (results: ReadonlyArray<TxnResult>) => A
): Effect.Effect<A, ApiError.ApiError> =>
  Effect.gen(function* () {
    for (let attempt = 0; ; attempt++) {
      const extra = yield* Admission.validate(q.ctx.admission, request)
      if (request.dryRun) return after([])
      const result = yield* Effect.either(q.ctx.store.txn([main, ...extra]))
      if (Either.isRight(result)) return after(result.right)
      const e = result.left
      if ((e._tag === "Conflict" || e._tag === "AlreadyExists" || e._tag === "NotFound") && e.key !== key && attempt < 20) {
        yield* Effect.sleep(`${Math.floor(q.ctx.random() * 5 * (attempt + 1))} millis`)
        continue
      }
      return yield* Effect.fail(storeError(q.resource, request.name)(e))
    }
  })

/**
 * Decode a body for a write, honouring fieldValidation (Strict → 400, Warn → Warning headers). A
 * write of the status subresource keeps all but the status of the stored object: only the status
 * (and the name, which must match) is decoded.
 */
const decodeBody = (q: Req, body: JsonObject, validation: Query.FieldValidation, name: string) =>
  Effect.suspend(() => {
    const r = q.resource
    const statusOnly = r.decodeStatus !== undefined && updateTarget(q) === "status"
    const decode = statusOnly ? r.decodeStatus! : r.decode
    const input = statusOnly ? { status: body["status"] } : body
    const named = (object: JsonObject): JsonObject => {
      if (!statusOnly) return object
      const bodyName = Objects.meta(body)["name"]
      return bodyName === undefined ? object : { ...object, metadata: { name: bodyName } }
    }
    const strict = decode(input, true)
    if (Either.isRight(strict)) return Effect.succeed({ object: named(strict.right), warnings: [] as Array<string> })
    const unknown = strict.left.filter((e) => e.message === "Unknown field")
    const other = strict.left.filter((e) => e.message !== "Unknown field")
    if (other.length > 0) {
      return Effect.fail(ApiError.of(Status.invalid({ group: r.group, kind: r.kind }, name, other)))
    }
    if (validation === "Strict") {
      return Effect.fail(ApiError.badRequest(`strict decoding error: ${unknown.map((e) => `unknown field ${JSON.stringify(e.path)}`).join(", ")}`))
    }
    return Effect.map(fromEither(Either.mapLeft(decode(input, false), (errors) => ApiError.of(Status.invalid({ group: r.group, kind: r.kind }, name, errors)))), (object) => ({
      object: named(object),
      warnings: validation === "Warn" ? unknown.map((e) => `unknown field ${JSON.stringify(e.path)}`) : []
    }))
  })

/** A namespaced create needs a live namespace (NamespaceLifecycle admission). */
const requireNamespace = (q: Req, namespace: string) =>
  Effect.gen(function* () {
    const ns = yield* Effect.either(q.ctx.store.get(Keys.object({ group: "", resource: "namespaces", name: namespace })))
    if (Either.isLeft(ns)) {
      if (ns.left._tag === "NotFound") return yield* Effect.fail(ApiError.of(Status.notFound("namespaces", namespace)))
      return yield* Effect.fail(ApiError.fromStore(ns.left, subject(q.resource, namespace)))
    }
    if (Objects.meta(Objects.fromStored(ns.right))["deletionTimestamp"] !== undefined) {
      return yield* Effect.fail(
        ApiError.of(
          Status.forbidden(
            { group: q.resource.group, resource: q.resource.plural },
            "",
            `unable to create new content in namespace ${namespace} because it is being terminated`
          )
        )
      )
    }
  })

/** GET of one object (or its status / scale). */
export const get = (q: Req, name: string) =>
  Effect.gen(function* () {
    const { object } = yield* current(q, name)
    if (q.route.subresource === "scale") return json(200, yield* toScale(q, object))
    if (Table.wanted(q.request.headers["accept"])) {
      const now = yield* Clock.currentTimeMillis
      return json(200, Table.render(q.resource, [object], { resourceVersion: Objects.meta(object)["resourceVersion"] }, now, q.request.query.get("includeObject")), {
        "content-type": Table.contentType
      })
    }
    return json(200, object)
  })

/** Selectors of a list or watch, compiled. */
const selectors = (q: Req, options: Query.ListOptions) =>
  Effect.gen(function* () {
    const label = options.labelSelector === "" ? undefined : LabelSelector.parse(options.labelSelector)
    if (label !== undefined && Either.isLeft(label)) {
      return yield* Effect.fail(ApiError.badRequest(`unable to parse requirement: ${label.left.message}`))
    }
    const field = options.fieldSelector === "" ? undefined : FieldSelector.parseFor(options.fieldSelector, q.resource)
    if (field !== undefined && Either.isLeft(field)) return yield* Effect.fail(field.left)
    const filter: WatchCache.Filter = {
      namespace: q.resource.namespaced ? q.route.namespace : undefined,
      label: label === undefined ? undefined : LabelSelector.compile(label.right),
      field: field === undefined ? undefined : FieldSelector.compile(field.right)
    }
    return filter
  })

const listEnvelope = (r: Resource, items: ReadonlyArray<JsonObject>, metadata: Record<string, unknown>): JsonObject => ({
  kind: r.listKind,
  apiVersion: r.apiVersion,
  metadata,
  items
})

/** LIST: from the watch cache, or paged from the store when limit/continue/Exact ask for it. */
export const list = (q: Req, options: Query.ListOptions) =>
  Effect.gen(function* () {
    const r = q.resource
    const filter = yield* selectors(q, options)
    let items: ReadonlyArray<JsonObject>
    const metadata: Record<string, unknown> = {}
    const paged = options.limit > 0 || options.continue !== undefined || options.resourceVersionMatch === "Exact"
    if (paged) {
      const page = yield* listFromStore(q, filter, options)
      items = page.items
      metadata["resourceVersion"] = String(page.revision)
      if (page.continue !== undefined) metadata["continue"] = page.continue
      if (page.remaining !== undefined) metadata["remainingItemCount"] = page.remaining
    } else {
      // No resourceVersion: a consistent read, as fresh as the store. "0": whatever the cache has.
      const result =
        options.resourceVersion === ""
          ? yield* freshList(q, filter, options)
          : yield* Effect.gen(function* () {
              const cache = yield* q.ctx.cache(r)
              const wanted = Number(options.resourceVersion)
              if (wanted > 0) yield* cache.waitFor(wanted, q.ctx.waitForRevision)
              return cache.list(filter)
            })
      items = result.items as ReadonlyArray<JsonObject>
      metadata["resourceVersion"] = String(result.revision)
    }
    if (Table.wanted(q.request.headers["accept"])) {
      const now = yield* Clock.currentTimeMillis
      return json(200, Table.render(r, items, metadata, now, q.request.query.get("includeObject")), { "content-type": Table.contentType })
    }
    return json(200, listEnvelope(r, items, metadata))
  })

/** A page read straight from the store at a pinned revision, filtered, up to `limit` items. */
const listFromStore = (q: Req, filter: WatchCache.Filter, options: Query.ListOptions) =>
  Effect.gen(function* () {
    const r = q.resource
    const prefix = Keys.prefix(r.group, r.plural, r.namespaced ? q.route.namespace : undefined)
    const fields = (o: JsonObject) => FieldSelector.fieldsOf(r, o)
    const matches = (o: JsonObject) =>
      // Stored labels passed the ObjectMeta schema.
      (filter.label === undefined || filter.label(Objects.meta(o)["labels"] as Record<string, string> | undefined)) &&
      (filter.field === undefined || filter.field(fields(o)))
    const filtered = filter.label !== undefined || filter.field !== undefined
    const limit = options.limit > 0 ? options.limit : 0
    const items: Array<JsonObject> = []
    let token = options.continue
    let revision = 0
    let remaining: number | undefined
    if (token !== undefined && Either.isLeft(ContinueToken.decode(token))) {
      return yield* Effect.fail(ApiError.badRequest(`continue key is not valid: ${JSON.stringify(token)} is not a continue token of this server`))
    }
    const atRevision = options.continue === undefined && options.resourceVersion !== "" && options.resourceVersionMatch === "Exact" ? Number(options.resourceVersion) : 0
    for (;;) {
      const want = limit === 0 ? 0 : limit - items.length
      const page = yield* q.ctx.store
        .list(prefix, {
          ...(want > 0 ? { limit: filtered ? Math.max(want, 100) : want } : {}),
          ...(token !== undefined ? { continue: token } : {}),
          ...(atRevision > 0 ? { atRevision } : {})
        })
        .pipe(Effect.mapError(storeError(r, "")))
      revision = page.revision
      let lastKey: string | undefined
      for (const kv of page.items) {
        if (limit > 0 && items.length >= limit) break
        lastKey = kv.key
        const o = read(q, kv)
        if (matches(o)) items.push(o)
      }
      const consumedAll = lastKey === page.items[page.items.length - 1]?.key
      if (!consumedAll && lastKey !== undefined) {
        // The page had more than we could return: continue right after the last key we used.
        token = continuation(page.revision, lastKey)
        remaining = filtered ? undefined : page.remaining + (page.items.length - page.items.findIndex((kv) => kv.key === lastKey) - 1)
        return { items, revision, continue: token, remaining }
      }
      token = page.continue
      if (token === undefined) return { items, revision, continue: undefined, remaining: undefined }
      if (limit > 0 && items.length >= limit) {
        remaining = filtered ? undefined : page.remaining
        return { items, revision, continue: token, remaining }
      }
    }
  })

const continuation = (revision: number, after: string): string => ContinueToken.encode({ revision, after })

/**
 * The matching objects as of the store's current revision: from the watch cache when it has
 * applied that revision, else one read of the store. (The cache sees only its own resource's
 * events, so after a write elsewhere it cannot prove freshness without reading the store anyway.)
 */
const freshList = (q: Req, filter: WatchCache.Filter, options: Query.ListOptions) =>
  Effect.gen(function* () {
    const cache = yield* q.ctx.cache(q.resource)
    const current = yield* Effect.mapError(q.ctx.store.currentRevision, storeError(q.resource, ""))
    if (cache.revision() >= current) return cache.list(filter)
    const page = yield* listFromStore(q, filter, { ...options, limit: 0, continue: undefined, resourceVersion: "", resourceVersionMatch: "" })
    return { items: page.items, revision: page.revision }
  })

/** WATCH: newline-delimited `{type, object}` events (or Server-Sent Events), from the watch cache. */
export const watch = (q: Req, options: Query.ListOptions) =>
  Effect.gen(function* () {
    const filter = yield* selectors(q, options)
    const cache = yield* q.ctx.cache(q.resource)
    const initial = options.resourceVersion === "" || options.resourceVersion === "0"
    const from = initial ? cache.revision() : Number(options.resourceVersion)
    if (!initial && from > cache.revision()) yield* cache.waitFor(from, q.ctx.waitForRevision)
    const sse = (q.request.headers["accept"] ?? "").includes("text/event-stream")
    const timeout = Duration.seconds(options.timeoutSeconds ?? 1800)
    // Every event is serialised once for all watchers (WatchCache.encodeLine), initial states too,
    // and goes out as its own element: no per-watcher copy of a batch, so 500 watchers of one
    // namespace share one copy of it while the socket takes the bytes at its own pace. A watch
    // asking for Tables (`kubectl get -w`) renders its own lines.
    const table = !sse && Table.wanted(q.request.headers["accept"]) ? Table.watchEncoder(q.resource, q.request.query.get("includeObject")) : undefined
    const encode: (event: WatchCache.WatchCacheEvent, now: number) => Uint8Array = table ?? (sse ? WatchCache.encodeSse : WatchCache.encodeLine)
    const startsWithState = initial && options.sendInitialEvents !== false
    // Held until the watcher is registered, so its initial events are these very ones (already encoded).
    let held: ReadonlyArray<WatchCache.WatchCacheEvent> | undefined = startsWithState ? cache.initialEvents(filter) : undefined
    let initialBytes = 0
    // What the initial events will cost, as plain events (a Table watch's own encoder keeps state).
    for (const e of held ?? []) initialBytes += (sse ? WatchCache.encodeSse : WatchCache.encodeLine)(e).length
    // One fiber per watch pulls batches and pushes their bytes; the timeout races the whole watch
    // once (per-event stream combinators would fork a fiber per event and per watcher).
    const body = Stream.asyncScoped<Uint8Array>((emit) =>
      Effect.gen(function* () {
        const subscription = yield* cache.subscribe(filter, from, {
          bookmarks: options.allowWatchBookmarks,
          initialEvents: startsWithState,
          initialEventsEndBookmark: options.sendInitialEvents === true
        })
        held = undefined
        const pump = Effect.gen(function* () {
          for (;;) {
            const batch = yield* subscription.take
            if (batch === undefined) return
            const now = table === undefined ? 0 : yield* Clock.currentTimeMillis
            yield* Effect.promise(() => emit.chunk(Chunk.unsafeFromArray(batch.map((e) => encode(e, now)))))
          }
        })
        yield* Effect.forkScoped(pump.pipe(Effect.timeout(timeout), Effect.ignore, Effect.ensuring(Effect.promise(() => emit.end()))))
      }),
      16
    )
    return {
      _tag: "Stream",
      status: 200,
      headers: { "content-type": sse ? "text/event-stream" : "application/json", "cache-control": "no-cache, private" },
      body,
      watch: { user: q.request.user.name, initialBytes }
    } satisfies ApiResponse
  })

/** Who a write is by: `fieldManager`, else the client's name from its User-Agent, as kube-apiserver. */
const managerOf = (q: Req): string => {
  const asked = q.request.query.get("fieldManager")
  if (asked !== null && asked !== "") return asked
  const agent = (q.request.headers["user-agent"] ?? "").split("/")[0]!.trim()
  // In-process clients (the controllers, dev's agent) send no User-Agent; they are named instead.
  return agent !== "" ? agent : q.request.client !== "" ? q.request.client : "unknown"
}

/** The fieldManager query, when given, must be at most 128 printable characters (kube's rule). */
const checkManager = (q: Req): Either.Either<void, ApiError.ApiError> => {
  const asked = q.request.query.get("fieldManager")
  if (asked === null) return Either.void
  if (asked.length > 128 || !/^[\x20-\x7e]*$/.test(asked)) return Either.left(ApiError.badRequest(`fieldManager: Invalid value: ${JSON.stringify(asked)}: must be at most 128 printable characters`))
  return Either.void
}

// A CRD's list types, worked out once per schema object (a new CRD version is a new object).
const crdSchemas = new WeakMap<object, ServerSideApply.Schema>()

/** The list types server-side apply and field ownership use for a resource. */
const ssaSchema = (r: Resource): ServerSideApply.Schema => {
  if (r.openapi._tag === "JsonSchema") {
    const cached = crdSchemas.get(r.openapi.schema)
    if (cached !== undefined) return cached
    const made = ServerSideApply.crdSchema(r.openapi.schema)
    crdSchemas.set(r.openapi.schema, made)
    return made
  }
  return ServerSideApply.builtInSchema(`${r.apiVersion}/${r.kind}`)
}

const subresourceOf = (q: Req): string => (q.route.subresource === "status" || q.route.subresource === "scale" ? q.route.subresource : "")

/** The write as field ownership records it. */
const writeOf = (q: Req, now: number): ServerSideApply.Write => ({
  manager: managerOf(q),
  apiVersion: q.resource.apiVersion,
  time: Objects.timestamp(now),
  subresource: subresourceOf(q)
})

/** `o` with these managedFields (none: the field goes). */
const withEntries = (o: JsonObject, entries: ReadonlyArray<ServerSideApply.Entry>): JsonObject => {
  const { managedFields: _old, ...m } = Objects.meta(o)
  return Objects.withMeta(o, entries.length === 0 ? m : { ...m, managedFields: entries })
}

/** CREATE (POST to the collection). */
export const create = (q: Req) =>
  Effect.gen(function* () {
    const options = yield* fromEither(Query.write(q.request.query))
    yield* fromEither(checkManager(q))
    const body = yield* fromEither(Either.flatMap(Body.parse(q.request.body, q.request.headers["content-type"]), Body.asObject))
    return yield* createObject(q, body, options)
  })

/** Create `body`; `entries`: its managedFields as an apply worked them out (else: the creator owns what it set). */
const createObject = (q: Req, body: JsonObject, options: Query.WriteOptions, entries?: ReadonlyArray<ServerSideApply.Entry>) =>
  Effect.gen(function* () {
    const r = q.resource
    const typed = yield* fromEither(Objects.checkType(r, body))
    const scoped = yield* fromEither(Objects.checkNamespace(r, typed, q.route.namespace))
    const name = String(Objects.meta(scoped)["name"] ?? "")
    const { object: decoded, warnings } = yield* decodeBody(q, scoped, options.fieldValidation, name)
    if (r.namespaced) yield* requireNamespace(q, q.route.namespace!)
    const now = yield* Clock.currentTimeMillis
    const prepared = yield* fromEither(
      Objects.prepareCreate(r, decoded, { namespace: q.route.namespace, now, uid: crypto.randomUUID(), region: q.ctx.region, random: q.ctx.random })
    )
    const mutated = yield* Admission.mutate(q.ctx.admission, admissionRequest(q, "CREATE", prepared, undefined, options.dryRun))
    const invalid = r.strategy.validate(mutated)
    const finalName = String(Objects.meta(mutated)["name"])
    if (invalid.length > 0) return yield* Effect.fail(ApiError.of(Status.invalid({ group: r.group, kind: r.kind }, finalName, invalid)))
    const admitted = withEntries(mutated, entries ?? ServerSideApply.update(undefined, mutated, [], ssaSchema(r), writeOf(q, now)))
    const stored = yield* write(q, admitted)
    const key = keyOf(r, q.route.namespace, finalName)
    return yield* commitAdmitted(q, admissionRequest(q, "CREATE", admitted, undefined, options.dryRun), key, { op: "create", key, value: stored }, (results) =>
      json(201, results.length === 0 ? admitted : read(q, results[0]!.kv!), warningHeader(warnings))
    )
  })

/** Which part of the object a PUT or PATCH may change: the whole, its status, or (Namespace) its finalizers. */
const updateTarget = (q: Req): Objects.UpdateTarget =>
  q.route.subresource === "status" ? "status" : q.route.subresource === "finalize" ? "finalize" : "main"

/** Whether a deleted object may now go: no finalizers, no grace period left, no namespace finalizers. */
const finalized = (r: Req["resource"], o: JsonObject): boolean => {
  const m = Objects.meta(o)
  if (m["deletionTimestamp"] === undefined || Objects.finalizers(o).length > 0) return false
  // A pod its node has not yet stopped outlives its last finalizer: the node's grace-0 delete ends it.
  if (Number(m["deletionGracePeriodSeconds"] ?? 0) !== 0) return false
  if (r.group === "" && r.kind === "Namespace") {
    const specFinalizers = Views.namespace(o).spec?.finalizers
    if (Array.isArray(specFinalizers) && specFinalizers.length > 0) return false
  }
  return true
}

/**
 * Write `next` over `kv` (CAS on its revision), deleting instead when finalization is complete.
 * managedFields: a body without them keeps the stored ones, an empty list resets them (as in
 * kube-apiserver); then the write's own changes are recorded, or an apply's `entries` are taken.
 */
const commitUpdate = (q: Req, name: string, kv: KeyValue, old: JsonObject, given: JsonObject, dryRun: boolean, entries?: ReadonlyArray<ServerSideApply.Entry>) =>
  Effect.gen(function* () {
    const r = q.resource
    const sent = Objects.meta(given)["managedFields"]
    const next = sent === undefined ? withEntries(given, ServerSideApply.entriesOf(old)) : given
    if (entries === undefined && Objects.sameObject(next, old)) return old
    const key = keyOf(r, q.route.namespace, name)
    if (finalized(r, next)) {
      // The answer is the object as it went: at the deletion's revision (a dry run: the current one),
      // so a client comparing resourceVersions never sees one missing.
      const revision = dryRun ? kv.modRevision : (yield* q.ctx.store.delete(key, kv.modRevision).pipe(Effect.mapError(storeError(r, name)))).revision
      return Objects.withMeta(next, { ...Objects.meta(next), resourceVersion: String(revision) })
    }
    const mutated = yield* Admission.mutate(q.ctx.admission, admissionRequest(q, "UPDATE", next, old, dryRun))
    const invalid = [...r.strategy.validate(mutated), ...r.strategy.validateUpdate(mutated, old)]
    if (invalid.length > 0) return yield* Effect.fail(ApiError.of(Status.invalid({ group: r.group, kind: r.kind }, name, invalid)))
    const now = yield* Clock.currentTimeMillis
    const admitted = withEntries(mutated, entries ?? ServerSideApply.update(old, mutated, ServerSideApply.entriesOf(mutated), ssaSchema(r), writeOf(q, now)))
    if (Objects.sameObject(admitted, old)) return old
    const stored = yield* write(q, admitted)
    return yield* commitAdmitted(q, admissionRequest(q, "UPDATE", admitted, old, dryRun), key, { op: "update", key, value: stored, expectedRevision: kv.modRevision }, (results) =>
      results.length === 0 ? admitted : read(q, results[0]!.kv!)
    )
  })

/** The revision an update must match: the body's resourceVersion, or (unconditional) the current one. */
const expectedRevision = (r: Resource, name: string, body: JsonObject, kv: KeyValue) => {
  const rv = Objects.meta(body)["resourceVersion"]
  if (rv === undefined || rv === "") return Effect.succeed(kv.modRevision)
  if (typeof rv !== "string" || !/^\d+$/.test(rv)) {
    return Effect.fail(ApiError.of(Status.invalid({ group: r.group, kind: r.kind }, name, [FieldError.invalid("metadata.resourceVersion", rv, "must be a number")])))
  }
  return Number(rv) === kv.modRevision ? Effect.succeed(kv.modRevision) : Effect.fail(ApiError.of(Status.conflict({ group: r.group, resource: r.plural }, name)))
}

/** UPDATE (PUT) of the object or its status. */
export const update = (q: Req, name: string) =>
  Effect.gen(function* () {
    const r = q.resource
    const options = yield* fromEither(Query.write(q.request.query))
    yield* fromEither(checkManager(q))
    const body = yield* fromEither(Either.flatMap(Body.parse(q.request.body, q.request.headers["content-type"]), Body.asObject))
    if (q.route.subresource === "scale") return yield* updateScale(q, name, body, options.dryRun)
    const typed = yield* fromEither(Objects.checkType(r, body))
    const scoped = yield* fromEither(Objects.checkNamespace(r, typed, q.route.namespace))
    const { kv, object: old } = yield* current(q, name)
    yield* expectedRevision(r, name, scoped, kv)
    const { object: decoded, warnings } = yield* decodeBody(q, scoped, options.fieldValidation, name)
    const next = yield* fromEither(Objects.prepareUpdate(r, decoded, old, updateTarget(q)))
    const written = yield* commitUpdate(q, name, kv, old, next, options.dryRun)
    return json(200, written, warningHeader(warnings))
  })

/** PATCH of the object, its status or its scale; retried on a concurrent write unless pinned. */
export const patch = (q: Req, name: string) =>
  Effect.gen(function* () {
    const r = q.resource
    const options = yield* fromEither(Query.write(q.request.query))
    yield* fromEither(checkManager(q))
    const type = Body.mediaType(q.request.headers["content-type"])
    if (type === "application/strategic-merge-patch+json" && !Patch.supportsStrategic(r.apiVersion, r.kind)) {
      return yield* Effect.fail(ApiError.of(Status.unsupportedMediaType(["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"])))
    }
    if (type === Patch.contentTypes.apply) return yield* apply(q, name, options)
    const patchBody = yield* fromEither(Body.parse(q.request.body, "application/json", ["application/json"]))
    for (let attempt = 0; ; attempt++) {
      const { kv, object: old } = yield* current(q, name)
      const target = q.route.subresource === "scale" ? yield* toScale(q, old) : old
      const patched = yield* fromEither(Either.mapLeft(Patch.apply(type, target, patchBody, `${r.apiVersion}/${r.kind}`), Patch.toApiError))
      const result = yield* Effect.either(
        q.route.subresource === "scale"
          ? updateScale(q, name, patched as JsonObject, options.dryRun) // a Scale patched as JSON; updateScale reads it through total readers
          : Effect.gen(function* () {
              const body = yield* fromEither(Body.asObject(patched))
              yield* expectedRevision(r, name, body, kv)
              const { object: decoded, warnings } = yield* decodeBody(q, body, options.fieldValidation, name)
              const next = yield* fromEither(Objects.prepareUpdate(r, decoded, old, updateTarget(q)))
              const written = yield* commitUpdate(q, name, kv, old, next, options.dryRun)
              return json(200, written, warningHeader(warnings))
            })
      )
      if (Either.isRight(result)) return result.right
      const pinned = Objects.meta(asObject(patched))["resourceVersion"] !== Objects.meta(target)["resourceVersion"]
      if (result.left.status.reason !== "Conflict" || pinned || attempt >= 4) return yield* Effect.fail(result.left)
    }
  })

/**
 * Server-side apply (PATCH `application/apply-patch+yaml`): the body is the manager's whole
 * intent for the object; it is merged with what is stored, conflicts with other managers are a
 * 409 unless `force`, and a missing object is created. Retried on a concurrent write.
 */
const apply = (q: Req, name: string, options: Query.WriteOptions) =>
  Effect.gen(function* () {
    const r = q.resource
    if (q.route.subresource === "scale") return yield* Effect.fail(ApiError.of(Status.unsupportedMediaType([Patch.contentTypes.json, Patch.contentTypes.merge])))
    const manager = q.request.query.get("fieldManager")
    if (manager === null || manager === "") return yield* Effect.fail(ApiError.badRequest("PATCH: fieldManager is required for apply requests"))
    const force = q.request.query.get("force") === "true"
    const config = yield* fromEither(Either.flatMap(Body.parse(q.request.body, "application/yaml", ["application/yaml"]), Body.asObject))
    const typed = yield* fromEither(Objects.checkType(r, config))
    const scoped = yield* fromEither(Objects.checkNamespace(r, typed, q.route.namespace))
    const named = Objects.meta(scoped)["name"]
    if (named !== undefined && named !== name) return yield* Effect.fail(ApiError.badRequest(`the name of the object (${String(named)}) does not match the name on the URL (${name})`))
    const intent = Objects.withMeta(scoped, { ...Objects.meta(scoped), name })
    const schema = ssaSchema(r)
    for (let attempt = 0; ; attempt++) {
      const now = yield* Clock.currentTimeMillis
      const write = writeOf(q, now)
      const found = yield* Effect.either(current(q, name))
      if (Either.isLeft(found)) {
        if (found.left.status.code !== 404 || q.route.subresource === "status") return yield* Effect.fail(found.left)
        const created = ServerSideApply.apply(undefined, intent, schema, write, force)
        if (created._tag === "Conflicts") return yield* Effect.fail(ApiError.badRequest("apply: conflicts on a new object"))
        const result = yield* Effect.either(createObject(q, created.object, options, created.entries))
        if (Either.isRight(result)) return result.right
        if (result.left.status.code !== 409 || attempt >= 4) return yield* Effect.fail(result.left)
        continue
      }
      const { kv, object: old } = found.right
      const applied = ServerSideApply.apply(old, intent, schema, write, force)
      if (applied._tag === "Conflicts") {
        return yield* Effect.fail(ApiError.of(Status.applyConflict({ group: r.group, resource: r.plural }, name, ServerSideApply.conflictMessage(applied.conflicts), applied.conflicts)))
      }
      const result = yield* Effect.either(
        Effect.gen(function* () {
          const body = Objects.withMeta(applied.object, { ...Objects.meta(applied.object), resourceVersion: Objects.meta(old)["resourceVersion"] })
          const { object: decoded, warnings } = yield* decodeBody(q, body, options.fieldValidation, name)
          const next = yield* fromEither(Objects.prepareUpdate(r, withEntries(decoded, applied.entries), old, updateTarget(q)))
          const written = yield* commitUpdate(q, name, kv, old, next, options.dryRun, applied.entries)
          return json(200, written, warningHeader(warnings))
        })
      )
      if (Either.isRight(result)) return result.right
      if (result.left.status.reason !== "Conflict" || (result.left.status.details?.causes?.length ?? 0) > 0 || attempt >= 4) return yield* Effect.fail(result.left)
    }
  })

/** The autoscaling/v1 Scale of an object. */
const toScale = (q: Req, o: JsonObject) =>
  Effect.gen(function* () {
    const scale = q.resource.subresources.scale
    if (!scale) return yield* Effect.fail(ApiError.of(Status.notFound({ group: q.resource.group, resource: `${q.resource.plural}/scale` }, String(Objects.meta(o)["name"]))))
    const m = Objects.meta(o)
    const selector = scale.labelSelectorPath === undefined ? undefined : at(o, scale.labelSelectorPath)
    const scaleObject: JsonObject = {
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: { name: m["name"], namespace: m["namespace"], uid: m["uid"], resourceVersion: m["resourceVersion"], creationTimestamp: m["creationTimestamp"] },
      spec: { replicas: Number(at(o, scale.specReplicasPath) ?? 0) },
      status: {
        replicas: Number(at(o, scale.statusReplicasPath) ?? 0),
        // The selector path of a scale subresource points at a LabelSelector (checked when the object was written).
        ...(selector !== undefined ? { selector: LabelSelector.formatSelector(selector as LabelSelector.LabelSelector) } : {})
      }
    }
    return scaleObject
  })

const at = (o: unknown, path: string): unknown =>
  path.split(".").reduce<unknown>((v, k) => (typeof v === "object" && v !== null ? Reflect.get(v, k) : undefined), o)

const setAt = (o: JsonObject, path: string, value: unknown): JsonObject => {
  const [head, ...rest] = path.split(".")
  if (rest.length === 0) return { ...o, [head!]: value }
  const child = o[head!]
  // An array on the path is indexed by key as any object (the cast says only that).
  return { ...o, [head!]: setAt(typeof child === "object" && child !== null ? (child as JsonObject) : {}, rest.join("."), value) }
}

/** PUT (or patched) Scale: only spec.replicas changes the object. */
const updateScale = (q: Req, name: string, body: JsonObject, dryRun: boolean) =>
  Effect.gen(function* () {
    const r = q.resource
    const scale = r.subresources.scale
    if (!scale) return yield* Effect.fail(ApiError.of(Status.notFound({ group: r.group, resource: `${r.plural}/scale` }, name)))
    const replicas = at(body, "spec.replicas")
    // Scale.spec.replicas is an int32: a wider number would be stored where no client can read it.
    const problem =
      typeof replicas !== "number" ? "must be an integer" : (Scalars.int32Problem(replicas) ?? (replicas < 0 ? "must be greater than or equal to 0" : undefined))
    if (problem !== undefined) {
      return yield* Effect.fail(
        ApiError.of(Status.invalid({ group: "autoscaling", kind: "Scale" }, name, [FieldError.invalid("spec.replicas", replicas ?? null, problem)]))
      )
    }
    const { kv, object: old } = yield* current(q, name)
    yield* expectedRevision(r, name, body, kv)
    const next = yield* fromEither(Objects.prepareUpdate(r, setAt(old, scale.specReplicasPath, replicas), old, "main"))
    const written = yield* commitUpdate(q, name, kv, old, next, dryRun)
    return json(200, yield* toScale(q, written))
  })

/** DELETE one object. */
export const remove = (q: Req, name: string) =>
  Effect.gen(function* () {
    const parsed = q.request.body && q.request.body.length > 0 ? Body.parse(q.request.body, "application/json", ["application/json"]) : Either.right(undefined)
    const body = yield* fromEither(Either.flatMap(parsed, (b) => (b === undefined ? Either.right(undefined) : Body.asObject(b))))
    const options = yield* fromEither(Query.remove(q.request.query, body))
    const result = yield* deleteOne(q, name, options)
    return result
  })

/**
 * The deletion of one object, shared by DELETE and delete-collection. A write that lands between
 * our read and our compare-and-swap (a controller updating status or scale) is not the client's
 * conflict: the deletion is retried on a fresh read, as kube-apiserver's GuaranteedUpdate does.
 * Failed preconditions are the client's and are answered at once.
 */
const deleteOne = (q: Req, name: string, options: Query.DeleteOptions) =>
  Effect.retry(deleteOnce(q, name, options), {
    times: 16,
    while: (e: ApiError.ApiError) => e.status.reason === "Conflict" && !(e.status.message ?? "").includes("Precondition failed")
  })

const deleteOnce = (q: Req, name: string, options: Query.DeleteOptions) =>
  Effect.gen(function* () {
    const r = q.resource
    const { kv, object: old } = yield* current(q, name)
    const m = Objects.meta(old)
    const pre = options.preconditions
    if (pre.uid !== undefined && pre.uid !== m["uid"]) {
      return yield* Effect.fail(
        ApiError.of(Status.conflict({ group: r.group, resource: r.plural }, name, `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(m["uid"])}`))
      )
    }
    if (pre.resourceVersion !== undefined && pre.resourceVersion !== m["resourceVersion"]) {
      return yield* Effect.fail(
        ApiError.of(
          Status.conflict({ group: r.group, resource: r.plural }, name, `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${String(m["resourceVersion"])}`)
        )
      )
    }
    const now = yield* Clock.currentTimeMillis
    if (m["deletionTimestamp"] !== undefined) {
      // Already terminating: a shorter grace period shortens it (a node agent confirms a pod's end
      // with grace 0), as in Kubernetes; anything else leaves the deletion as it is.
      const current = Number(m["deletionGracePeriodSeconds"] ?? 0)
      const shorter = options.gracePeriodSeconds !== undefined && options.gracePeriodSeconds < current
      if (!shorter) return json(200, old)
      const grace = options.gracePeriodSeconds ?? 0
      if (grace > 0 || Objects.finalizers(old).length > 0) {
        const next = Objects.withMeta(old, { ...m, deletionTimestamp: Objects.timestamp(now + grace * 1000), deletionGracePeriodSeconds: grace })
        const stored = yield* write(q, next)
        if (options.dryRun) return json(200, next)
        const written = yield* q.ctx.store.update(kv.key, stored, kv.modRevision).pipe(Effect.mapError(storeError(r, name)))
        return json(200, read(q, written))
      }
      yield* commitAdmitted(q, admissionRequest(q, "DELETE", old, old, options.dryRun), kv.key, { op: "delete", key: kv.key, expectedRevision: kv.modRevision }, () => undefined)
      return r.strategy.deleteReturnsObject ? json(200, old) : json(200, Status.success({ name, group: r.group, kind: r.plural, uid: String(m["uid"] ?? "") }))
    }
    const finalizers = [...Objects.finalizers(old)]
    if (options.propagationPolicy === "Orphan" && !finalizers.includes("orphan")) finalizers.push("orphan")
    if (options.propagationPolicy === "Foreground" && !finalizers.includes("foregroundDeletion")) finalizers.push("foregroundDeletion")
    // Pods on a node end gracefully: the agent stops them, then deletes with grace 0.
    const spec = asObject(old["spec"])
    const phase = asObject(old["status"])["phase"]
    const grace =
      r.apiVersion === "v1" && r.kind === "Pod" && spec["nodeName"] !== undefined && phase !== "Succeeded" && phase !== "Failed"
        ? (options.gracePeriodSeconds ?? Number(spec["terminationGracePeriodSeconds"] ?? 30))
        : 0
    const namespaceFinalizers = r.apiVersion === "v1" && r.kind === "Namespace" ? ((spec["finalizers"] as Array<string> | undefined) ?? []) : []
    if (finalizers.length > 0 || grace > 0 || namespaceFinalizers.length > 0) {
      let next = Objects.withMeta(old, {
        ...m,
        finalizers: finalizers.length > 0 ? finalizers : undefined,
        deletionTimestamp: Objects.timestamp(now + grace * 1000),
        deletionGracePeriodSeconds: grace
      })
      if (namespaceFinalizers.length > 0) next = { ...next, status: { ...asObject(old["status"]), phase: "Terminating" } }
      if (Objects.meta(next)["finalizers"] === undefined) delete Objects.meta(next)["finalizers"]
      yield* Admission.validate(q.ctx.admission, admissionRequest(q, "DELETE", old, old, options.dryRun))
      const stored = yield* write(q, next)
      if (options.dryRun) return json(200, next)
      const written = yield* q.ctx.store.update(kv.key, stored, kv.modRevision).pipe(Effect.mapError(storeError(r, name)))
      return json(200, read(q, written))
    }
    yield* commitAdmitted(q, admissionRequest(q, "DELETE", old, old, options.dryRun), kv.key, { op: "delete", key: kv.key, expectedRevision: kv.modRevision }, () => undefined)
    if (r.strategy.deleteReturnsObject) return json(200, old)
    return json(
      200,
      Status.success({ name, group: r.group, kind: r.plural, uid: String(m["uid"] ?? "") })
    )
  })

/** DELETE of a collection: every matching object, answered with the list of what was deleted. */
export const removeCollection = (q: Req) =>
  Effect.gen(function* () {
    const r = q.resource
    const listOptions = yield* fromEither(Query.list(q.request.query, false))
    const options = yield* fromEither(Query.remove(q.request.query, undefined))
    const filter = yield* selectors(q, listOptions)
    const { items, revision } = yield* freshList(q, filter, listOptions)
    const deleted = yield* Effect.forEach(items as ReadonlyArray<JsonObject>, (o) => {
      const name = String(Objects.meta(o)["name"])
      const scoped: Req = { ...q, route: { ...q.route, namespace: Objects.meta(o)["namespace"] as string | undefined } }
      return Effect.option(Effect.map(deleteOne(scoped, name, options), () => o))
    })
    return json(200, listEnvelope(r, Chunk.toReadonlyArray(Chunk.compact(Chunk.fromIterable(deleted))), { resourceVersion: String(revision) }))
  })
