/**
 * The Runtime port: what the node agent asks of a container runtime, i.e. the kbox API of
 * DESIGN §8 as TypeScript. `kbox-client` speaks it over a Unix socket to `koder-fleet box`
 * (or a real kbox daemon); `MemoryRuntime` simulates it for the agent's unit tests.
 *
 * Shape, and why:
 * - Two levels like the CRI: a **sandbox** per pod (shared namespaces, hostname, network,
 *   pod-level cgroup) and **containers** inside it. A container is one run of one process
 *   tree: it goes `created → running → exited` once and is never restarted in place. The agent
 *   restarts a container by creating a new one with `attempt + 1`, keeping the exited one
 *   (for `previous` logs and `lastState`) until it removes it. This keeps the runtime dumb and
 *   the restart policy (backoff, counts) in the agent's pure sync decision.
 * - Everything the agent needs to re-adopt after its own restart is *in the runtime*: sandboxes
 *   and containers carry the pod's identity (`podUid`, namespace, name), the container name,
 *   the attempt and free-form labels, and `list` filters on them. The agent keeps no state of
 *   its own about what it started; it lists.
 * - Records are plain JSON-safe data (the wire format of the kbox API is these very Schemas):
 *   timestamps are RFC 3339 strings with milliseconds, durations are named with their unit
 *   (`gracePeriodMs`, `timeoutMs`; `sinceSeconds` keeps its Kubernetes name).
 * - Calls are idempotent where a retry after a lost answer must be safe: `stop` of an exited
 *   container and `remove` of one that is already gone succeed. `create` cannot be: it fails
 *   `AlreadyExists` (carrying the existing id) for a second sandbox of a pod uid or a second
 *   container with the same (sandbox, name, attempt), so a retried create never duplicates.
 */
import { Context, type Effect, Schema, type Stream } from "effect"
import type { AlreadyExists, Invalid, NotFound, Unavailable, Unsupported } from "./RuntimeError.js"
import type * as StreamSession from "./StreamSession.js"

const opt = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })
const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })

// Errors: defined in the runtime layer's error module (they cross the wire, hence
// Schema.TaggedError); re-exported so `Runtime.NotFound`, `Runtime.RuntimeError`, ... stay.
export { AlreadyExists, Invalid, NotFound, ObjectKind, type RuntimeError, Unavailable, Unsupported } from "./RuntimeError.js"

// ---------------------------------------------------------------------------------------------
// Info
// ---------------------------------------------------------------------------------------------

/** Capability flags: what this runtime really does, so the agent adapts instead of assuming. */
export const Capabilities = Schema.Struct({
  /** `none`: plain host processes; `namespaces`: Linux namespaces per pod; `oci`: OCI containers. */
  isolation: Schema.Literal("none", "namespaces", "oci"),
  /** The namespaces each pod sandbox gets (empty when `isolation` is `none`). */
  namespaces: Schema.Array(Schema.Literal("pid", "mount", "uts", "ipc", "net")),
  /** The cgroup hierarchy the limits and stats use; `none`: limits are ignored, stats from /proc. */
  cgroups: Schema.Literal("none", "v1", "v2"),
  /** Which of `ContainerSpec.resources` are enforced. */
  limits: Schema.Struct({ cpu: Schema.Boolean, memory: Schema.Boolean, pids: Schema.Boolean }),
  /** `mounts` are bind-mounted at `containerPath`; false: the agent must point at `hostPath`s. */
  bindMounts: Schema.Boolean,
  /** `user` is honoured (the runtime runs as root). */
  runAsUser: Schema.Boolean,
  /** Sandboxes with `network: "pod"` get their own network namespace and IP. */
  podNetwork: Schema.Boolean,
  /** Checkpoint/restore (CRIU) of containers. */
  checkpoint: Schema.Boolean,
  /** NetworkPolicy enforcement inside pod network namespaces. */
  networkPolicy: Schema.Boolean,
  /** The drivers this daemon was built with; `Info.driver` is the one serving. */
  drivers: Schema.Array(Schema.String),
  /**
   * `images.pull` fetches images from OCI registries and a container's `image` is what it runs.
   * Optional on the wire: a box from before pulls answers without it (false).
   */
  imagePull: opt(Schema.Boolean)
})
/** Capability flags. */
export type Capabilities = typeof Capabilities.Type

/** `GET /v1/info`. */
export const Info = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  /** The driver serving this socket: `process`, `runc`, ... */
  driver: Schema.String,
  capabilities: Capabilities
})
/** Runtime identity and capabilities. */
export type Info = typeof Info.Type

// ---------------------------------------------------------------------------------------------
// Sandboxes
// ---------------------------------------------------------------------------------------------

/** A declared pod port; `hostPort` is the host side when the agent assigned or the pod asked one. */
export const PortMapping = Schema.Struct({
  name: opt(Schema.String),
  containerPort: Schema.Number,
  hostPort: opt(Schema.Number),
  protocol: opt(Schema.Literal("TCP", "UDP", "SCTP"))
})
/** A declared pod port. */
export type PortMapping = typeof PortMapping.Type

/** Resource limits; absent fields are unlimited. Enforced as `Capabilities.limits` says. */
export const Resources = Schema.Struct({
  /** CPU limit in millicores (1000 = one core), enforced as a CFS quota. */
  cpuMillis: opt(Schema.Number),
  /** CPU request in millicores, used as a relative weight (shares) when cgroups are there. */
  cpuRequestMillis: opt(Schema.Number),
  /** Memory limit in bytes; exceeding it OOM-kills the container (exit 137, `OOMKilled`). */
  memoryBytes: opt(Schema.Number),
  /** Maximum number of processes/threads. */
  pids: opt(Schema.Number)
})
/** Resource limits. */
export type Resources = typeof Resources.Type

/** `POST /v1/sandboxes`: one per pod. */
export const SandboxSpec = Schema.Struct({
  podUid: Schema.String,
  name: Schema.String,
  namespace: Schema.String,
  /** The hostname inside the pod (its own UTS namespace when isolated); default the pod name. */
  hostname: opt(Schema.String),
  /** `host`: the host's network; `pod`: its own namespace and IP (only if `podNetwork`). */
  network: Schema.Literal("host", "pod"),
  /** `network: pod`: the node's pod CIDR (`Node.spec.podCIDR`) the pod's IP comes from. */
  podCidr: opt(Schema.String),
  /** `network: pod`: the pod's resolver (`/etc/resolv.conf`), like the CRI's DNSConfig; absent: the host's. */
  dns: opt(
    Schema.Struct({
      nameservers: Schema.Array(Schema.String),
      searches: opt(Schema.Array(Schema.String)),
      options: opt(Schema.Array(Schema.String))
    })
  ),
  ports: opt(Schema.Array(PortMapping)),
  /** Pod-level limits (the pod cgroup), on top of each container's own. */
  resources: opt(Resources),
  labels: opt(StringMap)
})
/** A sandbox request. */
export type SandboxSpec = typeof SandboxSpec.Type

/** A pod's sandbox as the runtime holds it. */
export const Sandbox = Schema.Struct({
  id: Schema.String,
  spec: SandboxSpec,
  /** `ready` while its namespaces are held; `notready` if they were lost (e.g. host reboot). */
  state: Schema.Literal("ready", "notready"),
  /** The pod IP when it has its own network namespace; absent in host network mode. */
  ip: opt(Schema.String),
  /** The uid the runtime allocated for the pod: its containers' without `user` (for its volumes' owner). */
  uid: opt(Schema.Number),
  createdAt: Schema.String
})
/** A pod's sandbox. */
export type Sandbox = typeof Sandbox.Type

/** Filter of `sandboxes.list`: all given fields must match. */
export interface SandboxFilter {
  readonly podUid?: string
  readonly labels?: Readonly<Record<string, string>>
}

// ---------------------------------------------------------------------------------------------
// Containers
// ---------------------------------------------------------------------------------------------

/** A host directory made visible at `containerPath` (bind mount when `bindMounts`). */
export const Mount = Schema.Struct({
  hostPath: Schema.String,
  containerPath: Schema.String,
  readOnly: opt(Schema.Boolean)
})
/** A mount. */
export type Mount = typeof Mount.Type

/** Who the process runs as (numeric, like Kubernetes `runAsUser`/`runAsGroup`). */
export const User = Schema.Struct({
  uid: Schema.Number,
  gid: opt(Schema.Number),
  supplementalGroups: opt(Schema.Array(Schema.Number))
})
/** A process identity. */
export type User = typeof User.Type

/**
 * How a container is confined: the pod's and container's `securityContext`, resolved by the agent
 * (container fields over pod fields). A spec without it runs as the runtime always did (as
 * `user`, or the runtime's own user, with the runtime's capabilities); the agent always sends it.
 */
export const Security = Schema.Struct({
  /** Refuse to run as uid 0 (Invalid, "container has runAsNonRoot and image will run as root"). */
  runAsNonRoot: opt(Schema.Boolean),
  /** All capabilities, as the runtime's own user (root unless `user` says otherwise). */
  privileged: opt(Schema.Boolean),
  /** Capability names (`NET_BIND_SERVICE`, `CAP_` prefix optional, `ALL`) on top of / off the default set. */
  capabilities: opt(Schema.Struct({ add: opt(Schema.Array(Schema.String)), drop: opt(Schema.Array(Schema.String)) })),
  /** `false`: the `no_new_privs` bit (set anyway for a process that is not root). */
  allowPrivilegeEscalation: opt(Schema.Boolean),
  /** The root filesystem read-only for the container (its mounts keep their own modes). */
  readOnlyRootFilesystem: opt(Schema.Boolean),
  /** Without `user`: the primary group of the allocated uid (default: the uid's own number). */
  runAsGroup: opt(Schema.Number),
  /** Without `user`: supplementary groups (`supplementalGroups` and `fsGroup`). */
  supplementalGroups: opt(Schema.Array(Schema.Number))
})
/** How a container is confined. */
export type Security = typeof Security.Type

/** Well-known label keys the agent puts on sandboxes and containers to re-adopt them by `list`. */
export const Labels = {
  podUid: "fleet.koder.dev/pod-uid",
  podNamespace: "fleet.koder.dev/pod-namespace",
  podName: "fleet.koder.dev/pod-name",
  containerName: "fleet.koder.dev/container-name",
  restartAttempt: "fleet.koder.dev/restart-attempt",
  /** Hash of the container's spec in the pod, to notice a changed spec. */
  specHash: "fleet.koder.dev/spec-hash"
} as const

/** `POST /v1/containers`. */
export const ContainerSpec = Schema.Struct({
  sandboxId: Schema.String,
  /** The container's name in the pod; unique per sandbox together with `attempt`. */
  name: Schema.String,
  /** 0 for the first run, +1 for each restart (the agent's restartCount). */
  attempt: Schema.Number,
  /**
   * `NAME:TAG` or `NAME@sha256:...` of an imported image. Optional for the `process` driver:
   * without an image, `command` + `args` run on the host's filesystem.
   */
  image: opt(Schema.String),
  /** argv[0..]: the executable (resolved on PATH) and its leading arguments. */
  command: Schema.Array(Schema.String),
  /** Further arguments appended to `command`. */
  args: opt(Schema.Array(Schema.String)),
  /** The complete environment (nothing inherited from the runtime). */
  env: opt(StringMap),
  workingDir: opt(Schema.String),
  /** The process's identity; absent with `security`: a uid the runtime allocates for the pod. */
  user: opt(User),
  security: opt(Security),
  mounts: opt(Schema.Array(Mount)),
  resources: opt(Resources),
  /** The signal `stop` sends first (default `SIGTERM`). */
  stopSignal: opt(Schema.String),
  labels: opt(StringMap),
  /** Free-form notes kept with the container (not filterable). */
  annotations: opt(StringMap)
})
/** A container request. */
export type ContainerSpec = typeof ContainerSpec.Type

/** A container's lifecycle state. It only moves forward: created → running → exited. */
export const ContainerState = Schema.Literal("created", "running", "exited")
/** A container's lifecycle state. */
export type ContainerState = typeof ContainerState.Type

/**
 * Why a container exited, Kubernetes' `terminated.reason` vocabulary: `Completed` (exit 0),
 * `Error` (non-zero, including death by a signal), `OOMKilled` (the memory limit), `StartError`
 * (could not be started: command not found, wrong user or working directory), `Lost` (the
 * runtime lost track of the process and its exit status, e.g. after a host reboot).
 */
export const ExitReason = Schema.Literal("Completed", "Error", "OOMKilled", "StartError", "Lost")
/** Why a container exited. */
export type ExitReason = typeof ExitReason.Type

/** What a container is doing (`GET /v1/containers/{id}`'s `status`). */
export const ContainerStatus = Schema.Struct({
  state: ContainerState,
  /** The host pid of the container's main process while running. */
  pid: opt(Schema.Number),
  /** Exit code once exited; 128 + n for death by signal n (137 for SIGKILL), like a shell. */
  exitCode: opt(Schema.Number),
  /** The signal that ended it, by name (`SIGKILL`), when it died of one. */
  signal: opt(Schema.String),
  reason: opt(ExitReason),
  /** Human detail for the reason (e.g. the start error). */
  message: opt(Schema.String),
  startedAt: opt(Schema.String),
  finishedAt: opt(Schema.String)
})
/** A container's status. */
export type ContainerStatus = typeof ContainerStatus.Type

/** A container as the runtime holds it. */
export const Container = Schema.Struct({
  id: Schema.String,
  spec: ContainerSpec,
  status: ContainerStatus,
  createdAt: Schema.String,
  /** What it runs, pinned: `REPOSITORY@sha256:<hex>` of a pulled image, or `sha256:<hex>` of an imported one (the pod's `imageID`). */
  imageRef: opt(Schema.String)
})
/** A container. */
export type Container = typeof Container.Type

/** Filter of `containers.list`: all given fields must match. */
export interface ContainerFilter {
  readonly sandboxId?: string
  readonly name?: string
  readonly state?: ContainerState
  /** Every pair must be among the container's labels. */
  readonly labels?: Readonly<Record<string, string>>
}

/** `POST /v1/containers/{id}/exec`: run a command in the container's context. */
export const ExecRequest = Schema.Struct({
  command: Schema.Array(Schema.String),
  /** Kill the command after this long; the result then has `timedOut` and exit code 137. */
  timeoutMs: opt(Schema.Number),
  /** Added to (and overriding) the container's environment. */
  env: opt(StringMap),
  /** Default: the container's working directory. */
  workingDir: opt(Schema.String),
  /** Written to the command's standard input, then closed. */
  stdin: opt(Schema.String)
})
/** An exec request. */
export type ExecRequest = typeof ExecRequest.Type

/** The outcome of an exec: it always "succeeds" when the command ran, whatever its exit code. */
export const ExecResult = Schema.Struct({
  exitCode: Schema.Number,
  stdout: Schema.String,
  stderr: Schema.String,
  timedOut: Schema.Boolean
})
/** The outcome of an exec. */
export type ExecResult = typeof ExecResult.Type

/** Options of `logs`, the Kubernetes pod log options the runtime can answer. */
export interface LogOptions {
  /** Keep the stream open and deliver new output until the container exits. */
  readonly follow?: boolean
  /** Only the last n lines (of what is retained) before following. */
  readonly tailLines?: number
  /** Only lines written in the last n seconds. */
  readonly sinceSeconds?: number
  /** Fill each chunk's `timestamp`. */
  readonly timestamps?: boolean
  /**
   * There is no `previous` here: the previous run is another container (same sandbox and name,
   * `attempt - 1`), whose logs the agent asks for by its id.
   */
}

/**
 * One line of output (with its `\n`; the last one may lack it while the line is unfinished).
 * Chunks come in the order the lines were written, stdout and stderr interleaved.
 */
export const LogChunk = Schema.Struct({
  stream: Schema.Literal("stdout", "stderr"),
  /** When the runtime saw the line (RFC 3339), present when `timestamps` was asked. */
  timestamp: opt(Schema.String),
  line: Schema.String
})
/** One line of output. */
export type LogChunk = typeof LogChunk.Type

/** A resource sample (`GET /v1/containers/{id}/stats`), the shape of metrics.k8s.io. */
export const Stats = Schema.Struct({
  timestamp: Schema.String,
  cpu: Schema.Struct({
    /** Cumulative CPU time in nanoseconds since the container started. */
    usageCoreNanoSeconds: Schema.Number,
    /** Average rate since the previous sample (or since start), in nano-cores (1e9 = a core). */
    usageNanoCores: Schema.Number
  }),
  memory: Schema.Struct({
    /** What the OOM killer and Kubernetes look at: usage minus inactive file cache. */
    workingSetBytes: Schema.Number,
    rssBytes: Schema.Number,
    /** The container's memory limit when enforced. */
    limitBytes: opt(Schema.Number)
  }),
  /** Processes/threads in the container. */
  pids: Schema.Number
})
/** A resource sample. */
export type Stats = typeof Stats.Type

/** One process of a container (`GET /v1/containers/{id}/processes`). */
export const Process = Schema.Struct({
  /** Host pid. */
  pid: Schema.Number,
  ppid: Schema.Number,
  /** The executable's name (`comm`). */
  command: Schema.String,
  /** Full argv when readable. */
  args: Schema.Array(Schema.String),
  rssBytes: Schema.Number,
  /** `R`, `S`, `D`, `Z`, ... as in /proc/<pid>/stat. */
  state: Schema.String,
  /** Its threads (`num_threads`). */
  threads: opt(Schema.Number),
  /** Bytes it made the storage layer read and write (/proc/<pid>/io `read_bytes`, `write_bytes`). */
  readBytes: opt(Schema.Number),
  writeBytes: opt(Schema.Number)
})
/** One process of a container. */
export type Process = typeof Process.Type

// ---------------------------------------------------------------------------------------------
// NetworkPolicy: the rules one pod's network namespace enforces, already resolved by the agent
// (peer pods as /32 or /128 CIDRs, named ports as numbers). Loopback and established/related
// traffic are always allowed; the runtime adds that itself.
// ---------------------------------------------------------------------------------------------

/** A port or port range (`port`..`endPort`) of one protocol; without `port`, every port of it. */
export const PolicyPort = Schema.Struct({
  protocol: Schema.Literal("TCP", "UDP", "SCTP"),
  port: opt(Schema.Number),
  endPort: opt(Schema.Number)
})
/** A port or port range. */
export type PolicyPort = typeof PolicyPort.Type

/** One allowed peer set: without `cidrs`, any peer; without `ports`, every port. */
export const PolicyAllow = Schema.Struct({
  cidrs: opt(Schema.Array(Schema.String)),
  /** Holes in `cidrs` (an ipBlock's `except`). */
  except: opt(Schema.Array(Schema.String)),
  ports: opt(Schema.Array(PolicyPort))
})
/** One allowed peer set. */
export type PolicyAllow = typeof PolicyAllow.Type

/** One direction: `isolated: false` allows everything; otherwise only what some `allow` entry matches. */
export const PolicyDirection = Schema.Struct({
  isolated: Schema.Boolean,
  allow: Schema.Array(PolicyAllow)
})
/** One direction of a pod's rules. */
export type PolicyDirection = typeof PolicyDirection.Type

/** `POST /v1/containers/{id}/network-policy`: the pod's whole policy, replacing the previous one atomically. */
export const NetworkPolicyRules = Schema.Struct({
  ingress: PolicyDirection,
  egress: PolicyDirection
})
/** A pod's resolved NetworkPolicy. */
export type NetworkPolicyRules = typeof NetworkPolicyRules.Type

/** The answer of `applyNetworkPolicy`: how many firewall rules the pod now has. */
export const NetworkPolicyApplied = Schema.Struct({ rules: Schema.Number })
/** The answer of `applyNetworkPolicy`. */
export type NetworkPolicyApplied = typeof NetworkPolicyApplied.Type

// ---------------------------------------------------------------------------------------------
// Images
// ---------------------------------------------------------------------------------------------

/**
 * An image's own defaults (its OCI config), which the agent merges with a container's spec as
 * Kubernetes does: `command` replaces `entrypoint` (and drops `cmd`), `args` replaces `cmd`.
 */
export const ImageConfig = Schema.Struct({
  entrypoint: opt(Schema.Array(Schema.String)),
  cmd: opt(Schema.Array(Schema.String)),
  /** `KEY=VALUE`, as the OCI config has them; a container's own variables win. */
  env: opt(Schema.Array(Schema.String)),
  workingDir: opt(Schema.String),
  /** `uid`, `uid:gid`, `name` or `name:group`, as the image says. */
  user: opt(Schema.String)
})
/** An image's own defaults. */
export type ImageConfig = typeof ImageConfig.Type

/**
 * An image the runtime holds: an imported rootfs tarball (pinned by the tarball's sha256) or an
 * image pulled from a registry (pinned by its manifest's digest).
 */
export const Image = Schema.Struct({
  /** `NAME:TAG` references that point at it. */
  names: Schema.Array(Schema.String),
  /** `sha256:<hex>`: of the tarball (imported) or of the image's manifest (pulled). */
  digest: Schema.String,
  sizeBytes: Schema.Number,
  importedAt: Schema.String,
  /** `REPOSITORY@sha256:<hex>` of a pulled image: what `imageID` reports. */
  repoDigests: opt(Schema.Array(Schema.String)),
  /** A pulled image's config (an imported tarball has none). */
  config: opt(ImageConfig)
})
/** An image the runtime holds. */
export type Image = typeof Image.Type

/** `POST /v1/images/import`: a rootfs tarball already on the runtime's host. */
export const ImportRequest = Schema.Struct({
  /** `NAME:TAG`. */
  name: Schema.String,
  /** Path of the tarball on the runtime's host. */
  path: Schema.String
})
/** An image import request. */
export type ImportRequest = typeof ImportRequest.Type

/**
 * Registry credentials for one pull, from the pod's `imagePullSecrets` (the agent picks the ones
 * whose registry matches the image). Used for basic auth or to obtain a bearer token.
 */
export const PullCredential = Schema.Struct({
  username: opt(Schema.String),
  password: opt(Schema.String),
  /** An OAuth2 refresh token (`identitytoken` of a docker config). */
  identityToken: opt(Schema.String),
  /** A bearer token sent as is (`registrytoken`). */
  registryToken: opt(Schema.String)
})
/** Registry credentials. */
export type PullCredential = typeof PullCredential.Type

/** `POST /v1/images/pull`. */
export const PullRequest = Schema.Struct({
  /** A Kubernetes image reference: `[HOST[:PORT]/]PATH[:TAG][@sha256:<hex>]`. */
  image: Schema.String,
  /** `IfNotPresent`/`Never` use a held image; `Always` asks the registry (and fetches only what changed). */
  policy: Schema.Literal("Always", "IfNotPresent", "Never"),
  /** Tried in order until one is accepted; none: anonymous. */
  credentials: opt(Schema.Array(PullCredential))
})
/** An image pull request. */
export type PullRequest = typeof PullRequest.Type

/** The answer of a pull. */
export const PullResult = Schema.Struct({
  image: Image,
  /** Whether the registry was asked (false: the image was held and the policy allowed it). */
  pulled: Schema.Boolean,
  /** Bytes of blobs fetched (0 when every layer was cached). */
  fetchedBytes: Schema.Number,
  durationMs: Schema.Number
})
/** The answer of a pull. */
export type PullResult = typeof PullResult.Type

// ---------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------

/** Stop options. */
export interface StopOptions {
  /**
   * Time between the stop signal (SIGTERM) and SIGKILL of the whole process tree. 0 kills at
   * once. `stop` returns when the container has exited, with its final status.
   */
  readonly gracePeriodMs: number
}

/** A pod's sandbox operations. */
export interface Sandboxes {
  /** Create a pod's sandbox; `AlreadyExists` (with its id) if one exists for this `podUid`. */
  readonly create: (spec: SandboxSpec) => Effect.Effect<Sandbox, AlreadyExists | Invalid | Unavailable>
  readonly get: (id: string) => Effect.Effect<Sandbox, NotFound | Unavailable>
  readonly list: (filter?: SandboxFilter) => Effect.Effect<ReadonlyArray<Sandbox>, Unavailable>
  /**
   * Remove a sandbox and everything in it: its containers are killed (SIGKILL, whole process
   * trees) and removed. Stop them gracefully first. Succeeds if it is already gone.
   */
  readonly remove: (id: string) => Effect.Effect<void, Unavailable>
}

/** Container operations. */
export interface Containers {
  /** Create (not start) a container in a sandbox; returns its id. */
  readonly create: (spec: ContainerSpec) => Effect.Effect<string, NotFound | AlreadyExists | Invalid | Unavailable>
  /**
   * Start a created container. A start failure that is the workload's fault (command not found,
   * bad working directory or user) is not an error of the call: the container goes to `exited`
   * with reason `StartError`, as in Kubernetes, and `inspect` shows it.
   */
  readonly start: (id: string) => Effect.Effect<void, NotFound | Invalid | Unavailable>
  /** Stop signal, then SIGKILL after the grace period; returns the final status. Idempotent. */
  readonly stop: (id: string, options: StopOptions) => Effect.Effect<ContainerStatus, NotFound | Unavailable>
  /** Send a signal (`SIGHUP`, `SIGUSR1`, ... or a number) to the main process; `Invalid` unless running. */
  readonly signal: (id: string, signal: string) => Effect.Effect<void, NotFound | Invalid | Unavailable>
  /** Run a command in the running container's context (env, cwd, user, namespaces, cgroup). */
  readonly exec: (id: string, request: ExecRequest) => Effect.Effect<ExecResult, NotFound | Invalid | Unavailable>
  /**
   * Run a command in the running container's context with live streams (`kubectl exec -it`):
   * frames both ways until it ends (see StreamSession). `Unsupported` where the runtime cannot
   * stream (a TTY on a driver without pseudo-terminals).
   */
  readonly execStream: (id: string, request: StreamSession.ExecStreamRequest) => Effect.Effect<StreamSession.StreamSession, NotFound | Invalid | Unavailable | Unsupported>
  /** Attach to the running container's main process: its output from now on, and its stdin if it has one. */
  readonly attach: (id: string, request: StreamSession.AttachRequest) => Effect.Effect<StreamSession.StreamSession, NotFound | Invalid | Unavailable | Unsupported>
  /** Remove a container, killing its whole process tree if it runs, and its logs. Idempotent. */
  readonly remove: (id: string) => Effect.Effect<void, Unavailable>
  readonly list: (filter?: ContainerFilter) => Effect.Effect<ReadonlyArray<Container>, Unavailable>
  readonly inspect: (id: string) => Effect.Effect<Container, NotFound | Unavailable>
  /** Output lines; with `follow` the stream ends when the container exits. */
  readonly logs: (id: string, options?: LogOptions) => Stream.Stream<LogChunk, NotFound | Unavailable>
  /** A resource sample of a running container (`Invalid` when not running). */
  readonly stats: (id: string) => Effect.Effect<Stats, NotFound | Invalid | Unavailable>
  /** The processes of a running container (empty when not running). */
  readonly processes: (id: string) => Effect.Effect<ReadonlyArray<Process>, NotFound | Unavailable>
  /**
   * Enforce `rules` in the network namespace of the container's pod (any container of the pod
   * will do), replacing what was there atomically. `Unsupported` when this runtime cannot
   * (`capabilities.networkPolicy` is false, or the pod shares the host's network).
   */
  readonly applyNetworkPolicy: (
    id: string,
    rules: NetworkPolicyRules
  ) => Effect.Effect<NetworkPolicyApplied, NotFound | Invalid | Unavailable | Unsupported>
}

/** Image operations. */
export interface Images {
  readonly import: (request: ImportRequest) => Effect.Effect<Image, Invalid | Unavailable>
  /**
   * Make `request.image` present as its policy says. `NotFound` (kind image): the registry or
   * the node has no such image (`Never` and absent); `Invalid`: a malformed reference, refused
   * credentials, a digest that does not match; `Unavailable`: the registry cannot be reached;
   * `Unsupported`: this runtime runs no images (`capabilities.imagePull` is false).
   */
  readonly pull: (request: PullRequest) => Effect.Effect<PullResult, NotFound | Invalid | Unavailable | Unsupported>
  readonly list: Effect.Effect<ReadonlyArray<Image>, Unavailable>
}

/** The Runtime service. */
export interface RuntimeService {
  readonly info: Effect.Effect<Info, Unavailable>
  readonly sandboxes: Sandboxes
  readonly containers: Containers
  readonly images: Images
}

/** The Runtime port. */
export class Runtime extends Context.Tag("@koder/fleet-core/Runtime")<Runtime, RuntimeService>() {}

/** Does `labels` hold every pair of `selector`? (the `labels` filter of `list`). */
export const matchesLabels = (
  labels: Readonly<Record<string, string>> | undefined,
  selector: Readonly<Record<string, string>> | undefined
): boolean => {
  if (selector === undefined) return true
  for (const [k, v] of Object.entries(selector)) if (labels?.[k] !== v) return false
  return true
}

/** Does a container pass a filter? Shared by every implementation so they agree. */
export const matchesContainer = (c: Container, filter: ContainerFilter | undefined): boolean =>
  filter === undefined ||
  ((filter.sandboxId === undefined || c.spec.sandboxId === filter.sandboxId) &&
    (filter.name === undefined || c.spec.name === filter.name) &&
    (filter.state === undefined || c.status.state === filter.state) &&
    matchesLabels(c.spec.labels, filter.labels))

/** Does a sandbox pass a filter? */
export const matchesSandbox = (s: Pick<Sandbox, "spec">, filter: SandboxFilter | undefined): boolean =>
  filter === undefined ||
  ((filter.podUid === undefined || s.spec.podUid === filter.podUid) && matchesLabels(s.spec.labels, filter.labels))

/** The exit reason a plain exit code implies (no OOM or start error known). */
export const reasonOfExit = (exitCode: number): ExitReason => (exitCode === 0 ? "Completed" : "Error")
