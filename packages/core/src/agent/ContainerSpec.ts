/**
 * The runtime's spec of one container attempt (the kubelet's generateContainerConfig): command
 * and args for the runtime's isolation, the environment (defaults, host ports, mounts where the
 * runtime cannot bind them, the pod's own variables), user and security, mounts, resources and the
 * identity labels the agent re-adopts containers by. Pure: an error is the message of the
 * container's `CreateContainerConfigError`.
 */
import { Either } from "effect"
import type * as Pod from "../model/Pod.js"
import * as Quantity from "../model/Quantity.js"
import type * as Runtime from "../runtime/Runtime.js"
import * as ContainerEnv from "./ContainerEnv.js"
import * as ContainerIdentity from "./ContainerIdentity.js"
import * as ContainerSecurity from "./ContainerSecurity.js"
import * as HostPorts from "./HostPorts.js"
import * as VolumePlan from "./VolumePlan.js"

/** The node and pod facts a container's spec depends on. */
export interface Context {
  readonly hostIP: string
  readonly podIP: string
  readonly nodeAllocatable: Readonly<Record<string, string>>
  /** Environment every container starts with; the pod's own variables win. */
  readonly defaultEnv: Readonly<Record<string, string>>
  readonly network: "host" | "pod"
  readonly sandboxId: string
  readonly hostPorts: ReadonlyArray<HostPorts.Assignment>
  readonly capabilities: Runtime.Capabilities
}

/** A quantity in thousandths (cpu), or undefined when absent or invalid. */
export const milli = (q: string | undefined): number | undefined => {
  if (q === undefined) return undefined
  const parsed = Quantity.parse(q)
  return parsed._tag === "Right" ? Quantity.toMilli(parsed.right) : undefined
}

/** A quantity in units (bytes), or undefined when absent or invalid. */
export const units = (q: string | undefined): number | undefined => {
  if (q === undefined) return undefined
  const parsed = Quantity.parse(q)
  return parsed._tag === "Right" ? Quantity.toUnits(parsed.right) : undefined
}

/** The runtime resources of a container's limits (cpu, memory) and cpu request. */
export const resourcesOf = (container: Pod.Container): Runtime.Resources => {
  const limits = container.resources?.limits ?? {}
  const requests = container.resources?.requests ?? {}
  const cpuMillis = milli(limits["cpu"])
  const cpuRequestMillis = milli(requests["cpu"])
  const memoryBytes = units(limits["memory"])
  return {
    ...(cpuMillis === undefined ? {} : { cpuMillis }),
    ...(cpuRequestMillis === undefined ? {} : { cpuRequestMillis }),
    ...(memoryBytes === undefined ? {} : { memoryBytes })
  }
}

/** The image's `KEY=VALUE` variables (below the container's own). */
export const imageEnv = (image: Runtime.ImageConfig | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const kv of image?.env ?? []) {
    const eq = kv.indexOf("=")
    if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1)
  }
  return out
}

/**
 * The command line with the image's defaults, as Kubernetes merges them: `command` replaces the
 * entrypoint and drops the image's cmd; `args` alone replace the cmd after the entrypoint;
 * neither: entrypoint then cmd.
 */
export const withImage = (
  line: { readonly command: ReadonlyArray<string>; readonly args: ReadonlyArray<string> },
  image: Runtime.ImageConfig | undefined
): { readonly command: ReadonlyArray<string>; readonly args: ReadonlyArray<string> } => {
  if (image === undefined || line.command.length > 0) return line
  const entrypoint = image.entrypoint ?? []
  const args = line.args.length > 0 ? line.args : (image.cmd ?? [])
  // An image without an entrypoint runs its cmd (or the args) as the command.
  return entrypoint.length > 0 ? { command: entrypoint, args } : { command: args.slice(0, 1), args: args.slice(1) }
}

/**
 * The image's numeric `User` (`uid` or `uid:gid`) when the pod names no `runAsUser`. Named users
 * and root are left to the runtime, which runs the container as the uid it allocated for the pod.
 */
export const imageUser = (image: Runtime.ImageConfig | undefined, security: Runtime.Security): Runtime.User | undefined => {
  const m = /^(\d+)(?::(\d+))?$/.exec(image?.user ?? "")
  if (m === null) return undefined
  const uid = Number(m[1])
  if (uid === 0) return undefined
  const gid = m[2] === undefined ? security.runAsGroup : Number(m[2])
  return { uid, ...(gid === undefined ? {} : { gid }), ...(security.supplementalGroups === undefined ? {} : { supplementalGroups: security.supplementalGroups }) }
}

/** The spec of attempt `attempt` of `container`, or why it cannot be made. */
export const make = (
  pod: Pod.Pod,
  container: Pod.Container,
  attempt: number,
  init: boolean,
  lookup: VolumePlan.Lookup,
  plan: VolumePlan.Plan,
  context: Context,
  image?: Runtime.ImageConfig
): Either.Either<Runtime.ContainerSpec, string> => {
  const caps = context.capabilities
  const hostPorts = context.hostPorts
  const initial = [...HostPorts.env(hostPorts, container.name), ...(caps.bindMounts ? [] : VolumePlan.mountEnv(container, plan))]
  const env = ContainerEnv.resolve(pod, container, lookup, { hostIP: context.hostIP, podIP: context.podIP, nodeAllocatable: context.nodeAllocatable, initial })
  if (Either.isLeft(env)) return Either.left(env.left)
  const vars: Record<string, string> = { ...context.defaultEnv, ...imageEnv(image), HOSTNAME: pod.spec.hostname ?? pod.metadata.name ?? "" }
  for (const v of env.right) vars[v.name] = v.value
  const line = withImage(ContainerEnv.commandLine(container, env.right), image)
  const oci = caps.isolation === "oci"
  // Without an image there is no entrypoint: the args are the command.
  const command = line.command.length > 0 || oci ? line.command : line.args
  const args = line.command.length > 0 || oci ? line.args : []
  if (command.length === 0 && !oci) return Either.left(`container "${container.name}" has no command to run on this runtime (${caps.drivers.join(", ") || "no image support"})`)
  const security = ContainerSecurity.resolve(pod, container)
  if (Either.isLeft(security)) return Either.left(security.left)
  const user = security.right.user ?? imageUser(image, security.right.security)
  const workingDir = container.workingDir ?? (image?.workingDir === "" ? undefined : image?.workingDir)
  const resources = resourcesOf(container)
  return Either.right({
    sandboxId: context.sandboxId,
    name: container.name,
    attempt,
    ...(oci ? { image: container.image } : {}),
    command,
    ...(args.length > 0 ? { args } : {}),
    env: vars,
    ...(workingDir === undefined ? {} : { workingDir }),
    ...(user !== undefined && caps.runAsUser ? { user } : {}),
    security: security.right.security,
    mounts: plan.mounts.get(container.name) ?? [],
    ...(Object.keys(resources).length > 0 ? { resources } : {}),
    labels: ContainerIdentity.labelsFor(pod, container, attempt, init, context.network === "host" ? HostPorts.encode(hostPorts) : "")
  })
}
