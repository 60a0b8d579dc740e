/**
 * The built-in ClusterRoles and ClusterRoleBindings the server writes at start (Kubernetes'
 * bootstrap policy, plus Fleet's profiles), each annotated `rbac.authorization.kubernetes.io/autoupdate`.
 *
 * - `cluster-admin` (bound to `system:masters`); `admin` ⊇ `edit` ⊇ `view`, aggregated from
 *   roles labelled `rbac.authorization.k8s.io/aggregate-to-{admin,edit,view}` exactly as Kubernetes.
 * - `system:discovery`, `system:basic-user`, `system:public-info-viewer` for every authenticated
 *   user (the last also for anonymous requests); `system:node` for the group `system:nodes`.
 * - `fleet:customer`: bound by RoleBinding in a customer's namespaces; aggregates `admin` (so
 *   ResourceQuota and LimitRange stay read-only) plus Fleet's `exec`/`signal` verbs on pods.
 * - `fleet:collaborator`: bound by ClusterRoleBinding; reads everything `view` reads plus cluster
 *   objects (nodes, namespaces, RBAC, CRDs), manages workloads, never reads Secrets, and gets no
 *   exec/attach/port-forward (a shell in a pod reads the Secrets mounted there).
 * - `fleet:namespace-discovery`: `GET /apis/fleet.koder.dev/v1/accessiblenamespaces` for everyone.
 * - `system:node-bootstrapper`: join-token holders (`system:bootstrappers`) may create NodeJoins.
 * - `system:monitoring`: `GET /metrics` and the health checks, for the group `system:monitoring`
 *   (Kubernetes' role for Prometheus: bind a ServiceAccount to it, or add it to the group).
 */
import { Clock, Effect } from "effect"
import { jsonEqual } from "../object/Json.js"
import * as Meta from "../model/Meta.js"
import * as Rbac from "../model/Rbac.js"
import * as Keys from "../store/Keys.js"
import type { StoreService } from "../store/Store.js"
import type { StoreError } from "../store/StoreError.js"
import { ruleEqual, roleFromJson, type Rule } from "./RbacRules.js"
import { asArray, asObject } from "../object/Json.js"

type Json = Record<string, unknown>

const read = ["get", "list", "watch"]
const write = ["create", "delete", "deletecollection", "patch", "update"]
const readWrite = [...read, ...write]

const rule = (verbs: ReadonlyArray<string>, apiGroups: ReadonlyArray<string>, resources: ReadonlyArray<string>): Rule => ({
  verbs: [...verbs],
  apiGroups: [...apiGroups],
  resources: [...resources]
})
const urls = (verbs: ReadonlyArray<string>, nonResourceURLs: ReadonlyArray<string>): Rule => ({ verbs: [...verbs], nonResourceURLs: [...nonResourceURLs] })

/** The label that aggregates a ClusterRole into `fleet:customer`. */
export const AggregateToCustomer = "fleet.koder.dev/aggregate-to-customer"
/** The label that aggregates a ClusterRole into `fleet:collaborator`. */
export const AggregateToCollaborator = "fleet.koder.dev/aggregate-to-collaborator"

/** Fleet's dedicated verbs for mediated process control (DESIGN §7): never implied by `update`. */
export const processVerbs = ["exec", "signal"] as const

const meta = (name: string, labels: Readonly<Record<string, string>> = {}) => ({
  name,
  labels: { "kubernetes.io/bootstrapping": "rbac-defaults", ...labels },
  annotations: { [Rbac.AutoupdateAnnotation]: "true" }
})

const clusterRole = (name: string, rules: ReadonlyArray<Rule>, labels?: Readonly<Record<string, string>>): Json => ({
  apiVersion: Rbac.ApiVersion,
  kind: "ClusterRole",
  metadata: meta(name, labels),
  rules
})

const aggregatedRole = (name: string, selectors: ReadonlyArray<Readonly<Record<string, string>>>, labels?: Readonly<Record<string, string>>): Json => ({
  apiVersion: Rbac.ApiVersion,
  kind: "ClusterRole",
  metadata: meta(name, labels),
  aggregationRule: { clusterRoleSelectors: selectors.map((matchLabels) => ({ matchLabels })) },
  rules: []
})

const groups = (names: ReadonlyArray<string>) => names.map((name) => ({ kind: "Group", apiGroup: Rbac.Group, name }))

const clusterRoleBinding = (name: string, role: string, subjects: ReadonlyArray<Json>): Json => ({
  apiVersion: Rbac.ApiVersion,
  kind: "ClusterRoleBinding",
  metadata: meta(name),
  roleRef: { apiGroup: Rbac.Group, kind: "ClusterRole", name: role },
  subjects
})

const on = { [Rbac.AggregateToAdmin]: "true" }
const onEdit = { [Rbac.AggregateToEdit]: "true" }
const onView = { [Rbac.AggregateToView]: "true" }

// Kubernetes' system:aggregate-to-view, -edit, -admin, for the resources Fleet serves or will.
const viewRules: ReadonlyArray<Rule> = [
  rule(read, [""], ["pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"]),
  rule(read, [""], ["limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status", "namespaces/status", "replicationcontrollers/status", "pods/log"]),
  // Fleet's process counts per pod: usage figures, as metrics.k8s.io below (no command lines).
  rule(["get"], [""], ["pods/processmetrics"]),
  rule(read, [""], ["namespaces"]),
  rule(read, ["discovery.k8s.io"], ["endpointslices"]),
  rule(read, ["apps"], ["controllerrevisions", "statefulsets", "statefulsets/scale", "statefulsets/status", "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status"]),
  rule(read, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
  // metrics-server's system:aggregated-metrics-reader, aggregated to view, edit and admin.
  rule(["get", "list"], ["metrics.k8s.io"], ["pods", "nodes"]),
  rule(read, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
  rule(read, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
  rule(read, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
  rule(read, ["events.k8s.io"], ["events"]),
  rule(read, ["coordination.k8s.io"], ["leases"]),
  rule(read, ["fleet.koder.dev"], ["alertrules", "alertrules/status"])
]

const editRules: ReadonlyArray<Rule> = [
  rule(read, [""], ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"]),
  rule(["impersonate"], [""], ["serviceaccounts"]),
  rule(write, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
  rule(["create"], [""], ["pods/eviction"]),
  rule(write, [""], ["replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events", "endpoints"]),
  rule(["create"], [""], ["serviceaccounts/token"]),
  rule(write, ["apps"], ["statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale"]),
  rule(write, ["autoscaling"], ["horizontalpodautoscalers"]),
  rule(write, ["batch"], ["cronjobs", "jobs"]),
  rule(write, ["policy"], ["poddisruptionbudgets"]),
  rule(write, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
  rule(write, ["discovery.k8s.io"], ["endpointslices"]),
  rule(write, ["coordination.k8s.io"], ["leases"]),
  rule(write, ["fleet.koder.dev"], ["alertrules"])
]

const adminRules: ReadonlyArray<Rule> = [
  rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
  rule(readWrite, ["rbac.authorization.k8s.io"], ["rolebindings", "roles"])
]

// Workloads a collaborator manages (everything in edit but Secrets, tokens and pod shells).
const collaboratorRules: ReadonlyArray<Rule> = [
  rule(read, [""], ["nodes", "nodes/status", "namespaces", "persistentvolumes", "componentstatuses"]),
  rule(read, ["rbac.authorization.k8s.io"], ["roles", "rolebindings", "clusterroles", "clusterrolebindings"]),
  rule(read, ["apiextensions.k8s.io"], ["customresourcedefinitions"]),
  rule(read, ["storage.k8s.io"], ["storageclasses", "csidrivers", "csinodes", "volumeattachments"]),
  rule(read, ["scheduling.k8s.io"], ["priorityclasses"]),
  rule(read, ["admissionregistration.k8s.io"], ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]),
  rule(read, ["metrics.k8s.io"], ["pods", "nodes"]),
  rule(write, [""], ["pods", "services", "configmaps", "replicationcontrollers", "replicationcontrollers/scale", "persistentvolumeclaims", "events", "endpoints"]),
  rule(["create"], [""], ["pods/eviction"]),
  rule(write, ["apps"], ["deployments", "deployments/scale", "deployments/rollback", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale", "daemonsets"]),
  rule(write, ["autoscaling"], ["horizontalpodautoscalers"]),
  rule(write, ["batch"], ["cronjobs", "jobs"]),
  rule(write, ["policy"], ["poddisruptionbudgets"]),
  rule(write, ["networking.k8s.io"], ["ingresses", "networkpolicies"])
]

// Kubernetes' system:node, for the resources an agent touches; NodeRestriction narrows writes to its own objects.
const nodeRules: ReadonlyArray<Rule> = [
  rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
  rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews", "localsubjectaccessreviews"]),
  // Namespaces too (beyond Kubernetes' system:node): the agent resolves NetworkPolicy namespaceSelectors itself.
  rule(read, [""], ["services", "endpoints", "nodes", "pods", "namespaces"]),
  rule(["create", "update", "patch", "delete"], [""], ["nodes"]),
  rule(["update", "patch"], [""], ["nodes/status"]),
  rule(["create", "update", "patch"], ["", "events.k8s.io"], ["events"]),
  rule(["create", "delete"], [""], ["pods"]),
  rule(["update", "patch"], [""], ["pods/status"]),
  rule(["create"], [""], ["pods/eviction"]),
  // Secrets, ConfigMaps, claims, volumes and ServiceAccount tokens: only through the node's own
  // pods, which the Node authorizer (NodeAuthorizer.ts) decides before RBAC.
  rule(["get", "create", "update", "patch", "delete"], ["coordination.k8s.io"], ["leases"]),
  rule(read, ["discovery.k8s.io"], ["endpointslices"]),
  rule(read, ["networking.k8s.io"], ["networkpolicies"])
]

/**
 * Rules a built-in role once had and must no longer grant: reconciling removes them from the
 * stored role (an exact match only, so an administrator's own wider rule is kept).
 */
export const retiredRules: Readonly<Record<string, ReadonlyArray<Rule>>> = {
  // Before the Node authorizer, every node could read every Secret and mint any account's token.
  "system:node": [rule(["get"], [""], ["secrets", "configmaps", "persistentvolumeclaims", "persistentvolumes"]), rule(["create"], [""], ["serviceaccounts/token"])]
}

/** The built-in ClusterRoles. */
export const clusterRoles: ReadonlyArray<Json> = [
  clusterRole("cluster-admin", [rule(["*"], ["*"], ["*"]), urls(["*"], ["*"])]),
  aggregatedRole("admin", [on]),
  aggregatedRole("edit", [onEdit], on),
  aggregatedRole("view", [onView], onEdit),
  clusterRole("system:aggregate-to-admin", adminRules, on),
  clusterRole("system:aggregate-to-edit", editRules, onEdit),
  clusterRole("system:aggregate-to-view", viewRules, onView),
  clusterRole("system:discovery", [urls(["get"], ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"])]),
  clusterRole("system:basic-user", [
    rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
    rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])
  ]),
  clusterRole("system:public-info-viewer", [urls(["get"], ["/healthz", "/livez", "/readyz", "/version", "/version/"])]),
  clusterRole("system:node", nodeRules),
  clusterRole("system:monitoring", [urls(["get"], ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"])]),
  aggregatedRole("fleet:customer", [on, { [AggregateToCustomer]: "true" }]),
  clusterRole(
    "fleet:aggregate-to-customer",
    [rule([...processVerbs], [""], ["pods", "pods/exec", "pods/attach", "pods/signal"]), rule(["create"], [""], ["pods/portforward"]), rule(read, [""], ["pods/log"]), rule(["get"], [""], ["pods/processmetrics"])],
    { [AggregateToCustomer]: "true" }
  ),
  aggregatedRole("fleet:collaborator", [onView, { [AggregateToCollaborator]: "true" }]),
  clusterRole("fleet:aggregate-to-collaborator", collaboratorRules, { [AggregateToCollaborator]: "true" }),
  clusterRole("fleet:namespace-discovery", [rule(["get", "list"], ["fleet.koder.dev"], ["accessiblenamespaces"])]),
  // Join-token holders (group system:bootstrappers) may join a node, as Kubernetes' bootstrappers may request a certificate.
  clusterRole("system:node-bootstrapper", [
    rule(["create"], ["fleet.koder.dev"], ["nodejoins"]),
    rule(["create", "get", "list", "watch"], ["certificates.k8s.io"], ["certificatesigningrequests"])
  ])
]

/** The built-in ClusterRoleBindings. */
export const clusterRoleBindings: ReadonlyArray<Json> = [
  clusterRoleBinding("cluster-admin", "cluster-admin", groups(["system:masters"])),
  clusterRoleBinding("system:discovery", "system:discovery", groups(["system:authenticated"])),
  clusterRoleBinding("system:basic-user", "system:basic-user", groups(["system:authenticated"])),
  clusterRoleBinding("system:public-info-viewer", "system:public-info-viewer", groups(["system:authenticated", "system:unauthenticated"])),
  clusterRoleBinding("system:node", "system:node", groups(["system:nodes"])),
  clusterRoleBinding("system:monitoring", "system:monitoring", groups(["system:monitoring"])),
  clusterRoleBinding("fleet:namespace-discovery", "fleet:namespace-discovery", groups(["system:authenticated"])),
  clusterRoleBinding("system:node-bootstrapper", "system:node-bootstrapper", groups(["system:bootstrappers"]))
]

const parseObject = (text: string): Json | undefined => {
  try {
    return asObject(JSON.parse(text))
  } catch {
    return undefined
  }
}

/**
 * What the stored object should be, given the built-in one (Kubernetes' reconciliation of
 * bootstrap policy): labels and annotations added, missing rules, selectors and subjects added,
 * the roleRef restored; users' additions are kept. `undefined` when the stored object opts out
 * with `autoupdate: "false"`.
 */
export const reconcile = (stored: Json, builtIn: Json): Json | undefined => {
  const m = asObject(stored["metadata"])
  if (asObject(m["annotations"])[Rbac.AutoupdateAnnotation] === "false") return undefined
  const bm = asObject(builtIn["metadata"])
  const metadata = { ...m, labels: { ...asObject(m["labels"]), ...asObject(bm["labels"]) }, annotations: { ...asObject(m["annotations"]), ...asObject(bm["annotations"]) } }
  if (builtIn["kind"] === "ClusterRole") {
    const aggregation = asObject(builtIn["aggregationRule"])
    if (builtIn["aggregationRule"] !== undefined) {
      const selectors = [...asArray(asObject(stored["aggregationRule"])["clusterRoleSelectors"])]
      for (const s of asArray(aggregation["clusterRoleSelectors"])) if (!selectors.some((x) => jsonEqual(x, s))) selectors.push(s)
      return { ...stored, metadata, aggregationRule: { clusterRoleSelectors: selectors }, rules: stored["rules"] ?? [] }
    }
    const retired = retiredRules[String(bm["name"])] ?? []
    const kept = asArray(stored["rules"]).filter((r) => {
      const parsed = roleFromJson({ kind: "ClusterRole", metadata: { name: "retired" }, rules: [r] })?.rules[0]
      return parsed === undefined || !retired.some((x) => ruleEqual(x, parsed))
    })
    const have = roleFromJson({ ...stored, rules: kept })?.rules ?? []
    const missing = (builtIn["rules"] as ReadonlyArray<Rule>).filter((r) => !have.some((h) => ruleEqual(h, r)))
    return { ...stored, metadata, rules: [...kept, ...missing] }
  }
  const subjects = [...asArray(stored["subjects"])]
  for (const s of asArray(builtIn["subjects"])) if (!subjects.some((x) => jsonEqual(x, s))) subjects.push(s)
  return { ...stored, metadata, roleRef: builtIn["roleRef"], subjects }
}

/**
 * Write the bootstrap policy into the store, idempotently: missing objects are created (with uid,
 * creationTimestamp and the region label), stored ones reconciled and written only when changed.
 */
export const ensure = (store: StoreService, region: string = Meta.DefaultRegion): Effect.Effect<void, StoreError> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const objects = [
      ...clusterRoles.map((o) => ["clusterroles", o] as const),
      ...clusterRoleBindings.map((o) => ["clusterrolebindings", o] as const)
    ]
    for (const [resource, builtIn] of objects) {
      const name = String(asObject(builtIn["metadata"])["name"])
      const key = Keys.object({ group: Rbac.Group, resource, name })
      const existing = yield* Effect.either(store.get(key))
      if (existing._tag === "Left") {
        if (existing.left._tag !== "NotFound") return yield* Effect.fail(existing.left)
        const m = asObject(builtIn["metadata"])
        const metadata = {
          ...m,
          uid: crypto.randomUUID(),
          creationTimestamp: new Date(Math.floor(now / 1000) * 1000).toISOString().replace(".000Z", "Z"),
          labels: { ...asObject(m["labels"]), [Meta.RegionLabel]: region }
        }
        // Another server may create it first; its copy is as good as ours.
        yield* store.create(key, JSON.stringify({ ...builtIn, metadata })).pipe(Effect.catchTag("AlreadyExists", () => Effect.void))
        continue
      }
      const stored = parseObject(existing.right.value)
      if (stored === undefined) continue
      const next = reconcile(stored, builtIn)
      if (next === undefined || jsonEqual(next, stored)) continue
      yield* store.update(key, JSON.stringify(next), existing.right.modRevision).pipe(Effect.catchTag("Conflict", () => Effect.void))
    }
  })
