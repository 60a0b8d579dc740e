/**
 * Service ClusterIP allocation, as kube-apiserver 1.31+ does it with the MultiCIDRServiceAllocator
 * design: every allocated address is one cluster-scoped `networking.k8s.io/v1` `IPAddress` object
 * named by the address and pointing at its Service (`spec.parentRef`). The store's create-if-absent
 * is the lock, so two concurrent Services can never hold the same IP, across API servers too.
 *
 *   Service write ─▶ plan (ipFamilies, ipFamilyPolicy, which IPs to take or give back)
 *     mutate:   create IPAddress objects (random free offset; on AlreadyExists try another) ─▶ set clusterIP(s)
 *     validate: txn ops: check/create the Service's new IPAddresses, delete the ones it gives up
 *
 * Kubernetes allocates in the Service registry and undoes the allocation when the write fails.
 * Here allocation is an admission plugin (last in the mutating order, as the registry runs after
 * mutating admission), and `validate` ties the addresses to the Service write in one store
 * transaction: the write commits only while each new address is still this Service's, and a
 * delete (or a type change to ExternalName, or a dual-stack downgrade) removes the released
 * addresses in the same transaction, so releasing needs no second step. A write refused after
 * `mutate` (quota, a validating webhook, a name that exists) leaves its addresses behind; the
 * repair controller (`controllers/ClusterIpRepair.ts`) deletes such leaks after a grace period,
 * as Kubernetes' does. Deviations: the first address of each range is reserved for the
 * `kubernetes` Service (never handed out dynamically, but it may be requested); dynamic
 * allocation prefers the upper part of the range (KEP-3070) as upstream does.
 */
import { Clock, Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as Objects from "../api/Objects.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import * as IpRange from "../network/IpRange.js"
import { asArray, asObject, jsonEqual, type JsonObject } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { StoreService, TxnOp } from "../store/Store.js"
import { getObject, strings } from "./internal/json.js"

/** The plugin's name. */
export const name = "ClusterIpAllocator"

/** kube-apiserver's default `--service-cluster-ip-range`. */
export const defaultRange = "10.96.0.0/12"

/** The label naming the allocator that owns an IPAddress. */
export const managedByLabel = "ipaddress.kubernetes.io/managed-by"

/** The label giving an IPAddress's family. */
export const familyLabel = "ipaddress.kubernetes.io/ip-family"

/** The `managed-by` value of addresses this allocator (and its repair controller) creates. */
export const controllerName = "ipallocator.k8s.io"

/** The IPAddress resource in the store. */
export const ipAddresses = { group: "networking.k8s.io", plural: "ipaddresses" } as const

/** The configured Service ranges: one, or two of different families (dual-stack); the first is primary. */
export interface Ranges {
  readonly primary: IpRange.IpRange
  readonly all: ReadonlyArray<IpRange.IpRange>
}

/** The range of a family, if configured. */
export const rangeFor = (ranges: Ranges, family: IpRange.Family): IpRange.IpRange | undefined => ranges.all.find((r) => r.family === family)

/**
 * Parses `--service-cluster-ip-range`: one CIDR, or two comma-separated of different families.
 * IPv6 ranges must be /64 or longer, as kube-apiserver's IPAddress allocator requires.
 */
export const parseRanges = (text: string): Either.Either<Ranges, string> => {
  const parts = text.split(",").map((s) => s.trim()).filter((s) => s !== "")
  if (parts.length === 0 || parts.length > 2) return Either.left(`--service-cluster-ip-range must hold one or two CIDRs, got ${JSON.stringify(text)}`)
  const all: Array<IpRange.IpRange> = []
  for (const p of parts) {
    const r = IpRange.parse(p)
    if (Either.isLeft(r)) return Either.left(r.left)
    if (r.right.family === "IPv6" && r.right.prefix < 64) return Either.left(`shortest allowed prefix length for service CIDR is 64, got ${r.right.prefix}`)
    all.push(r.right)
  }
  if (all.length === 2 && all[0]!.family === all[1]!.family) return Either.left("--service-cluster-ip-range: two ranges must be of different IP families (dual-stack)")
  return Either.right({ primary: all[0]!, all })
}

// ---- planning (pure) ----------------------------------------------------------------------

/** One address a write needs: at `index` of `clusterIPs`, of `family`, a requested one or any. */
export interface Allocation {
  readonly index: number
  readonly family: IpRange.Family
  readonly requested: string | undefined
}

/** What a Service write means for its addresses. */
export interface Plan {
  /** The spec to store: families and policy defaulted, clusterIP(s) normalized ("" where one is to be allocated). */
  readonly spec: JsonObject
  readonly allocate: ReadonlyArray<Allocation>
  /** Addresses the Service gives up with this write. */
  readonly release: ReadonlyArray<string>
}

const typeOf = (spec: JsonObject): string => (typeof spec["type"] === "string" ? spec["type"] : "ClusterIP")
const needsClusterIP = (spec: JsonObject) => typeOf(spec) !== "ExternalName"
const ipsOf = (spec: JsonObject): ReadonlyArray<string> => asArray(spec["clusterIPs"]).filter((s): s is string => typeof s === "string")
const familiesOf = (spec: JsonObject): ReadonlyArray<string> => asArray(spec["ipFamilies"]).filter((s): s is string => typeof s === "string")
const clusterIPOf = (spec: JsonObject): string => (typeof spec["clusterIP"] === "string" ? spec["clusterIP"] : "")
const policyOf = (spec: JsonObject): string | undefined => (typeof spec["ipFamilyPolicy"] === "string" ? spec["ipFamilyPolicy"] : undefined)
const hasSelector = (spec: JsonObject) => Object.keys(strings(spec["selector"])).length > 0
const otherFamily = (f: string): IpRange.Family => (f === "IPv4" ? "IPv6" : "IPv4")

/** The addresses a Service holds (headless `None` excluded). */
export const addressesOf = (service: JsonObject): ReadonlyArray<string> => {
  const spec = asObject(service["spec"])
  if (!needsClusterIP(spec)) return []
  const ips = ipsOf(spec)
  const all = ips.length > 0 ? ips : clusterIPOf(spec) === "" ? [] : [clusterIPOf(spec)]
  return all.filter((ip) => ip !== "" && ip !== "None")
}

const isValidIP = (ip: string) => IpRange.parseAddress(ip) !== undefined
const invalidIPDetail = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"

// kube-apiserver's ValidateServiceClusterIPsRelatedFields, the part allocation relies on.
const validateIPFields = (spec: JsonObject): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const ips = ipsOf(spec)
  const clusterIP = clusterIPOf(spec)
  if (clusterIP !== "") {
    if (ips.length === 0) errors.push(FieldError.required("spec.clusterIPs"))
    else if (ips[0] !== clusterIP) errors.push(FieldError.invalid("spec.clusterIPs", ips, "first value must match `clusterIP`"))
  } else if (ips.length > 0) errors.push(FieldError.invalid("spec.clusterIPs", ips, "must be empty when `clusterIP` is not specified"))
  const seen = new Set<string>()
  familiesOf(spec).forEach((f, i) => {
    if (f !== "IPv4" && f !== "IPv6") errors.push(FieldError.notSupported(`spec.ipFamilies[${i}]`, f, ["IPv4", "IPv6"]))
    if (seen.has(f)) errors.push(FieldError.duplicate(`spec.ipFamilies[${i}]`, f))
    seen.add(f)
  })
  let badIPs = false
  ips.forEach((ip, i) => {
    if (i === 0 && ip === "None") {
      if (ips.length > 1) {
        badIPs = true
        errors.push(FieldError.invalid("spec.clusterIPs", ips, "'None' must be the first and only value"))
      }
      return
    }
    if (!isValidIP(ip)) {
      badIPs = true
      errors.push(FieldError.invalid(`spec.clusterIPs[${i}]`, ip, invalidIPDetail))
    }
  })
  if (ips.length > 2) errors.push(FieldError.invalid("spec.clusterIPs", ips, "may only hold up to 2 values"))
  if (badIPs) return errors
  if (ips.length === 2 && IpRange.familyOf(ips[0]!) === IpRange.familyOf(ips[1]!)) {
    errors.push(FieldError.invalid("spec.clusterIPs", ips, "may specify no more than one IP for each IP family"))
  }
  const families = familiesOf(spec)
  if (!(ips.length === 1 && ips[0] === "None")) {
    ips.forEach((ip, i) => {
      const f = families[i]
      if (f === undefined) return
      const actual = IpRange.familyOf(ip)
      if (f !== actual) errors.push(FieldError.invalid(`spec.clusterIPs[${i}]`, ip, `expected an ${f} value as indicated by \`ipFamilies[${i}]\``))
    })
  }
  return errors
}

// kube-apiserver's normalizeClusterIPs: keep clusterIP and clusterIPs in step for old clients.
const normalizeClusterIPs = (spec: JsonObject, old: JsonObject | undefined): JsonObject => {
  const ips = ipsOf(spec)
  const clusterIP = clusterIPOf(spec)
  if (old === undefined) return clusterIP !== "" && ips.length === 0 ? { ...spec, clusterIPs: [clusterIP] } : spec
  let next = spec
  if (ipsOf(old).length > 0 && ips.length === 0 && clusterIPOf(old) === clusterIP) next = { ...next, clusterIPs: ipsOf(old) }
  if (clusterIPOf(old) !== clusterIP) {
    const same = jsonEqual(ipsOf(old), ipsOf(next))
    if (clusterIPOf(old) !== "" && clusterIP === "") {
      if (same) next = { ...next, clusterIPs: undefined }
    } else if (same) next = { ...next, clusterIPs: [clusterIP] }
  }
  return next
}

// A PreferDualStack Service whose addresses and families did not change is left as it is, so a
// cluster turning dual-stack (or back) never adds or drops an address behind its owner's back.
const unchangedPreferDualStack = (spec: JsonObject, old: JsonObject | undefined) =>
  old !== undefined &&
  typeOf(old) === typeOf(spec) &&
  needsClusterIP(spec) &&
  policyOf(spec) === "PreferDualStack" &&
  policyOf(old) === "PreferDualStack" &&
  jsonEqual(ipsOf(old), ipsOf(spec)) &&
  jsonEqual(familiesOf(old), familiesOf(spec))

const drop = (spec: JsonObject, keys: ReadonlyArray<string>): JsonObject => {
  const out = { ...spec }
  for (const k of keys) delete out[k]
  return out
}

/**
 * What a Service write (`old` undefined: a create) means for its addresses, on a cluster with
 * `ranges` (pure): kube-apiserver's `initIPFamilyFields` (policy and families defaulted and
 * checked against the cluster), `patchAllocatedValues` and `normalizeClusterIPs` (updates that
 * omit allocated addresses keep them), and its update cases (ExternalName ↔ ClusterIP types,
 * dual-stack upgrade and downgrade). Refusals are field errors worded like kube-apiserver.
 */
export const plan = (specIn: JsonObject, old: JsonObject | undefined, ranges: Ranges): Either.Either<Plan, ReadonlyArray<FieldError.FieldError>> => {
  let spec: JsonObject = { ...specIn }
  // ExternalName: no addresses; what a ClusterIP-type Service held is released.
  if (!needsClusterIP(spec)) {
    const release = old !== undefined && needsClusterIP(old) ? addressesOf({ spec: old }) : []
    if (old !== undefined && needsClusterIP(old)) {
      // dropTypeDependentFields: fields carried over unchanged from the old type are cleared.
      for (const k of ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"]) if (jsonEqual(spec[k], old[k])) spec = drop(spec, [k])
    }
    const errors: Array<FieldError.FieldError> = []
    if (clusterIPOf(spec) !== "" || ipsOf(spec).length > 0) errors.push(FieldError.forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
    if (familiesOf(spec).length > 0) errors.push(FieldError.forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
    if (policyOf(spec) !== undefined) errors.push(FieldError.forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
    return errors.length > 0 ? Either.left(errors) : Either.right({ spec, allocate: [], release })
  }
  if (old !== undefined && needsClusterIP(old)) {
    // patchAllocatedValues: an update that leaves the addresses out keeps them.
    if (clusterIPOf(spec) === "" && clusterIPOf(old) !== "") spec = { ...spec, clusterIP: clusterIPOf(old) }
    if (ipsOf(spec).length === 0 && ipsOf(old).length > 0) spec = { ...spec, clusterIPs: ipsOf(old) }
  }
  spec = normalizeClusterIPs(spec, old)
  if (unchangedPreferDualStack(spec, old)) return Either.right({ spec, allocate: [], release: [] })

  if (policyOf(spec) === undefined) {
    const policy =
      old !== undefined && policyOf(old) !== undefined
        ? policyOf(old)!
        : clusterIPOf(spec) === "None" && !hasSelector(spec)
          ? "RequireDualStack"
          : "SingleStack"
    spec = { ...spec, ipFamilyPolicy: policy }
  }
  const fieldErrors = validateIPFields(spec)
  if (fieldErrors.length > 0) return Either.left(fieldErrors)

  const errors: Array<FieldError.FieldError> = []
  const policy = policyOf(spec)!
  if (old !== undefined && needsClusterIP(old)) {
    if (policy === "SingleStack") {
      // Setting SingleStack with the addresses unchanged is the intent to drop the secondary.
      if (jsonEqual(ipsOf(old), ipsOf(spec)) && ipsOf(spec).length > 1) spec = { ...spec, clusterIPs: ipsOf(spec).slice(0, 1) }
      if (jsonEqual(familiesOf(old), familiesOf(spec)) && familiesOf(spec).length > 1) spec = { ...spec, ipFamilies: familiesOf(spec).slice(0, 1) }
    } else {
      if (ipsOf(spec).length < ipsOf(old).length) errors.push(FieldError.invalid("spec.ipFamilyPolicy", policy, "must be 'SingleStack' to release the secondary cluster IP"))
      if (familiesOf(spec).length < familiesOf(old).length) errors.push(FieldError.invalid("spec.ipFamilyPolicy", policy, "must be 'SingleStack' to release the secondary IP family"))
    }
  }
  if (policy === "SingleStack") {
    if (ipsOf(spec).length === 2) errors.push(FieldError.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"))
    if (familiesOf(spec).length === 2) errors.push(FieldError.invalid("spec.ipFamilyPolicy", policy, "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"))
  }
  // Families follow the requested addresses.
  const families: Array<string> = [...familiesOf(spec)]
  for (const [i, ip] of ipsOf(spec).entries()) {
    if (ip === "None") break
    const f = IpRange.familyOf(ip)!
    if (i >= families.length) {
      if (rangeFor(ranges, f) === undefined) errors.push(FieldError.invalid(`spec.clusterIPs[${i}]`, ipsOf(spec), `${f} is not configured on this cluster`))
      else families.push(f)
    }
  }
  if (errors.length > 0) return Either.left(errors)

  // Headless without a selector: any families, nothing to allocate.
  if (clusterIPOf(spec) === "None" && !hasSelector(spec)) {
    if (families.length === 0) families.push(ranges.primary.family)
    if (families.length < 2 && policy !== "SingleStack") families.push(otherFamily(families[0]!))
    return Either.right({ spec: { ...spec, ipFamilies: families }, allocate: [], release: [] })
  }
  if (policy === "RequireDualStack" && ranges.all.length < 2) errors.push(FieldError.invalid("spec.ipFamilyPolicy", policy, "this cluster is not configured for dual-stack services"))
  families.forEach((f, i) => {
    if (rangeFor(ranges, f as IpRange.Family) === undefined) errors.push(FieldError.invalid(`spec.ipFamilies[${i}]`, f, "not configured on this cluster"))
  })
  if (errors.length > 0) return Either.left(errors)
  if (families.length === 0) families.push(ranges.primary.family)
  if (policy !== "SingleStack" && families.length === 1 && ranges.all.length === 2) families.push(otherFamily(families[0]!))
  spec = { ...spec, ipFamilies: families }

  // Headless with a selector: families only.
  if (clusterIPOf(spec) === "None") return Either.right({ spec, allocate: [], release: [] })

  const ips = ipsOf(spec)
  const slots = families.map((f, i) => ({ index: i, family: f as IpRange.Family, requested: ips[i] !== undefined && ips[i] !== "" ? ips[i] : undefined }))
  const allocating = old === undefined || !needsClusterIP(old)
  if (allocating) {
    return Either.right({ spec: { ...spec, clusterIPs: slots.map((s) => s.requested ?? "") }, allocate: slots, release: [] })
  }
  const oldIPs = ipsOf(old)
  if (oldIPs[0] === "None") return Either.right({ spec, allocate: [], release: [] })
  if (familiesOf(old).length === 1 && families.length === 2) {
    // Upgrade to dual-stack: the secondary address is allocated (or the requested one taken).
    return Either.right({ spec: { ...spec, clusterIPs: [ips[0] ?? "", ips[1] ?? ""] }, allocate: [slots[1]!], release: [] })
  }
  if (familiesOf(old).length === 2 && families.length === 1 && oldIPs[1] !== undefined) {
    return Either.right({ spec, allocate: [], release: [oldIPs[1]] })
  }
  return Either.right({ spec, allocate: [], release: [] })
}

// ---- the range (pure) ---------------------------------------------------------------------

/**
 * KEP-3070: ranges of 16 addresses or more keep a lower band, `min(max(16, size/16), 256)`
 * addresses, that dynamic allocation only uses once the upper band is full, so statically
 * chosen addresses (DNS at .10) rarely collide with dynamic ones.
 */
export const staticBand = (range: IpRange.IpRange): bigint => {
  if (range.size <= 16n) return 0n
  const band = range.size / 16n
  return band < 16n ? 16n : band > 256n ? 256n : band
}

/**
 * The offset bands dynamic allocation walks, in order: the upper band, then the lower one. Offset
 * 1 (the first address) is left for the `kubernetes` Service.
 */
export const dynamicBands = (range: IpRange.IpRange): ReadonlyArray<{ readonly first: bigint; readonly last: bigint }> => {
  const { last } = IpRange.usable(range)
  const band = staticBand(range)
  const upper = { first: 1n + band > 2n ? 1n + band : 2n, last }
  const lower = { first: 2n, last: band }
  return [upper, lower].filter((b) => b.first <= b.last)
}

/** Why an address cannot be requested: outside the range, or its network or broadcast address. */
export const outOfRange = (range: IpRange.IpRange, ip: string): string | undefined => {
  const offset = IpRange.offsetOf(range, ip)
  const { first, last } = IpRange.usable(range)
  return offset !== undefined && offset >= first && offset <= last
    ? undefined
    : `the provided IP (${ip}) is not in the valid range. The range of valid IPs is ${range.cidr}`
}

// A uniformly drawn offset in [0, n) from a [0, 1) source; ranges wider than 2^53 take several draws.
const randomBelow = (n: bigint, random: () => number): bigint => {
  if (n <= 1n) return 0n
  if (n <= BigInt(Number.MAX_SAFE_INTEGER)) return BigInt(Math.floor(random() * Number(n)))
  let v = 0n
  for (let bits = 0n; 1n << bits < n * 65536n; bits += 32n) v = (v << 32n) | BigInt(Math.floor(random() * 2 ** 32))
  return v % n
}

// ---- the plugin (effects) -----------------------------------------------------------------

/** How the plugin is configured. */
export interface Options {
  readonly store: StoreService
  readonly transformer?: Transformer
  /** `--service-cluster-ip-range`: one CIDR or a dual-stack pair (default `10.96.0.0/12`). */
  readonly range?: string
  /** Randomness for choosing addresses (injectable for tests). */
  readonly random?: () => number
}

/** The object Kubernetes stores for an address held by a Service. */
export const ipAddressFor = (ip: string, service: { readonly namespace: string; readonly name: string }): JsonObject => ({
  apiVersion: "networking.k8s.io/v1",
  kind: "IPAddress",
  metadata: { name: ip, labels: { [familyLabel]: IpRange.familyOf(ip) ?? "IPv4", [managedByLabel]: controllerName } },
  spec: { parentRef: { group: "", resource: "services", namespace: service.namespace, name: service.name } }
})

/** Whether an IPAddress object points at this Service. */
export const heldBy = (ipAddress: JsonObject, service: { readonly namespace: string; readonly name: string }): boolean => {
  const ref = asObject(asObject(ipAddress["spec"])["parentRef"])
  return (ref["group"] ?? "") === "" && ref["resource"] === "services" && ref["namespace"] === service.namespace && ref["name"] === service.name
}

const invalid = (service: string, errors: ReadonlyArray<FieldError.FieldError>) => ApiError.of(Status.invalid({ group: "", kind: "Service" }, service, errors))
const alreadyAllocated = (service: string, ip: string) =>
  invalid(service, [FieldError.invalid("spec.clusterIPs", ip, `failed to allocate IP ${ip}: provided IP is already allocated`)])

/** The plugin. */
export const make = (options: Options): Admission.Plugin => {
  const codec = options.transformer ?? identity
  const random = options.random ?? Math.random
  const parsed = parseRanges(options.range ?? defaultRange)
  const keyOf = (ip: string) => Keys.object({ group: ipAddresses.group, resource: ipAddresses.plural, name: ip })
  const unavailable = (e: { readonly _tag: string }) => ApiError.fromStore(e as never, { resource: { group: ipAddresses.group, resource: ipAddresses.plural }, name: "" })
  const isServices = (request: Admission.Request) => request.resource.group === "" && request.resource.plural === "services" && request.subresource === ""
  const target = (request: Admission.Request) => ({ namespace: request.namespace, name: request.name })

  const encode = (ip: string, service: { readonly namespace: string; readonly name: string }) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      const o = ipAddressFor(ip, service)
      const m = asObject(o["metadata"])
      const stored = { ...o, metadata: { ...m, uid: crypto.randomUUID(), creationTimestamp: Objects.timestamp(now) } }
      return codec.toStore(ipAddresses, JSON.stringify(stored))
    })

  /** Create the IPAddress; false when it exists already. */
  const tryCreate = (ip: string, service: { readonly namespace: string; readonly name: string }) =>
    Effect.flatMap(encode(ip, service), (value) =>
      options.store.create(keyOf(ip), value).pipe(
        Effect.as(true),
        Effect.catchTag("AlreadyExists", () => Effect.succeed(false)),
        Effect.mapError(unavailable)
      )
    )

  const existing = (ip: string) => getObject(options.store, codec, { group: ipAddresses.group, plural: ipAddresses.plural, name: ip })

  /** The addresses of the range already taken (from the store). */
  const taken = (range: IpRange.IpRange) =>
    options.store.list(Keys.prefix(ipAddresses.group, ipAddresses.plural)).pipe(
      Effect.map((page) => {
        const prefix = Keys.prefix(ipAddresses.group, ipAddresses.plural)
        const out = new Set<bigint>()
        for (const kv of page.items) {
          const offset = IpRange.offsetOf(range, kv.key.slice(prefix.length))
          if (offset !== undefined) out.add(offset)
        }
        return out
      }),
      Effect.mapError(unavailable)
    )

  /**
   * Take any free address of `range` for the Service. A few random probes first (cheap while the
   * range is sparse); then the taken set is read once and each band is walked from a random
   * offset, trying every free address; a lost race (AlreadyExists) just moves on.
   */
  const allocateNext = (range: IpRange.IpRange, service: { readonly namespace: string; readonly name: string }, dryRun: boolean) =>
    Effect.gen(function* () {
      const bands = dynamicBands(range)
      if (bands.length === 0) return undefined
      const upper = bands[0]!
      if (!dryRun) {
        for (let i = 0; i < 4; i++) {
          const ip = IpRange.addressAt(range, upper.first + randomBelow(upper.last - upper.first + 1n, random))!
          if (yield* tryCreate(ip, service)) return ip
        }
      }
      const used = yield* taken(range)
      for (const band of bands) {
        const width = band.last - band.first + 1n
        const start = randomBelow(width, random)
        for (let i = 0n; i < width; i++) {
          const offset = band.first + ((start + i) % width)
          if (used.has(offset)) continue
          const ip = IpRange.addressAt(range, offset)!
          if (dryRun || (yield* tryCreate(ip, service))) return ip
        }
      }
      return undefined
    })

  const release = (ips: ReadonlyArray<string>) =>
    Effect.forEach(ips, (ip) => options.store.delete(keyOf(ip)).pipe(Effect.ignore), { discard: true })

  const mutate = (request: Admission.Request): Effect.Effect<JsonObject, ApiError.ApiError> =>
    Effect.gen(function* () {
      if (!isServices(request) || request.operation === "DELETE") return request.object
      if (Either.isLeft(parsed)) return yield* Effect.fail(ApiError.of(Status.internalError(`the service cluster IP range is invalid: ${parsed.left}`)))
      const ranges = parsed.right
      const spec = asObject(request.object["spec"])
      const oldSpec = request.oldObject === undefined ? undefined : asObject(request.oldObject["spec"])
      const planned = plan(spec, oldSpec, ranges)
      if (Either.isLeft(planned)) return yield* Effect.fail(invalid(request.name, planned.left))
      const { allocate } = planned.right
      const ips = [...ipsOf(planned.right.spec)]
      const service = target(request)
      const created: Array<string> = []
      const undo = (e: ApiError.ApiError) => Effect.zipRight(release(created), Effect.fail(e))
      for (const slot of allocate) {
        const range = rangeFor(ranges, slot.family)!
        if (slot.requested !== undefined) {
          const why = outOfRange(range, slot.requested)
          if (why !== undefined) {
            return yield* undo(invalid(request.name, [FieldError.invalid("spec.clusterIPs", ips, `failed to allocate IP ${slot.requested}: ${why}`)]))
          }
          const ip = IpRange.canonical(slot.requested)!
          if (!request.dryRun && (yield* tryCreate(ip, service))) created.push(ip)
          else {
            // Taken, unless by this very Service (a leftover of an earlier attempt of this write).
            const held = yield* existing(ip)
            if (held !== undefined && !heldBy(held.object, service)) return yield* undo(alreadyAllocated(request.name, ip))
          }
          ips[slot.index] = ip
        } else {
          const ip = yield* allocateNext(range, service, request.dryRun)
          if (ip === undefined) return yield* undo(ApiError.of(Status.internalError("failed to allocate a serviceIP: range is full")))
          if (!request.dryRun) created.push(ip)
          ips[slot.index] = ip
        }
      }
      const next: JsonObject = { ...planned.right.spec }
      if (ips.length > 0 && ips.every((ip) => ip !== "")) {
        next["clusterIPs"] = ips
        next["clusterIP"] = ips[0]
      }
      for (const k of Object.keys(next)) if (next[k] === undefined) delete next[k]
      return { ...request.object, spec: next }
    })

  const validate = (request: Admission.Request): Effect.Effect<ReadonlyArray<TxnOp>, ApiError.ApiError> =>
    Effect.gen(function* () {
      if (!isServices(request)) return []
      const service = target(request)
      const before = request.oldObject === undefined ? [] : addressesOf(request.oldObject)
      const after = request.operation === "DELETE" ? [] : addressesOf(request.object)
      const ops: Array<TxnOp> = []
      // New addresses must still be this Service's when the write commits.
      for (const ip of after.filter((ip) => !before.includes(ip))) {
        const name = IpRange.canonical(ip) ?? ip
        const held = yield* existing(name)
        if (held === undefined) ops.push({ op: "create", key: keyOf(name), value: yield* encode(name, service) })
        else if (heldBy(held.object, service)) ops.push({ op: "check", key: held.key, expectedRevision: held.revision })
        else return yield* Effect.fail(alreadyAllocated(request.name, name))
      }
      // Released addresses go with the write, when this Service still holds them.
      for (const ip of before.filter((ip) => !after.includes(ip))) {
        const held = yield* existing(IpRange.canonical(ip) ?? ip)
        if (held !== undefined && heldBy(held.object, service)) ops.push({ op: "delete", key: held.key, expectedRevision: held.revision })
      }
      return ops
    })

  return { name, mutate, validate }
}
