/**
 * Finding the programs the box runs (sh, nsenter, unshare, nft, ip, runc …): on the box's PATH,
 * then in the standard directories, resolved to absolute paths so a shim or a launch file never
 * depends on the PATH of whoever reads it.
 */
import { statSync } from "node:fs"
import { join } from "node:path"

/** The standard directories, searched after PATH (and the PATH given to workloads without one). */
export const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Found paths only: a tool installed after a miss is found on the next look.
const found = new Map<string, string>()

/** The absolute path of a program, or undefined when it is nowhere to be found. */
export const which = (name: string): string | undefined => {
  const hit = found.get(name)
  if (hit !== undefined) return hit
  for (const dir of [...(process.env.PATH ?? "").split(":"), ...defaultPath.split(":")]) {
    if (dir === "") continue
    const p = join(dir, name)
    try {
      if (statSync(p).isFile()) {
        found.set(name, p)
        return p
      }
    } catch {
      // not here
    }
  }
  return undefined
}
