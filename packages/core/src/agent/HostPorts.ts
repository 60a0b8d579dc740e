/**
 * Host ports of Fleet's unprivileged host-network mode (DESIGN §8): pods share the host's network,
 * so two replicas cannot both listen on their declared `containerPort`. Instead every declared
 * container port gets a free host port, chosen by the agent when the pod first starts and kept for
 * the pod's life (its restarts included). A container learns its ports from the environment:
 * `PORT` is its own first declared port, and `FLEET_PORT_<NAME>` (the port's name upper-cased,
 * `-` as `_`; unnamed ports by number, `FLEET_PORT_8080`) names every port of the pod, so
 * sidecars can reach each other. Ports with an explicit `hostPort`, and every port of a
 * `hostNetwork: true` pod, keep their declared number, as in Kubernetes.
 *
 * The assignment is reported in the pod's `status.hostPorts`, where the endpoint controllers find
 * the port a Service reaches (the pod IP being the host's), and is written on the pod's
 * containers so that a restarted agent re-adopts it.
 */
import type * as Pod from "../model/Pod.js"

/** One declared port of a pod and the host port it got. */
export interface Assignment {
  readonly containerName: string
  readonly name?: string
  readonly containerPort: number
  readonly protocol: "TCP" | "UDP" | "SCTP"
  readonly hostPort: number
}

/** A declared port that needs a host port; `fixed` when it must be a given number. */
export interface Request {
  readonly containerName: string
  readonly name?: string
  readonly containerPort: number
  readonly protocol: "TCP" | "UDP" | "SCTP"
  readonly fixed?: number
}

/** The container label carrying the pod's assignment (JSON), for re-adoption. */
export const label = "fleet.koder.dev/host-ports"

/** The declared ports of a pod (init containers first, then containers, in spec order). */
export const requests = (pod: Pod.Pod): ReadonlyArray<Request> => {
  const out: Array<Request> = []
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    for (const p of c.ports ?? []) {
      const fixed = p.hostPort !== undefined && p.hostPort > 0 ? p.hostPort : pod.spec.hostNetwork === true ? p.containerPort : undefined
      out.push({
        containerName: c.name,
        ...(p.name === undefined ? {} : { name: p.name }),
        containerPort: p.containerPort,
        protocol: p.protocol ?? "TCP",
        ...(fixed === undefined ? {} : { fixed })
      })
    }
  }
  return out
}

/** How many host ports must be allocated for `requests` (those without a fixed number). */
export const needed = (requests: ReadonlyArray<Request>): number => requests.filter((r) => r.fixed === undefined).length

/**
 * The assignment of `requests`, taking `allocated` ports in order for those without a fixed
 * number (undefined when there are fewer allocated ports than `needed`).
 */
export const assign = (requests: ReadonlyArray<Request>, allocated: ReadonlyArray<number>): ReadonlyArray<Assignment> | undefined => {
  if (allocated.length < needed(requests)) return undefined
  let i = 0
  return requests.map((r) => ({
    containerName: r.containerName,
    ...(r.name === undefined ? {} : { name: r.name }),
    containerPort: r.containerPort,
    protocol: r.protocol,
    hostPort: r.fixed ?? allocated[i++]!
  }))
}

/** Whether a stored assignment still covers exactly the pod's declared ports. */
export const matches = (requests: ReadonlyArray<Request>, assignments: ReadonlyArray<Assignment>): boolean =>
  requests.length === assignments.length &&
  requests.every((r, i) => {
    const a = assignments[i]!
    return a.containerName === r.containerName && a.containerPort === r.containerPort && a.protocol === r.protocol && (r.fixed === undefined || a.hostPort === r.fixed)
  })

/** `FLEET_PORT_<NAME>` for a port. */
export const envName = (port: Pick<Assignment, "name" | "containerPort">): string =>
  `FLEET_PORT_${(port.name ?? String(port.containerPort)).toUpperCase().replace(/[^A-Z0-9_]/g, "_")}`

/** The environment a container gets: `PORT` (its first port) and `FLEET_PORT_<NAME>` for every port of the pod. */
export const env = (assignments: ReadonlyArray<Assignment>, containerName: string): ReadonlyArray<{ readonly name: string; readonly value: string }> => {
  const out: Array<{ name: string; value: string }> = []
  const own = assignments.find((a) => a.containerName === containerName)
  if (own !== undefined) out.push({ name: "PORT", value: String(own.hostPort) })
  const seen = new Set<string>()
  for (const a of assignments) {
    const name = envName(a)
    if (seen.has(name)) continue
    seen.add(name)
    out.push({ name, value: String(a.hostPort) })
  }
  return out
}

/**
 * The host port a probe or hook reaches for `port` (a number or a port name) of `container`:
 * the assigned host port of that container port, else the number itself.
 */
export const resolve = (pod: Pod.Pod, assignments: ReadonlyArray<Assignment>, containerName: string, port: number | string): number | undefined => {
  let number: number | undefined
  if (typeof port === "number") number = port
  else if (/^\d+$/.test(port)) number = Number(port)
  else {
    const c = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((x) => x.name === containerName)
    number = c?.ports?.find((p) => p.name === port)?.containerPort
    if (number === undefined) return undefined
  }
  const own = assignments.find((a) => a.containerName === containerName && a.containerPort === number && a.protocol === "TCP")
  const any = own ?? assignments.find((a) => a.containerPort === number && a.protocol === "TCP")
  return any?.hostPort ?? number
}

/** The assignment as its container label value. */
export const encode = (assignments: ReadonlyArray<Assignment>): string =>
  JSON.stringify(assignments.map((a) => [a.containerName, a.name ?? "", a.containerPort, a.protocol, a.hostPort]))

/** An assignment from its container label value (empty when absent or unreadable). */
export const decode = (text: string | undefined): ReadonlyArray<Assignment> => {
  if (text === undefined || text === "") return []
  try {
    const rows = JSON.parse(text) as unknown
    if (!Array.isArray(rows)) return []
    return rows.flatMap((row): Array<Assignment> => {
      if (!Array.isArray(row) || row.length !== 5) return []
      const [containerName, name, containerPort, protocol, hostPort] = row as [unknown, unknown, unknown, unknown, unknown]
      if (typeof containerName !== "string" || typeof containerPort !== "number" || typeof hostPort !== "number") return []
      if (protocol !== "TCP" && protocol !== "UDP" && protocol !== "SCTP") return []
      return [{ containerName, ...(typeof name === "string" && name !== "" ? { name } : {}), containerPort, protocol, hostPort }]
    })
  } catch {
    return []
  }
}

/** The ports as the pod's `status.hostPorts` lists them. */
export const status = (assignments: ReadonlyArray<Assignment>): ReadonlyArray<Assignment> =>
  assignments.map((a) => ({ containerName: a.containerName, ...(a.name === undefined ? {} : { name: a.name }), containerPort: a.containerPort, protocol: a.protocol, hostPort: a.hostPort }))
