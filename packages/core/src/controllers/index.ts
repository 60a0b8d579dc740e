/**
 * Every built-in reconciler (DESIGN §6), and `all(options)`: the set a control plane runs, in
 * the names `--disable-controllers` accepts. Each module's first lines say what it reconciles and
 * how it follows Kubernetes.
 */
import type * as Controller from "./Controller.js"
import * as AlertRule from "./AlertRuleController.js"
import * as ClusterIpRepair from "./ClusterIpRepair.js"
import * as CronJob from "./CronJob.js"
import * as DaemonSet from "./DaemonSet.js"
import * as Deployment from "./Deployment.js"
import * as Disruption from "./DisruptionController.js"
import * as EndpointSlice from "./EndpointSliceController.js"
import * as Endpoints from "./Endpoints.js"
import * as EventTtl from "./EventTtl.js"
import * as GarbageCollector from "./GarbageCollector.js"
import * as HorizontalPodAutoscaler from "./HorizontalPodAutoscaler.js"
import * as Job from "./Job.js"
import * as KubernetesService from "./KubernetesService.js"
import * as Namespace from "./NamespaceController.js"
import * as NodeIpam from "./NodeIpam.js"
import * as NodeLifecycle from "./NodeLifecycle.js"
import * as LocalPathProvisioner from "./LocalPathProvisioner.js"
import * as PersistentVolumeBinder from "./PersistentVolumeBinder.js"
import * as PodGC from "./PodGC.js"
import * as ReplicaSet from "./ReplicaSet.js"
import * as ResourceQuota from "./ResourceQuotaController.js"
import * as RootCaPublisher from "./RootCaPublisher.js"
import * as ServiceAccount from "./ServiceAccountController.js"
import * as ServiceLoadBalancer from "./ServiceLoadBalancer.js"
import * as StatefulSet from "./StatefulSet.js"

export {
  AlertRule,
  ClusterIpRepair,
  CronJob,
  DaemonSet,
  Deployment,
  Disruption,
  EndpointSlice,
  Endpoints,
  EventTtl,
  GarbageCollector,
  HorizontalPodAutoscaler,
  Job,
  KubernetesService,
  Namespace,
  NodeIpam,
  NodeLifecycle,
  LocalPathProvisioner,
  PersistentVolumeBinder,
  PodGC,
  ReplicaSet,
  ResourceQuota,
  RootCaPublisher,
  ServiceAccount,
  ServiceLoadBalancer,
  StatefulSet
}

/** Options of the whole set: per-controller options, and which controllers to leave out. */
export interface Options {
  /** Reconciler names to leave out (`cronjob`, `node-lifecycle`, …). */
  readonly disabled?: ReadonlyArray<string>
  readonly alertRule?: AlertRule.Options
  readonly clusterIpRepair?: ClusterIpRepair.Options
  readonly daemonSet?: DaemonSet.Options
  readonly deployment?: Deployment.Options
  readonly endpointSlice?: EndpointSlice.Options
  readonly eventTtl?: EventTtl.Options
  readonly garbageCollector?: GarbageCollector.Options
  readonly horizontalPodAutoscaler?: HorizontalPodAutoscaler.Options
  readonly job?: Job.Options
  readonly kubernetesService?: KubernetesService.Options
  readonly namespace?: Namespace.Options
  readonly nodeIpam?: NodeIpam.Options
  readonly nodeLifecycle?: NodeLifecycle.Options
  readonly podGC?: PodGC.Options
  readonly replicaSet?: ReplicaSet.Options
  readonly resourceQuota?: ResourceQuota.Options
  readonly rootCaPublisher?: RootCaPublisher.Options
  readonly serviceAccount?: ServiceAccount.Options
  readonly serviceLoadBalancer?: ServiceLoadBalancer.Options
  readonly statefulSet?: StatefulSet.Options
}

/** Every built-in reconciler, configured, minus the disabled ones. */
export const all = (options: Options = {}): ReadonlyArray<Controller.Reconciler> => {
  const disabled = new Set(options.disabled ?? [])
  return [
    Namespace.reconciler(options.namespace),
    GarbageCollector.reconciler(options.garbageCollector),
    ServiceAccount.reconciler(options.serviceAccount),
    RootCaPublisher.reconciler(options.rootCaPublisher),
    KubernetesService.reconciler(options.kubernetesService),
    Deployment.reconciler(options.deployment),
    ReplicaSet.reconciler(options.replicaSet),
    StatefulSet.reconciler(options.statefulSet),
    DaemonSet.reconciler(options.daemonSet),
    Job.reconciler(options.job),
    CronJob.reconciler(),
    Endpoints.reconciler(),
    EndpointSlice.reconciler(options.endpointSlice),
    ClusterIpRepair.reconciler(options.clusterIpRepair),
    ServiceLoadBalancer.reconciler(options.serviceLoadBalancer),
    NodeIpam.reconciler(options.nodeIpam),
    NodeLifecycle.reconciler(options.nodeLifecycle),
    PodGC.reconciler(options.podGC),
    PersistentVolumeBinder.claimReconciler(),
    PersistentVolumeBinder.volumeReconciler(),
    LocalPathProvisioner.reconciler(),
    Disruption.reconciler(),
    ResourceQuota.reconciler(options.resourceQuota),
    HorizontalPodAutoscaler.reconciler(options.horizontalPodAutoscaler),
    EventTtl.reconciler(options.eventTtl),
    AlertRule.reconciler(options.alertRule)
  ].filter((r) => !disabled.has(r.name))
}

/** The names of every built-in reconciler. */
export const names = (): ReadonlyArray<string> => all().map((r) => r.name)
