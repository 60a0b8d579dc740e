/**
 * The rbac.authorization.k8s.io/v1 kinds: `Role` and `ClusterRole` (rules: verbs on resources or
 * non-resource URLs; a ClusterRole may aggregate others by label), `RoleBinding` and
 * `ClusterRoleBinding` (grant a role to users, groups and ServiceAccounts). The evaluator that
 * reads them is `policy/Rbac.ts`.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { LabelSelector } from "./LabelSelector.js"
import { makeObjectMeta } from "./Meta.js"

/** The API group of these kinds. */
export const Group = "rbac.authorization.k8s.io"

/** Their apiVersion. */
export const ApiVersion = "rbac.authorization.k8s.io/v1"

/** Names of RBAC objects are path segments (`system:node` is valid), as in Kubernetes' ValidateRBACName. */
export const isValidName = (name: string): ReadonlyArray<string> =>
  name === "." || name === ".."
    ? [`may not be '${name}'`]
    : name.includes("/")
      ? ["may not contain '/'"]
      : name.includes("%")
        ? ["may not contain '%'"]
        : []

/** Object metadata of RBAC objects. */
export const RbacMeta = makeObjectMeta(isValidName)

const Strings = Schema.Array(Schema.String)

/** One permission: verbs on (apiGroups × resources [× resourceNames]) or on nonResourceURLs. */
export const PolicyRule = Schema.Struct({
  verbs: Strings,
  apiGroups: optional(Strings),
  resources: optional(Strings),
  resourceNames: optional(Strings),
  nonResourceURLs: optional(Strings)
})

/** A policy rule. */
export type PolicyRule = typeof PolicyRule.Type

/** Who a binding grants its role to. */
export const Subject = Schema.Struct({
  kind: Schema.String,
  apiGroup: optional(Schema.String),
  name: Schema.String,
  namespace: optional(Schema.String)
})

/** A binding subject. */
export type Subject = typeof Subject.Type

/** The role a binding grants. */
export const RoleRef = Schema.Struct({
  apiGroup: Schema.String,
  kind: Schema.String,
  name: Schema.String
})

/** A role reference. */
export type RoleRef = typeof RoleRef.Type

/** Which ClusterRoles an aggregated ClusterRole collects rules from. */
export const AggregationRule = Schema.Struct({
  clusterRoleSelectors: optional(Schema.Array(LabelSelector))
})

/** An aggregation rule. */
export type AggregationRule = typeof AggregationRule.Type

/** The `Role` kind: rules within one namespace. */
export const Role = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("Role"),
  metadata: RbacMeta,
  rules: optional(Schema.Array(PolicyRule))
})

/** A Role object. */
export type Role = typeof Role.Type

/** The `ClusterRole` kind: rules usable cluster-wide or, through a RoleBinding, in one namespace. */
export const ClusterRole = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("ClusterRole"),
  metadata: RbacMeta,
  rules: optional(Schema.Array(PolicyRule)),
  aggregationRule: optional(AggregationRule)
})

/** A ClusterRole object. */
export type ClusterRole = typeof ClusterRole.Type

/** The `RoleBinding` kind: grants a Role or ClusterRole within its namespace. */
export const RoleBinding = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("RoleBinding"),
  metadata: RbacMeta,
  subjects: optional(Schema.Array(Subject)),
  roleRef: RoleRef
})

/** A RoleBinding object. */
export type RoleBinding = typeof RoleBinding.Type

/** The `ClusterRoleBinding` kind: grants a ClusterRole cluster-wide. */
export const ClusterRoleBinding = Schema.Struct({
  apiVersion: Schema.Literal(ApiVersion),
  kind: Schema.Literal("ClusterRoleBinding"),
  metadata: RbacMeta,
  subjects: optional(Schema.Array(Subject)),
  roleRef: RoleRef
})

/** A ClusterRoleBinding object. */
export type ClusterRoleBinding = typeof ClusterRoleBinding.Type

/** Annotation marking bootstrap policy the server keeps up to date. */
export const AutoupdateAnnotation = "rbac.authorization.kubernetes.io/autoupdate"

/** Labels that aggregate a ClusterRole into the built-in `admin`, `edit` and `view`. */
export const AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
export const AggregateToEdit = "rbac.authorization.k8s.io/aggregate-to-edit"
export const AggregateToView = "rbac.authorization.k8s.io/aggregate-to-view"

/** Kubernetes' ValidatePolicyRule: verbs required; resource rules or non-resource rules, not both. */
export const validateRules = (rules: ReadonlyArray<typeof PolicyRule.Encoded> | null | undefined, namespaced: boolean, path = "rules"): ReadonlyArray<FieldError.FieldError> =>
  (rules ?? []).flatMap((rule, i) => {
    const at = `${path}[${i}]`
    const errors: Array<FieldError.FieldError> = []
    if (rule.verbs.length === 0) errors.push(FieldError.required(`${at}.verbs`, "verbs must contain at least one value"))
    if ((rule.nonResourceURLs ?? []).length > 0) {
      if (namespaced) errors.push(FieldError.invalid(`${at}.nonResourceURLs`, rule.nonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
      if ((rule.apiGroups ?? []).length > 0 || (rule.resources ?? []).length > 0) {
        errors.push(FieldError.invalid(`${at}.nonResourceURLs`, rule.nonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
      }
      return errors
    }
    if ((rule.apiGroups ?? []).length === 0) errors.push(FieldError.required(`${at}.apiGroups`, "resource rules must supply at least one api group"))
    if ((rule.resources ?? []).length === 0) errors.push(FieldError.required(`${at}.resources`, "resource rules must supply at least one resource"))
    return errors
  })

/** A RoleBinding or ClusterRoleBinding as stored. */
export type StoredBinding = typeof RoleBinding.Encoded | typeof ClusterRoleBinding.Encoded

/** Kubernetes' binding validation: a known roleRef and well-formed subjects. */
export const validateBinding = (binding: StoredBinding, namespaced: boolean): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  const ref = binding.roleRef
  if (ref.apiGroup !== Group) errors.push(FieldError.notSupported("roleRef.apiGroup", ref.apiGroup, [Group]))
  const kinds = namespaced ? ["Role", "ClusterRole"] : ["ClusterRole"]
  if (!kinds.includes(ref.kind)) errors.push(FieldError.notSupported("roleRef.kind", ref.kind, kinds))
  if (ref.name === "") errors.push(FieldError.required("roleRef.name"))
  else for (const d of isValidName(ref.name)) errors.push(FieldError.invalid("roleRef.name", ref.name, d))
  ;(binding.subjects ?? []).forEach((subject, i) => {
    const at = `subjects[${i}]`
    if (subject.name === "") errors.push(FieldError.required(`${at}.name`))
    switch (subject.kind) {
      case "ServiceAccount":
        if (subject.apiGroup !== undefined && subject.apiGroup !== "") errors.push(FieldError.notSupported(`${at}.apiGroup`, subject.apiGroup, [""]))
        if (!namespaced && (subject.namespace === undefined || subject.namespace === "")) errors.push(FieldError.required(`${at}.namespace`))
        break
      case "User":
      case "Group":
        if (subject.apiGroup !== Group) errors.push(FieldError.notSupported(`${at}.apiGroup`, subject.apiGroup, [Group]))
        break
      default:
        errors.push(FieldError.notSupported(`${at}.kind`, subject.kind, ["ServiceAccount", "User", "Group"]))
    }
  })
  return errors
}

/** Kubernetes' subject defaulting: User and Group subjects belong to the RBAC API group. */
export const defaultSubjects = <B extends StoredBinding>(binding: B): B =>
  binding.subjects == null
    ? binding
    : {
        ...binding,
        subjects: binding.subjects.map((subject) => {
          if (subject.apiGroup !== undefined) return subject
          return subject.kind === "User" || subject.kind === "Group" ? { ...subject, apiGroup: Group } : subject.kind === "ServiceAccount" ? { ...subject, apiGroup: "" } : subject
        })
      }
