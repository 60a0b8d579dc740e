/**
 * Service node-port allocation (`spec.ports[].nodePort` of NodePort and LoadBalancer Services),
 * as kube-apiserver's Service registry does it, with the ClusterIP allocator's locking: each
 * held port is one store key, `/registry/ranges/servicenodeports/<port>`, naming the Service that
 * holds it, and the store's create-if-absent is the lock, so two concurrent Services never get
 * the same port, across API servers too.
 *
 *   Service write ─▶ plan (which ports to keep, allocate, release; field errors)
 *     mutate:   create the port keys (requested ones, else random free ones) ─▶ set nodePorts
 *     validate: txn ops: check/create the Service's new port keys, delete the ones it gives up
 *
 * Kubernetes keeps one bitmap object (`RangeAllocation`) per range; one key per port needs no
 * read-modify-write of a shared object, so concurrent creates do not retry on each other. The
 * plan follows upstream: ports of Services that need none (ClusterIP, ExternalName, LoadBalancer
 * with `allocateLoadBalancerNodePorts: false` and none requested) hold none, and a type change
 * drops the old ones; an update that omits a port's nodePort keeps it (matched by port name);
 * ports of one Service with the same `port` share a node port (TCP and UDP of DNS); a requested
 * port must be in the range and free. A write refused after `mutate` leaves its keys behind, as
 * with ClusterIPs; instead of a repair controller, a key is taken over when it is older than
 * `leakGraceMs` and the Service it names does not hold that port (looked up when the port is
 * requested, or when the range looks full). Departure: no `healthCheckNodePort`.
 */
import { Clock, Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, isJsonObject, type JsonObject } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { StoreService, TxnOp } from "../store/Store.js"
import { getObject, parse } from "./internal/json.js"

/** The plugin's name. */
export const name = "NodePortAllocator"

/** kube-apiserver's default `--service-node-port-range`. */
export const defaultRange = "30000-32767"

/** How long a port key whose Service does not hold it is left alone (a create may still be in flight). */
export const leakGraceMs = 60_000

/** A range of node ports, both ends included. */
export interface PortRange {
  readonly first: number
  readonly last: number
}

/** Parses `--service-node-port-range`: `FIRST-LAST` (or `FIRST+COUNT`, as upstream also accepts). */
export const parseRange = (text: string): Either.Either<PortRange, string> => {
  const m = /^\s*(\d+)\s*([-+])\s*(\d+)\s*$/.exec(text)
  if (m === null) return Either.left(`expected FIRST-LAST (e.g. ${defaultRange}), got ${JSON.stringify(text)}`)
  const first = Number(m[1])
  const last = m[2] === "+" ? first + Number(m[3]) - 1 : Number(m[3])
  if (first < 1 || last > 65535 || last < first) return Either.left(`${JSON.stringify(text)} is not a range of ports within 1-65535`)
  return Either.right({ first, last })
}

/** The range as kube-apiserver prints it. */
export const formatRange = (range: PortRange): string => `${range.first}-${range.last}`

// ---- planning (pure) ----------------------------------------------------------------------

/** One port of the Service that needs a node port: at `index` of `spec.ports`, a requested one or any. */
export interface Allocation {
  readonly index: number
  readonly requested: number | undefined
}

/** What a Service write means for its node ports. */
export interface Plan {
  /** The spec to store: kept node ports filled in, dropped ones removed. */
  readonly spec: JsonObject
  /** Ports that need a node port (requested or not); the same node port may appear for several. */
  readonly allocate: ReadonlyArray<Allocation>
  /** Node ports the Service gives up with this write. */
  readonly release: ReadonlyArray<number>
}

const typeOf = (spec: JsonObject): string => (typeof spec["type"] === "string" ? spec["type"] : "ClusterIP")
const portsOf = (spec: JsonObject): ReadonlyArray<JsonObject> => asArray(spec["ports"]).map((p) => asObject(p))
const nodePortOf = (p: JsonObject): number | undefined => (typeof p["nodePort"] === "number" && p["nodePort"] !== 0 ? p["nodePort"] : undefined)

/** The node ports a Service spec holds. */
export const nodePortsOf = (spec: JsonObject): ReadonlyArray<number> => [...new Set(portsOf(spec).flatMap((p) => nodePortOf(p) ?? []))]

/** Whether a Service of this spec gets node ports allocated (upstream's `needsNodePort`). */
export const needsNodePorts = (spec: JsonObject): boolean =>
  typeOf(spec) === "NodePort" || (typeOf(spec) === "LoadBalancer" && spec["allocateLoadBalancerNodePorts"] !== false)

// Node ports may be set on these types: a LoadBalancer without allocation keeps requested ones.
const mayHoldNodePorts = (spec: JsonObject): boolean => typeOf(spec) === "NodePort" || typeOf(spec) === "LoadBalancer"

/**
 * What a Service write (`old` undefined: a create) means for its node ports, in `range` (pure).
 * Refusals are field errors worded like kube-apiserver's.
 */
export const plan = (specIn: JsonObject, old: JsonObject | undefined, range: PortRange): Either.Either<Plan, ReadonlyArray<FieldError.FieldError>> => {
  const oldPorts = old === undefined || !mayHoldNodePorts(old) ? [] : portsOf(old)
  const oldHeld = old === undefined ? [] : nodePortsOf(old)
  let ports = portsOf(specIn).map((p) => ({ ...p }))
  const errors: Array<FieldError.FieldError> = []
  if (!mayHoldNodePorts(specIn)) {
    // dropTypeDependentFields: node ports carried over from a NodePort/LoadBalancer type are cleared.
    ports = ports.map((p) => {
      const n = nodePortOf(p)
      if (n === undefined || !oldHeld.includes(n)) return p
      const { nodePort: _, ...rest } = p
      return rest
    })
    ports.forEach((p, i) => {
      if (nodePortOf(p) !== undefined) errors.push(FieldError.forbidden(`spec.ports[${i}].nodePort`, `may not be used when \`type\` is '${typeOf(specIn)}'`))
    })
    if (errors.length > 0) return Either.left(errors)
    return Either.right({ spec: withPorts(specIn, ports), allocate: [], release: oldHeld })
  }
  const needs = needsNodePorts(specIn)
  if (needs && oldPorts.length > 0) {
    // patchAllocatedValues: a port whose nodePort was left out keeps the one it had.
    ports = ports.map((p) => {
      if (nodePortOf(p) !== undefined) return p
      const was = oldPorts.find((o) => (o["name"] ?? "") === (p["name"] ?? "") && (o["protocol"] ?? "TCP") === (p["protocol"] ?? "TCP")) ??
        (oldPorts.length === 1 && ports.length === 1 ? oldPorts[0] : undefined)
      const n = was === undefined ? undefined : nodePortOf(was)
      return n === undefined ? p : { ...p, nodePort: n }
    })
  }
  const seen = new Map<string, number>()
  ports.forEach((p, i) => {
    const n = nodePortOf(p)
    if (n === undefined) return
    const key = `${n}/${String(p["protocol"] ?? "TCP")}`
    if (seen.has(key)) errors.push(FieldError.duplicate(`spec.ports[${i}].nodePort`, n))
    seen.set(key, i)
    if ((n < range.first || n > range.last) && !oldHeld.includes(n)) {
      errors.push(FieldError.invalid(`spec.ports[${i}].nodePort`, n, `provided port is not in the valid range. The range of valid ports is ${formatRange(range)}`))
    }
  })
  if (errors.length > 0) return Either.left(errors)
  // Ports with the same port number share a node port (upstream's allocNodePorts).
  const allocate: Array<Allocation> = []
  ports.forEach((p, i) => {
    const n = nodePortOf(p)
    if (n !== undefined) {
      if (!oldHeld.includes(n)) allocate.push({ index: i, requested: n })
      return
    }
    if (!needs) return
    const sibling = ports.findIndex((q, j) => j !== i && q["port"] === p["port"] && nodePortOf(q) !== undefined)
    if (sibling >= 0) ports[i] = { ...p, nodePort: nodePortOf(ports[sibling]!) }
    else if (!allocate.some((a) => a.requested === undefined && ports[a.index]!["port"] === p["port"])) allocate.push({ index: i, requested: undefined })
  })
  const kept = new Set(ports.flatMap((p) => nodePortOf(p) ?? []))
  return Either.right({ spec: withPorts(specIn, ports), allocate, release: oldHeld.filter((n) => !kept.has(n)) })
}

const withPorts = (spec: JsonObject, ports: ReadonlyArray<JsonObject>): JsonObject => (spec["ports"] === undefined ? spec : { ...spec, ports })

// ---- the plugin (effects) -----------------------------------------------------------------

/** How the plugin is configured. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
  /** `--service-node-port-range` (default `30000-32767`). */
  readonly range?: string
  /** Randomness for choosing ports (injectable for tests). */
  readonly random?: () => number
}

/** The store prefix of held node ports. */
export const keyPrefix = `${Keys.root}ranges/servicenodeports/`

/** The store key of a held node port. */
export const keyOf = (port: number): string => `${keyPrefix}${port}`

interface Holder {
  readonly namespace: string
  readonly name: string
}

const holderOf = (value: string): { readonly service: Holder; readonly createdAt: number } | undefined => {
  const parsed = parse(value)
  const o = Either.isRight(parsed) && isJsonObject(parsed.right) ? parsed.right : undefined
  const s = o !== undefined && isJsonObject(o["service"]) ? o["service"] : undefined
  if (s === undefined || typeof s["namespace"] !== "string" || typeof s["name"] !== "string") return undefined
  return { service: { namespace: s["namespace"], name: s["name"] }, createdAt: typeof o?.["createdAt"] === "number" ? o["createdAt"] : 0 }
}

const invalid = (service: string, errors: ReadonlyArray<FieldError.FieldError>) => ApiError.of(Status.invalid({ group: "", kind: "Service" }, service, errors))

/** The plugin. */
export const make = (options: Options): Admission.Plugin => {
  const codec = options.transformer ?? identity
  const random = options.random ?? Math.random
  const parsed = parseRange(options.range ?? defaultRange)
  const unavailable = (e: { readonly _tag: string }) => ApiError.fromStore(e as never, { resource: { group: "", resource: "services" }, name: "" })
  const isServices = (request: Admission.Request) => request.resource.group === "" && request.resource.plural === "services" && request.subresource === ""
  const same = (a: Holder, b: Holder) => a.namespace === b.namespace && a.name === b.name

  const encode = (service: Holder) => Effect.map(Clock.currentTimeMillis, (now) => JSON.stringify({ service, createdAt: now }))

  /** Create the port key; false when it exists already. */
  const tryCreate = (port: number, service: Holder) =>
    Effect.flatMap(encode(service), (value) =>
      options.store.create(keyOf(port), value).pipe(
        Effect.as(true),
        Effect.catchTag("AlreadyExists", () => Effect.succeed(false)),
        Effect.mapError(unavailable)
      )
    )

  const existing = (port: number) =>
    options.store.get(keyOf(port)).pipe(
      Effect.map((kv) => ({ revision: kv.modRevision, holder: holderOf(kv.value) })),
      Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
      Effect.mapError(unavailable)
    )

  /** Whether a key is a leak: old enough, and the Service it names does not hold the port. */
  const stale = (port: number, held: { readonly holder: ReturnType<typeof holderOf> }) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (held.holder !== undefined && now - held.holder.createdAt < leakGraceMs) return false
      if (held.holder === undefined) return true
      const service = yield* getObject(options.store, codec, { group: "", plural: "services", namespace: held.holder.service.namespace, name: held.holder.service.name })
      return service === undefined || !nodePortsOf(asObject(service.object["spec"])).includes(port)
    })

  /** Take `port` over from a leaked key (compare-and-swap on its revision); false when someone else won. */
  const takeOver = (port: number, revision: number, service: Holder) =>
    Effect.flatMap(encode(service), (value) =>
      options.store.txn([{ op: "update", key: keyOf(port), value, expectedRevision: revision }]).pipe(
        Effect.as(true),
        Effect.catchAll(() => Effect.succeed(false))
      )
    )

  /** Reserve `port` for the Service: free, a leftover of its own, or a stale leak. */
  const claim = (port: number, service: Holder, dryRun: boolean): Effect.Effect<"created" | "held" | "taken", ApiError.ApiError> =>
    Effect.gen(function* () {
      if (!dryRun && (yield* tryCreate(port, service))) return "created"
      const held = yield* existing(port)
      if (held === undefined) return dryRun ? "held" : yield* claim(port, service, dryRun)
      if (held.holder !== undefined && same(held.holder.service, service)) return "held"
      if (yield* stale(port, held)) {
        if (dryRun) return "held"
        return (yield* takeOver(port, held.revision, service)) ? "created" : "taken"
      }
      return "taken"
    })

  const takenPorts = (range: PortRange) =>
    options.store.list(keyPrefix).pipe(
      Effect.map((page) => new Set(page.items.map((kv) => Number(kv.key.slice(keyPrefix.length))).filter((n) => n >= range.first && n <= range.last))),
      Effect.mapError(unavailable)
    )

  /**
   * Take any free port of the range: a few random probes first (cheap while the range is sparse),
   * then one read of the taken set and a walk from a random offset; a lost race moves on. When
   * nothing is free, leaked keys are looked for before the range is declared full.
   */
  const allocateNext = (range: PortRange, service: Holder, dryRun: boolean, avoid: ReadonlySet<number>) =>
    Effect.gen(function* () {
      const width = range.last - range.first + 1
      const pick = () => range.first + Math.floor(random() * width)
      if (!dryRun) {
        for (let i = 0; i < 4; i++) {
          const port = pick()
          if (!avoid.has(port) && (yield* tryCreate(port, service))) return port
        }
      }
      const used = yield* takenPorts(range)
      const start = pick() - range.first
      for (let i = 0; i < width; i++) {
        const port = range.first + ((start + i) % width)
        if (used.has(port) || avoid.has(port)) continue
        if (dryRun || (yield* tryCreate(port, service))) return port
      }
      for (const port of used) {
        if (avoid.has(port)) continue
        if ((yield* claim(port, service, dryRun)) === "created") return port
      }
      return undefined
    })

  const release = (ports: ReadonlyArray<number>) => Effect.forEach(ports, (p) => options.store.delete(keyOf(p)).pipe(Effect.ignore), { discard: true })

  const mutate = (request: Admission.Request): Effect.Effect<JsonObject, ApiError.ApiError> =>
    Effect.gen(function* () {
      if (!isServices(request) || request.operation === "DELETE") return request.object
      if (Either.isLeft(parsed)) return yield* Effect.fail(ApiError.of(Status.internalError(`the service node port range is invalid: ${parsed.left}`)))
      const range = parsed.right
      const spec = asObject(request.object["spec"])
      const oldSpec = request.oldObject === undefined ? undefined : asObject(request.oldObject["spec"])
      const planned = plan(spec, oldSpec, range)
      if (Either.isLeft(planned)) return yield* Effect.fail(invalid(request.name, planned.left))
      const service = { namespace: request.namespace, name: request.name }
      const ports = portsOf(planned.right.spec).map((p) => ({ ...p }))
      const created: Array<number> = []
      const undo = (e: ApiError.ApiError) => Effect.zipRight(release(created), Effect.fail(e))
      for (const slot of planned.right.allocate) {
        let port = slot.requested
        if (port !== undefined) {
          if (!created.includes(port)) {
            const outcome = yield* claim(port, service, request.dryRun)
            if (outcome === "taken") {
              return yield* undo(invalid(request.name, [FieldError.invalid(`spec.ports[${slot.index}].nodePort`, port, "provided port is already allocated")]))
            }
            if (outcome === "created") created.push(port)
          }
        } else {
          const avoid = new Set(ports.flatMap((p) => nodePortOf(p) ?? []))
          port = yield* allocateNext(range, service, request.dryRun, avoid)
          if (port === undefined) return yield* undo(ApiError.of(Status.internalError(`failed to allocate a nodePort: range is full (${formatRange(range)})`)))
          if (!request.dryRun) created.push(port)
          // Ports of the same number share it.
          const number = ports[slot.index]!["port"]
          ports.forEach((p, j) => {
            if (j === slot.index || (p["port"] === number && nodePortOf(p) === undefined)) ports[j] = { ...p, nodePort: port }
          })
        }
      }
      return { ...request.object, spec: withPorts(planned.right.spec, ports) }
    })

  const validate = (request: Admission.Request): Effect.Effect<ReadonlyArray<TxnOp>, ApiError.ApiError> =>
    Effect.gen(function* () {
      if (!isServices(request)) return []
      const service = { namespace: request.namespace, name: request.name }
      const specOf = (o: JsonObject | undefined) => asObject(o?.["spec"])
      const before = request.oldObject === undefined ? [] : nodePortsOf(specOf(request.oldObject))
      const after = request.operation === "DELETE" ? [] : nodePortsOf(specOf(request.object))
      const ops: Array<TxnOp> = []
      // New ports must still be this Service's when the write commits.
      for (const port of after.filter((p) => !before.includes(p))) {
        const held = yield* existing(port)
        if (held === undefined) ops.push({ op: "create", key: keyOf(port), value: yield* encode(service) })
        else if (held.holder !== undefined && same(held.holder.service, service)) ops.push({ op: "check", key: keyOf(port), expectedRevision: held.revision })
        else return yield* Effect.fail(invalid(request.name, [FieldError.invalid("spec.ports.nodePort", port, "provided port is already allocated")]))
      }
      // Released ports go with the write, when this Service still holds them.
      for (const port of before.filter((p) => !after.includes(p))) {
        const held = yield* existing(port)
        if (held?.holder !== undefined && same(held.holder.service, service)) ops.push({ op: "delete", key: keyOf(port), expectedRevision: held.revision })
      }
      return ops
    })

  return { name, mutate, validate }
}
