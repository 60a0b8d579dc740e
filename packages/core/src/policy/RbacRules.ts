/**
 * The RBAC evaluator, as pure functions over plain data (Kubernetes' `rbac/v1` helpers and rule
 * resolver): does a rule allow a request; which roles and bindings apply to a user; aggregated
 * ClusterRoles; the rules a user holds in a namespace; and whether one set of rules covers
 * another (privilege-escalation prevention). `RbacIndex` keeps a `Policy` current from the store.
 *
 *   roles, clusterRoles ─▶ aggregate ─▶ effective rules by role ─┐
 *   bindings ─▶ grants by subject (user / group) ─────────────────┴▶ Policy ─▶ authorize(request)
 */
import * as LabelSelector from "../model/LabelSelector.js"
import { asObject } from "../object/Json.js"

/** One permission, as `PolicyRule` in rbac.authorization.k8s.io/v1. */
export interface Rule {
  readonly verbs: ReadonlyArray<string>
  readonly apiGroups?: ReadonlyArray<string> | undefined
  readonly resources?: ReadonlyArray<string> | undefined
  readonly resourceNames?: ReadonlyArray<string> | undefined
  readonly nonResourceURLs?: ReadonlyArray<string> | undefined
}

/** Who is asking (authentication's user). */
export interface User {
  readonly name: string
  readonly groups: ReadonlyArray<string>
}

/** What is asked, as `Authz.Attributes` carries it. */
export interface Request {
  readonly user: User
  readonly verb: string
  readonly resourceRequest: boolean
  readonly apiGroup: string
  readonly resource: string
  readonly subresource: string
  readonly namespace: string
  readonly name: string
  readonly path: string
}

/** An authorization decision, as `Authz.Decision`. */
export interface Decision {
  readonly allowed: boolean
  readonly reason: string
}

/** A Role or ClusterRole, reduced to what evaluation needs. */
export interface RoleObject {
  readonly kind: "Role" | "ClusterRole"
  /** `""` for ClusterRoles. */
  readonly namespace: string
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly rules: ReadonlyArray<Rule>
  readonly aggregationRule?: { readonly clusterRoleSelectors?: ReadonlyArray<LabelSelector.LabelSelector> | undefined } | undefined
}

/** A binding subject. */
export interface Subject {
  readonly kind: string
  readonly name: string
  readonly namespace?: string | undefined
}

/** A RoleBinding or ClusterRoleBinding, reduced to what evaluation needs. */
export interface BindingObject {
  readonly kind: "RoleBinding" | "ClusterRoleBinding"
  /** `""` for ClusterRoleBindings. */
  readonly namespace: string
  readonly name: string
  readonly subjects: ReadonlyArray<Subject>
  readonly roleRef: { readonly kind: string; readonly name: string }
}

/** The group Kubernetes treats as cluster administrators, allowed everything without a lookup. */
export const mastersGroup = "system:masters"
/** Every authenticated user is in this group. */
export const authenticatedGroup = "system:authenticated"
/** Anonymous requests carry this group. */
export const unauthenticatedGroup = "system:unauthenticated"

const all = "*"

// ---------------------------------------------------------------------------------------------
// Rule matching (k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go)

const has = (list: ReadonlyArray<string> | undefined, value: string) => list !== undefined && (list.includes(all) || list.includes(value))

/** Whether the rule names the verb (or `*`). */
export const verbMatches = (rule: Rule, verb: string): boolean => has(rule.verbs, verb)

/** Whether the rule names the API group (or `*`). */
export const apiGroupMatches = (rule: Rule, group: string): boolean => has(rule.apiGroups, group)

/** Whether the rule names `resource` or `resource/subresource`, `*`, or `*` + `/subresource`. */
export const resourceMatches = (rule: Rule, resource: string, subresource: string): boolean => {
  const combined = subresource === "" ? resource : `${resource}/${subresource}`
  for (const r of rule.resources ?? []) {
    if (r === all || r === combined) return true
    if (subresource !== "" && r === `*/${subresource}`) return true
  }
  return false
}

/** A rule without resourceNames matches every name; with them, only those (never an unnamed request). */
export const resourceNameMatches = (rule: Rule, name: string): boolean =>
  rule.resourceNames === undefined || rule.resourceNames.length === 0 || rule.resourceNames.includes(name)

/** Whether the rule names the path exactly, by a trailing-`*` prefix, or `*`. */
export const nonResourceURLMatches = (rule: Rule, path: string): boolean => {
  for (const u of rule.nonResourceURLs ?? []) {
    if (u === all || u === path) return true
    if (u.endsWith("*") && path.startsWith(u.slice(0, -1))) return true
  }
  return false
}

/** Whether one rule allows the request. */
export const ruleAllows = (rule: Rule, request: Omit<Request, "user">): boolean =>
  request.resourceRequest
    ? verbMatches(rule, request.verb) &&
      apiGroupMatches(rule, request.apiGroup) &&
      resourceMatches(rule, request.resource, request.subresource) &&
      resourceNameMatches(rule, request.name)
    : verbMatches(rule, request.verb) && nonResourceURLMatches(rule, request.path)

// ---------------------------------------------------------------------------------------------
// Reading stored objects

const strings = (v: unknown): ReadonlyArray<string> | undefined => (Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : undefined)

const toRule = (v: unknown): Rule => {
  const r = asObject(v)
  return { verbs: strings(r["verbs"]) ?? [], apiGroups: strings(r["apiGroups"]), resources: strings(r["resources"]), resourceNames: strings(r["resourceNames"]), nonResourceURLs: strings(r["nonResourceURLs"]) }
}

/** A stored Role or ClusterRole as a `RoleObject`; `undefined` for anything else. */
export const roleFromJson = (o: unknown): RoleObject | undefined => {
  const j = asObject(o)
  const m = asObject(j["metadata"])
  if ((j["kind"] !== "Role" && j["kind"] !== "ClusterRole") || typeof m["name"] !== "string") return undefined
  const labels = Object.fromEntries(Object.entries(asObject(m["labels"])).filter((e): e is [string, string] => typeof e[1] === "string"))
  const aggregation = j["aggregationRule"] === undefined || j["aggregationRule"] === null ? undefined : asObject(j["aggregationRule"])
  return {
    kind: j["kind"],
    namespace: j["kind"] === "Role" ? String(m["namespace"] ?? "") : "",
    name: m["name"],
    labels,
    rules: Array.isArray(j["rules"]) ? j["rules"].map(toRule) : [],
    ...(aggregation === undefined || j["kind"] !== "ClusterRole"
      ? {}
      : { aggregationRule: { clusterRoleSelectors: Array.isArray(aggregation["clusterRoleSelectors"]) ? (aggregation["clusterRoleSelectors"].map(asObject) as ReadonlyArray<LabelSelector.LabelSelector>) : [] } })
  }
}

/** A stored RoleBinding or ClusterRoleBinding as a `BindingObject`; `undefined` for anything else. */
export const bindingFromJson = (o: unknown): BindingObject | undefined => {
  const j = asObject(o)
  const m = asObject(j["metadata"])
  const ref = asObject(j["roleRef"])
  if ((j["kind"] !== "RoleBinding" && j["kind"] !== "ClusterRoleBinding") || typeof m["name"] !== "string") return undefined
  return {
    kind: j["kind"],
    namespace: j["kind"] === "RoleBinding" ? String(m["namespace"] ?? "") : "",
    name: m["name"],
    subjects: (Array.isArray(j["subjects"]) ? j["subjects"] : []).map((s) => {
      const x = asObject(s)
      return { kind: String(x["kind"] ?? ""), name: String(x["name"] ?? ""), ...(typeof x["namespace"] === "string" ? { namespace: x["namespace"] } : {}) }
    }),
    roleRef: { kind: String(ref["kind"] ?? ""), name: String(ref["name"] ?? "") }
  }
}

// ---------------------------------------------------------------------------------------------
// Aggregation (k8s.io/kubernetes/pkg/controller/clusterroleaggregation)

const listEqual = (a: ReadonlyArray<string> | undefined, b: ReadonlyArray<string> | undefined) => {
  const x = a ?? []
  const y = b ?? []
  return x.length === y.length && x.every((v, i) => v === y[i])
}

/** Whether two rules are the same (field by field, order kept; absent equals empty). */
export const ruleEqual = (a: Rule, b: Rule): boolean =>
  listEqual(a.verbs, b.verbs) &&
  listEqual(a.apiGroups, b.apiGroups) &&
  listEqual(a.resources, b.resources) &&
  listEqual(a.resourceNames, b.resourceNames) &&
  listEqual(a.nonResourceURLs, b.nonResourceURLs)

/** Whether two rule lists are the same. */
export const rulesEqual = (a: ReadonlyArray<Rule>, b: ReadonlyArray<Rule>): boolean => a.length === b.length && a.every((r, i) => ruleEqual(r, b[i]!))

/**
 * The rules of every aggregated ClusterRole: for each selector in order, the rules of matching
 * ClusterRoles (by name, itself excluded), without duplicates. Aggregated roles may aggregate
 * each other (`admin` ⊇ `edit` ⊇ `view`), so this iterates to a fixed point.
 */
export const aggregate = (clusterRoles: ReadonlyArray<RoleObject>): ReadonlyMap<string, ReadonlyArray<Rule>> => {
  const byName = [...clusterRoles].filter((r) => r.kind === "ClusterRole").sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const effective = new Map<string, ReadonlyArray<Rule>>(byName.map((r) => [r.name, r.rules]))
  const aggregated = byName.filter((r) => r.aggregationRule !== undefined)
  const result = new Map<string, ReadonlyArray<Rule>>()
  for (let pass = 0; pass <= aggregated.length; pass++) {
    let changed = false
    for (const role of aggregated) {
      const rules: Array<Rule> = []
      for (const selector of role.aggregationRule?.clusterRoleSelectors ?? []) {
        for (const other of byName) {
          if (other.name === role.name || !LabelSelector.matches(selector, other.labels)) continue
          for (const rule of effective.get(other.name) ?? []) if (!rules.some((r) => ruleEqual(r, rule))) rules.push(rule)
        }
      }
      result.set(role.name, rules)
      if (!rulesEqual(rules, effective.get(role.name) ?? [])) {
        effective.set(role.name, rules)
        changed = true
      }
    }
    if (!changed) break
  }
  return result
}

// ---------------------------------------------------------------------------------------------
// The policy: roles by key, grants by subject

/** One binding of one role to one subject, in a namespace or (`""`) cluster-wide. */
interface Grant {
  readonly namespace: string
  readonly roleKey: string
  /** `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`, for the decision's reason. */
  readonly description: string
}

interface Grants {
  readonly cluster: Array<Grant>
  readonly namespaced: Map<string, Array<Grant>>
}

/** Roles, bindings and the derived index; immutable once built. */
export interface Policy {
  /** Effective rules by role key (`ClusterRole/name`, `Role/namespace/name`), aggregation applied. */
  readonly roles: ReadonlyMap<string, ReadonlyArray<Rule>>
  /** Computed rules of aggregated ClusterRoles, by name. */
  readonly aggregated: ReadonlyMap<string, ReadonlyArray<Rule>>
  /** Grants by `user:<name>` and `group:<name>` (ServiceAccounts are users). */
  readonly grants: ReadonlyMap<string, Grants>
}

/** The key of a role, as bindings reference it. */
export const roleKey = (kind: string, namespace: string, name: string): string => (kind === "ClusterRole" ? `ClusterRole/${name}` : `Role/${namespace}/${name}`)

/** The user name of a ServiceAccount. */
export const serviceAccountUser = (namespace: string, name: string): string => `system:serviceaccount:${namespace}:${name}`

const describeSubject = (s: Subject, bindingNamespace: string) =>
  s.kind === "ServiceAccount" ? `ServiceAccount ${JSON.stringify(`${s.name}/${s.namespace ?? bindingNamespace}`)}` : `${s.kind} ${JSON.stringify(s.name)}`

const subjectKey = (s: Subject, bindingNamespace: string): string | undefined => {
  switch (s.kind) {
    case "User":
      return `user:${s.name}`
    case "Group":
      return `group:${s.name}`
    case "ServiceAccount": {
      // A RoleBinding's ServiceAccount defaults to the binding's namespace.
      const ns = s.namespace !== undefined && s.namespace !== "" ? s.namespace : bindingNamespace
      return ns === "" ? undefined : `user:${serviceAccountUser(ns, s.name)}`
    }
    default:
      return undefined
  }
}

/** Build a policy from the current roles and bindings. */
export const make = (roles: ReadonlyArray<RoleObject>, bindings: ReadonlyArray<BindingObject>): Policy => {
  const aggregated = aggregate(roles.filter((r) => r.kind === "ClusterRole"))
  const ruleMap = new Map<string, ReadonlyArray<Rule>>()
  for (const r of roles) ruleMap.set(roleKey(r.kind, r.namespace, r.name), r.kind === "ClusterRole" ? (aggregated.get(r.name) ?? r.rules) : r.rules)
  const grants = new Map<string, Grants>()
  for (const b of bindings) {
    // A ClusterRoleBinding may only reference a ClusterRole; a RoleBinding either.
    if (b.roleRef.kind !== "ClusterRole" && (b.roleRef.kind !== "Role" || b.kind !== "RoleBinding")) continue
    const key = roleKey(b.roleRef.kind, b.namespace, b.roleRef.name)
    const bindingName = b.kind === "RoleBinding" ? `${b.name}/${b.namespace}` : b.name
    for (const s of b.subjects) {
      const k = subjectKey(s, b.namespace)
      if (k === undefined) continue
      let g = grants.get(k)
      if (g === undefined) grants.set(k, (g = { cluster: [], namespaced: new Map() }))
      const grant = {
        namespace: b.namespace,
        roleKey: key,
        description: `${b.kind} ${JSON.stringify(bindingName)} of ${b.roleRef.kind} ${JSON.stringify(b.roleRef.name)} to ${describeSubject(s, b.namespace)}`
      }
      if (b.namespace === "") g.cluster.push(grant)
      else {
        let list = g.namespaced.get(b.namespace)
        if (list === undefined) g.namespaced.set(b.namespace, (list = []))
        list.push(grant)
      }
    }
  }
  return { roles: ruleMap, aggregated, grants }
}

/** An empty policy (denies everyone but `system:masters`). */
export const empty: Policy = make([], [])

/** The groups evaluation uses: every named user is implicitly in `system:authenticated`, as Kubernetes' authenticators ensure. */
export const groupsOf = (user: User): ReadonlyArray<string> =>
  user.name !== "system:anonymous" && !user.groups.includes(authenticatedGroup) && !user.groups.includes(unauthenticatedGroup)
    ? [...user.groups, authenticatedGroup]
    : user.groups

const subjectGrants = (policy: Policy, user: User): ReadonlyArray<Grants> => {
  const out: Array<Grants> = []
  const u = policy.grants.get(`user:${user.name}`)
  if (u !== undefined) out.push(u)
  for (const g of groupsOf(user)) {
    const x = policy.grants.get(`group:${g}`)
    if (x !== undefined) out.push(x)
  }
  return out
}

/** Visit the grants that apply to a user in a namespace (cluster-wide ones first), until `visit` returns true. */
const visitGrants = (policy: Policy, user: User, namespace: string, visit: (grant: Grant) => boolean): boolean => {
  const subjects = subjectGrants(policy, user)
  for (const s of subjects) for (const g of s.cluster) if (visit(g)) return true
  if (namespace === "") return false
  for (const s of subjects) for (const g of s.namespaced.get(namespace) ?? []) if (visit(g)) return true
  return false
}

/** Decide a request: `system:masters` always; otherwise the first binding whose role has a matching rule. */
export const authorize = (policy: Policy, request: Request): Decision => {
  if (request.user.groups.includes(mastersGroup)) return { allowed: true, reason: "" }
  let reason = ""
  const allowed = visitGrants(policy, request.user, request.namespace, (grant) => {
    const rules = policy.roles.get(grant.roleKey)
    if (rules === undefined || !rules.some((r) => ruleAllows(r, request))) return false
    reason = `RBAC: allowed by ${grant.description}`
    return true
  })
  return { allowed, reason }
}

/** What a user may do in a namespace (`""`: cluster-wide only), as a rules review reports it. */
export interface RuleSet {
  readonly rules: ReadonlyArray<Rule>
  /** Bindings whose role does not exist (Kubernetes reports them as an evaluation error). */
  readonly missing: ReadonlyArray<string>
}

/** Every rule a user holds in a namespace (deduplicated); masters get `*`. */
export const rulesFor = (policy: Policy, user: User, namespace: string): RuleSet => {
  const rules: Array<Rule> = []
  const missing: Array<string> = []
  if (user.groups.includes(mastersGroup)) rules.push({ verbs: [all], apiGroups: [all], resources: [all] }, { verbs: [all], nonResourceURLs: [all] })
  visitGrants(policy, user, namespace, (grant) => {
    const found = policy.roles.get(grant.roleKey)
    if (found === undefined) missing.push(grant.roleKey)
    for (const r of found ?? []) if (!rules.some((x) => ruleEqual(x, r))) rules.push(r)
    return false
  })
  return { rules, missing }
}

/**
 * The namespaces a user reaches through RoleBindings whose role grants at least one rule; `all`
 * when the user may list namespaces cluster-wide.
 */
export const namespacesFor = (policy: Policy, user: User): { readonly all: boolean; readonly namespaces: ReadonlyArray<string> } => {
  const listAll = authorize(policy, { user, verb: "list", resourceRequest: true, apiGroup: "", resource: "namespaces", subresource: "", namespace: "", name: "", path: "/api/v1/namespaces" })
  if (listAll.allowed) return { all: true, namespaces: [] }
  const found = new Set<string>()
  for (const s of subjectGrants(policy, user)) {
    for (const [ns, grants] of s.namespaced) {
      if (grants.some((g) => (policy.roles.get(g.roleKey)?.length ?? 0) > 0)) found.add(ns)
    }
  }
  return { all: false, namespaces: [...found].sort() }
}

// ---------------------------------------------------------------------------------------------
// Escalation prevention (k8s.io/component-helpers/auth/rbac/validation: Covers)

/** The atomic permissions of `servant` that `owner` does not cover (empty: no escalation). */
export const uncovered = (owner: ReadonlyArray<Rule>, servant: ReadonlyArray<Rule>): ReadonlyArray<Rule> => {
  const out: Array<Rule> = []
  for (const rule of servant) for (const atom of breakdown(rule)) if (!owner.some((o) => ruleCovers(o, atom))) out.push(atom)
  return out
}

/** A rule split into one rule per verb × group × resource × name (or verb × URL). */
const breakdown = (rule: Rule): ReadonlyArray<Rule> => {
  const out: Array<Rule> = []
  for (const verb of rule.verbs) {
    for (const url of rule.nonResourceURLs ?? []) out.push({ verbs: [verb], nonResourceURLs: [url] })
    for (const group of rule.apiGroups ?? []) {
      for (const resource of rule.resources ?? []) {
        if ((rule.resourceNames ?? []).length === 0) out.push({ verbs: [verb], apiGroups: [group], resources: [resource] })
        else for (const name of rule.resourceNames!) out.push({ verbs: [verb], apiGroups: [group], resources: [resource], resourceNames: [name] })
      }
    }
  }
  return out
}

const coversAll = (owner: ReadonlyArray<string> | undefined, servant: ReadonlyArray<string> | undefined) =>
  (servant ?? []).every((s) => (owner ?? []).includes(all) || (owner ?? []).includes(s))

const resourceCovered = (owner: ReadonlyArray<string> | undefined, servant: ReadonlyArray<string> | undefined) =>
  (servant ?? []).every((s) => {
    for (const o of owner ?? []) {
      if (o === all || o === s) return true
      const slash = s.indexOf("/")
      if (slash >= 0 && o === `*${s.slice(slash)}`) return true
    }
    return false
  })

const urlCovered = (owner: ReadonlyArray<string> | undefined, servant: ReadonlyArray<string> | undefined) =>
  (servant ?? []).every((s) => (owner ?? []).some((o) => o === all || o === s || (o.endsWith("*") && s.startsWith(o.slice(0, -1)))))

const ruleCovers = (owner: Rule, servant: Rule): boolean =>
  coversAll(owner.verbs, servant.verbs) &&
  coversAll(owner.apiGroups, servant.apiGroups) &&
  resourceCovered(owner.resources, servant.resources) &&
  urlCovered(owner.nonResourceURLs, servant.nonResourceURLs) &&
  ((owner.resourceNames ?? []).length === 0 || coversAll(owner.resourceNames, servant.resourceNames ?? [""]))
