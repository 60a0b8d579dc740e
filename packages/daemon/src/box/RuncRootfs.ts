/**
 * The runc driver's root filesystems and cgroup directories: a container's rootfs an overlay on
 * its image (or a copy, shifted into its pod's user namespace), bind-mounted under /run when the
 * pod has a user namespace; and the cgroup levels runc makes in every mounted hierarchy.
 */
import { existsSync, readdirSync, rmdirSync } from "node:fs"
import { chmod, chown, mkdir } from "node:fs/promises"
import { dirname, join } from "node:path"
import * as Cgroups from "./Cgroups.js"
import { invalid, unavailable } from "./Driver.js"
import { readText } from "./RecordFiles.js"
import { run } from "./RuncCommand.js"
import * as UserNamespace from "./UserNamespace.js"

/** Remove an empty directory; anything else (a mount still there, gone already) is left. */
export const rmdirQuiet = (path: string) => {
  try {
    rmdirSync(path)
  } catch {
    // not empty or still mounted: left in place
  }
}

/** Mount points (decoded) from /proc/self/mountinfo. */
export const mountPoints = (): Set<string> => {
  const out = new Set<string>()
  for (const line of (readText("/proc/self/mountinfo") ?? "").split("\n")) {
    const p = line.split(" ")[4]
    if (p !== undefined) out.add(p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
  }
  return out
}

/**
 * Where runc puts a relative cgroup path in every mounted hierarchy (cgroup v1 resolves it
 * under this process's own cgroup per hierarchy, v2 under the parent of its own): the
 * hierarchies Cgroups does not manage (cpuset, devices, freezer, name=systemd, ...) get
 * directories too, which runc leaves behind for a pod's and the box's levels.
 */
export const hierarchyDirs = (relative: string, mountinfo: string, procCgroup: string): Array<string> => {
  const own = procCgroup.split("\n").map((l) => /^(\d+):([^:]*):(.*)$/.exec(l)).filter((m) => m !== null)
  const out: Array<string> = []
  for (const line of mountinfo.split("\n")) {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) continue
    const mountPoint = left.split(" ")[4]
    const [fstype, , superOptions] = right.split(" ")
    if (mountPoint === undefined) continue
    if (fstype === "cgroup2") {
      const path = own.find((m) => m![1] === "0" && m![2] === "")?.[3] ?? "/"
      out.push(join(mountPoint, path, relative), join(mountPoint, dirname(path), relative))
    } else if (fstype === "cgroup") {
      const options = new Set((superOptions ?? "").split(","))
      const m = own.find((m) => m![2] !== "" && m![2]!.split(",").every((c) => options.has(c)))
      if (m) out.push(join(mountPoint, m[3]!, relative))
    }
  }
  return [...new Set(out)]
}

/**
 * cgroup v1 with swap accounting: the limit must then cover memory+swap too, or it only moves
 * pages to swap (runc refuses a swap limit where the files are missing).
 */
export const memswAccounting = (): boolean => {
  const memory = Cgroups.parseMountinfo(readText("/proc/self/mountinfo") ?? "").v1.get("memory")
  return memory !== undefined && existsSync(join(memory, "memory.memsw.limit_in_bytes"))
}

/** rmdir a cgroup directory and its children, deepest first; busy ones stay. */
export const removeCgroupTree = (d: string) => {
  try {
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) removeCgroupTree(join(d, e.name))
    rmdirSync(d)
  } catch {
    // gone, or still has processes
  }
}

/** Makes containers' root filesystems for one box. */
export class Rootfs {
  constructor(
    /** Overlays work here (until one fails: copies from then on). */
    private overlay: boolean,
    /** Where user-namespaced containers' rootfs are bind-mounted (`/run/kbox-<hash of the data dir>`, 0711). */
    private readonly rootsDir: string
  ) {}

  /** The container's root filesystem: an overlay on the image (or a copy of it). */
  async prepare(dir: string, lower: string, digest: string, ids: number | undefined): Promise<"overlay" | "copy"> {
    const rootfs = join(dir, "bundle", "rootfs")
    await mkdir(rootfs, { recursive: true, mode: 0o755 })
    if (!existsSync(lower)) throw invalid(`image ${digest}: its rootfs is gone from ${lower}`)
    // overlayfs options are comma- and colon-separated: such paths cannot be said there. In a user
    // namespace the files must belong to the pod's range: a copy, its owners shifted (an overlay
    // would copy every file up to chown it anyway; runc 1.1 has no idmapped mounts).
    if (ids === undefined && this.overlay && !/[,:\\]/.test(lower + dir)) {
      await mkdir(join(dir, "upper"), { recursive: true, mode: 0o755 })
      await mkdir(join(dir, "work"), { recursive: true, mode: 0o700 })
      const r = await run("mount", [
        "-t",
        "overlay",
        "overlay",
        "-o",
        `lowerdir=${lower},upperdir=${join(dir, "upper")},workdir=${join(dir, "work")}`,
        rootfs
      ])
      if (r.code === 0) return "overlay"
      // e.g. the data dir is on a filesystem overlayfs cannot use as an upper layer: copy from now on.
      this.overlay = false
    }
    const r = await run("cp", ["-a", `${lower}/.`, rootfs])
    if (r.code !== 0) throw unavailable(`copying the image's rootfs: ${r.stderr.trim()}`)
    if (ids !== undefined) await UserNamespace.shiftTree(rootfs, ids)
    return "copy"
  }

  /**
   * Bind-mount a user-namespaced container's rootfs under /run: runc's init resolves the rootfs
   * path as the pod's root, an unprivileged host id, which cannot pass the data dir's 0700 parents.
   */
  /** Where a user-namespaced container's rootfs is bind-mounted. */
  target(id: string): string {
    return join(this.rootsDir, id, "rootfs")
  }

  async mountRoot(id: string, dir: string, ids: number): Promise<string> {
    await mkdir(this.rootsDir, { recursive: true, mode: 0o711 })
    // Its directory only the pod's root may pass (root:ids 0710): any host user can read mount
    // points from /proc/*/mountinfo, and the copy's files are as readable as in the image.
    const parent = join(this.rootsDir, id)
    await mkdir(parent, { recursive: true, mode: 0o700 })
    await chown(parent, 0, ids)
    await chmod(parent, 0o710)
    const target = join(parent, "rootfs")
    await mkdir(target, { recursive: true, mode: 0o700 })
    const r = await run("mount", ["--bind", join(dir, "bundle", "rootfs"), target])
    if (r.code !== 0) throw unavailable(`mounting the rootfs at ${target}: ${r.stderr.trim()}`)
    return target
  }

  async unmount(dir: string, rec: { readonly rootfs?: "overlay" | "copy"; readonly root?: string }): Promise<void> {
    const targets = [
      ...(rec.root === undefined ? [] : [rec.root]),
      ...(rec.rootfs === "overlay" ? [join(dir, "bundle", "rootfs")] : [])
    ]
    for (const target of targets) {
      if (mountPoints().has(target) && (await run("umount", [target])).code !== 0) await run("umount", ["-l", target])
      // The bind's mount point under /run: empty once unmounted (rmdir never deletes through a mount).
      if (target === rec.root) {
        rmdirQuiet(target)
        rmdirQuiet(dirname(target))
      }
    }
  }
}
