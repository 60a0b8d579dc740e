/**
 * The strategic-merge list strategies of the built-in kinds, transcribed from the
 * `patchStrategy` / `patchMergeKey` struct tags in k8s.io/api (core/v1, apps/v1, batch/v1,
 * policy/v1, discovery/v1, networking/v1) and
 * k8s.io/apimachinery (meta/v1 ObjectMeta). A list without a `patchStrategy:"merge"` tag is
 * replaced by a strategic merge patch, so it is absent here on purpose; notably:
 * - `PodSpec.tolerations`, `NodeSpec.taints`, `PodSpec.readinessGates`, `Container.envFrom`,
 *   `Container.resizePolicy`, `Endpoints.subsets`, `Namespace.spec.finalizers` (no tag: atomic).
 * - `PodStatus.containerStatuses` / `initContainerStatuses`, `NodeStatus.images` (no tag).
 * - every list of a CustomResourceDefinition (`spec.versions`, `status.conditions`).
 * - `StatefulSetSpec.volumeClaimTemplates`, `CronJobStatus.active`, `JobSpec.podFailurePolicy.rules`,
 *   every list of an EndpointSlice (`endpoints`, `ports`: listType=atomic).
 */
import { byValue, type MergeKeys } from "./patchStrategic.js"

// ObjectMeta: `finalizers` patchStrategy=merge (a set of strings), `ownerReferences` by uid.
const objectMeta = (prefix: string): Record<string, string> => ({
  [`${prefix}metadata.finalizers`]: byValue,
  [`${prefix}metadata.ownerReferences`]: "uid"
})

// Container and EphemeralContainer(Common) carry the same tags.
const container = (list: string): Record<string, string> => ({
  [list]: "name",
  [`${list}[].ports`]: "containerPort",
  [`${list}[].env`]: "name",
  [`${list}[].volumeMounts`]: "mountPath",
  [`${list}[].volumeDevices`]: "devicePath"
})

const podSpec = (spec: string): Record<string, string> => ({
  [`${spec}.volumes`]: "name", // merge,retainKeys
  ...container(`${spec}.initContainers`),
  ...container(`${spec}.containers`),
  ...container(`${spec}.ephemeralContainers`),
  [`${spec}.imagePullSecrets`]: "name",
  [`${spec}.hostAliases`]: "ip",
  [`${spec}.topologySpreadConstraints`]: "topologyKey",
  [`${spec}.schedulingGates`]: "name",
  [`${spec}.resourceClaims`]: "name" // merge,retainKeys
})

const podStatus: Record<string, string> = {
  "status.conditions": "type",
  "status.podIPs": "ip",
  "status.hostIPs": "ip",
  "status.resourceClaimStatuses": "name" // merge,retainKeys
}

// Deployment, ReplicaSet, StatefulSet, DaemonSet and Job: their own metadata, the pod template's
// metadata and spec, and status conditions by type.
const podController: MergeKeys = {
  ...objectMeta(""),
  ...objectMeta("spec.template."),
  ...podSpec("spec.template.spec"),
  "status.conditions": "type"
}

/** Merge keys per built-in kind, keyed `apiVersion/kind` (`"apps/v1/Deployment"`). */
export const builtInMergeKeys: Readonly<Record<string, MergeKeys>> = {
  "v1/Pod": { ...objectMeta(""), ...podSpec("spec"), ...podStatus },
  "apps/v1/Deployment": podController,
  "apps/v1/ReplicaSet": podController,
  "apps/v1/StatefulSet": podController,
  "apps/v1/DaemonSet": podController,
  "apps/v1/ControllerRevision": objectMeta(""),
  "batch/v1/Job": podController,
  "batch/v1/CronJob": {
    ...objectMeta(""),
    ...objectMeta("spec.jobTemplate."),
    ...objectMeta("spec.jobTemplate.spec.template."),
    ...podSpec("spec.jobTemplate.spec.template.spec")
  },
  "v1/PersistentVolumeClaim": { ...objectMeta(""), "status.conditions": "type" },
  "v1/PersistentVolume": objectMeta(""),
  "discovery.k8s.io/v1/EndpointSlice": objectMeta(""),
  "policy/v1/PodDisruptionBudget": { ...objectMeta(""), "status.conditions": "type" },
  "networking.k8s.io/v1/IPAddress": objectMeta(""),
  "scheduling.k8s.io/v1/PriorityClass": objectMeta(""),
  "storage.k8s.io/v1/StorageClass": objectMeta(""),
  "fleet.koder.dev/v1/ProcessControl": objectMeta(""),
  "fleet.koder.dev/v1/AlertRule": { ...objectMeta(""), "spec.webhook.headers": "name" },
  "autoscaling/v2/HorizontalPodAutoscaler": { ...objectMeta(""), "status.conditions": "type" },
  "networking.k8s.io/v1/Ingress": objectMeta(""),
  "networking.k8s.io/v1/IngressClass": objectMeta(""),
  "networking.k8s.io/v1/NetworkPolicy": objectMeta(""),
  "v1/Node": {
    ...objectMeta(""),
    "spec.podCIDRs": byValue,
    "status.conditions": "type",
    "status.addresses": "type"
  },
  "v1/Service": { ...objectMeta(""), "spec.ports": "port", "status.conditions": "type" },
  "v1/Endpoints": objectMeta(""),
  "v1/Namespace": { ...objectMeta(""), "status.conditions": "type" },
  "v1/ConfigMap": objectMeta(""),
  "v1/Secret": objectMeta(""),
  "v1/Event": objectMeta(""),
  "v1/ServiceAccount": { ...objectMeta(""), secrets: "name", imagePullSecrets: "name" },
  "v1/LimitRange": objectMeta(""),
  "v1/ResourceQuota": objectMeta(""),
  // RBAC rules and subjects are atomic lists in Kubernetes.
  "rbac.authorization.k8s.io/v1/Role": objectMeta(""),
  "rbac.authorization.k8s.io/v1/ClusterRole": objectMeta(""),
  "rbac.authorization.k8s.io/v1/RoleBinding": objectMeta(""),
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": objectMeta(""),
  "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration": { ...objectMeta(""), webhooks: "name" },
  "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration": { ...objectMeta(""), webhooks: "name" },
  "coordination.k8s.io/v1/Lease": objectMeta(""),
  // apiextensions v1 tags no list with patchStrategy (status.conditions is only listType=map).
  "apiextensions.k8s.io/v1/CustomResourceDefinition": objectMeta("")
}

/** The merge keys every object has (its metadata), for a built-in kind not in the table. */
export const objectMetaMergeKeys: MergeKeys = objectMeta("")
