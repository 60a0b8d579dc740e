/**
 * The resource metrics API, `metrics.k8s.io/v1beta1`, as metrics-server serves it: read-only
 * `nodes` (NodeMetrics, cluster-scoped) and `pods` (PodMetrics, namespaced, or across all
 * namespaces) with `get` and `list` (`labelSelector`, `fieldSelector` on metadata.name/namespace).
 * `kubectl top` and the HorizontalPodAutoscaler read it.
 *
 *   agents ─record─▶ MetricsSource (newest sample per node) ─┐
 *   store ─ pods / nodes (existence, labels) ────────────────┴─▶ NodeMetrics / PodMetrics
 *
 * Objects are computed per request, never stored: an object is served only when it exists in the
 * store *and* has a fresh sample, and it carries the labels of the node or pod it measures (label
 * selectors select on them, as metrics-server does). Watches and writes answer 405.
 */
import { Clock, Effect, Either } from "effect"
import * as LabelSelector from "../model/LabelSelector.js"
import * as MetricsModel from "../model/Metrics.js"
import * as Quantity from "../model/Quantity.js"
import * as Status from "../model/Status.js"
import * as Keys from "../store/Keys.js"
import type { StoreService } from "../store/Store.js"
import * as ApiError from "./ApiError.js"
import * as FieldSelector from "./FieldSelector.js"
import { json, type ApiRequest, type ApiResponse } from "./Http.js"
import type { MetricsSourceService, PodPoint, Usage } from "./MetricsSource.js"
import * as Objects from "./Objects.js"
import type { JsonObject, Registry, Resource } from "./Registry.js"
import type { ResourceRoute } from "./Router.js"
import { virtual } from "./VirtualResource.js"
import * as Table from "./Table.js"
import * as Transformer from "./Transformer.js"

const { ApiVersion, Group, Version } = MetricsModel

/** The verbs discovery lists for both resources (metrics-server's). */
export const verbs: ReadonlyArray<string> = ["get", "list"]

/** Options of the API. */
export interface Options {
  /** How stored pods and nodes are encoded (default: as they are). */
  readonly transformer?: Transformer.Transformer
}

/** CPU as metrics-server writes it: nano-cores scaled to the largest exact suffix (`250m`, `1234567n`). */
export const cpuQuantity = (nanoCores: number): string => Quantity.format({ nanos: BigInt(Math.max(0, Math.round(nanoCores))), format: "DecimalSI" })

/** Memory as metrics-server writes it: bytes in binary notation when whole (`12Ki`), else plain bytes. */
export const memoryQuantity = (bytes: number): string => Quantity.format(Quantity.fromUnits(Math.max(0, Math.round(bytes)), "BinarySI"))

const usageList = (u: Usage): Record<string, string> => ({ cpu: cpuQuantity(u.usageNanoCores), memory: memoryQuantity(u.workingSetBytes) })

const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z")

const notAllowed = (plural: string, verb: string) => ApiError.of(Status.methodNotSupported({ group: Group, resource: plural }, verb))

/** The stored objects under `prefix` (pods of a namespace, all nodes), decoded. */
const readStored = (store: StoreService, transformer: Transformer.Transformer, resource: { readonly group: string; readonly plural: string }, prefix: string) =>
  Effect.map(
    Effect.mapError(store.list(prefix), (e) => ApiError.fromStore(e, { resource: resource.plural, name: "" })),
    (page) => {
      const out: Array<JsonObject> = []
      for (const kv of page.items) {
        try {
          out.push(Objects.fromStored({ value: transformer.fromStore(resource, kv.value), modRevision: kv.modRevision }))
        } catch {
          // An unreadable object has no labels to select on; it is left out as metrics-server skips it.
        }
      }
      return out
    }
  )

interface Selection {
  readonly labels: LabelSelector.Matcher
  readonly fields: FieldSelector.Matcher
}

const selection = (request: ApiRequest): Either.Either<Selection, ApiError.ApiError> => {
  const labelText = request.query.get("labelSelector") ?? ""
  const fieldText = request.query.get("fieldSelector") ?? ""
  const labels = labelText === "" ? Either.right(LabelSelector.everything) : Either.map(LabelSelector.parse(labelText), LabelSelector.compile)
  if (Either.isLeft(labels)) return Either.left(ApiError.badRequest(`unable to parse requirement: ${labels.left.message}`))
  const fields = fieldText === "" ? Either.right(FieldSelector.everything) : Either.map(FieldSelector.parse(fieldText), FieldSelector.compile)
  if (Either.isLeft(fields)) return Either.left(fields.left)
  return Either.right({ labels: labels.right, fields: fields.right })
}

const selected = (s: Selection, o: JsonObject) => {
  const m = Objects.meta(o)
  const fields: Record<string, string> = { "metadata.name": String(m["name"] ?? "") }
  if (m["namespace"] !== undefined) fields["metadata.namespace"] = String(m["namespace"])
  return s.labels(m["labels"] as Record<string, string> | undefined) && s.fields(fields) // labels passed the ObjectMeta schema
}

const metadataOf = (measured: JsonObject, now: number): JsonObject => {
  const m = Objects.meta(measured)
  return {
    name: m["name"],
    ...(m["namespace"] === undefined ? {} : { namespace: m["namespace"] }),
    creationTimestamp: rfc3339(now),
    ...(m["labels"] === undefined ? {} : { labels: m["labels"] })
  }
}

const podMetrics = (pod: JsonObject, point: PodPoint, now: number): JsonObject => ({
  apiVersion: ApiVersion,
  kind: "PodMetrics",
  metadata: metadataOf(pod, now),
  timestamp: rfc3339(point.timestampMs),
  window: MetricsModel.formatDuration(point.windowMs),
  containers: point.containers.map((c) => ({ name: c.name, usage: usageList(c.usage) }))
})

/**
 * Answer a GET: one object (404 when it or its sample is missing) or a list (Table when asked),
 * after refusing writes, watches and subresources.
 */
const serve = (
  resource: () => Resource,
  request: ApiRequest,
  route: ResourceRoute,
  items: (selection: Selection, now: number) => Effect.Effect<ReadonlyArray<JsonObject>, ApiError.ApiError>,
  notFoundName: (name: string) => string
): Effect.Effect<ApiResponse, ApiError.ApiError> =>
  Effect.gen(function* () {
    const r = resource()
    const watching = route.watchPath || request.query.get("watch") === "true" || request.query.get("watch") === "1"
    if (route.subresource !== undefined) return yield* Effect.fail(ApiError.of(Status.notFound({ group: Group, resource: `${r.plural}/${route.subresource}` }, route.name ?? "")))
    if (request.method.toUpperCase() !== "GET" || watching) return yield* Effect.fail(notAllowed(r.plural, watching ? "watch" : request.method.toLowerCase()))
    const now = yield* Clock.currentTimeMillis
    if (route.name !== undefined) {
      const name = route.name
      const one = (yield* items({ labels: LabelSelector.everything, fields: (f) => f["metadata.name"] === name }, now))[0]
      if (one === undefined) return yield* Effect.fail(ApiError.of(Status.notFound({ group: Group, resource: r.plural }, notFoundName(name))))
      return json(200, one)
    }
    const s = yield* selection(request)
    const list = yield* items(s, now)
    if (Table.wanted(request.headers["accept"])) {
      return json(200, Table.render(r, list, {}, now, request.query.get("includeObject")), { "content-type": Table.contentType })
    }
    return json(200, { apiVersion: ApiVersion, kind: `${r.kind}List`, metadata: {}, items: list })
  })

const usageColumns = (cpu: (o: JsonObject) => unknown, memory: (o: JsonObject) => unknown) =>
  [
    { name: "CPU", type: "string", value: cpu },
    { name: "Memory", type: "string", value: memory },
    { name: "Window", type: "string", value: ".window" }
  ] as const

const podTotal = (o: JsonObject, resourceName: "cpu" | "memory"): string => {
  let nanos = 0n
  for (const c of (o["containers"] as ReadonlyArray<{ readonly usage: Record<string, string> }> | undefined) ?? []) {
    const q = Quantity.parse(c.usage[resourceName] ?? "0")
    if (Either.isRight(q)) nanos += q.right.nanos
  }
  return Quantity.format({ nanos, format: resourceName === "memory" ? "BinarySI" : "DecimalSI" })
}

/** The two virtual resources, answering from `source` and the stored pods and nodes. */
export const resources = (source: MetricsSourceService, store: StoreService, options: Options = {}): ReadonlyArray<Resource> => {
  const transformer = options.transformer ?? Transformer.identity
  const nodes: Resource = {
    ...virtual({
      group: Group,
      version: Version,
      kind: "NodeMetrics",
      plural: "nodes",
      schema: MetricsModel.NodeMetrics,
      // The server builds these objects itself, with `usage` a quantity map.
      printerColumns: usageColumns((o) => (o["usage"] as Record<string, string> | undefined)?.["cpu"], (o) => (o["usage"] as Record<string, string> | undefined)?.["memory"]),
      handle: (request, route) =>
        serve(() => nodes, request, route, (s, now) =>
          Effect.gen(function* () {
            const points = new Map((yield* source.nodes).map((p) => [p.name, p]))
            if (points.size === 0) return []
            const stored = yield* readStored(store, transformer, { group: "", plural: "nodes" }, Keys.prefix("", "nodes"))
            const out: Array<JsonObject> = []
            for (const node of stored) {
              const point = points.get(String(Objects.meta(node)["name"]))
              if (point === undefined || !selected(s, node)) continue
              out.push({
                apiVersion: ApiVersion,
                kind: "NodeMetrics",
                metadata: metadataOf(node, now),
                timestamp: rfc3339(point.timestampMs),
                window: MetricsModel.formatDuration(point.windowMs),
                usage: usageList(point.usage)
              })
            }
            return out
          }), (name) => name)
    }),
    verbs
  }
  const pods: Resource = {
    ...virtual({
      group: Group,
      version: Version,
      kind: "PodMetrics",
      plural: "pods",
      namespaced: true,
      schema: MetricsModel.PodMetrics,
      printerColumns: usageColumns((o) => podTotal(o, "cpu"), (o) => podTotal(o, "memory")),
      handle: (request, route) =>
        serve(() => pods, request, route, (s, now) =>
          Effect.gen(function* () {
            const points = new Map((yield* source.pods(route.namespace)).map((p) => [`${p.namespace}/${p.name}`, p]))
            if (points.size === 0) return []
            const stored = yield* readStored(store, transformer, { group: "", plural: "pods" }, Keys.prefix("", "pods", route.namespace))
            const out: Array<JsonObject> = []
            for (const pod of stored) {
              const m = Objects.meta(pod)
              const point = points.get(`${String(m["namespace"])}/${String(m["name"])}`)
              if (point !== undefined && selected(s, pod)) out.push(podMetrics(pod, point, now))
            }
            return out
          }), (name) => `${route.namespace ?? ""}/${name}`)
    }),
    verbs
  }
  return [nodes, pods]
}

/** Serve the resource metrics API from `registry`. */
export const install = (registry: Registry, source: MetricsSourceService, store: StoreService, options: Options = {}): void => {
  for (const r of resources(source, store, options)) registry.put(r)
}
