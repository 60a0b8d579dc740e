/**
 * The process driver's run directory in /dev/shm (containerd's `/run` state beside its
 * `/var/lib` root): where the shims of its containers keep their FIFOs, pid and exit files.
 */
import { createHash } from "node:crypto"
import { existsSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { privateDirSync } from "../internal/files.js"
import { readText } from "./RecordFiles.js"

/** The names of this user's run directories in /dev/shm start so. */
const runDirPrefix = `kbox-${process.getuid?.() ?? 0}-`

/**
 * The run directory of the box serving `dataDir`, in /dev/shm when it is there (containerd's
 * `/run` state beside its `/var/lib` root): one per data dir, kept across restarts of the box
 * (the shims of the containers it adopts write there) but not of the host, like the processes
 * it describes. Memory: the secrets of launch files never reach a disk, and the files made and
 * removed with every container (FIFOs, pid, exit) cost no disk inode allocation, which on a disk
 * that has just removed many files is slow enough to be a large part of a pod start.
 */
export const runDirFor = (dataDir: string): string | undefined => {
  const dir = privateDirSync(join("/dev/shm", `${runDirPrefix}${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}`))
  if (dir === undefined) return undefined
  try {
    // Which data dir it serves, so a box can tell an orphan (see sweepRunDirs).
    if (readText(join(dir, "data-dir")) !== dataDir) writeFileSync(join(dir, "data-dir"), dataDir, { mode: 0o600 })
    return dir
  } catch {
    return undefined
  }
}

/**
 * Remove this user's run directories whose data dir is gone: no box can adopt their containers
 * any more (a box killed, then its data dir removed, as tests and throwaway clusters do), and a
 * run directory otherwise outlives them until the host restarts.
 */
export const sweepRunDirs = () => {
  try {
    for (const name of readdirSync("/dev/shm")) {
      if (!name.startsWith(runDirPrefix)) continue
      const dir = join("/dev/shm", name)
      const dataDir = readText(join(dir, "data-dir"))
      if (dataDir !== undefined && dataDir !== "" && !existsSync(dataDir) && privateDirSync(dir) !== undefined) rmSync(dir, { recursive: true, force: true })
    }
  } catch {
    // no /dev/shm: nothing to sweep
  }
}

/** The run directory's launch directory, emptied of what a previous box left. */
export const launchDirIn = (runDir: string): string | undefined => {
  const dir = privateDirSync(join(runDir, "launch"))
  if (dir === undefined) return undefined
  try {
    for (const name of readdirSync(dir)) rmSync(join(dir, name), { force: true })
    return dir
  } catch {
    return undefined
  }
}
