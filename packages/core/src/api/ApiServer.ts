/**
 * The API server as one request handler: route → (health | discovery | resource verbs), behind
 * authentication. It owns the registry and one watch cache per resource, created on first use
 * and closed with the server (or when a CRD's resource goes away).
 *
 *   request ─▶ route ─▶ health? ─▶ authenticate ─▶ authorize ─▶ priority and fairness ─▶ discovery | Rest verb ─▶ response
 *
 * Every other request gets a request id (the client's `X-Request-Id` when it sent a sane one),
 * returned as `X-Request-Id` and attached to every log line written while it is handled, and is
 * counted in `FleetMetrics.api` by verb, group, resource, subresource and code.
 */
import { Duration, Effect, Either, ExecutionStrategy, Exit, FiberRef, LogLevel, Scope } from "effect"
import * as Status from "../model/Status.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import * as Keys from "../store/Keys.js"
import { Store as StoreTag, type StoreService } from "../store/Store.js"
import * as Admission from "./Admission.js"
import * as ApiError from "./ApiError.js"
import * as Authz from "./Authz.js"
import * as Crd from "./Crd.js"
import * as Discovery from "./Discovery.js"
import { json, type ApiRequest, type ApiResponse, type UserInfo } from "./Http.js"
import * as OpenApi from "./OpenApi.js"
import * as FieldSelector from "./FieldSelector.js"
import * as FlowControl from "./FlowControl.js"
import * as Impersonation from "./Impersonation.js"
import * as Objects from "./Objects.js"
import * as Query from "./Query.js"
import * as Registry from "./Registry.js"
import * as Rest from "./Rest.js"
import * as Router from "./Router.js"
import * as SelfSubjectReviews from "./authn/SelfSubjectReviews.js"
import * as Transformer from "./Transformer.js"
import * as WatchCache from "./WatchCache.js"

/** How to build a server. */
export interface Options {
  readonly store: StoreService
  /** Establishes the caller (401 when nobody accepts the credentials). */
  readonly authenticate: (headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<UserInfo, ApiError.ApiError>
  /** The region every new object is labelled with unless it names one (default "local"). */
  readonly region?: string
  /** The registry to serve (default: the built-in kinds). */
  readonly registry?: Registry.Registry
  /** How long a list or watch waits for a future resourceVersion (default 3 s). */
  readonly waitForRevision?: Duration.DurationInput
  /** The address clients reach the server at, for discovery (`host:port`). */
  readonly address?: string
  /** Whether the server is ready (readyz); defaults to always. */
  readonly ready?: () => boolean
  /** What `/version` reports about this build. */
  readonly buildInfo?: Discovery.BuildInfo
  /** Decides whether an authenticated request may proceed (default: allow; RBAC in `policy/RbacEvaluator`). */
  readonly authorize?: Authz.Authorizer
  /** Admission plugins, in order. */
  readonly admission?: ReadonlyArray<Admission.Plugin>
  /** Encoding of stored values (encryption at rest); default: as they are. */
  readonly transformer?: Transformer.Transformer
  /** Receives one record per mutating request, after it is answered. */
  readonly audit?: (record: AuditRecord) => void
  /** Extra subresources of existing resources (`serviceaccounts/token`, `pods/eviction`, …). */
  readonly subresources?: ReadonlyArray<SubresourceHandler>
  /** The workload priority level's seats and queue (default `FlowControl.defaultSeats` seats). */
  readonly flowControl?: FlowControl.Options
}

/** A subresource served by its own handler, after authentication and authorization. */
export interface SubresourceHandler {
  readonly group: string
  readonly plural: string
  readonly subresource: string
  readonly handle: (
    request: ApiRequest,
    route: Router.ResourceRoute,
    context: {
      readonly store: StoreService
      readonly registry: Registry.Registry
      readonly resource: Registry.Resource
      readonly transformer: Transformer.Transformer
      /** The server's admission chain (for subresources that admit CONNECTs: exec, signal). */
      readonly admission: ReadonlyArray<Admission.Plugin>
    }
  ) => Effect.Effect<ApiResponse, ApiError.ApiError>
}

/** What the audit log records of one mutating request, or of a node's read of a Secret, ConfigMap, claim or account (never a body). */
export interface AuditRecord {
  readonly time: string
  readonly user: string
  readonly groups: ReadonlyArray<string>
  readonly verb: string
  readonly apiGroup: string
  readonly resource: string
  readonly subresource: string
  readonly namespace: string
  readonly name: string
  readonly code: number
  readonly latencyMs: number
  readonly client: string
  /** Set when the caller acted as another user (`Impersonate-User`): `user` and `groups` are the caller's. */
  readonly impersonatedUser?: { readonly user: string; readonly groups: ReadonlyArray<string> }
  /** What admission noted of the request (`pod-security.kubernetes.io/audit-violations`, …), when anything. */
  readonly annotations?: Readonly<Record<string, string>>
}

// exec and signal act on a workload: the audit log records them as it records writes.
const mutatingVerbs = new Set(["create", "update", "patch", "delete", "deletecollection", "exec", "signal"])

// A node's reads of what its pods are given (Secrets, ConfigMaps, claims, accounts) are recorded
// too, as kube-apiserver's audit policies do: a stolen node credential leaves a trail.
const nodeReads = new Set(["secrets", "configmaps", "serviceaccounts", "persistentvolumeclaims", "persistentvolumes"])
const audited = (a: Authz.Attributes): boolean =>
  mutatingVerbs.has(a.verb) || (a.resourceRequest && a.apiGroup === "" && nodeReads.has(a.resource) && a.user.groups.includes("system:nodes"))

/**
 * The `Warning` header: what the handler sent with admission's warnings added (`299 - "…"`, as
 * kube-apiserver writes them). A warning quotes what the client sent (an unknown field's name, a
 * sysctl's, a probe's host), and a header holds only printable ASCII (node:http refuses the rest),
 * so anything else in the quoted texts is escaped as `\uXXXX`, which client-go's unquoting reads back.
 */
const warningHeader = (sent: string | undefined, warnings: ReadonlyArray<string>): Record<string, string> => {
  const all = [...(sent === undefined ? [] : [sent]), ...warnings.map((w) => `299 - ${JSON.stringify(w)}`)]
  return all.length === 0 ? {} : { warning: all.join(", ").replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) }
}

/** A running API server. */
export interface ApiServer {
  readonly registry: Registry.Registry
  /** Handle a request whose body has been read; `user` is filled by authentication here. */
  readonly handle: (request: Omit<ApiRequest, "user">) => Effect.Effect<ApiResponse>
  /** Open watch caches (for metrics and tests). */
  readonly caches: () => number
}

/** A client's request id is kept when it is short and printable (it ends up in logs); else one is made. */
export const requestIdOf = (headers: Readonly<Record<string, string | undefined>>): string => {
  const given = headers["x-request-id"]
  return given !== undefined && given.length > 0 && given.length <= 128 && /^[\x21-\x7e]+$/.test(given) ? given : crypto.randomUUID()
}

// The verb label of request metrics, as kube-apiserver spells it.
const metricVerbs: Readonly<Record<string, string>> = { create: "POST", update: "PUT", exec: "CONNECT", signal: "CONNECT" }
const metricVerb = (verb: string) => metricVerbs[verb] ?? verb.toUpperCase()
const nobody: UserInfo = { name: "", uid: "", groups: [] }

const notFoundPath = () => ApiError.of({ ...Status.notFound("", ""), message: "the server could not find the requested resource", details: {} })

/** What the routing of a request needs of the server, built once in `make`. */
interface Served {
  readonly options: Options
  readonly registry: Registry.Registry
  readonly ctx: Rest.Context
  readonly extensions: ReadonlyMap<string, SubresourceHandler>
}

/** A request on a resource: found (or a CRD synced just now), then routed by subresource and verb to `Rest`. */
const serveResource = ({ options, registry, ctx, extensions }: Served, route: Router.ResourceRoute, request: ApiRequest): Effect.Effect<ApiResponse, ApiError.ApiError> =>
  Effect.gen(function* () {
    let r = registry.byResource(route.group, route.version, route.plural)
    if (r === undefined && route.group !== "") {
      // A CRD may have been created a moment ago (here or on another server): if its object
      // exists, sync now. One point read, so requests for unknown kinds stay cheap.
      const crdKey = Keys.object({ group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: `${route.plural}.${route.group}` })
      if (Either.isRight(yield* Effect.either(options.store.get(crdKey)))) {
        yield* Effect.ignore(Crd.sync(options.store, registry))
        r = registry.byResource(route.group, route.version, route.plural)
      }
    }
    if (r === undefined) return yield* Effect.fail(notFoundPath())
    if (route.namespace !== undefined && !r.namespaced) return yield* Effect.fail(notFoundPath())
    // Virtual resources (reviews, computed lists) answer every request themselves.
    if (r.handle !== undefined) return yield* r.handle(request, route)
    const extra = route.subresource === undefined ? undefined : extensions.get(`${r.group}/${r.plural}/${route.subresource}`)
    if (extra !== undefined) {
      if (route.name === undefined) return yield* Effect.fail(notFoundPath())
      return yield* extra.handle(request, route, { store: options.store, registry, resource: r, transformer: ctx.transformer, admission: options.admission ?? [] })
    }
    if (route.subresource !== undefined) {
      const ok =
        (route.subresource === "status" && r.subresources.status) ||
        (route.subresource === "scale" && r.subresources.scale !== undefined) ||
        (route.subresource === "finalize" && r.group === "" && r.kind === "Namespace" && request.method.toUpperCase() !== "GET")
      if (!ok || route.name === undefined) return yield* Effect.fail(notFoundPath())
    }
    const q = { ctx, resource: r, route, request }
    const method = request.method.toUpperCase()
    const crossNamespace = r.namespaced && route.namespace === undefined
    if (route.name === undefined) {
      switch (method) {
        case "GET": {
          const options = yield* fromEither(Query.list(request.query, route.watchPath))
          return yield* options.watch ? Rest.watch(q, options) : Rest.list(q, options)
        }
        case "POST":
          if (crossNamespace) break
          return yield* Rest.create(q)
        case "DELETE":
          return yield* Rest.removeCollection(q)
      }
      return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: r.group, resource: r.plural }, method.toLowerCase())))
    }
    if (crossNamespace) return yield* Effect.fail(notFoundPath())
    switch (method) {
      case "GET": {
        if (route.watchPath || request.query.get("watch") === "true" || request.query.get("watch") === "1") {
          // A watch on one object: a field selector on its name.
          const params = new URLSearchParams(request.query)
          params.set("fieldSelector", `metadata.name=${route.name}`)
          const options = yield* fromEither(Query.list(params, true))
          return yield* Rest.watch({ ...q, route: { ...route, name: undefined } }, options)
        }
        return yield* Rest.get(q, route.name)
      }
      case "PUT":
        return yield* Rest.update(q, route.name)
      case "PATCH":
        return yield* Rest.patch(q, route.name)
      case "DELETE":
        if (route.subresource !== undefined) break
        return yield* Rest.remove(q, route.name)
    }
    return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group: r.group, resource: r.plural }, method.toLowerCase())))
  })

/** Version, discovery and OpenAPI documents. */
const serveDiscovery = ({ options, registry }: Served, route: Router.Route, request: ApiRequest): Effect.Effect<ApiResponse, ApiError.ApiError> =>
  Effect.suspend(() => {
    if (request.method.toUpperCase() !== "GET") return Effect.fail(ApiError.of(Status.methodNotSupported("", request.method.toLowerCase())))
    const accept = request.headers["accept"]
    switch (route._tag) {
      case "Version":
        return Effect.succeed(json(200, Discovery.version(options.buildInfo)))
      case "CoreVersions": {
        const aggregated = Discovery.wantsAggregated(accept)
        if (aggregated) return Effect.succeed(json(200, Discovery.aggregated(registry, "api", aggregated), { "content-type": aggregated, vary: "Accept" }))
        return Effect.succeed(json(200, Discovery.apiVersions(options.address ?? ""), { vary: "Accept" }))
      }
      case "GroupList": {
        const aggregated = Discovery.wantsAggregated(accept)
        if (aggregated) return Effect.succeed(json(200, Discovery.aggregated(registry, "apis", aggregated), { "content-type": aggregated, vary: "Accept" }))
        return Effect.succeed(json(200, Discovery.apiGroupList(registry), { vary: "Accept" }))
      }
      case "Group":
        return Effect.map(fromEither(Discovery.apiGroup(registry, route.group)), (body) => json(200, body))
      case "ResourceList":
        return Effect.map(fromEither(Discovery.apiResourceList(registry, route.group, route.version)), (body) => json(200, body))
      case "OpenApiV2":
        // kubectl asks for protobuf first; answering JSON to a protobuf-only Accept would break it.
        if (accept !== undefined && !/json|\*\/\*/.test(accept)) return Effect.fail(ApiError.of(Status.notAcceptable(["application/json"])))
        return Effect.succeed(json(200, OpenApi.v2(registry)))
      case "OpenApiV3":
        return route.groupVersion === undefined
          ? Effect.succeed(json(200, OpenApi.v3Index(registry)))
          : Effect.map(fromEither(OpenApi.v3(registry, route.groupVersion)), (body) => json(200, body))
      default:
        return Effect.fail(notFoundPath())
    }
  })

/** Build the server; watch caches live in the surrounding scope. */
export const make = (options: Options): Effect.Effect<ApiServer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const registry = options.registry ?? Registry.make()
    // Who am I (`kubectl auth whoami`) is the server's own, whatever authenticates or authorizes.
    SelfSubjectReviews.install(registry)
    const transformer = options.transformer ?? Transformer.identity
    const extensions = new Map((options.subresources ?? []).map((x) => [`${x.group}/${x.plural}/${x.subresource}`, x]))
    const authorize = options.authorize ?? Authz.allowAll
    const scope = yield* Effect.scope
    const metricRegistry = yield* MetricRegistry
    const metrics = FleetMetrics.api(metricRegistry)
    const flowControl = FlowControl.make(options.flowControl ?? { seats: FlowControl.defaultSeats }, metricRegistry)
    // The caches built so far, for the watcher and object gauges.
    const built = new Map<string, { readonly group: string; readonly plural: string; readonly cache: WatchCache.WatchCache }>()
    const stopWatchers = metrics.watchers.collect((add) => built.forEach((b) => add([b.group, b.plural], b.cache.watchers())))
    const stopObjects = metrics.cacheObjects.collect((add) => built.forEach((b) => add([b.group, b.plural], b.cache.size())))
    yield* Effect.addFinalizer(() => Effect.sync(() => (stopWatchers(), stopObjects(), flowControl.close(), built.clear())))
    const caches = new Map<string, { cache: Effect.Effect<WatchCache.WatchCache, ApiError.ApiError>; scope: Scope.CloseableScope }>()
    const cacheKey = (r: Registry.Resource) => `${r.group}/${r.plural}`

    registry.onChange(() => {
      // Close the caches of resources that are no longer served (a CRD was deleted).
      for (const [key, entry] of caches) {
        const [group, plural] = key.split("/") as [string, string]
        if (!registry.all().some((r) => r.group === group && r.plural === plural)) {
          caches.delete(key)
          built.delete(key)
          Effect.runFork(Scope.close(entry.scope, Exit.void))
        }
      }
    })

    const cacheFor = (r: Registry.Resource): Effect.Effect<WatchCache.WatchCache, ApiError.ApiError> =>
      Effect.suspend(() => {
        const existing = caches.get(cacheKey(r))
        if (existing) return existing.cache
        return Effect.gen(function* () {
          const child = yield* Scope.fork(scope, ExecutionStrategy.sequential)
          const made = WatchCache.make({
            prefix: Keys.prefix(r.group, r.plural),
            decode: (_key, value, revision) => Objects.fromStored({ value: transformer.fromStore(r, value), modRevision: revision }),
            fields: (o) => FieldSelector.fieldsOf(r, o),
            kind: r.kind,
            apiVersion: r.apiVersion,
            resource: { group: r.group, resource: r.plural }
          }).pipe(
            Effect.provideService(StoreTag, options.store),
            Scope.extend(child),
            Effect.tap((cache) => Effect.sync(() => built.set(cacheKey(r), { group: r.group, plural: r.plural, cache })))
          )
          const cached = yield* Effect.cached(made)
          caches.set(cacheKey(r), { cache: cached, scope: child })
          return yield* cached
        })
      })

    // Serve the CRDs in the store, and follow them for as long as the server runs.
    yield* Effect.ignore(Crd.sync(options.store, registry))
    yield* Effect.forkIn(Crd.run(options.store, registry), scope)

    const ctx: Rest.Context = {
      store: options.store,
      registry,
      region: options.region ?? "local",
      cache: cacheFor,
      waitForRevision: Duration.decode(options.waitForRevision ?? "3 seconds"),
      random: Math.random,
      admission: options.admission ?? [],
      transformer
    }

    const served: Served = { options, registry, ctx, extensions }

    const handle = (raw: Omit<ApiRequest, "user">): Effect.Effect<ApiResponse> => {
      const route = Router.route(raw.path)
      if (route._tag === "Health") {
        const ok = route.check !== "readyz" || (options.ready?.() ?? true)
        return Effect.succeed({ _tag: "Json", status: ok ? 200 : 503, headers: { "content-type": "text/plain" }, body: ok ? "ok" : "not ready" })
      }
      let attributes: Authz.Attributes | undefined
      // The authenticated caller when it acts as another user (for the audit record).
      let impersonator: UserInfo | undefined
      // Admission's warnings (sent as Warning headers) and audit annotations for this request.
      const notes = Admission.emptyNotes()
      const started = Date.now()
      const t0 = performance.now()
      const requestId = requestIdOf(raw.headers)
      const kind = metrics.inflight.labels(raw.method === "GET" || raw.method === "HEAD" ? "readOnly" : "mutating")
      kind.inc()
      return Effect.gen(function* () {
        const caller = yield* options.authenticate(raw.headers)
        // From here on the request is the impersonated user's: authorization, flow control, admission.
        const user = yield* Impersonation.impersonate(raw.headers, caller, authorize).pipe(
          // A refused impersonation is audited as the caller's request.
          Effect.tapError(() => Effect.sync(() => (attributes = Authz.attributes(route, { ...raw, user: caller }))))
        )
        if (user !== caller) impersonator = caller
        // The rest of the request, its answer too, at its level's priority (restored at its end;
        // FlowControl.serve sets it as well, for servers that use FlowControl without this one).
        yield* FiberRef.set(FiberRef.currentSchedulingPriority, FlowControl.schedulingPriorityOf(user))
        const request: ApiRequest = { ...raw, user }
        attributes = Authz.attributes(route, request)
        const decision = yield* authorize(attributes)
        if (!decision.allowed) return yield* Effect.fail(Authz.forbidden(attributes, decision.reason))
        if (route._tag === "Resource") return yield* flowControl.serve(attributes, serveResource(served, route, request))
        if (route._tag === "Unknown") return yield* Effect.fail(notFoundPath())
        return yield* serveDiscovery(served, route, request)
      }).pipe(
        Effect.locally(Admission.currentNotes, notes),
        Effect.catchAll((e) => Effect.succeed(json(e.status.code ?? 500, e.status, e.headers ?? {}))),
        Effect.catchAllDefect((defect) =>
          Effect.succeed(json(500, Status.internalError(defect instanceof Error ? defect.message : String(defect))))
        ),
        Effect.flatMap((response) => {
          kind.dec()
          const seconds = (performance.now() - t0) / 1000
          const a = attributes ?? Authz.attributes(route, { ...raw, user: nobody })
          // Only served resources become label values: a 4xx for a made-up path must not add series.
          const known = response.status < 400 || route._tag !== "Resource" || registry.byResource(route.group, route.version, route.plural) !== undefined
          const group = known ? a.apiGroup : ""
          const resource = known ? a.resource : ""
          const subresource = known && response.status !== 404 ? a.subresource : ""
          const verb = metricVerb(a.verb)
          metrics.requests.labels(verb, group, resource, subresource, String(response.status)).inc()
          metrics.duration.labels(verb, group, resource, subresource).observe(seconds)
          const answered: ApiResponse = { ...response, headers: { ...response.headers, ...warningHeader(response.headers["warning"], notes.warnings), "x-request-id": requestId } }
          const user = attributes?.user.name ?? ""
          if (response.status >= 500) {
            return Effect.as(Effect.logWarning(`${raw.method} ${raw.path} answered ${response.status}`).pipe(Effect.annotateLogs({ code: response.status, user })), answered)
          }
          // A line per request at debug only, and built only then: the common path stays cheap.
          return Effect.flatMap(FiberRef.get(FiberRef.currentMinimumLogLevel), (level) =>
            LogLevel.greaterThan(level, LogLevel.Debug)
              ? Effect.succeed(answered)
              : Effect.as(Effect.logDebug(`${raw.method} ${raw.path}`).pipe(Effect.annotateLogs({ code: response.status, user, latencyMs: Date.now() - started })), answered)
          )
        }),
        Effect.tap((response) =>
          Effect.sync(() => {
            const a = attributes
            if (options.audit === undefined || a === undefined || !audited(a)) return
            options.audit({
              time: new Date(started).toISOString(),
              user: (impersonator ?? a.user).name,
              groups: (impersonator ?? a.user).groups,
              verb: a.verb,
              apiGroup: a.apiGroup,
              resource: a.resource,
              subresource: a.subresource,
              namespace: a.namespace,
              name: a.name,
              code: response.status,
              latencyMs: Date.now() - started,
              client: raw.client,
              ...(impersonator === undefined ? {} : { impersonatedUser: { user: a.user.name, groups: a.user.groups } }),
              ...(Object.keys(notes.annotations).length === 0 ? {} : { annotations: { ...notes.annotations } })
            })
          })
        ),
        Effect.onInterrupt(() => Effect.sync(() => kind.dec())),
        Effect.annotateLogs("requestId", requestId),
        (effect) => Effect.locallyWith(effect, FiberRef.currentSchedulingPriority, (p) => p)
      )
    }

    return { registry, handle, caches: () => caches.size }
  })

const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)
