/**
 * User namespaces for the runc driver's pods: each pod gets a range of 65536 host ids of its own
 * (container ids 0–65535 map to it, so the container's root is an unprivileged host id no other
 * pod has), plus its allocated uid mapped to itself (Confinement.uidRange: the id its containers
 * run as by default, and the owner the agent gives its volumes, so they stay accessible). The
 * decisions are pure; the probe and the ownership shift of a rootfs copy are the edges.
 */
import { spawnSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { chmod, lchown, lstat, readdir } from "node:fs/promises"
import { join } from "node:path"

/** Ids per pod: container ids 0..65535. */
export const idsPerPod = 65_536

/** The first host id of the first pod's range: above the allocated uids (200000–265535) and Debian's first subuid ranges. */
export const firstHostId = 1_000_000

/** The last host id a range may use (4294967295 is "no id"). */
const lastHostId = 4_294_967_294

/** An OCI id mapping (also a line of /proc/PID/uid_map: `containerID hostID size`). */
export interface IdMapping {
  readonly containerID: number
  readonly hostID: number
  readonly size: number
}

/** The lowest range start not in `used` (starts of other pods' ranges); undefined when none is left. */
export const allocateRange = (used: ReadonlySet<number>): number | undefined => {
  for (let first = firstHostId; first + idsPerPod - 1 <= lastHostId; first += idsPerPod) if (!used.has(first)) return first
  return undefined
}

/**
 * A pod's mappings (uid and gid alike): container 0..65535 → host `first`.., and the pod's
 * allocated id to itself (it lies above 65535, so the two never overlap).
 */
export const mappings = (first: number, podId: number | undefined): Array<IdMapping> => [
  { containerID: 0, hostID: first, size: idsPerPod },
  ...(podId === undefined || podId < idsPerPod ? [] : [{ containerID: podId, hostID: podId, size: 1 }])
]

/** The text for /proc/PID/uid_map or gid_map (written in one write: the kernel takes only one). */
export const mapText = (m: ReadonlyArray<IdMapping>): string => m.map((x) => `${x.containerID} ${x.hostID} ${x.size}\n`).join("")

/** The host id an image file's owner becomes: shifted into the range; ids past it become the range's nobody (65534). */
export const shiftId = (id: number, first: number): number => first + (id < idsPerPod ? id : 65_534)

/** Whether user namespaces can be used here, and why not. */
export type Probe = { readonly enabled: true } | { readonly enabled: false; readonly reason: string }

/** Probe once: the kernel allows user namespaces (a limit above 0) and one can be made (`unshare --user --map-root-user true`). */
export const probe = (unshare: string): Probe => {
  let max: number
  try {
    max = Number(readFileSync("/proc/sys/user/max_user_namespaces", "utf8").trim())
  } catch {
    return { enabled: false, reason: "the kernel has no user namespaces (/proc/sys/user/max_user_namespaces is missing)" }
  }
  if (!(max > 0)) return { enabled: false, reason: "/proc/sys/user/max_user_namespaces is 0" }
  const r = spawnSync(unshare, ["--user", "--map-root-user", "true"], { encoding: "utf8", timeout: 10_000 })
  if (r.status !== 0)
    return { enabled: false, reason: `unshare --user --map-root-user true failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}` }
  return { enabled: true }
}

/**
 * Give a rootfs copy's files to the pod's range (owner and group shifted, as `shiftId`), so the
 * container's root owns what the image's root owned. chown clears set-id bits: they are put back.
 */
export const shiftTree = async (root: string, first: number): Promise<void> => {
  const visit = async (path: string): Promise<void> => {
    const st = await lstat(path)
    await lchown(path, shiftId(st.uid, first), shiftId(st.gid, first))
    if (!st.isSymbolicLink() && (st.mode & 0o6000) !== 0) await chmod(path, st.mode & 0o7777)
    if (st.isDirectory()) for (const name of await readdir(path)) await visit(join(path, name))
  }
  await visit(root)
}
