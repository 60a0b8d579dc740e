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

/** The spec of attempt `attempt` of `container`, or why it cannot be made. */
export const make = (
  pod: Pod.Pod,
  container: Pod.Container,
  attempt: number,
  init: boolean,
  lookup: VolumePlan.Lookup,
  plan: VolumePlan.Plan,
  context: Context
): Either.Either<Runtime.ContainerSpec, string> => {
  const caps = context.capabilities
  const hostPorts = context.hostPorts
  const initial = [...HostPorts.env(hostPorts, container.name), ...(caps.bindMounts ? [] : VolumePlan.mountEnv(container, plan))]
  const env = ContainerEnv.resolve(pod, container, lookup, { hostIP: context.hostIP, podIP: context.podIP, nodeAllocatable: context.nodeAllocatable, initial })
  if (Either.isLeft(env)) return Either.left(env.left)
  const vars: Record<string, string> = { ...context.defaultEnv, HOSTNAME: pod.spec.hostname ?? pod.metadata.name ?? "" }
  for (const v of env.right) vars[v.name] = v.value
  const line = ContainerEnv.commandLine(container, env.right)
  const oci = caps.isolation === "oci"
  // Without an image there is no entrypoint: the args are the command.
  const command = line.command.length > 0 || oci ? line.command : line.args
  const args = line.command.length > 0 || oci ? line.args : []
  if (command.length === 0 && !oci) return Either.left(`container "${container.name}" has no command to run on this runtime (${caps.drivers.join(", ") || "no image support"})`)
  const security = ContainerSecurity.resolve(pod, container)
  if (Either.isLeft(security)) return Either.left(security.left)
  const resources = resourcesOf(container)
  return Either.right({
    sandboxId: context.sandboxId,
    name: container.name,
    attempt,
    ...(oci ? { image: container.image } : {}),
    command,
    ...(args.length > 0 ? { args } : {}),
    env: vars,
    ...(container.workingDir === undefined ? {} : { workingDir: container.workingDir }),
    ...(security.right.user !== undefined && caps.runAsUser ? { user: security.right.user } : {}),
    security: security.right.security,
    mounts: plan.mounts.get(container.name) ?? [],
    ...(Object.keys(resources).length > 0 ? { resources } : {}),
    labels: ContainerIdentity.labelsFor(pod, container, attempt, init, context.network === "host" ? HostPorts.encode(hostPorts) : "")
  })
}
