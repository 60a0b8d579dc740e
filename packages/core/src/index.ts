/**
 * @koder/fleet-core: the Koder Fleet kernel. Runtime-agnostic model, ports and decisions;
 * adapters (SQLite, PostgreSQL, kbox) live in their own packages.
 */
// Model (DESIGN §3)
export * as Apps from "./model/Apps.js"
export * as Autoscaling from "./model/Autoscaling.js"
export * as Authorization from "./model/Authorization.js"
export * as Batch from "./model/Batch.js"
export * as Config from "./model/Config.js"
export * as CronSchedule from "./model/CronSchedule.js"
export * as CustomResourceDefinition from "./model/CustomResourceDefinition.js"
export * as Decode from "./model/Decode.js"
export * as EndpointSlice from "./model/EndpointSlice.js"
export * as Event from "./model/Event.js"
export * as FieldError from "./model/FieldError.js"
export * as IntOrString from "./model/IntOrString.js"
export * as Kinds from "./model/Kinds.js"
export * as LabelSelector from "./model/LabelSelector.js"
export * as Lease from "./model/Lease.js"
export * as Meta from "./model/Meta.js"
export * as Metrics from "./model/Metrics.js"
export * as Namespace from "./model/Namespace.js"
export * as Networking from "./model/Networking.js"
export * as NetworkPolicy from "./model/NetworkPolicy.js"
export * as Node from "./model/Node.js"
export * as Pod from "./model/Pod.js"
export * as Policy from "./model/Policy.js"
export * as Scheduling from "./model/Scheduling.js"
export * as ProcessControl from "./model/ProcessControl.js"
export * as Quantity from "./model/Quantity.js"
export * as Rbac from "./model/Rbac.js"
export * as Scalars from "./model/Scalars.js"
export * as Service from "./model/Service.js"
export * as ServiceAccount from "./model/ServiceAccount.js"
export * as Status from "./model/Status.js"
export * as Validation from "./model/Validation.js"
export * as Volume from "./model/Volume.js"

// Store (DESIGN §4)
export * as CompactionPolicy from "./store/CompactionPolicy.js"
export * as ContinueToken from "./store/ContinueToken.js"
export * as KeyOrder from "./store/KeyOrder.js"
export * as Keys from "./store/Keys.js"
export * as Store from "./store/Store.js"
export * as StoreError from "./store/StoreError.js"
export * as WatchFeed from "./store/WatchFeed.js"

// Coordination
export * as Fencing from "./coordination/Fencing.js"
export * as LeaderElection from "./coordination/LeaderElection.js"

// Observability (DESIGN §11): metrics registry, exposition, the catalogue of series
export * as Exposition from "./observability/Exposition.js"
export * as FleetMetrics from "./observability/FleetMetrics.js"
export * as MetricRegistry from "./observability/MetricRegistry.js"

// API server (DESIGN §5)
export * as ApiError from "./api/ApiError.js"
export * as ApiServer from "./api/ApiServer.js"
export * as Authn from "./api/Authn.js"
export * as NamespaceServiceAccount from "./api/authn/NamespaceServiceAccount.js"
export * as NodeCredentials from "./api/authn/NodeCredentials.js"
export * as Oidc from "./api/authn/Oidc.js"
export * as ServiceAccountTokens from "./api/authn/ServiceAccountTokens.js"
export * as Http from "./api/Http.js"
export * as Registry from "./api/Registry.js"
export * as Client from "./client/Client.js"
export * as InProcess from "./client/InProcess.js"
export * as Drain from "./client/Drain.js"
export * as Binding from "./api/Binding.js"
export * as Eviction from "./api/Eviction.js"
export * as Placement from "./api/Placement.js"
export * as MetricsApi from "./api/Metrics.js"
export * as MetricsSource from "./api/MetricsSource.js"
export * as NodeAccess from "./api/NodeAccess.js"
export * as PodLog from "./api/PodLog.js"
export * as PodExec from "./api/PodExec.js"
export * as Admission from "./api/Admission.js"
export * as Authz from "./api/Authz.js"
export * as RbacApi from "./api/rbac/RbacApi.js"

// Authorization policy ([4/10])
export * as BootstrapPolicy from "./policy/BootstrapPolicy.js"
export * as DisruptionPolicy from "./policy/Disruption.js"
export * as IpRange from "./policy/IpRange.js"
export * as RbacEscalation from "./policy/RbacEscalation.js"
export * as RbacIndex from "./policy/RbacIndex.js"
export * as RbacPolicy from "./policy/Rbac.js"
export * as Transformer from "./api/Transformer.js"

// Admission plugins ([4/10])
export * as AdmissionPlugins from "./admission/index.js"

// Controllers (DESIGN §6)
export * as Conditions from "./controllers/Conditions.js"
export * as Controller from "./controllers/Controller.js"
export * as ControllerManager from "./controllers/ControllerManager.js"
export * as Controllers from "./controllers/index.js"
export * as EventRecorder from "./controllers/EventRecorder.js"
export * as Informer from "./controllers/Informer.js"
export * as Pods from "./controllers/Pods.js"
export * as WorkQueue from "./controllers/WorkQueue.js"

// Scheduling (DESIGN §7)
export * as NodeAffinity from "./scheduler/NodeAffinity.js"
export * as TaintToleration from "./scheduler/TaintToleration.js"
export * as SchedulerFramework from "./scheduler/Framework.js"
export * as Snapshot from "./scheduler/Snapshot.js"
export * as Schedule from "./scheduler/Schedule.js"
export * as SchedulerProfiles from "./scheduler/Profiles.js"
export * as SchedulingQueue from "./scheduler/Queue.js"
export * as SchedulerPlugins from "./scheduler/plugins/index.js"
export * as Scheduler from "./scheduler/Scheduler.js"

// Runtime (DESIGN §8)
export * as MemoryRuntime from "./runtime/MemoryRuntime.js"
export * as Runtime from "./runtime/Runtime.js"

// Node agent (DESIGN §8)
export * as Agent from "./agent/Agent.js"
export * as AgentError from "./agent/AgentError.js"
export * as ContainerEnv from "./agent/ContainerEnv.js"
export * as ContainerIdentity from "./agent/ContainerIdentity.js"
export * as CrashLoopBackoff from "./agent/CrashLoopBackoff.js"
export * as HostPortAllocator from "./agent/HostPortAllocator.js"
export * as HostPorts from "./agent/HostPorts.js"
export * as NodeAdmission from "./agent/NodeAdmission.js"
export * as NodeStatus from "./agent/NodeStatus.js"
export * as PodStatus from "./agent/PodStatus.js"
export * as PodSync from "./agent/PodSync.js"
export * as Prober from "./agent/Prober.js"
export * as Probes from "./agent/Probes.js"
export * as VolumePlan from "./agent/VolumePlan.js"
export * as VolumeWriter from "./agent/VolumeWriter.js"
export * as AgentUsage from "./agent/Usage.js"

// Networking (DESIGN §8): Service data paths
export * as ServiceBackends from "./network/ServiceBackends.js"
// Isolated network mode: pod CIDRs, pod IPs, ClusterIP rules, routes between nodes
export * as Ipam from "./network/Ipam.js"
export * as NodeRoutes from "./network/NodeRoutes.js"
export * as PodCidr from "./network/PodCidr.js"
export * as ServiceRules from "./network/ServiceRules.js"
