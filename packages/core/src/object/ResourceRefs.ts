/**
 * How the client and informers name a resource (`apiVersion` with `kind`, or `plural` and
 * scope when the kind is unknown), and the built-in kinds the controllers, scheduler and agent
 * watch and write, defined once: `ResourceRefs.Pod` rather than a `PodRef` per file.
 */

/** A resource by `apiVersion` and `kind`, or by `plural` (and scope) when discovery is not wanted. */
export interface ResourceRef {
  readonly apiVersion: string
  readonly kind?: string
  readonly plural?: string
  readonly namespaced?: boolean
}

export const AlertRule: ResourceRef = { apiVersion: "fleet.koder.dev/v1", kind: "AlertRule" }
export const ConfigMap: ResourceRef = { apiVersion: "v1", kind: "ConfigMap" }
export const ControllerRevision: ResourceRef = { apiVersion: "apps/v1", kind: "ControllerRevision" }
export const CronJob: ResourceRef = { apiVersion: "batch/v1", kind: "CronJob" }
export const CustomResourceDefinition: ResourceRef = { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition" }
export const DaemonSet: ResourceRef = { apiVersion: "apps/v1", kind: "DaemonSet" }
export const Deployment: ResourceRef = { apiVersion: "apps/v1", kind: "Deployment" }
export const EndpointSlice: ResourceRef = { apiVersion: "discovery.k8s.io/v1", kind: "EndpointSlice" }
export const Endpoints: ResourceRef = { apiVersion: "v1", kind: "Endpoints" }
export const Event: ResourceRef = { apiVersion: "v1", kind: "Event" }
export const HorizontalPodAutoscaler: ResourceRef = { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" }
export const Job: ResourceRef = { apiVersion: "batch/v1", kind: "Job" }
export const Lease: ResourceRef = { apiVersion: "coordination.k8s.io/v1", kind: "Lease" }
export const Namespace: ResourceRef = { apiVersion: "v1", kind: "Namespace" }
export const NetworkPolicy: ResourceRef = { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy" }
export const Node: ResourceRef = { apiVersion: "v1", kind: "Node" }
export const PersistentVolume: ResourceRef = { apiVersion: "v1", kind: "PersistentVolume" }
export const PersistentVolumeClaim: ResourceRef = { apiVersion: "v1", kind: "PersistentVolumeClaim" }
export const Pod: ResourceRef = { apiVersion: "v1", kind: "Pod" }
export const PodDisruptionBudget: ResourceRef = { apiVersion: "policy/v1", kind: "PodDisruptionBudget" }
export const ReplicaSet: ResourceRef = { apiVersion: "apps/v1", kind: "ReplicaSet" }
export const ReplicationController: ResourceRef = { apiVersion: "v1", kind: "ReplicationController" }
export const ResourceQuota: ResourceRef = { apiVersion: "v1", kind: "ResourceQuota" }
export const Secret: ResourceRef = { apiVersion: "v1", kind: "Secret" }
export const Service: ResourceRef = { apiVersion: "v1", kind: "Service" }
export const ServiceAccount: ResourceRef = { apiVersion: "v1", kind: "ServiceAccount" }
export const StorageClass: ResourceRef = { apiVersion: "storage.k8s.io/v1", kind: "StorageClass" }
export const StatefulSet: ResourceRef = { apiVersion: "apps/v1", kind: "StatefulSet" }
export const MemberCluster: ResourceRef = { apiVersion: "federation.fleet.koder.dev/v1alpha1", kind: "MemberCluster" }
export const Work: ResourceRef = { apiVersion: "federation.fleet.koder.dev/v1alpha1", kind: "Work" }
export const CertificateSigningRequest: ResourceRef = { apiVersion: "certificates.k8s.io/v1", kind: "CertificateSigningRequest" }
