/**
 * core's VolumeWriter port on the host's filesystem. emptyDirs are created world-writable (0777,
 * as the kubelet does: a container may run as any user); hostPaths are checked or created per
 * their `type`; projected files (ConfigMap, Secret, projected, downwardAPI volumes) are written the
 * way the kubelet's AtomicWriter writes them, so a reader never sees half an update:
 *
 *   <dir>/..2024_05_01T10_00_00.123Z.ab12cd/app.conf     the files of one version, with their modes
 *   <dir>/..data -> ..2024_05_01T10_00_00.123Z.ab12cd     swapped by a rename: the atomic step
 *   <dir>/app.conf -> ..data/app.conf                     what the container sees
 *
 * A volume whose files are unchanged is left alone (no new version, no symlink swap). Files with
 * an `owner` (Secret and projected volumes: the pod's uid and fsGroup) are chowned to it when the
 * agent runs as root; unprivileged, they stay the agent's user's (the only user pods run as then).
 * emptyDir and local-path volumes of a pod with an `fsGroup` are given to that group (`applyGroup`).
 */
import { AgentError, VolumeWriter, type VolumePlan } from "@koder/fleet-core"
import { Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { chmod, chown, lstat, mkdir, readdir, readFile, readlink, rename, rm, stat, symlink, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"

const dataLink = "..data"

const exists = (path: string) => stat(path).then(() => true, () => false)

const bytesOf = (f: VolumePlan.File) => Buffer.from(f.data, f.encoding === "base64" ? "base64" : "utf8")

// A projected path must stay inside its volume.
const safe = (path: string) => path !== "" && !path.startsWith("/") && !path.split("/").some((p) => p === ".." || p === "")

// Ownership applies only where the agent may give files away (root).
const ownerFor = (owner: VolumePlan.Owner | undefined): { readonly uid: number; readonly gid: number } | undefined =>
  owner === undefined || process.getuid?.() !== 0 ? undefined : { uid: owner.uid ?? -1, gid: owner.gid ?? -1 }

const unchanged = async (dir: string, version: string, files: ReadonlyArray<VolumePlan.File>, owner: VolumePlan.Owner | undefined): Promise<boolean> => {
  const want = ownerFor(owner)
  const listed: Array<string> = []
  const walk = async (rel: string) => {
    for (const e of await readdir(join(dir, version, rel), { withFileTypes: true })) {
      const path = rel === "" ? e.name : `${rel}/${e.name}`
      if (e.isDirectory()) await walk(path)
      else listed.push(path)
    }
  }
  try {
    await walk("")
    if (listed.length !== files.length) return false
    for (const f of files) {
      const full = join(dir, version, f.path)
      const [content, st] = await Promise.all([readFile(full), stat(full)])
      if ((st.mode & 0o777) !== f.mode || !content.equals(bytesOf(f))) return false
      if (want !== undefined && ((want.uid !== -1 && st.uid !== want.uid) || (want.gid !== -1 && st.gid !== want.gid))) return false
    }
    return true
  } catch {
    return false
  }
}

/** Write `files` into `dir` atomically (a new version directory and a `..data` swap); no-op when unchanged. */
export const writeAtomic = async (dir: string, files: ReadonlyArray<VolumePlan.File>, owner?: VolumePlan.Owner): Promise<boolean> => {
  for (const f of files) if (!safe(f.path)) throw new Error(`invalid path ${JSON.stringify(f.path)}: must be relative and not contain '..'`)
  await mkdir(dir, { recursive: true, mode: 0o755 })
  const current = await readlink(join(dir, dataLink)).catch(() => undefined)
  if (current !== undefined && (await unchanged(dir, current, files, owner))) return false
  const to = ownerFor(owner)
  const version = `..${new Date().toISOString().replace(/:/g, "_")}.${randomBytes(4).toString("hex")}`
  for (const f of files) {
    const full = join(dir, version, f.path)
    await mkdir(dirname(full), { recursive: true, mode: 0o755 })
    await writeFile(full, bytesOf(f), { mode: f.mode })
    // Given away before the mode is widened to it: nobody else reads it meanwhile.
    if (to !== undefined) await chown(full, to.uid, to.gid)
    await chmod(full, f.mode)
  }
  await mkdir(join(dir, version), { recursive: true, mode: 0o755 })
  const tmp = join(dir, `${dataLink}_tmp`)
  await rm(tmp, { force: true })
  await symlink(version, tmp)
  await rename(tmp, join(dir, dataLink))
  const visible = new Set(files.map((f) => f.path.split("/")[0]!))
  for (const name of visible) {
    const link = join(dir, name)
    const st = await lstat(link).catch(() => undefined)
    if (st !== undefined && !st.isSymbolicLink()) await rm(link, { recursive: true, force: true })
    if (st === undefined || !st.isSymbolicLink()) await symlink(join(dataLink, name), link)
  }
  for (const entry of await readdir(dir)) if (!entry.startsWith("..") && !visible.has(entry)) await rm(join(dir, entry), { recursive: true, force: true })
  if (current !== undefined && current !== version) await rm(join(dir, current), { recursive: true, force: true })
  return true
}

/**
 * Give a volume to the pod's fsGroup, as the kubelet's `SetVolumeOwnership`: every file's group
 * becomes `gid` with group read-write (0660 added), directories also group-searchable and setgid
 * (new files inherit the group). Skipped when the top directory already has that group and the
 * setgid bit (the kubelet's OnRootMismatch), so a large volume is walked once, not at every start.
 * Root only; symbolic links are left alone.
 */
export const applyGroup = async (path: string, gid: number): Promise<void> => {
  if (process.getuid?.() !== 0) return
  const top = await stat(path)
  if (top.gid === gid && (top.mode & 0o2000) !== 0) return
  const walk = async (p: string) => {
    const st = await lstat(p)
    if (st.isSymbolicLink()) return
    await chown(p, st.uid, gid)
    await chmod(p, (st.mode & 0o7777) | 0o660 | (st.isDirectory() ? 0o2110 : 0))
    if (st.isDirectory()) for (const e of await readdir(p)) await walk(join(p, e))
  }
  await walk(path)
}

const checkHostPath = async (path: string, type: string, createMode?: number): Promise<string | undefined> => {
  const st = await stat(path).catch(() => undefined)
  switch (type) {
    case "DirectoryOrCreate":
      if (st === undefined) {
        await mkdir(path, { recursive: true, mode: 0o755 })
        // The mode as asked, not as the umask left it.
        if (createMode !== undefined) await chmod(path, createMode)
      } else if (!st.isDirectory()) return `${path} is not a directory`
      return undefined
    case "FileOrCreate":
      if (st === undefined) {
        if (!(await exists(dirname(path)))) return `the parent directory of ${path} does not exist`
        await writeFile(path, "", { mode: 0o644, flag: "a" })
      } else if (!st.isFile()) return `${path} is not a file`
      return undefined
    case "Directory":
      return st?.isDirectory() === true ? undefined : `hostPath type check failed: ${path} is not a directory`
    case "File":
      return st?.isFile() === true ? undefined : `hostPath type check failed: ${path} is not a file`
    case "Socket":
      return st?.isSocket() === true ? undefined : `hostPath type check failed: ${path} is not a socket file`
    case "CharDevice":
      return st?.isCharacterDevice() === true ? undefined : `hostPath type check failed: ${path} is not a character device`
    case "BlockDevice":
      return st?.isBlockDevice() === true ? undefined : `hostPath type check failed: ${path} is not a block device`
    default:
      return undefined
  }
}

/** The writer. */
export const make = (): VolumeWriter.VolumeWriterService => ({
  prepare: (source) =>
    Effect.tryPromise({
      try: async () => {
        switch (source._tag) {
          case "EmptyDir":
            if (!(await exists(source.path))) {
              await mkdir(source.path, { recursive: true })
              await chmod(source.path, 0o777)
            }
            if (source.group !== undefined) await applyGroup(source.path, source.group)
            return
          case "HostPath": {
            const problem = await checkHostPath(source.path, source.type, source.createMode)
            if (problem !== undefined) throw new Error(problem)
            if (source.group !== undefined) await applyGroup(source.path, source.group)
            return
          }
          case "Files":
            await writeAtomic(source.path, source.files, source.owner)
            return
        }
      },
      catch: (e) => new AgentError.VolumeError({ volume: source.name, message: e instanceof Error ? e.message : String(e) })
    }),
  removePod: (podDir) =>
    Effect.tryPromise({
      try: () => rm(podDir, { recursive: true, force: true }),
      catch: (e) => new AgentError.VolumeError({ volume: podDir, message: e instanceof Error ? e.message : String(e) })
    })
})

/** The VolumeWriter port on this host. */
export const layer: Layer.Layer<VolumeWriter.VolumeWriter> = Layer.sync(VolumeWriter.VolumeWriter, make)
