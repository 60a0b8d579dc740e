/**
 * The OCI runtime spec (runtime-spec 1.0, what `runc` reads from a bundle's `config.json`) for
 * the box's runc driver: a pure function from a container's spec and its place (rootfs, pod
 * namespaces, cgroup) to the JSON document. Defaults follow Docker's (capabilities, masked and
 * read-only /proc and /sys paths, /dev), so images behave as they would there.
 */
import type { Runtime } from "@koder/fleet-core"
import * as Confinement from "./Confinement.js"
import { defaultPath } from "./Tools.js"
import type { IdMapping } from "./UserNamespace.js"

/** The PATH a container gets when its env has none (Docker's default; the box's tool search path too). */
export { defaultPath }

/** Docker's default capability set (what an unprivileged container's root keeps). */
export const defaultCapabilities: ReadonlyArray<string> = [
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FSETID",
  "CAP_FOWNER",
  "CAP_MKNOD",
  "CAP_NET_RAW",
  "CAP_SETGID",
  "CAP_SETUID",
  "CAP_SETFCAP",
  "CAP_SETPCAP",
  "CAP_NET_BIND_SERVICE",
  "CAP_SYS_CHROOT",
  "CAP_KILL",
  "CAP_AUDIT_WRITE"
]

const maskedPaths = [
  "/proc/asound",
  "/proc/acpi",
  "/proc/kcore",
  "/proc/keys",
  "/proc/latency_stats",
  "/proc/timer_list",
  "/proc/timer_stats",
  "/proc/sched_debug",
  "/proc/scsi",
  "/sys/firmware"
]
const readonlyPaths = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

/** An OCI `process` (also the `--process` file of `runc exec`). */
export interface Process {
  readonly terminal: false
  readonly user: { readonly uid: number; readonly gid: number; readonly additionalGids?: ReadonlyArray<number> }
  readonly args: ReadonlyArray<string>
  readonly env: ReadonlyArray<string>
  readonly cwd: string
  readonly capabilities: Readonly<Record<"bounding" | "effective" | "permitted", ReadonlyArray<string>>> &
    Readonly<Partial<Record<"inheritable" | "ambient", ReadonlyArray<string>>>>
  readonly noNewPrivileges: boolean
}

/** An OCI mount. */
export interface Mount {
  readonly destination: string
  readonly type: string
  readonly source: string
  readonly options?: ReadonlyArray<string>
}

/** The parts of the OCI runtime spec the driver writes. */
export interface Spec {
  readonly ociVersion: string
  readonly process: Process
  readonly root: { readonly path: string; readonly readonly: boolean }
  readonly hostname?: string
  readonly mounts: ReadonlyArray<Mount>
  readonly linux: {
    readonly cgroupsPath: string
    readonly resources: Record<string, unknown>
    readonly namespaces: ReadonlyArray<{ readonly type: string; readonly path?: string }>
    readonly maskedPaths: ReadonlyArray<string>
    readonly readonlyPaths: ReadonlyArray<string>
    readonly uidMappings?: ReadonlyArray<IdMapping>
    readonly gidMappings?: ReadonlyArray<IdMapping>
  }
}

/** What a container's config is made of. */
export interface Input {
  readonly spec: Runtime.ContainerSpec
  /** Absolute path of the container's (writable) root filesystem. */
  readonly rootfs: string
  /** The hostname, when the container gets a UTS namespace of its own (not joined). */
  readonly hostname?: string
  /** Namespaces to join instead of creating (`/proc/<pod holder>/ns/uts`...). */
  readonly join?: { readonly uts?: string; readonly ipc?: string }
  /** The cgroup, relative to runc's own (`kbox-<hash>/<sandbox>/<container>`). */
  readonly cgroupsPath: string
  /** Swap can be limited (v1 `memory.memsw.*` present, or v2): then swap is held at the memory limit. */
  readonly swapLimit: boolean
  /** Host files bind-mounted read-only at the same path when they exist (/etc/resolv.conf, /etc/hosts). */
  readonly hostFiles?: ReadonlyArray<string>
  /** Who the process runs as and what it may do (Confinement.decide); absent: root with Docker's capabilities. */
  readonly confinement?: Confinement.Confinement | undefined
  /** The pod's user namespace to join (`/proc/<pod holder>/ns/user`) and its mappings (UserNamespace.mappings). */
  readonly userns?: { readonly path: string; readonly mappings: ReadonlyArray<IdMapping> } | undefined
}

/** `KEY=VALUE` list from a map, PATH defaulted. */
export const envList = (env: Readonly<Record<string, string>> | undefined): Array<string> =>
  Object.entries({ PATH: defaultPath, ...env }).map(([k, v]) => `${k}=${v}`)

/**
 * The OCI process for a command run as the container's user. With a `confinement` its user
 * (the pod's allocated uid when it names none), exactly its capabilities (every one when
 * privileged), in all five sets (ambient: a process that is not root keeps them across exec),
 * and its no_new_privs.
 */
export const processSpec = (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> | undefined,
  cwd: string | undefined,
  user: Runtime.User | undefined,
  confinement?: Confinement.Confinement
): Process => {
  const who = confinement?.user ?? (user === undefined ? undefined : { uid: user.uid, gid: user.gid ?? user.uid, groups: user.supplementalGroups ?? [] })
  const uid = who?.uid ?? 0
  const groups = confinement === undefined ? user?.supplementalGroups : who !== undefined && who.groups.length > 0 ? who.groups : undefined
  const caps =
    confinement === undefined
      ? undefined
      : (confinement.capabilities ?? Confinement.allCapabilities).map(Confinement.ociCap)
  return {
    terminal: false,
    user: {
      uid,
      // As the process driver does: without a group, the user's own id.
      gid: who?.gid ?? uid,
      ...(groups === undefined ? {} : { additionalGids: groups })
    },
    args,
    env: envList(env),
    cwd: cwd === undefined || cwd === "" ? "/" : cwd,
    capabilities:
      caps === undefined
        ? { bounding: defaultCapabilities, effective: defaultCapabilities, permitted: defaultCapabilities }
        : { bounding: caps, effective: caps, permitted: caps, inheritable: caps, ambient: caps },
    noNewPrivileges: confinement?.noNewPrivs ?? false
  }
}

/** `linux.resources` from a container's limits (runc's cgroup v1 terms; it maps them for v2). */
export const resources = (r: Runtime.Resources | undefined, swapLimit: boolean): Record<string, unknown> => {
  const out: Record<string, unknown> = { devices: [{ allow: false, access: "rwm" }] }
  if (r?.memoryBytes !== undefined) {
    const limit = Math.floor(r.memoryBytes)
    // Swap at the memory limit: the limit is the limit, not a hint before swapping.
    out.memory = swapLimit ? { limit, swap: limit } : { limit }
  }
  const cpu: Record<string, number> = {}
  if (r?.cpuMillis !== undefined) {
    cpu.period = 100_000
    cpu.quota = Math.max(1000, Math.round(r.cpuMillis * 100))
  }
  if (r?.cpuRequestMillis !== undefined) cpu.shares = Math.max(2, Math.round((r.cpuRequestMillis * 1024) / 1000))
  if (Object.keys(cpu).length > 0) out.cpu = cpu
  if (r?.pids !== undefined) out.pids = { limit: r.pids }
  return out
}

/** The bundle's `config.json` for a container. */
export const config = (input: Input): Spec => {
  const { spec } = input
  const mounts: Array<Mount> = [
    { destination: "/proc", type: "proc", source: "proc" },
    { destination: "/dev", type: "tmpfs", source: "tmpfs", options: ["nosuid", "strictatime", "mode=755", "size=65536k"] },
    {
      destination: "/dev/pts",
      type: "devpts",
      source: "devpts",
      options: ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]
    },
    { destination: "/dev/shm", type: "tmpfs", source: "shm", options: ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"] },
    { destination: "/dev/mqueue", type: "mqueue", source: "mqueue", options: ["nosuid", "noexec", "nodev"] },
    ...(input.userns === undefined
      ? [
          { destination: "/sys", type: "sysfs", source: "sysfs", options: ["nosuid", "noexec", "nodev", "ro"] },
          { destination: "/sys/fs/cgroup", type: "cgroup", source: "cgroup", options: ["nosuid", "noexec", "nodev", "relatime", "ro"] }
        ]
      : // sysfs can be mounted only from a user namespace owning the network namespace; the
        // container has the host's: the host's /sys, read-only (what rootless runtimes do).
        [{ destination: "/sys", type: "bind", source: "/sys", options: ["rbind", "nosuid", "noexec", "nodev", "ro"] }])
  ]
  for (const f of input.hostFiles ?? []) mounts.push({ destination: f, type: "bind", source: f, options: ["rbind", "ro"] })
  for (const m of spec.mounts ?? [])
    mounts.push({ destination: m.containerPath, type: "bind", source: m.hostPath, options: ["rbind", m.readOnly === true ? "ro" : "rw"] })
  const namespaces: Array<{ type: string; path?: string }> = [
    ...(input.userns === undefined ? [] : [{ type: "user", path: input.userns.path }]),
    { type: "pid" },
    { type: "mount" },
    input.join?.ipc === undefined ? { type: "ipc" } : { type: "ipc", path: input.join.ipc },
    input.join?.uts === undefined ? { type: "uts" } : { type: "uts", path: input.join.uts }
  ]
  return {
    ociVersion: "1.0.2",
    process: processSpec([...spec.command, ...(spec.args ?? [])], spec.env, spec.workingDir, spec.user, input.confinement),
    root: { path: input.rootfs, readonly: input.confinement?.readOnlyRoot === true },
    // A joined UTS namespace already has the pod's hostname.
    ...(input.join?.uts === undefined && input.hostname !== undefined ? { hostname: input.hostname } : {}),
    mounts,
    linux: {
      cgroupsPath: input.cgroupsPath,
      resources: resources(spec.resources, input.swapLimit),
      // No network namespace: host networking (capabilities.podNetwork is false).
      namespaces,
      maskedPaths,
      readonlyPaths,
      // runc wants the mappings even when it joins the namespace (it checks ids against them).
      ...(input.userns === undefined ? {} : { uidMappings: input.userns.mappings, gidMappings: input.userns.mappings })
    }
  }
}
