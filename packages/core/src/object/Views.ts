/**
 * Typed views of stored objects: each built-in kind's static type derived from its `model/`
 * Schema, in the form the store and informers hold it (`Schema.Encoded`: the JSON as written,
 * where a quantity may still be a number). Reconcilers, scheduler plugins, admission and network
 * code read `Views.pod(o).spec.nodeName` instead of `asObject(asObject(o["spec"])["nodeName"])`.
 *
 * No decode runs here: every object in the store passed its kind's Schema when it was written, so
 * re-checking on each informer read would only cost time on the hot paths. The cast from
 * `JsonObject` to a view is written once, in `view`, and that is the reason it is safe.
 */
import type { Schema } from "effect"
import type * as AlertRuleModel from "../model/AlertRule.js"
import type * as AppsModel from "../model/Apps.js"
import type * as AutoscalingModel from "../model/Autoscaling.js"
import type * as BatchModel from "../model/Batch.js"
import type * as ConfigModel from "../model/Config.js"
import type * as EndpointSliceModel from "../model/EndpointSlice.js"
import type * as EventModel from "../model/Event.js"
import type * as IngressModel from "../model/Ingress.js"
import type * as LeaseModel from "../model/Lease.js"
import type * as NamespaceModel from "../model/Namespace.js"
import type * as NetworkPolicyModel from "../model/NetworkPolicy.js"
import type * as NodeModel from "../model/Node.js"
import type * as PodModel from "../model/Pod.js"
import type * as PolicyModel from "../model/Policy.js"
import type * as RbacModel from "../model/Rbac.js"
import type * as SchedulingModel from "../model/Scheduling.js"
import type * as StorageModel from "../model/Storage.js"
import type * as ServiceModel from "../model/Service.js"
import type * as ServiceAccountModel from "../model/ServiceAccount.js"
import type * as VolumeModel from "../model/Volume.js"
import type { JsonObject } from "./Json.js"

/** The stored (wire) form of a Schema. */
export type Stored<S extends Schema.Schema.Any> = Schema.Schema.Encoded<S>

/** A stored object read as kind `K` (see the module comment for why no decode runs). */
export const view = <K>(o: JsonObject): K => o as unknown as K

export type AlertRule = Stored<typeof AlertRuleModel.AlertRule>
export const alertRule = (o: JsonObject): AlertRule => view<AlertRule>(o)
export type ConfigMap = Stored<typeof ConfigModel.ConfigMap>
export const configMap = (o: JsonObject): ConfigMap => view<ConfigMap>(o)
export type Secret = Stored<typeof ConfigModel.Secret>
export const secret = (o: JsonObject): Secret => view<Secret>(o)
export type Deployment = Stored<typeof AppsModel.Deployment>
export const deployment = (o: JsonObject): Deployment => view<Deployment>(o)
export type ReplicaSet = Stored<typeof AppsModel.ReplicaSet>
export const replicaSet = (o: JsonObject): ReplicaSet => view<ReplicaSet>(o)
export type StatefulSet = Stored<typeof AppsModel.StatefulSet>
export const statefulSet = (o: JsonObject): StatefulSet => view<StatefulSet>(o)
export type DaemonSet = Stored<typeof AppsModel.DaemonSet>
export const daemonSet = (o: JsonObject): DaemonSet => view<DaemonSet>(o)
export type ControllerRevision = Stored<typeof AppsModel.ControllerRevision>
export const controllerRevision = (o: JsonObject): ControllerRevision => view<ControllerRevision>(o)
export type EndpointSlice = Stored<typeof EndpointSliceModel.EndpointSlice>
export const endpointSlice = (o: JsonObject): EndpointSlice => view<EndpointSlice>(o)
export type Event = Stored<typeof EventModel.Event>
export const event = (o: JsonObject): Event => view<Event>(o)
export type HorizontalPodAutoscaler = Stored<typeof AutoscalingModel.HorizontalPodAutoscaler>
export const horizontalPodAutoscaler = (o: JsonObject): HorizontalPodAutoscaler => view<HorizontalPodAutoscaler>(o)
export type Ingress = Stored<typeof IngressModel.Ingress>
export const ingress = (o: JsonObject): Ingress => view<Ingress>(o)
export type Job = Stored<typeof BatchModel.Job>
export const job = (o: JsonObject): Job => view<Job>(o)
export type CronJob = Stored<typeof BatchModel.CronJob>
export const cronJob = (o: JsonObject): CronJob => view<CronJob>(o)
export type Lease = Stored<typeof LeaseModel.Lease>
export const lease = (o: JsonObject): Lease => view<Lease>(o)
export type LimitRange = Stored<typeof PolicyModel.LimitRange>
export const limitRange = (o: JsonObject): LimitRange => view<LimitRange>(o)
export type ResourceQuota = Stored<typeof PolicyModel.ResourceQuota>
export const resourceQuota = (o: JsonObject): ResourceQuota => view<ResourceQuota>(o)
export type PodDisruptionBudget = Stored<typeof PolicyModel.PodDisruptionBudget>
export const podDisruptionBudget = (o: JsonObject): PodDisruptionBudget => view<PodDisruptionBudget>(o)
export type Namespace = Stored<typeof NamespaceModel.Namespace>
export const namespace = (o: JsonObject): Namespace => view<Namespace>(o)
export type NetworkPolicy = Stored<typeof NetworkPolicyModel.NetworkPolicy>
export const networkPolicy = (o: JsonObject): NetworkPolicy => view<NetworkPolicy>(o)
export type Node = Stored<typeof NodeModel.Node>
export const node = (o: JsonObject): Node => view<Node>(o)
export type PersistentVolumeClaim = Stored<typeof VolumeModel.PersistentVolumeClaim>
export const persistentVolumeClaim = (o: JsonObject): PersistentVolumeClaim => view<PersistentVolumeClaim>(o)
export type PersistentVolume = Stored<typeof VolumeModel.PersistentVolume>
export const persistentVolume = (o: JsonObject): PersistentVolume => view<PersistentVolume>(o)
export type Pod = Stored<typeof PodModel.Pod>
export const pod = (o: JsonObject): Pod => view<Pod>(o)
export type PriorityClass = Stored<typeof SchedulingModel.PriorityClass>
export const priorityClass = (o: JsonObject): PriorityClass => view<PriorityClass>(o)
export type StorageClass = Stored<typeof StorageModel.StorageClass>
export const storageClass = (o: JsonObject): StorageClass => view<StorageClass>(o)
export type Service = Stored<typeof ServiceModel.Service>
export const service = (o: JsonObject): Service => view<Service>(o)
export type Endpoints = Stored<typeof ServiceModel.Endpoints>
export const endpoints = (o: JsonObject): Endpoints => view<Endpoints>(o)
export type Role = Stored<typeof RbacModel.Role>
export const role = (o: JsonObject): Role => view<Role>(o)
export type ClusterRole = Stored<typeof RbacModel.ClusterRole>
export const clusterRole = (o: JsonObject): ClusterRole => view<ClusterRole>(o)
export type RoleBinding = Stored<typeof RbacModel.RoleBinding>
export const roleBinding = (o: JsonObject): RoleBinding => view<RoleBinding>(o)
export type ClusterRoleBinding = Stored<typeof RbacModel.ClusterRoleBinding>
export const clusterRoleBinding = (o: JsonObject): ClusterRoleBinding => view<ClusterRoleBinding>(o)
export type ServiceAccount = Stored<typeof ServiceAccountModel.ServiceAccount>
export const serviceAccount = (o: JsonObject): ServiceAccount => view<ServiceAccount>(o)

/** A pod's spec, status and containers as stored. */
export type PodSpec = NonNullable<Pod["spec"]>
export type PodStatus = NonNullable<Pod["status"]>
export type Container = PodSpec["containers"][number]
export type NodeSpec = NonNullable<Node["spec"]>
export type NodeStatus = NonNullable<Node["status"]>
