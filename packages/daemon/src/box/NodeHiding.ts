/**
 * What a pod must not see of the node: the box's data dir (records, logs, its key), the directory
 * of its socket, its run directory, and what the box is told to hide besides (`--hide`: the
 * server's data dir in `koder-fleet dev`, holding the kubeconfig, the encryption key and
 * state.db, and the agent's, holding the node's token and every pod's volumes).
 *
 * In each pod's mount namespace (made private by its holder, so nothing here reaches the host)
 * every hidden directory is covered by an empty tmpfs of mode 0000 owned by root. The box still
 * bind-mounts pod volumes from under those directories: what a covered directory holds stays
 * reachable at `<dir>/.kbox-host` inside the cover, which only a process with CAP_DAC_OVERRIDE or
 * CAP_DAC_READ_SEARCH can enter (mode 0000 stops even root without them; a pod's root keeps
 * CAP_DAC_OVERRIDE by default: docs/box.md); `sourceIn` names volume sources by that path.
 */
import { isAbsolute, normalize, relative, sep } from "node:path"

/** Where a covered directory stays reachable for the box's bind mounts (inside the root-only cover). */
export const hostDirName = ".kbox-host"

/**
 * The host's own directories, never covered even when named (a socket at /run/kbox.sock names
 * /run): covering them would take from pods what every program needs (/run holds resolv.conf's
 * target on many hosts); a socket there is protected by its mode alone (0600, root).
 */
export const systemDirs: ReadonlySet<string> = new Set([
  "/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/lib64", "/mnt", "/opt", "/proc", "/root",
  "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/lib", "/var/run", "/var/tmp"
])

/**
 * The directories to cover: absolute, normalised, without one inside another (the outer one
 * covers it), never one of `systemDirs`.
 */
export const plan = (paths: ReadonlyArray<string | undefined>): Array<string> => {
  const dirs = [...new Set(paths.filter((p): p is string => p !== undefined && isAbsolute(p)).map((p) => normalize(p).replace(/\/+$/, "") || "/"))].filter(
    (p) => !systemDirs.has(p)
  )
  return dirs.filter((d) => !dirs.some((o) => o !== d && inside(o, d))).sort()
}

/** Is `path` `dir` or below it? */
export const inside = (dir: string, path: string): boolean => {
  const rel = relative(dir, path)
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel))
}

/** A host path as the box reaches it in a pod's mount namespace whose `hidden` directories are covered. */
export const sourceIn = (hidden: ReadonlyArray<string>, path: string): string => {
  const p = normalize(path)
  const dir = hidden.find((d) => inside(d, p))
  if (dir === undefined) return path
  const rel = relative(dir, p)
  return rel === "" ? `${dir}/${hostDirName}` : `${dir}/${hostDirName}/${rel}`
}

/** Where a pod's cover is made before it moves over its directory (an empty directory on the host, removed after). */
export const coverDirName = (sandboxId: string): string => `.kbox-cover-${sandboxId}`

/**
 * Cover each directory named after the cover's name in argv (`COVER DIR...`; run in the pod's
 * mount namespace, as root, by `nsenter -t HOLDER -m`). The tmpfs is mounted at `<dir>/COVER`
 * first, what the directory holds is bind-mounted (recursively) at `.kbox-host` inside it, and
 * then the tmpfs moves over the directory: once covered, a directory's own content cannot be
 * reached to bind it (a lookup, even through an open descriptor's /proc link, lands on the mount
 * over it). The box then removes `<dir>/COVER` on the host (the pod's namespace only had a copy
 * of a mount there, which goes with it). A directory that does not exist is skipped.
 */
export const hideScript = `cover=$1; shift
for d in "$@"; do
  [ -d "$d" ] || continue
  mkdir -m 0000 "$d/$cover" || exit 1
  mount -t tmpfs -o mode=0000,uid=0,gid=0,size=64k,nosuid,nodev,noexec kbox-hidden "$d/$cover" || exit 1
  mkdir -m 0000 "$d/$cover/${hostDirName}" || exit 1
  mount --rbind "$d" "$d/$cover/${hostDirName}" || exit 1
  mount --move "$d/$cover" "$d" || exit 1
done
`
