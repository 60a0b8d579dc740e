/**
 * The agent's memory-backed directory for Secret and projected volumes (Secret values,
 * ServiceAccount tokens): a private directory on /dev/shm, the host's tmpfs, so they never reach a
 * disk, as the kubelet keeps them on a tmpfs. One per agent data dir, kept across restarts of the
 * agent (running pods' bind mounts point into it) but not of the host; its top is 0700 and the
 * agent's, so no other user (pods run as their own uids) can enter it except through the one
 * volume a pod has mounted.
 *
 *   /dev/shm/kfleet-<agent's uid>-<sha256(data dir)[:12]>/           0700, `data-dir` names its data dir
 *     pods/<pod uid>/volumes/kubernetes.io~secret/<name>/…          VolumePlan's layout, files 0400
 *
 * Why not a tmpfs mount per pod (the kubelet's way): pods' mount namespaces are private copies
 * made when their sandbox starts, before the agent writes their volumes, so a mount made after it
 * would not be seen inside the pod; /dev/shm is there before any pod, for root and unprivileged
 * agents alike. Without /dev/shm (or with it taken by another user) there is no memory directory
 * and these volumes stay in the pod's directory under the data dir (0700): docs/nodes.md says so.
 */
import { createHash } from "node:crypto"
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { privateDirSync } from "../internal/files.js"

const shm = "/dev/shm"
const prefix = `kfleet-${process.getuid?.() ?? 0}-`

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}


/** Is `path` on a tmpfs (from /proc/self/mountinfo: the longest mount point containing it)? */
export const onTmpfs = (path: string): boolean => {
  let best = ""
  let fstype = ""
  for (const line of (readText("/proc/self/mountinfo") ?? "").split("\n")) {
    const [left, right] = line.split(" - ")
    const mountPoint = left?.split(" ")[4]
    if (mountPoint === undefined || right === undefined) continue
    if ((path === mountPoint || path.startsWith(mountPoint === "/" ? "/" : `${mountPoint}/`)) && mountPoint.length >= best.length) {
      best = mountPoint
      fstype = right.split(" ")[0] ?? ""
    }
  }
  return fstype === "tmpfs"
}

/** Remove this user's memory directories whose data dir is gone (no agent will use them again). */
const sweep = () => {
  try {
    for (const name of readdirSync(shm)) {
      if (!name.startsWith(prefix)) continue
      const dir = join(shm, name)
      const dataDir = readText(join(dir, "data-dir"))
      if (dataDir !== undefined && dataDir !== "" && !existsSync(dataDir) && privateDirSync(dir) !== undefined) rmSync(dir, { recursive: true, force: true })
    }
  } catch {
    // nothing to sweep
  }
}

/** Where the memory directory of the agent whose data dir is `dataDir` is (made or not). */
export const pathFor = (dataDir: string): string => join(shm, `${prefix}${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`)

/** The memory directory of the agent whose data dir is `dataDir`, or undefined when there can be none. */
export const forAgent = (dataDir: string): string | undefined => {
  if (!existsSync(shm) || !onTmpfs(shm)) return undefined
  sweep()
  const dir = privateDirSync(pathFor(dataDir))
  if (dir === undefined) return undefined
  try {
    if (readText(join(dir, "data-dir")) !== dataDir) writeFileSync(join(dir, "data-dir"), dataDir, { mode: 0o600 })
    return dir
  } catch {
    return undefined
  }
}
