/**
 * The load-balancer controller: gives each `type: LoadBalancer` Service an address from a
 * configured pool (`--lb-pool`, e.g. `127.0.0.2-127.0.0.20` or `192.168.1.240/28`) and writes it
 * to `status.loadBalancer.ingress[].ip`, where clients read it and where every agent's proxy
 * (`daemon/net/ServiceProxy.ts`) listens on it at the Service's ports — MetalLB's IPAM half, with
 * the userspace proxy as the data path.
 *
 *   Service key ─▶ decide(Service, addresses others hold, pool) ─▶ Assign(ip) | Clear | Keep | Exhausted
 *
 * Level-triggered and pure: the address a Service keeps is the one in its status, while it is
 * still in the pool and no older Service holds it; `spec.loadBalancerIP` (deprecated upstream,
 * still honoured by most implementations) asks for a specific one; otherwise the lowest free
 * address is taken. Services with a `loadBalancerClass` belong to another implementation and are
 * left alone. A Service that stops being a LoadBalancer has its status cleared. One worker, so
 * two Services are never given the same address between a decision and its write; the informer
 * view a decision reads includes this controller's own past writes (see `Controller.ts`).
 */
import { Effect, Either } from "effect"
import * as IpRange from "../network/IpRange.js"
import type * as Controller from "./Controller.js"
import * as Informer from "../informer/Informer.js"
import { type JsonObject, asArray, asObject, asString } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"




/** A pool of addresses: inclusive ranges of one family each. */
export interface Pool {
  readonly ranges: ReadonlyArray<{ readonly family: IpRange.Family; readonly first: bigint; readonly last: bigint }>
  /** The text it was parsed from. */
  readonly text: string
}

/**
 * Parses `--lb-pool`: comma-separated `FIRST-LAST` address ranges and CIDRs (every address of a
 * CIDR is used: a pool is a set of host addresses, not a subnet).
 */
export const parsePool = (text: string): Either.Either<Pool, string> => {
  const ranges: Array<Pool["ranges"][number]> = []
  for (const part of text.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    if (part.includes("/")) {
      const r = IpRange.parse(part)
      if (Either.isLeft(r)) return Either.left(r.left)
      ranges.push({ family: r.right.family, first: r.right.base, last: r.right.base + r.right.size - 1n })
      continue
    }
    const [a, b] = part.split("-").map((s) => s.trim())
    const first = a === undefined ? undefined : IpRange.parseAddress(a)
    const last = b === undefined ? first : IpRange.parseAddress(b)
    if (first === undefined || last === undefined) return Either.left(`${JSON.stringify(part)} is neither FIRST-LAST nor a CIDR`)
    if (first.family !== last.family || last.value < first.value) return Either.left(`${JSON.stringify(part)} is not a range of addresses of one family`)
    ranges.push({ family: first.family, first: first.value, last: last.value })
  }
  if (ranges.length === 0) return Either.left("the pool is empty")
  return Either.right({ ranges, text })
}

/** Whether `ip` is in the pool. */
export const inPool = (pool: Pool, ip: string): boolean => {
  const a = IpRange.parseAddress(ip)
  return a !== undefined && pool.ranges.some((r) => r.family === a.family && a.value >= r.first && a.value <= r.last)
}

/** What to do about one Service. */
export type Decision =
  | { readonly _tag: "Keep" }
  | { readonly _tag: "Assign"; readonly ip: string }
  | { readonly _tag: "Clear" }
  | { readonly _tag: "Exhausted"; readonly reason: string; readonly message: string }

const statusIPs = (service: JsonObject): ReadonlyArray<string> =>
  asArray(asObject(asObject(service["status"])["loadBalancer"])["ingress"]).flatMap((i) => (asString(asObject(i)["ip"]) === "" ? [] : [asString(asObject(i)["ip"])]))

/** Whether this controller serves the Service: a LoadBalancer without another implementation's class. */
export const handles = (service: JsonObject): boolean => {
  const spec = asObject(service["spec"])
  return asString(spec["type"]) === "LoadBalancer" && asString(spec["loadBalancerClass"]) === ""
}

/**
 * The decision for `service` (pure), given the addresses other Services hold (address →
 * whether that holder is older than this Service, so on a tie the older one keeps it).
 */
export const decide = (service: JsonObject, heldByOthers: ReadonlyMap<string, boolean>, pool: Pool): Decision => {
  const spec = asObject(service["spec"])
  const current = statusIPs(service)
  if (!handles(service)) {
    // Another class's Service is its implementation's to write; a former LoadBalancer is cleared.
    return asString(spec["type"]) !== "LoadBalancer" && current.length > 0 ? { _tag: "Clear" } : { _tag: "Keep" }
  }
  const requested = asString(spec["loadBalancerIP"])
  const usable = (ip: string) => inPool(pool, ip) && heldByOthers.get(IpRange.canonical(ip) ?? ip) !== true
  if (requested !== "") {
    const ip = IpRange.canonical(requested)
    if (ip === undefined || !inPool(pool, ip)) return { _tag: "Exhausted", reason: "LoadBalancerIPNotInPool", message: `loadBalancerIP ${requested} is not in the pool ${pool.text}` }
    if (!usable(ip)) return { _tag: "Exhausted", reason: "LoadBalancerIPTaken", message: `loadBalancerIP ${requested} is held by another Service` }
    return current.length === 1 && current[0] === ip ? { _tag: "Keep" } : { _tag: "Assign", ip }
  }
  if (current.length === 1 && usable(current[0]!)) return { _tag: "Keep" }
  for (const r of pool.ranges) {
    for (let v = r.first; v <= r.last; v++) {
      const ip = IpRange.formatAddress({ family: r.family, value: v })
      if (!heldByOthers.has(ip)) return { _tag: "Assign", ip }
    }
  }
  return { _tag: "Exhausted", reason: "AllocationFailed", message: `no free address in the load-balancer pool ${pool.text}` }
}

/** How the controller is configured. */
export interface Options {
  /** `--lb-pool`; none: the controller does nothing (Services stay pending, as without a cloud provider). */
  readonly pool?: string
  /** How soon a Service the pool could not serve is looked at again (default 30 s). */
  readonly retryMs?: number
}

const created = (o: JsonObject) => asString(asObject(o["metadata"])["creationTimestamp"])
const olderThan = (a: JsonObject, b: JsonObject) => {
  const ta = created(a)
  const tb = created(b)
  return ta !== tb ? ta < tb : Informer.keyOf(a) < Informer.keyOf(b)
}

/** The reconciler (`service-load-balancer`). */
export const reconciler = (options: Options = {}): Controller.Reconciler => {
  const pool = options.pool === undefined ? undefined : parsePool(options.pool)
  return {
    name: "service-load-balancer",
    primary: ResourceRefs.Service,
    // One worker: a decision and its write happen before the next Service's decision.
    workers: 1,
    reconcile: (key, ctx) =>
      Effect.gen(function* () {
        if (pool === undefined || Either.isLeft(pool)) return
        const { namespace, name } = Informer.splitKey(key)
        const services = ctx.informers.for(ResourceRefs.Service)
        const service = services.get(namespace, name)
        if (service === undefined) return
        const others = new Map<string, boolean>()
        for (const s of services.list()) {
          if (Informer.keyOf(s) === key || !handles(s)) continue
          for (const ip of statusIPs(s)) others.set(IpRange.canonical(ip) ?? ip, (others.get(ip) ?? false) || olderThan(s, service))
        }
        const decision = decide(service, others, pool.right)
        switch (decision._tag) {
          case "Keep":
            return
          case "Clear":
            yield* ctx.client.update({ ...service, status: { ...asObject(service["status"]), loadBalancer: {} } }, "status")
            return
          case "Assign":
            yield* ctx.client.update({ ...service, status: { ...asObject(service["status"]), loadBalancer: { ingress: [{ ip: decision.ip }] } } }, "status")
            yield* ctx.events.record(service, "Normal", "IPAllocated", `Assigned IP ["${decision.ip}"]`)
            return
          case "Exhausted":
            yield* ctx.events.record(service, "Warning", decision.reason, decision.message)
            return { requeueAfterMs: options.retryMs ?? 30_000 }
        }
      })
  }
}
