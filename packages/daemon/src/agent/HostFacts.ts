/**
 * What the agent reports about its host (DESIGN §8): CPU, memory, ephemeral storage and pod
 * capacity read from the machine, allocatable = capacity minus `--reserved` (what the system and
 * Fleet itself keep, as the kubelet's --system-reserved/--kube-reserved), the well-known labels'
 * values (hostname, os and arch in Go's names), the internal IP and the system facts of
 * `status.nodeInfo`.
 */
import { type NodeStatus, Quantity, Storage } from "@koder/fleet-core"
import { Either } from "effect"
import { readFileSync, statfsSync } from "node:fs"
import { arch, availableParallelism, hostname, networkInterfaces, platform, release, totalmem } from "node:os"

/** Pods a node runs at most unless told otherwise (the kubelet's --max-pods). */
export const defaultMaxPods = 110

/** What the caller knows better than the host. */
export interface Options {
  /** The node's name (default: the host name, lower-cased, made a DNS-1123 subdomain). */
  readonly nodeName?: string
  /** Where pod directories live: its filesystem's size is the ephemeral-storage capacity. */
  readonly dataDir: string
  /** Resources kept back from pods, e.g. `{ cpu: "500m", memory: "1Gi" }` (see `parseReserved`). */
  readonly reserved?: Readonly<Record<string, string>>
  readonly maxPods?: number
  readonly region?: string
  readonly labels?: Readonly<Record<string, string>>
  readonly taints?: NodeStatus.Facts["taints"]
  /** The address pods and Endpoints use (default: the first non-internal IPv4 address). */
  readonly internalIP?: string
  /** The agent's HTTPS port (default 9301). */
  readonly port?: number
  /** `<name>://<version>` of the runtime. */
  readonly containerRuntimeVersion: string
  /** The agent's version as nodes report it (default `v1.31.0-fleet`). */
  readonly version?: string
}

/** `cpu=500m,memory=1Gi` (the kubelet's --system-reserved syntax) as a ResourceList; a string is the error. */
export const parseReserved = (text: string): Either.Either<Record<string, string>, string> => {
  const out: Record<string, string> = {}
  for (const part of text.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const m = /^([a-z0-9.\-/]+)=(.+)$/i.exec(part)
    if (m === null) return Either.left(`--reserved ${JSON.stringify(text)}: expected name=quantity[,name=quantity...]`)
    if (Either.isLeft(Quantity.parse(m[2]!))) return Either.left(`--reserved: ${m[1]}=${m[2]} is not a quantity`)
    out[m[1]!] = m[2]!
  }
  return Either.right(out)
}

/** Go's GOARCH for Node's `os.arch()`. */
export const goArch = (a: string = arch()): string =>
  ({ x64: "amd64", ia32: "386", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64", loong64: "loong64" })[a] ?? a

/** Go's GOOS for Node's `os.platform()`. */
export const goOs = (p: string = platform()): string => (p === "win32" ? "windows" : p)

/** The host name as a node name: lower case, DNS-1123 subdomain characters. */
export const defaultNodeName = (): string =>
  hostname()
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "") || "localhost"

/** The first non-internal IPv4 address, else 127.0.0.1. */
export const defaultInternalIP = (): string => {
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address
  return "127.0.0.1"
}

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8").trim()
  } catch {
    return undefined
  }
}

const osImage = (): string => {
  const m = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readText("/etc/os-release") ?? "")
  return m?.[1] ?? `${platform()} ${release()}`
}

const quantity = (text: string | undefined): Quantity.Quantity => {
  const q = text === undefined ? undefined : Quantity.parse(text)
  return q !== undefined && Either.isRight(q) ? q.right : Quantity.zero
}

/** `capacity - reserved` per resource, never below zero. */
export const allocatable = (capacity: Readonly<Record<string, string>>, reserved: Readonly<Record<string, string>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(capacity)) {
    const left = Quantity.sub(quantity(value), quantity(reserved[name]))
    out[name] = Quantity.format(left.nanos < 0n ? Quantity.zero : left)
  }
  return out
}

/** The host's capacity: CPUs, memory, the data dir's filesystem and the pod limit. */
export const capacity = (dataDir: string, maxPods = defaultMaxPods): Record<string, string> => {
  let storage: number | undefined
  try {
    const fs = statfsSync(dataDir)
    storage = fs.blocks * fs.bsize
  } catch {
    storage = undefined
  }
  return {
    cpu: String(availableParallelism()),
    memory: `${Math.floor(totalmem() / 1024)}Ki`,
    ...(storage === undefined ? {} : { "ephemeral-storage": `${Math.floor(storage / 1024)}Ki` }),
    pods: String(maxPods)
  }
}

/** Where the agent keeps local-path volumes: `<dataDir>/storage`, as k3s's `<data-dir>/storage`. */
export const localPathRoot = (dataDir: string): string => `${dataDir.replace(/\/+$/, "")}/storage`

/** Everything the agent registers its node with. */
export const detect = (options: Options): NodeStatus.Facts => {
  const cap = capacity(options.dataDir, options.maxPods)
  const machineID = readText("/etc/machine-id") ?? hostname()
  return {
    nodeName: options.nodeName ?? defaultNodeName(),
    hostname: options.nodeName ?? defaultNodeName(),
    os: goOs(),
    arch: goArch(),
    ...(options.region === undefined ? {} : { region: options.region }),
    ...(options.labels === undefined ? {} : { labels: options.labels }),
    ...(options.taints === undefined ? {} : { taints: options.taints }),
    // The agent makes local-path volumes' directories under its data dir (LocalPathVolumes.ts).
    annotations: { [Storage.LocalPathRootAnnotation]: localPathRoot(options.dataDir) },
    capacity: cap,
    allocatable: allocatable(cap, options.reserved ?? {}),
    internalIP: options.internalIP ?? defaultInternalIP(),
    port: options.port ?? 9301,
    nodeInfo: {
      machineID,
      systemUUID: readText("/sys/class/dmi/id/product_uuid") ?? machineID,
      bootID: readText("/proc/sys/kernel/random/boot_id") ?? "",
      kernelVersion: release(),
      osImage: osImage(),
      containerRuntimeVersion: options.containerRuntimeVersion,
      kubeletVersion: options.version ?? "v1.31.0-fleet"
    }
  }
}
