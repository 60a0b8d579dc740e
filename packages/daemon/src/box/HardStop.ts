/**
 * The last resort of a bounded shutdown (issue 29 item 8): SIGKILL, synchronously, every process
 * a box serving `dataDir` started — pod holders, container shims, workloads and their
 * descendants — from this thread, whatever state the box and the agent are in (busy, hung, or
 * holding containers adopted from a crashed run). `koder-fleet dev` calls it on a second Ctrl-C
 * and when its shutdown deadline passes, just before it exits: nothing it ran may outlive it.
 *
 * What it finds, from /proc alone (the box's records may be stale or half written):
 *   - every process whose argv names a launch file (`….launch`) of this box (in its run directory
 *     `/dev/shm/kbox-<uid>-<hash of dataDir>/`, or in the data dir itself; a user's `less` of a
 *     log there is not one): the holders
 *     (`fleet-shim holder <launch>`) and the shims (`sh -c . "$0" <launch>`), the live ones and the
 *     ones adopted from an earlier run alike;
 *   - this process's own children (the box's launcher, and whatever it was about to start);
 *   - then everything in those processes' sessions and process groups and every descendant
 *     (`Procfs.tree`), except this process's own session when it shares one.
 * A holder is pid 1 of its pod's pid namespace, so its death takes the pod's processes with it;
 * the session and descendant walk covers pods without one. The scan repeats a few times, so a
 * process forked between scan and kill is caught too.
 */
import { createHash } from "node:crypto"
import * as Procfs from "./Procfs.js"

/** The strings whose presence in a process's argv marks it as this box's (pure). */
export const markers = (dataDir: string, uid: number = process.getuid?.() ?? 0): ReadonlyArray<string> => [
  // As the process driver names the run directory (RunDir.runDirFor).
  `/dev/shm/kbox-${uid}-${createHash("sha256").update(dataDir).digest("hex").slice(0, 12)}/`,
  `${dataDir.replace(/\/+$/, "")}/`
]

const sleepMs = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** The processes to kill now (see the module comment). */
const victims = (dataDir: string, self: number): Array<Procfs.Stat> => {
  const stats = Procfs.all(0)
  const marks = markers(dataDir)
  const own = stats.find((s) => s.pid === self)
  const roots = stats.filter((s) => s.pid !== self && (s.ppid === self || Procfs.cmdline(s.pid).some((arg) => arg.endsWith(".launch") && marks.some((m) => arg.includes(m)))))
  const found = new Map<number, Procfs.Stat>()
  for (const root of roots) {
    for (const s of Procfs.tree(root.pid, stats)) found.set(s.pid, s)
    // The launcher's session holds every shim and holder it started.
    if (root.sid !== own?.sid) for (const s of Procfs.tree(root.sid, stats)) found.set(s.pid, s)
  }
  found.delete(self)
  return [...found.values()].filter((s) => s.state !== "Z")
}

/**
 * SIGKILL everything the box of `dataDir` started (and this process's children); the number of
 * processes killed. Blocks for at most about `passes` × 20 ms beyond the scans.
 */
export const killAll = (dataDir: string, options: { readonly self?: number; readonly passes?: number } = {}): number => {
  const self = options.self ?? process.pid
  let killed = 0
  for (let pass = 0; pass < (options.passes ?? 5); pass++) {
    const now = victims(dataDir, self)
    if (now.length === 0) break
    for (const s of now) {
      try {
        process.kill(s.pid, "SIGKILL")
        killed++
      } catch {
        // gone meanwhile
      }
    }
    sleepMs(20)
  }
  return killed
}
