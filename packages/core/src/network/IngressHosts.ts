import { asArray, asObject, asString } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
/**
 * Who owns an ingress host: the decision that keeps one tenant's Ingress from taking another
 * tenant's traffic (issue 29 item 7). Pure: Ingresses (and the admin's host policy) in, a
 * host → owning namespace table and the claims that lost out. The proxy builds its routes only
 * from winning claims (`IngressRoutes.build`), the status writer reports the lost ones (a Warning
 * Event `HostConflict`, no load-balancer address), and the `IngressHostOwnership` admission plugin
 * refuses a write that would lose, so a conflict normally never reaches the proxy.
 *
 * The rule:
 *   - an Ingress claims every host of its rules and of its `tls` entries (lower case, no trailing
 *     dot); rules without a host and a `defaultBackend` claim the catch-all `""` (requests for
 *     hosts nobody routes);
 *   - two claims overlap when a request host could match both: equal patterns, or a wildcard
 *     `*.example.com` and a host exactly one label below it (`a.example.com`; Kubernetes' wildcard
 *     rule), never `*.example.com` and `example.com` or `a.b.example.com`;
 *   - claims from the same namespace never conflict (a team may split a host over Ingresses);
 *   - of overlapping claims from different namespaces, the one considered first owns the host;
 *     the others lose that host only (their other hosts still serve). Claims are considered in
 *     this order: those the admin's policy reserves for their namespace, then every other claim
 *     by the Ingress's age (creationTimestamp, then uid, then namespace/name: deterministic);
 *   - the policy (ConfigMap `kube-system/fleet-ingress-hosts`, data `<namespace>: <host patterns>`
 *     separated by spaces, commas or newlines) reserves patterns: a claim overlapping a reserved
 *     pattern of another namespace loses, unless a pattern equal to the claimed host is reserved
 *     for the claim's own namespace (the most specific entry decides).
 */
/** A JSON object from the API. */
export type JsonObject = Record<string, unknown>

/** Where the admin's host policy lives (a ConfigMap only cluster admins can write). */
export const PolicyConfigMap = { namespace: "kube-system", name: "fleet-ingress-hosts" } as const

/** One policy entry: a host pattern reserved for a namespace. */
export interface Reservation {
  readonly pattern: string
  readonly namespace: string
}

/** The admin's host policy. */
export type Policy = ReadonlyArray<Reservation>

/** Why a claim lost. */
export type Reason = "HostClaimed" | "HostReserved"

/** A host an Ingress claims but does not get. */
export interface Loss {
  /** The losing Ingress, `namespace/name`. */
  readonly ingress: string
  readonly namespace: string
  /** The host pattern as the Ingress wrote it (normalised; `""` for rules without a host). */
  readonly host: string
  /** The namespace that owns an overlapping pattern. */
  readonly owner: string
  /** The owning pattern (may differ from `host`: a wildcard and a concrete host). */
  readonly ownerHost: string
  /** The owning Ingress (`namespace/name`), or undefined when only the policy reserves it. */
  readonly ownerIngress: string | undefined
  readonly reason: Reason
}

/** The owner of a host pattern. */
export interface Owner {
  readonly namespace: string
  /** The first Ingress (`namespace/name`) of that namespace to claim it. */
  readonly ingress: string
}

/** The decision. */
export interface Ownership {
  /** Host pattern → owner, for every pattern some Ingress serves. */
  readonly owners: ReadonlyMap<string, Owner>
  /** Every lost claim, in the order considered. */
  readonly losses: ReadonlyArray<Loss>
  /** Ingress (`namespace/name`) → the host patterns it lost. */
  readonly lost: ReadonlyMap<string, ReadonlySet<string>>
}

const keyOf = (o: JsonObject) => `${asString(metadataOf(o)["namespace"])}/${asString(metadataOf(o)["name"])}`
const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

/** A host as claims compare it: lower case, no trailing dot (ports are not part of an Ingress host). */
export const normalize = (host: string): string => {
  const h = host.trim().toLowerCase()
  return h.endsWith(".") ? h.slice(0, -1) : h
}

/** Whether two host patterns can match the same request host (see the module comment). */
export const overlaps = (a: string, b: string): boolean => {
  if (a === b) return true
  if (a === "" || b === "") return false
  const covers = (wild: string, host: string) => wild.startsWith("*.") && !host.startsWith("*.") && host.slice(host.indexOf(".") + 1) === wild.slice(2) && host.indexOf(".") > 0
  return covers(a, b) || covers(b, a)
}

/** The host patterns an Ingress claims: its rules' hosts (`""` for a rule without one) and its TLS hosts. */
export const claimsOf = (ingress: JsonObject): ReadonlyArray<string> => {
  const spec = asObject(ingress["spec"])
  const hosts = new Set<string>()
  for (const rule of asArray(spec["rules"])) hosts.add(normalize(asString(asObject(rule)["host"])))
  // A default backend answers requests for any host nobody routes: it is a catch-all claim.
  if (spec["defaultBackend"] !== undefined) hosts.add("")
  for (const t of asArray(spec["tls"])) for (const h of asArray(asObject(t)["hosts"])) if (asString(h).trim() !== "") hosts.add(normalize(asString(h)))
  return [...hosts]
}

/**
 * Parse the policy ConfigMap's `data`: each key a namespace, each value host patterns separated
 * by whitespace or commas. Keys or patterns that cannot be hosts are reported, not fatal.
 */
export const parsePolicy = (data: Readonly<Record<string, unknown>> | undefined): { readonly policy: Policy; readonly problems: ReadonlyArray<string> } => {
  const policy: Array<Reservation> = []
  const problems: Array<string> = []
  for (const [namespace, value] of Object.entries(data ?? {})) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace)) {
      problems.push(`key ${JSON.stringify(namespace)} is not a namespace name`)
      continue
    }
    for (const raw of asString(value).split(/[\s,]+/)) {
      if (raw === "") continue
      const pattern = normalize(raw)
      if (!/^(\*\.)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(pattern)) problems.push(`${namespace}: ${JSON.stringify(raw)} is not a host or *.domain pattern`)
      else policy.push({ pattern, namespace })
    }
  }
  return { policy, problems }
}

/** What the policy says of a claim: `undefined` (nothing), `own` (reserved for it) or the reservation it collides with. */
const policyVerdict = (policy: Policy, host: string, namespace: string): "own" | Reservation | undefined => {
  const equal = policy.filter((r) => r.pattern === host)
  if (equal.length > 0) return equal.some((r) => r.namespace === namespace) ? "own" : equal[0]
  const other = policy.find((r) => overlaps(r.pattern, host) && r.namespace !== namespace)
  if (other !== undefined) return other
  // A host under a wildcard reserved for its own namespace is reserved too; a wildcard claim over
  // a host reserved for its namespace is not (that would reserve the wildcard's other hosts).
  return policy.some((r) => r.namespace === namespace && r.pattern.startsWith("*.") && overlaps(r.pattern, host)) ? "own" : undefined
}

const uid = (o: JsonObject) => asString(metadataOf(o)["uid"])
/** An Ingress without a creationTimestamp (not yet stored: admission) sorts after every stored one. */
const created = (o: JsonObject) => asString(metadataOf(o)["creationTimestamp"]) || "\uffff"

/** Oldest first: creationTimestamp, then uid, then namespace/name. */
export const byAge = (a: JsonObject, b: JsonObject): number => compareText(created(a), created(b)) || compareText(uid(a), uid(b)) || compareText(keyOf(a), keyOf(b))

/** Decide who owns which host among these Ingresses (the ones the proxy serves). */
export const decide = (ingresses: ReadonlyArray<JsonObject>, policy: Policy = []): Ownership => {
  const sorted = [...ingresses].sort(byAge)
  const claims: Array<{ readonly ingress: string; readonly namespace: string; readonly host: string; readonly reserved: boolean }> = []
  for (const ing of sorted) {
    const namespace = asString(metadataOf(ing)["namespace"])
    for (const host of claimsOf(ing)) claims.push({ ingress: keyOf(ing), namespace, host, reserved: policyVerdict(policy, host, namespace) === "own" })
  }
  // Reserved claims first; the sort is stable, so age order holds within each group.
  const ordered = [...claims.filter((c) => c.reserved), ...claims.filter((c) => !c.reserved)]
  const owners = new Map<string, Owner>()
  // Owned concrete hosts by their parent domain: what a wildcard claim overlaps, without a scan.
  const concreteUnder = new Map<string, Array<string>>()
  /** The owned patterns overlapping `host`: itself, the wildcard over it, or (for a wildcard) the hosts under it. */
  const overlapping = (host: string): Array<[string, Owner]> => {
    const out: Array<[string, Owner]> = []
    const add = (pattern: string) => {
      const o = owners.get(pattern)
      if (o !== undefined) out.push([pattern, o])
    }
    add(host)
    if (host.startsWith("*.")) for (const h of concreteUnder.get(host.slice(2)) ?? []) add(h)
    else if (host !== "" && host.indexOf(".") > 0) add(`*.${host.slice(host.indexOf(".") + 1)}`)
    return out
  }
  const losses: Array<Loss> = []
  const lost = new Map<string, Set<string>>()
  const lose = (loss: Loss) => {
    losses.push(loss)
    const set = lost.get(loss.ingress) ?? new Set<string>()
    set.add(loss.host)
    lost.set(loss.ingress, set)
  }
  for (const c of ordered) {
    const verdict = c.reserved ? "own" : policyVerdict(policy, c.host, c.namespace)
    if (verdict !== undefined && verdict !== "own") {
      const holder = overlapping(c.host).find(([, o]) => o.namespace === verdict.namespace)
      lose({ ingress: c.ingress, namespace: c.namespace, host: c.host, owner: verdict.namespace, ownerHost: verdict.pattern, ownerIngress: holder?.[1].ingress, reason: "HostReserved" })
      continue
    }
    const taken = overlapping(c.host).find(([, o]) => o.namespace !== c.namespace)
    if (taken !== undefined) {
      lose({ ingress: c.ingress, namespace: c.namespace, host: c.host, owner: taken[1].namespace, ownerHost: taken[0], ownerIngress: taken[1].ingress, reason: "HostClaimed" })
      continue
    }
    if (!owners.has(c.host)) {
      owners.set(c.host, { namespace: c.namespace, ingress: c.ingress })
      const dot = c.host.indexOf(".")
      if (!c.host.startsWith("*.") && dot > 0) {
        const parent = c.host.slice(dot + 1)
        const list = concreteUnder.get(parent)
        if (list === undefined) concreteUnder.set(parent, [c.host])
        else list.push(c.host)
      }
    }
  }
  return { owners, losses, lost }
}

/** The Ingress without the hosts it lost: its rules and TLS entries for them removed (what the proxy serves of it). */
export const withoutLost = (ingress: JsonObject, lost: ReadonlySet<string> | undefined): JsonObject => {
  if (lost === undefined || lost.size === 0) return ingress
  const spec = asObject(ingress["spec"])
  const rules = asArray(spec["rules"]).filter((r) => !lost.has(normalize(asString(asObject(r)["host"]))))
  const tls = asArray(spec["tls"]).flatMap((t) => {
    const hosts = asArray(asObject(t)["hosts"]).map(asString)
    if (hosts.length === 0) return lost.has("") ? [] : [t]
    const kept = hosts.filter((h) => !lost.has(normalize(h)))
    return kept.length === 0 ? [] : [{ ...asObject(t), hosts: kept }]
  })
  // The default backend stays: for the hosts it still owns it is their fallback (`IngressRoutes`
  // uses it as the catch-all only for the catch-all's owner).
  return { ...ingress, spec: { ...spec, rules, tls } }
}

/** The Ingress with only the claims in `hosts`: rules, TLS hosts and (for `""`) the default backend. */
export const onlyClaims = (ingress: JsonObject, hosts: ReadonlySet<string>): JsonObject => {
  const spec = asObject(ingress["spec"])
  const rules = asArray(spec["rules"]).filter((r) => hosts.has(normalize(asString(asObject(r)["host"]))))
  const tls = asArray(spec["tls"]).flatMap((t) => {
    const kept = asArray(asObject(t)["hosts"]).map(asString).filter((h) => h.trim() !== "" && hosts.has(normalize(h)))
    return kept.length === 0 ? [] : [{ ...asObject(t), hosts: kept }]
  })
  const { defaultBackend, ...rest } = spec
  return { ...ingress, spec: { ...rest, ...(defaultBackend !== undefined && hosts.has("") ? { defaultBackend } : {}), rules, tls } }
}

/** The message of a lost claim, as the Event and the admission refusal say it. */
export const describeLoss = (loss: Loss): string => {
  const host = loss.host === "" ? "rules without a host (the catch-all)" : `host ${JSON.stringify(loss.host)}`
  const by = loss.ownerHost === loss.host ? "" : ` (as ${JSON.stringify(loss.ownerHost)})`
  return loss.reason === "HostReserved"
    ? `${host} is reserved for namespace ${JSON.stringify(loss.owner)}${by} by the ingress host policy (ConfigMap ${PolicyConfigMap.namespace}/${PolicyConfigMap.name})`
    : `${host} is owned by namespace ${JSON.stringify(loss.owner)}${by}${loss.ownerIngress === undefined ? "" : `, Ingress ${loss.ownerIngress}`}`
}
