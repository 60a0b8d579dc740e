/**
 * Who a container's processes run as and what they may do, decided from its request (`user`,
 * `security`) and the uid the box allocated for its pod: pure functions, applied by the process
 * driver's chain (`setpriv`, Shim.ts) and by the runc driver's OCI spec (Oci.ts).
 *
 * - A request with `security` (the agent always sends it) runs as `user` or, without one, as the
 *   pod's allocated uid (never root); `runAsNonRoot` with uid 0 is refused with the kubelet's message.
 * - Capabilities: uid 0 keeps the container runtimes' default set (Oci.defaultCapabilities), any
 *   other uid none; then `add`, then `drop` (`ALL` in either means every capability). `privileged`
 *   keeps every capability of the box's user.
 * - `no_new_privs` unless `allowPrivilegeEscalation` is true; for root, only when it is false
 *   (Kubernetes' default lets root escalate).
 * - A request without `security` (older clients; only the node's root can reach the socket) runs
 *   as it always did: as `user` when given, else as the box's user, with its capabilities.
 */
import type { Runtime } from "@koder/fleet-core"
import { Either } from "effect"

/** The uids the box gives pods that do not name one (documented in docs/box.md): 65536 of them. */
export const uidRange = { first: 200_000, last: 265_535 } as const

/** Every capability setpriv and the OCI spec know (Linux 6.x), lower case without `cap_`. */
export const allCapabilities: ReadonlyArray<string> = [
  "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
  "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
  "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
  "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
  "mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
  "checkpoint_restore"
]

/** What the container runtimes give root in a container (Docker's, containerd's). */
export const defaultCapabilities: ReadonlyArray<string> = [
  "chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap", "setpcap",
  "net_bind_service", "sys_chroot", "kill", "audit_write"
]

/** `NET_BIND_SERVICE`, `CAP_NET_BIND_SERVICE`, `net_bind_service` → `net_bind_service`. */
export const capName = (name: string): string => name.trim().toLowerCase().replace(/^cap_/, "")

/** `net_bind_service` → `CAP_NET_BIND_SERVICE` (the OCI spec's spelling). */
export const ociCap = (name: string): string => `CAP_${name.toUpperCase()}`

/** How a container runs. */
export interface Confinement {
  /** Switch to this identity; undefined: stay the box's user. */
  readonly user: { readonly uid: number; readonly gid: number; readonly groups: ReadonlyArray<number> } | undefined
  /** Exactly these capabilities (bounding, permitted, effective, inheritable, ambient); undefined: leave them. */
  readonly capabilities: ReadonlyArray<string> | undefined
  readonly noNewPrivs: boolean
  readonly readOnlyRoot: boolean
}

/** The confinement of requests without `security`: as before. */
export const legacy = (user: Runtime.User | undefined): Confinement => ({
  user: user === undefined ? undefined : { uid: user.uid, gid: user.gid ?? user.uid, groups: user.supplementalGroups ?? [] },
  capabilities: undefined,
  noNewPrivs: false,
  readOnlyRoot: false
})

const validId = (n: number) => Number.isInteger(n) && n >= 0 && n <= 4_294_967_294

/**
 * Decide a container's confinement. `podUid`: the uid the box allocated for the pod (undefined
 * when the box cannot switch users: it then runs everything as itself). Left: why it must not run.
 */
export const decide = (spec: Pick<Runtime.ContainerSpec, "user" | "security">, podUid: number | undefined): Either.Either<Confinement, string> => {
  const s = spec.security
  if (s === undefined) return Either.right(legacy(spec.user))
  const uid = spec.user?.uid ?? podUid
  const gid = spec.user?.gid ?? s.runAsGroup ?? uid
  const groups = spec.user?.supplementalGroups ?? s.supplementalGroups ?? []
  for (const [field, v] of [["user.uid", uid], ["user.gid", gid]] as const)
    if (v !== undefined && !validId(v)) return Either.left(`${field}: ${v} is not a valid id`)
  for (const g of groups) if (!validId(g)) return Either.left(`supplementalGroups: ${g} is not a valid id`)
  // The box's own uid when it cannot switch (an unprivileged box): what the process will run as.
  const effective = uid ?? process.getuid?.() ?? 0
  if (s.runAsNonRoot === true && effective === 0) return Either.left("container has runAsNonRoot and image will run as root")
  const known = new Set(allCapabilities)
  const names = (list: ReadonlyArray<string> | undefined, field: string): Either.Either<Array<string>, string> => {
    const out: Array<string> = []
    for (const raw of list ?? []) {
      const n = capName(raw)
      if (n === "all") out.push(...allCapabilities)
      else if (known.has(n)) out.push(n)
      else return Either.left(`security.capabilities.${field}: unknown capability ${JSON.stringify(raw)}`)
    }
    return Either.right(out)
  }
  const add = names(s.capabilities?.add, "add")
  if (Either.isLeft(add)) return Either.left(add.left)
  const drop = names(s.capabilities?.drop, "drop")
  if (Either.isLeft(drop)) return Either.left(drop.left)
  const user = uid === undefined ? undefined : { uid, gid: gid ?? uid, groups }
  if (s.privileged === true) return Either.right({ user, capabilities: undefined, noNewPrivs: false, readOnlyRoot: s.readOnlyRootFilesystem === true })
  const base = effective === 0 ? defaultCapabilities : []
  const dropped = new Set(drop.right)
  const capabilities = [...new Set([...base, ...add.right])].filter((c) => !dropped.has(c))
  const noNewPrivs = effective === 0 ? s.allowPrivilegeEscalation === false : s.allowPrivilegeEscalation !== true
  return Either.right({ user, capabilities, noNewPrivs, readOnlyRoot: s.readOnlyRootFilesystem === true })
}

/** The lowest uid of the range not in `used`; undefined when all are taken. */
export const allocateUid = (used: ReadonlySet<number>): number | undefined => {
  for (let uid = uidRange.first; uid <= uidRange.last; uid++) if (!used.has(uid)) return uid
  return undefined
}

/** setpriv's arguments for a confinement (before its `--`), empty when it changes nothing. */
export const setprivArgs = (c: Confinement): Array<string> => {
  const out: Array<string> = []
  if (c.user !== undefined)
    out.push(`--reuid=${c.user.uid}`, `--regid=${c.user.gid}`, c.user.groups.length === 0 ? "--clear-groups" : `--groups=${c.user.groups.join(",")}`)
  if (c.capabilities !== undefined) {
    const set = ["-all", ...c.capabilities.map((n) => `+${n}`)].join(",")
    // Ambient too: a process that is not root keeps its capabilities across exec only so.
    out.push(`--inh-caps=${set}`, `--ambient-caps=${set}`, `--bounding-set=${set}`)
  }
  if (c.noNewPrivs) out.push("--no-new-privs")
  return out
}
