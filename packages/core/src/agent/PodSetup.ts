/**
 * What a pod needs before its containers start: host ports (re-adopted from its containers or
 * its status, else allocated), a sandbox (its own network namespace in `pod` mode, with the pod
 * CIDR's gateway as DNS), and its volumes written from the plan. Also removes a gone pod's
 * directories.
 */
import { Effect, Either } from "effect"
import type * as Client from "../client/Client.js"
import type * as Pod from "../model/Pod.js"
import * as NodeRoutes from "../network/NodeRoutes.js"
import * as PodCidr from "../network/PodCidr.js"
import * as PodDns from "../network/PodDns.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Runtime from "../runtime/Runtime.js"
import * as ContainerIdentity from "./ContainerIdentity.js"
import * as HostPorts from "./HostPorts.js"
import type * as HostPortAllocator from "./HostPortAllocator.js"
import * as PodStates from "./PodStates.js"
import * as VolumePlan from "./VolumePlan.js"
import type * as VolumeWriter from "./VolumeWriter.js"

/** What setting pods up needs. */
export interface Deps {
  readonly client: Client.Client
  readonly runtime: Runtime.RuntimeService
  readonly allocator: HostPortAllocator.HostPortAllocatorService
  readonly writer: VolumeWriter.VolumeWriterService
  readonly nodeName: string
  readonly network: "host" | "pod"
  readonly internalIP: string
  readonly nodeAllocatable: Readonly<Record<string, string>>
  readonly dataDir: string
  readonly memoryDir: string | undefined
}

/** The node's pod CIDR (`pod` mode), once read. */
export interface State {
  podCidr: string | undefined
}

/** Host ports for `pod`'s declared ports: kept, re-adopted from its containers or status, or allocated. */
export const ensureHostPorts = (deps: Deps, table: PodStates.Table, state: PodStates.PodState, pod: Pod.Pod, raw: ReadonlyArray<Runtime.Container>) =>
  Effect.gen(function* () {
    const requests = HostPorts.requests(pod)
    if (state.hostPorts !== undefined && HostPorts.matches(requests, state.hostPorts)) return state.hostPorts
    if (deps.network === "pod") {
      state.hostPorts = requests.map((r) => ({ containerName: r.containerName, ...(r.name === undefined ? {} : { name: r.name }), containerPort: r.containerPort, protocol: r.protocol, hostPort: r.fixed ?? r.containerPort }))
      return state.hostPorts
    }
    // Re-adoption: the assignment written on the pod's containers.
    for (const c of raw) {
      const stored = HostPorts.decode(c.spec.labels?.[ContainerIdentity.Labels.hostPorts])
      if (stored.length > 0 && HostPorts.matches(requests, stored)) return (state.hostPorts = stored)
    }
    // Written by this agent (`HostPorts.status`), so every entry has its protocol.
    const reported = (pod.status?.hostPorts ?? []) as ReadonlyArray<HostPorts.Assignment>
    if (reported.length > 0 && HostPorts.matches(requests, reported)) return (state.hostPorts = reported)
    const free = requests.filter((r) => r.fixed === undefined)
    const allocated = free.length === 0 ? [] : yield* deps.allocator.allocate(free.map((r) => r.protocol), PodStates.takenHostPorts(table))
    const assigned = HostPorts.assign(requests, allocated) ?? []
    state.hostPorts = assigned
    return assigned
  })

// The node's pod CIDR (isolated mode), assigned by the server's node IPAM after registration
// and immutable from then on: read once it is there.
const nodePodCidr = (deps: Deps, setup: State) =>
  Effect.gen(function* () {
    if (setup.podCidr !== undefined) return setup.podCidr
    const cidr = NodeRoutes.podCidrsOf(yield* deps.client.get(ResourceRefs.Node, undefined, deps.nodeName))[0]
    if (cidr === undefined) return yield* Effect.fail(new Runtime.Invalid({ message: `node ${deps.nodeName} has no pod CIDR yet (spec.podCIDR, assigned by the server's node IPAM)` }))
    return (setup.podCidr = cidr)
  })

/** The runtime spec of `pod`'s sandbox. */
export const sandboxSpec = (pod: Pod.Pod, own: boolean, cidr: string | undefined, hostPorts: ReadonlyArray<HostPorts.Assignment>): Runtime.SandboxSpec => {
  // The pod's DNS is its gateway (the node sends gateway:53 to its DNS server).
  const gateway = cidr === undefined ? undefined : Either.getOrUndefined(PodCidr.block(cidr))?.gateway
  const dns = gateway === undefined ? undefined : PodDns.config(PodStates.podObject(pod), gateway)
  return {
    podUid: pod.metadata.uid ?? "",
    name: pod.metadata.name ?? "",
    namespace: pod.metadata.namespace ?? "",
    hostname: pod.spec.hostname ?? pod.metadata.name ?? "",
    network: own ? "pod" : "host",
    ...(cidr === undefined ? {} : { podCidr: cidr }),
    ...(dns === undefined ? {} : { dns }),
    ports: hostPorts.map((a) => ({ ...(a.name === undefined ? {} : { name: a.name }), containerPort: a.containerPort, hostPort: a.hostPort, protocol: a.protocol })),
    labels: ContainerIdentity.sandboxLabels(pod)
  }
}

/** A ready sandbox for `pod`: kept, adopted, or made (a dead one is replaced). */
export const ensureSandbox = (deps: Deps, setup: State, state: PodStates.PodState, pod: Pod.Pod, hostPorts: ReadonlyArray<HostPorts.Assignment>) =>
  Effect.gen(function* () {
    if (state.sandbox !== undefined && state.sandbox.state === "ready") return state.sandbox
    const own = deps.network === "pod" && pod.spec.hostNetwork !== true
    const cidr = own ? yield* nodePodCidr(deps, setup) : undefined
    const spec = sandboxSpec(pod, own, cidr, hostPorts)
    // Create first (one call on the hot path); an existing one is adopted, a dead one replaced.
    const create = deps.runtime.sandboxes.create(spec).pipe(Effect.catchTag("RuntimeAlreadyExists", (e) => deps.runtime.sandboxes.get(e.id)))
    let sandbox = yield* create
    if (sandbox.state !== "ready") {
      yield* deps.runtime.sandboxes.remove(sandbox.id)
      sandbox = yield* create
    }
    return (state.sandbox = sandbox)
  })

/** Plan `pod`'s volumes and write their sources; a Left is the FailedMount message. */
export const prepareVolumes = (deps: Deps, state: PodStates.PodState, pod: Pod.Pod, lookup: VolumePlan.Lookup) =>
  Effect.gen(function* () {
    const plan = VolumePlan.plan(
      pod,
      lookup,
      VolumePlan.podDir(deps.dataDir, pod.metadata.uid ?? ""),
      { hostIP: deps.internalIP, podIP: PodStates.podIPOf(state, deps.network, deps.internalIP) ?? "", nodeAllocatable: deps.nodeAllocatable },
      { ...(deps.memoryDir === undefined ? {} : { memoryDir: deps.memoryDir }), identity: VolumePlan.identityOf(pod, state.sandbox?.uid) }
    )
    if (Either.isLeft(plan)) return Either.left(plan.left)
    for (const source of plan.right.sources) {
      const done = yield* Effect.either(deps.writer.prepare(source))
      if (done._tag === "Left") return Either.left(`MountVolume.SetUp failed for volume "${done.left.volume}" : ${done.left.message}`)
    }
    return Either.right(plan.right)
  })

/** Remove a pod's directories: its own under the data dir, and its Secrets' in the memory directory. */
export const removePodDirs = (deps: Pick<Deps, "writer" | "dataDir" | "memoryDir">, uid: string) =>
  Effect.all(
    [deps.dataDir, ...(deps.memoryDir === undefined ? [] : [deps.memoryDir])].map((d) => deps.writer.removePod(VolumePlan.podDir(d, uid)).pipe(Effect.ignore)),
    { discard: true }
  )
