/**
 * The registry of built-in kinds: for each, its group/version, REST resource names (plural,
 * singular, short names as kubectl knows them), whether it is namespaced, and its schema.
 * The API server's routing, discovery and decoding all read this one table.
 */
import { Either, Option, type Schema } from "effect"
import * as AlertRuleModule from "./AlertRule.js"
import * as Apps from "./Apps.js"
import * as Autoscaling from "./Autoscaling.js"
import * as Batch from "./Batch.js"
import * as CertificatesModule from "./Certificates.js"
import * as Config from "./Config.js"
import * as Crd from "./CustomResourceDefinition.js"
import { decodeObject, type DecodeOptions } from "./Decode.js"
import * as EndpointSliceModule from "./EndpointSlice.js"
import * as EventModule from "./Event.js"
import * as FederationModule from "./Federation.js"
import * as FieldError from "./FieldError.js"
import * as IngressModule from "./Ingress.js"
import * as LeaseModule from "./Lease.js"
import * as NamespaceModule from "./Namespace.js"
import * as NetworkPolicyModule from "./NetworkPolicy.js"
import * as Networking from "./Networking.js"
import * as NodeModule from "./Node.js"
import * as PodModule from "./Pod.js"
import * as RbacModule from "./Rbac.js"
import * as Policy from "./Policy.js"
import * as ProcessControlModule from "./ProcessControl.js"
import * as Scheduling from "./Scheduling.js"
import * as ServiceModule from "./Service.js"
import * as ServiceAccountModule from "./ServiceAccount.js"
import * as StorageModule from "./Storage.js"
import * as VolumeModule from "./Volume.js"

/** Everything the API server needs to know about one kind. */
export interface KindInfo {
  /** API group; `""` for the core group. */
  readonly group: string
  readonly version: string
  /** `group/version`, or just `version` for the core group. */
  readonly apiVersion: string
  readonly kind: string
  readonly listKind: string
  /** The REST resource name, e.g. `pods`. */
  readonly plural: string
  readonly singular: string
  readonly namespaced: boolean
  readonly shortNames: ReadonlyArray<string>
  readonly schema: Schema.Schema.AnyNoContext
}

const info = (
  apiVersion: string,
  kind: string,
  plural: string,
  namespaced: boolean,
  shortNames: ReadonlyArray<string>,
  schema: Schema.Schema.AnyNoContext
): KindInfo => {
  const slash = apiVersion.indexOf("/")
  return {
    group: slash < 0 ? "" : apiVersion.slice(0, slash),
    version: slash < 0 ? apiVersion : apiVersion.slice(slash + 1),
    apiVersion,
    kind,
    listKind: `${kind}List`,
    plural,
    singular: kind.toLowerCase(),
    namespaced,
    shortNames,
    schema
  }
}

/** Every built-in kind. */
export const all: ReadonlyArray<KindInfo> = [
  info("v1", "Namespace", "namespaces", false, ["ns"], NamespaceModule.Namespace),
  info("v1", "Node", "nodes", false, ["no"], NodeModule.Node),
  info("v1", "Pod", "pods", true, ["po"], PodModule.Pod),
  info("v1", "ConfigMap", "configmaps", true, ["cm"], Config.ConfigMap),
  info("v1", "Secret", "secrets", true, [], Config.Secret),
  info("v1", "Service", "services", true, ["svc"], ServiceModule.Service),
  info("v1", "Endpoints", "endpoints", true, ["ep"], ServiceModule.Endpoints),
  info("v1", "Event", "events", true, ["ev"], EventModule.Event),
  info("v1", "ServiceAccount", "serviceaccounts", true, ["sa"], ServiceAccountModule.ServiceAccount),
  info("coordination.k8s.io/v1", "Lease", "leases", true, [], LeaseModule.Lease),
  info("apps/v1", "Deployment", "deployments", true, ["deploy"], Apps.Deployment),
  info("apps/v1", "ReplicaSet", "replicasets", true, ["rs"], Apps.ReplicaSet),
  info("apps/v1", "StatefulSet", "statefulsets", true, ["sts"], Apps.StatefulSet),
  info("apps/v1", "DaemonSet", "daemonsets", true, ["ds"], Apps.DaemonSet),
  info("apps/v1", "ControllerRevision", "controllerrevisions", true, [], Apps.ControllerRevision),
  info("batch/v1", "Job", "jobs", true, [], Batch.Job),
  info("batch/v1", "CronJob", "cronjobs", true, ["cj"], Batch.CronJob),
  info("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, ["hpa"], Autoscaling.HorizontalPodAutoscaler),
  info("v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, ["pvc"], VolumeModule.PersistentVolumeClaim),
  info("v1", "PersistentVolume", "persistentvolumes", false, ["pv"], VolumeModule.PersistentVolume),
  info("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", true, [], EndpointSliceModule.EndpointSlice),
  info("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", true, ["pdb"], Policy.PodDisruptionBudget),
  info("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", false, ["pc"], Scheduling.PriorityClass),
  info("storage.k8s.io/v1", "StorageClass", "storageclasses", false, ["sc"], StorageModule.StorageClass),
  info("networking.k8s.io/v1", "Ingress", "ingresses", true, ["ing"], IngressModule.Ingress),
  info("networking.k8s.io/v1", "IngressClass", "ingressclasses", false, [], IngressModule.IngressClass),
  info("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", true, ["netpol"], NetworkPolicyModule.NetworkPolicy),
  info("networking.k8s.io/v1", "IPAddress", "ipaddresses", false, ["ip"], Networking.IPAddress),
  info("v1", "LimitRange", "limitranges", true, ["limits"], Policy.LimitRange),
  info("v1", "ResourceQuota", "resourcequotas", true, ["quota"], Policy.ResourceQuota),
  info("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false, [], Policy.MutatingWebhookConfiguration),
  info("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false, [], Policy.ValidatingWebhookConfiguration),
  info("rbac.authorization.k8s.io/v1", "Role", "roles", true, [], RbacModule.Role),
  info("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false, [], RbacModule.ClusterRole),
  info("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true, [], RbacModule.RoleBinding),
  info("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false, [], RbacModule.ClusterRoleBinding),
  info("fleet.koder.dev/v1", "ProcessControl", "processcontrols", true, [], ProcessControlModule.ProcessControl),
  info("fleet.koder.dev/v1", "AlertRule", "alertrules", true, [], AlertRuleModule.AlertRule),
  info("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", false, ["crd", "crds"], Crd.CustomResourceDefinition)
]

/** The hub's kinds (`koder-fleet hub` serves them beside `all`; clients of any role know them). */
export const federation: ReadonlyArray<KindInfo> = [
  info(FederationModule.ApiVersion, "MemberCluster", "memberclusters", false, ["mc"], FederationModule.MemberCluster),
  info(FederationModule.ApiVersion, "Work", "works", true, [], FederationModule.Work),
  info("certificates.k8s.io/v1", "CertificateSigningRequest", "certificatesigningrequests", false, ["csr"], CertificatesModule.CertificateSigningRequest)
]

const byKind = new Map([...all, ...federation].map((k) => [`${k.apiVersion}/${k.kind}`, k]))

/** The kind registered for `apiVersion` + `kind` (e.g. `"apps/v1"`, `"Deployment"`). */
export const kindFor = (apiVersion: string, kind: string): Option.Option<KindInfo> =>
  Option.fromNullable(byKind.get(`${apiVersion}/${kind}`))

/**
 * The kind served at `group` + `resource`, where `resource` is a plural, singular or short
 * name (`pods`, `pod`, `po`), matched case-insensitively as kubectl does.
 */
export const resourceFor = (group: string, resource: string): Option.Option<KindInfo> => {
  const r = resource.toLowerCase()
  return Option.fromNullable(
    all.find((k) => k.group === group && (k.plural === r || k.singular === r || k.shortNames.includes(r)))
  )
}

/** The kind for a short, singular or plural name in any group (`deploy` → Deployment). */
export const resolveName = (name: string): Option.Option<KindInfo> => {
  const r = name.toLowerCase()
  return Option.fromNullable(all.find((k) => k.plural === r || k.singular === r || k.shortNames.includes(r)))
}

/**
 * Decodes an object of any registered kind, choosing the schema from its own `apiVersion`
 * and `kind`. Unknown or missing type information is reported as field errors.
 */
export const decodeAny = (
  input: unknown,
  options?: DecodeOptions
): Either.Either<{ readonly info: KindInfo; readonly object: unknown }, ReadonlyArray<FieldError.FieldError>> => {
  const o = typeof input === "object" && input !== null ? (input as Record<string, unknown>) : {}
  const errors: Array<FieldError.FieldError> = []
  if (typeof o["apiVersion"] !== "string" || o["apiVersion"] === "") errors.push(FieldError.required("apiVersion"))
  if (typeof o["kind"] !== "string" || o["kind"] === "") errors.push(FieldError.required("kind"))
  if (errors.length > 0) return Either.left(errors)
  const apiVersion = o["apiVersion"] as string
  const kind = o["kind"] as string
  const found = kindFor(apiVersion, kind)
  if (Option.isNone(found)) {
    return Either.left([
      FieldError.notSupported(
        "kind",
        kind,
        all.filter((k) => k.apiVersion === apiVersion).map((k) => k.kind)
      )
    ])
  }
  const decoded = decodeObject(found.value.schema, input, options)
  return Either.map(decoded, (object) => ({ info: found.value, object }))
}
