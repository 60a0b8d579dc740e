/**
 * The `Pod` kind (v1) and its parts: containers, volumes, probes, scheduling constraints
 * (affinity, tolerations, topology spread) and the status the node agent reports. Also
 * `PodTemplateSpec`, which workload kinds (Deployment, ReplicaSet, ...) embed.
 */
import { Schema } from "effect"
import { details, nonEmptyArray, optional, RequiredString, StringMap } from "./internal/fields.js"
import { IntOrString } from "./IntOrString.js"
import { LabelSelector } from "./LabelSelector.js"
import { ConditionStatus, LocalObjectReference, ObjectMeta } from "./Meta.js"
import { TaintEffect } from "./Node.js"
import { QuantitySchema, ResourceList } from "./Quantity.js"
import { Int32, Int64, NonNegativeInt32, NonNegativeInt64, PortNumber, Time } from "./Scalars.js"
import * as Validation from "./Validation.js"

// ---- Environment ---------------------------------------------------------------------------

/** Selects a key of a ConfigMap. */
export const ConfigMapKeySelector = Schema.Struct({
  name: optional(Schema.String),
  key: Schema.String,
  optional: optional(Schema.Boolean)
})

/** Selects a key of a Secret. */
export const SecretKeySelector = Schema.Struct({
  name: optional(Schema.String),
  key: Schema.String,
  optional: optional(Schema.Boolean)
})

/** Selects a field of the pod (downward API), e.g. `metadata.name`, `status.podIP`. */
export const ObjectFieldSelector = Schema.Struct({
  apiVersion: optional(Schema.String),
  fieldPath: Schema.String
})

/** Selects a container's resource request or limit (downward API). */
export const ResourceFieldSelector = Schema.Struct({
  containerName: optional(Schema.String),
  resource: Schema.String,
  divisor: optional(QuantitySchema)
})

/** Where an environment variable's value comes from. */
export const EnvVarSource = Schema.Struct({
  configMapKeyRef: optional(ConfigMapKeySelector),
  secretKeyRef: optional(SecretKeySelector),
  fieldRef: optional(ObjectFieldSelector),
  resourceFieldRef: optional(ResourceFieldSelector)
})

/** An environment variable: a literal value or a reference. */
export const EnvVar = Schema.Struct({
  name: Schema.String,
  value: optional(Schema.String),
  valueFrom: optional(EnvVarSource)
})

/** An environment variable. */
export type EnvVar = typeof EnvVar.Type

/** A whole ConfigMap or Secret to import as environment variables. */
export const EnvFromSource = Schema.Struct({
  prefix: optional(Schema.String),
  configMapRef: optional(Schema.Struct({ name: optional(Schema.String), optional: optional(Schema.Boolean) })),
  secretRef: optional(Schema.Struct({ name: optional(Schema.String), optional: optional(Schema.Boolean) }))
})

/** An environment import. */
export type EnvFromSource = typeof EnvFromSource.Type

// ---- Ports, resources, probes ----------------------------------------------------------------

/** Network protocols for ports. */
export const Protocol = Schema.Literal("TCP", "UDP", "SCTP")

/** A network protocol. */
export type Protocol = typeof Protocol.Type

/** A port a container listens on. */
export const ContainerPort = Schema.Struct({
  name: optional(Schema.String),
  containerPort: PortNumber,
  hostPort: optional(PortNumber),
  protocol: optional(Protocol),
  hostIP: optional(Schema.String)
})

/** A container port. */
export type ContainerPort = typeof ContainerPort.Type

/** A container's resource requests (scheduling) and limits (enforcement). */
export const ResourceRequirements = Schema.Struct({
  requests: optional(ResourceList),
  limits: optional(ResourceList)
})

/** Resource requests and limits. */
export type ResourceRequirements = typeof ResourceRequirements.Type

/** Runs a command in the container. */
export const ExecAction = Schema.Struct({ command: optional(Schema.Array(Schema.String)) })

/** One HTTP header for an HTTP probe. */
export const HTTPHeader = Schema.Struct({ name: Schema.String, value: Schema.String })

/** Performs an HTTP GET; success is a 2xx or 3xx status. */
export const HTTPGetAction = Schema.Struct({
  path: optional(Schema.String),
  port: IntOrString,
  host: optional(Schema.String),
  scheme: optional(Schema.Literal("HTTP", "HTTPS")),
  httpHeaders: optional(Schema.Array(HTTPHeader))
})

/** Opens a TCP connection; success is a completed handshake. */
export const TCPSocketAction = Schema.Struct({
  port: IntOrString,
  host: optional(Schema.String)
})

/** Calls the gRPC health-checking protocol. */
export const GRPCAction = Schema.Struct({
  port: PortNumber,
  service: optional(Schema.String)
})

/** Waits for a duration (a `preStop` hook that lets load balancers drain). */
export const SleepAction = Schema.Struct({ seconds: Int64 })

/** A liveness, readiness or startup check. Exactly one handler is expected. */
export const Probe = Schema.Struct({
  exec: optional(ExecAction),
  httpGet: optional(HTTPGetAction),
  tcpSocket: optional(TCPSocketAction),
  grpc: optional(GRPCAction),
  initialDelaySeconds: optional(NonNegativeInt32),
  periodSeconds: optional(NonNegativeInt32),
  timeoutSeconds: optional(NonNegativeInt32),
  successThreshold: optional(NonNegativeInt32),
  failureThreshold: optional(NonNegativeInt32),
  terminationGracePeriodSeconds: optional(Int64)
})

/** A container probe. */
export type Probe = typeof Probe.Type

/** An action run by a lifecycle hook. */
export const LifecycleHandler = Schema.Struct({
  exec: optional(ExecAction),
  httpGet: optional(HTTPGetAction),
  tcpSocket: optional(TCPSocketAction),
  sleep: optional(SleepAction)
})

/** Hooks run after a container starts and before it is stopped. */
export const Lifecycle = Schema.Struct({
  postStart: optional(LifecycleHandler),
  preStop: optional(LifecycleHandler)
})

// ---- Paths inside volumes ------------------------------------------------------------------

/**
 * What is wrong with a path that must stay inside its volume (kube's validateLocalDescendingPath):
 * a file written at `../x` or `/x`, or a mount of such a subPath, would reach the node outside
 * the pod's directory.
 */
export const localDescendingPath = (path: string): ReadonlyArray<string> => [
  ...(path.startsWith("/") ? ["must be a relative path"] : []),
  ...(path.split("/").includes("..") ? ["must not contain '..'"] : [])
]

/** As `localDescendingPath`, and not starting with `..`: the kubelet keeps `..data` and its siblings (ValidateLocalNonReservedPath). */
export const localNonReservedPath = (path: string): ReadonlyArray<string> => [
  ...localDescendingPath(path),
  ...(path.startsWith("..") && !path.startsWith("../") ? ["must not start with '..'"] : [])
]

/** A file's path inside a configMap, secret, downwardAPI or projected volume. */
const VolumeFilePath = Schema.String.pipe(Schema.filter((p) => (p.length === 0 ? "Required value" : details(localNonReservedPath(p)))))

/** A file mode: 0 to 0777, as Kubernetes checks `mode` and `defaultMode`. */
const FileMode = Int32.pipe(Schema.filter((m) => (m >= 0 && m <= 0o777) || "must be a number between 0 and 0777 (octal), both inclusive"))

/** Mounts a pod volume into a container. */
export const VolumeMount = Schema.Struct({
  name: Schema.String,
  mountPath: RequiredString,
  readOnly: optional(Schema.Boolean),
  subPath: optional(Schema.String.pipe(Schema.filter((p) => details(localDescendingPath(p))))),
  subPathExpr: optional(Schema.String.pipe(Schema.filter((p) => details(localDescendingPath(p))))),
  mountPropagation: optional(Schema.Literal("None", "HostToContainer", "Bidirectional"))
}).pipe(
  Schema.filter((m) =>
    m.subPath !== undefined && m.subPath !== "" && m.subPathExpr !== undefined && m.subPathExpr !== ""
      ? { path: ["subPathExpr"], message: "subPathExpr and subPath are mutually exclusive" }
      : true
  )
)

/** A volume mount. */
export type VolumeMount = typeof VolumeMount.Type

/** When to pull a container image. */
export const PullPolicy = Schema.Literal("Always", "IfNotPresent", "Never")

/** A seccomp profile selection. */
export const SeccompProfile = Schema.Struct({
  type: Schema.Literal("RuntimeDefault", "Unconfined", "Localhost"),
  localhostProfile: optional(Schema.String)
})

/** Linux capabilities to add to or drop from a container. */
export const Capabilities = Schema.Struct({
  add: optional(Schema.Array(Schema.String)),
  drop: optional(Schema.Array(Schema.String))
})

/** Container-level security settings (the commonly used subset of Kubernetes'). */
export const SecurityContext = Schema.Struct({
  runAsUser: optional(Int64),
  runAsGroup: optional(Int64),
  runAsNonRoot: optional(Schema.Boolean),
  readOnlyRootFilesystem: optional(Schema.Boolean),
  privileged: optional(Schema.Boolean),
  allowPrivilegeEscalation: optional(Schema.Boolean),
  capabilities: optional(Capabilities),
  seccompProfile: optional(SeccompProfile)
})

/** Container security settings. */
export type SecurityContext = typeof SecurityContext.Type

// Container and volume names are DNS-1123 labels: they appear in paths, env names and DNS.
const LabelName = Schema.String.pipe(Schema.filter((n) => details(Validation.isDNS1123Label(n))))

/**
 * A container. `image` is required: Kubernetes lets a higher-level controller fill it in, but
 * Fleet has no such controller, so an image-less container could never start.
 */
export const Container = Schema.Struct({
  name: LabelName,
  image: RequiredString,
  command: optional(Schema.Array(Schema.String)),
  args: optional(Schema.Array(Schema.String)),
  workingDir: optional(Schema.String),
  env: optional(Schema.Array(EnvVar)),
  envFrom: optional(Schema.Array(EnvFromSource)),
  ports: optional(Schema.Array(ContainerPort)),
  resources: optional(ResourceRequirements),
  livenessProbe: optional(Probe),
  readinessProbe: optional(Probe),
  startupProbe: optional(Probe),
  lifecycle: optional(Lifecycle),
  volumeMounts: optional(Schema.Array(VolumeMount)),
  imagePullPolicy: optional(PullPolicy),
  securityContext: optional(SecurityContext),
  terminationMessagePath: optional(Schema.String),
  terminationMessagePolicy: optional(Schema.Literal("File", "FallbackToLogsOnError")),
  stdin: optional(Schema.Boolean),
  stdinOnce: optional(Schema.Boolean),
  tty: optional(Schema.Boolean)
})

/** A container. */
export type Container = typeof Container.Type

// ---- Volumes ---------------------------------------------------------------------------------

/** Maps a ConfigMap/Secret key to a file path in a volume. */
export const KeyToPath = Schema.Struct({
  key: Schema.String,
  path: VolumeFilePath,
  mode: optional(FileMode)
})

/** Scratch space that lives as long as the pod. */
export const EmptyDirVolumeSource = Schema.Struct({
  medium: optional(Schema.String),
  sizeLimit: optional(QuantitySchema)
})

/** A path on the node's filesystem. */
export const HostPathVolumeSource = Schema.Struct({
  path: Schema.String.pipe(Schema.filter((p) => !p.split("/").includes("..") || "must not contain '..'")),
  type: optional(
    Schema.Literal("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")
  )
})

/** A ConfigMap's keys as files. */
export const ConfigMapVolumeSource = Schema.Struct({
  name: optional(Schema.String),
  items: optional(Schema.Array(KeyToPath)),
  defaultMode: optional(FileMode),
  optional: optional(Schema.Boolean)
})

/** A Secret's keys as files. */
export const SecretVolumeSource = Schema.Struct({
  secretName: optional(Schema.String),
  items: optional(Schema.Array(KeyToPath)),
  defaultMode: optional(FileMode),
  optional: optional(Schema.Boolean)
})

/** A claim on a PersistentVolume. */
export const PersistentVolumeClaimVolumeSource = Schema.Struct({
  claimName: Schema.String,
  readOnly: optional(Schema.Boolean)
})

/** Pod fields exposed as files (downward API). */
export const DownwardAPIVolumeFile = Schema.Struct({
  path: VolumeFilePath,
  fieldRef: optional(ObjectFieldSelector),
  resourceFieldRef: optional(ResourceFieldSelector),
  mode: optional(FileMode)
})

/** One source merged into a projected volume. */
export const VolumeProjection = Schema.Struct({
  configMap: optional(
    Schema.Struct({ name: optional(Schema.String), items: optional(Schema.Array(KeyToPath)), optional: optional(Schema.Boolean) })
  ),
  secret: optional(
    Schema.Struct({ name: optional(Schema.String), items: optional(Schema.Array(KeyToPath)), optional: optional(Schema.Boolean) })
  ),
  downwardAPI: optional(Schema.Struct({ items: optional(Schema.Array(DownwardAPIVolumeFile)) })),
  serviceAccountToken: optional(
    Schema.Struct({ audience: optional(Schema.String), expirationSeconds: optional(Int64), path: VolumeFilePath })
  )
})

/** Several sources merged into one directory (e.g. the service account token volume). */
export const ProjectedVolumeSource = Schema.Struct({
  sources: optional(Schema.Array(VolumeProjection)),
  defaultMode: optional(FileMode)
})

const volumeSourceFields = [
  "emptyDir",
  "hostPath",
  "configMap",
  "secret",
  "persistentVolumeClaim",
  "projected",
  "downwardAPI"
] as const

/**
 * A named volume the pod's containers can mount. At most one source may be set; none at all
 * is allowed because Kubernetes defaults that to `emptyDir` (a later defaulting stage).
 */
export const Volume = Schema.Struct({
  name: LabelName,
  emptyDir: optional(EmptyDirVolumeSource),
  hostPath: optional(HostPathVolumeSource),
  configMap: optional(ConfigMapVolumeSource),
  secret: optional(SecretVolumeSource),
  persistentVolumeClaim: optional(PersistentVolumeClaimVolumeSource),
  projected: optional(ProjectedVolumeSource),
  downwardAPI: optional(Schema.Struct({ items: optional(Schema.Array(DownwardAPIVolumeFile)), defaultMode: optional(FileMode) }))
}).pipe(
  Schema.filter(
    (v) => volumeSourceFields.filter((f) => v[f] !== undefined).length <= 1 || "Forbidden: may not specify more than 1 volume type"
  )
)

/** A pod volume. */
export type Volume = typeof Volume.Type

// ---- Scheduling ------------------------------------------------------------------------------

/** Operators of node selector requirements (adds numeric `Gt`/`Lt` to the label operators). */
export const NodeSelectorOperator = Schema.Literal("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

/** One requirement on a node's labels or fields. */
export const NodeSelectorRequirement = Schema.Struct({
  key: Schema.String,
  operator: NodeSelectorOperator,
  values: optional(Schema.Array(Schema.String))
})

/** A node selector requirement. */
export type NodeSelectorRequirement = typeof NodeSelectorRequirement.Type

/** Requirements that must all hold (AND). */
export const NodeSelectorTerm = Schema.Struct({
  matchExpressions: optional(Schema.Array(NodeSelectorRequirement)),
  matchFields: optional(Schema.Array(NodeSelectorRequirement))
})

/** A node selector term. */
export type NodeSelectorTerm = typeof NodeSelectorTerm.Type

/** Terms of which at least one must hold (OR). */
export const NodeSelector = Schema.Struct({
  nodeSelectorTerms: Schema.Array(NodeSelectorTerm)
})

/** A weighted term for preferred scheduling. */
export const PreferredSchedulingTerm = Schema.Struct({
  weight: Int32,
  preference: NodeSelectorTerm
})

/** Constraints on which nodes a pod may or prefers to run on. */
export const NodeAffinity = Schema.Struct({
  requiredDuringSchedulingIgnoredDuringExecution: optional(NodeSelector),
  preferredDuringSchedulingIgnoredDuringExecution: optional(Schema.Array(PreferredSchedulingTerm))
})

/** Node affinity. */
export type NodeAffinity = typeof NodeAffinity.Type

/** Pods (selected by labels, in some namespaces) to be co-located with or kept away from. */
export const PodAffinityTerm = Schema.Struct({
  labelSelector: optional(LabelSelector),
  namespaceSelector: optional(LabelSelector),
  namespaces: optional(Schema.Array(Schema.String)),
  topologyKey: RequiredString
})

/** A pod affinity term. */
export type PodAffinityTerm = typeof PodAffinityTerm.Type

/** A weighted pod affinity term (weight 1-100). */
export const WeightedPodAffinityTerm = Schema.Struct({
  weight: Int32.pipe(Schema.filter((w) => (w >= 1 && w <= 100) || "must be in the range 1-100")),
  podAffinityTerm: PodAffinityTerm
})

/** Pod affinity or anti-affinity rules. */
export const PodAffinity = Schema.Struct({
  requiredDuringSchedulingIgnoredDuringExecution: optional(Schema.Array(PodAffinityTerm)),
  preferredDuringSchedulingIgnoredDuringExecution: optional(Schema.Array(WeightedPodAffinityTerm))
})

/** Pod affinity or anti-affinity. */
export type PodAffinity = typeof PodAffinity.Type

/** All affinity rules of a pod. */
export const Affinity = Schema.Struct({
  nodeAffinity: optional(NodeAffinity),
  podAffinity: optional(PodAffinity),
  podAntiAffinity: optional(PodAffinity)
})

/** Affinity rules. */
export type Affinity = typeof Affinity.Type

/** Lets a pod schedule onto (or stay on) nodes with a matching taint. */
export const Toleration = Schema.Struct({
  key: optional(Schema.String),
  operator: optional(Schema.Literal("Exists", "Equal")),
  value: optional(Schema.String),
  effect: optional(TaintEffect),
  tolerationSeconds: optional(Int64)
})

/** A toleration. */
export type Toleration = typeof Toleration.Type

/** Spreads matching pods evenly across topology domains (zones, nodes). */
export const TopologySpreadConstraint = Schema.Struct({
  maxSkew: Int32.pipe(Schema.filter((n) => n > 0 || "must be greater than zero")),
  topologyKey: RequiredString,
  whenUnsatisfiable: Schema.Literal("DoNotSchedule", "ScheduleAnyway"),
  labelSelector: optional(LabelSelector),
  minDomains: optional(Int32),
  nodeAffinityPolicy: optional(Schema.Literal("Honor", "Ignore")),
  nodeTaintsPolicy: optional(Schema.Literal("Honor", "Ignore")),
  matchLabelKeys: optional(Schema.Array(Schema.String))
})

/** A topology spread constraint. */
export type TopologySpreadConstraint = typeof TopologySpreadConstraint.Type

/** Pod-level security settings (the commonly used subset of Kubernetes'). */
export const PodSecurityContext = Schema.Struct({
  runAsUser: optional(Int64),
  runAsGroup: optional(Int64),
  runAsNonRoot: optional(Schema.Boolean),
  fsGroup: optional(Int64),
  supplementalGroups: optional(Schema.Array(Int64)),
  seccompProfile: optional(SeccompProfile),
  sysctls: optional(Schema.Array(Schema.Struct({ name: Schema.String, value: Schema.String })))
})

/** Extra `/etc/hosts` entries. */
export const HostAlias = Schema.Struct({
  ip: Schema.String,
  hostnames: optional(Schema.Array(Schema.String))
})

/** Restart policies for a pod's containers. */
export const RestartPolicy = Schema.Literal("Always", "OnFailure", "Never")

/** DNS policies for a pod. */
export const DNSPolicy = Schema.Literal("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")

/** The desired state of a pod. `containers` must be non-empty. */
export const PodSpec = Schema.Struct({
  containers: nonEmptyArray(Container),
  initContainers: optional(Schema.Array(Container)),
  volumes: optional(Schema.Array(Volume)),
  restartPolicy: optional(RestartPolicy),
  terminationGracePeriodSeconds: optional(NonNegativeInt64),
  activeDeadlineSeconds: optional(Int64.pipe(Schema.filter((n) => n > 0 || "must be greater than zero"))),
  dnsPolicy: optional(DNSPolicy),
  nodeSelector: optional(StringMap),
  serviceAccountName: optional(Schema.String),
  automountServiceAccountToken: optional(Schema.Boolean),
  nodeName: optional(Schema.String),
  hostNetwork: optional(Schema.Boolean),
  hostPID: optional(Schema.Boolean),
  hostIPC: optional(Schema.Boolean),
  shareProcessNamespace: optional(Schema.Boolean),
  securityContext: optional(PodSecurityContext),
  imagePullSecrets: optional(Schema.Array(LocalObjectReference)),
  hostname: optional(Schema.String),
  subdomain: optional(Schema.String),
  affinity: optional(Affinity),
  schedulerName: optional(Schema.String),
  tolerations: optional(Schema.Array(Toleration)),
  hostAliases: optional(Schema.Array(HostAlias)),
  priorityClassName: optional(Schema.String),
  priority: optional(Int32),
  preemptionPolicy: optional(Schema.Literal("PreemptLowerPriority", "Never")),
  runtimeClassName: optional(Schema.String),
  enableServiceLinks: optional(Schema.Boolean),
  topologySpreadConstraints: optional(Schema.Array(TopologySpreadConstraint)),
  readinessGates: optional(Schema.Array(Schema.Struct({ conditionType: Schema.String }))),
  overhead: optional(ResourceList)
})

/** A pod spec. */
export type PodSpec = typeof PodSpec.Type

// ---- Status ----------------------------------------------------------------------------------

/** The lifecycle phase of a pod. */
export const PodPhase = Schema.Literal("Pending", "Running", "Succeeded", "Failed", "Unknown")

/** The lifecycle phase of a pod. */
export type PodPhase = typeof PodPhase.Type

/** A pod condition such as `PodScheduled` or `Ready` (custom readiness gates allow any type). */
export const PodCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  lastProbeTime: optional(Time),
  lastTransitionTime: optional(Time),
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** A pod condition. */
export type PodCondition = typeof PodCondition.Type

/** A container not yet running, and why (e.g. `ContainerCreating`, `ImagePullBackOff`). */
export const ContainerStateWaiting = Schema.Struct({
  reason: optional(Schema.String),
  message: optional(Schema.String)
})

/** A running container. */
export const ContainerStateRunning = Schema.Struct({
  startedAt: optional(Time)
})

/** A container that exited. */
export const ContainerStateTerminated = Schema.Struct({
  exitCode: Int32,
  signal: optional(Int32),
  reason: optional(Schema.String),
  message: optional(Schema.String),
  startedAt: optional(Time),
  finishedAt: optional(Time),
  containerID: optional(Schema.String)
})

/** A container's state: at most one of waiting, running, terminated. */
export const ContainerState = Schema.Struct({
  waiting: optional(ContainerStateWaiting),
  running: optional(ContainerStateRunning),
  terminated: optional(ContainerStateTerminated)
})

/** A container's state. */
export type ContainerState = typeof ContainerState.Type

/** What the node agent observed about one container. */
export const ContainerStatus = Schema.Struct({
  name: Schema.String,
  state: optional(ContainerState),
  lastState: optional(ContainerState),
  ready: Schema.Boolean,
  restartCount: NonNegativeInt32,
  image: Schema.String,
  imageID: Schema.String,
  containerID: optional(Schema.String),
  started: optional(Schema.Boolean)
})

/** A container status. */
export type ContainerStatus = typeof ContainerStatus.Type

/** One IP address of a pod or host. */
export const IPAddress = Schema.Struct({ ip: Schema.String })

/** Quality-of-service classes, derived from requests and limits. */
export const QOSClass = Schema.Literal("Guaranteed", "Burstable", "BestEffort")

/** The observed state of a pod. */
export const PodStatus = Schema.Struct({
  phase: optional(PodPhase),
  conditions: optional(Schema.Array(PodCondition)),
  message: optional(Schema.String),
  reason: optional(Schema.String),
  nominatedNodeName: optional(Schema.String),
  hostIP: optional(Schema.String),
  hostIPs: optional(Schema.Array(IPAddress)),
  podIP: optional(Schema.String),
  podIPs: optional(Schema.Array(IPAddress)),
  startTime: optional(Time),
  initContainerStatuses: optional(Schema.Array(ContainerStatus)),
  containerStatuses: optional(Schema.Array(ContainerStatus)),
  qosClass: optional(QOSClass),
  /**
   * Fleet: the host ports the agent gave the pod's declared container ports in host-network mode
   * (each container port gets a free host port, passed to the process as PORT / FLEET_PORT_<NAME>).
   * Endpoints then carry hostIP:hostPort. Absent when pods have their own network.
   */
  hostPorts: optional(
    Schema.Array(
      Schema.Struct({
        containerName: Schema.String,
        name: optional(Schema.String),
        containerPort: Int32,
        protocol: optional(Protocol),
        hostPort: Int32
      })
    )
  )
})

/** A pod status. */
export type PodStatus = typeof PodStatus.Type

/** The `Pod` kind. */
export const Pod = Schema.Struct({
  apiVersion: Schema.Literal("v1"),
  kind: Schema.Literal("Pod"),
  metadata: ObjectMeta,
  spec: PodSpec,
  status: optional(PodStatus)
})

/** A Pod object. */
export type Pod = typeof Pod.Type

/** A Pod as JSON (quantities may be numbers, optional fields may be `null`). */
export type PodEncoded = typeof Pod.Encoded

/** The pod a workload controller stamps out: metadata (labels) and spec. */
export const PodTemplateSpec = Schema.Struct({
  metadata: optional(ObjectMeta),
  spec: PodSpec
})

/** A pod template. */
export type PodTemplateSpec = typeof PodTemplateSpec.Type
