/**
 * The runc driver's pod holders: a process owning a pod's UTS and IPC namespaces (and its user
 * namespace, where the kernel allows one), which every container of the pod joins.
 */
import { spawn } from "node:child_process"
import { readlinkSync } from "node:fs"
import { writeFile } from "node:fs/promises"
import { unavailable } from "./Driver.js"
import { spawned } from "./ExecOutput.js"
import * as Procfs from "./Procfs.js"

/**
 * A pod's holder: `unshare --uts --ipc -- sh -c HOLDER kbox-holder HOSTNAME SLEEP`; with a user
 * namespace (`unshare --user --uts --ipc`) it first waits for a line on stdin: the box writes it
 * once it has written the namespace's id maps (only a process outside may write them).
 */
const holderUsernsScript = `read -r _ || exit 1
echo "$1" >/proc/sys/kernel/hostname || exit 1
exec "$2" 2147483647 </dev/null
`

const holderScript = `echo "$1" >/proc/sys/kernel/hostname || exit 1
exec "$2" 2147483647
`

/** A symlink's target (/proc/PID/ns/*), undefined when it cannot be read. */
const readlinkOr = (path: string): string | undefined => {
  try {
    return readlinkSync(path)
  } catch {
    return undefined
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Starts holders with this host's tools. */
export class RuncHolders {
  constructor(private readonly tools: { readonly sh: string; readonly unshare: string; readonly sleep: string }) {}

  /** The pod's holder: new UTS and IPC namespaces, the hostname set, then `sleep` (nobody's child). */
  /** Start a pod's holder; resolves once it holds the namespaces (and its id maps are written). */
  async start(hostname: string, idMap: string | undefined): Promise<Procfs.ProcessId> {
    const script = idMap === undefined ? holderScript : holderUsernsScript
    const child = spawn(
      this.tools.unshare,
      [...(idMap === undefined ? [] : ["--user"]), "--uts", "--ipc", "--", this.tools.sh, "-c", script, "kbox-holder", hostname, this.tools.sleep],
      { detached: true, stdio: [idMap === undefined ? "ignore" : "pipe", "ignore", "ignore"], cwd: "/", env: {} }
    )
    await spawned(child)
    child.unref()
    const holder = Procfs.processId(child.pid)
    if (idMap !== undefined && holder !== undefined)
      try {
        await this.map(holder, idMap)
        // Flushed before the pipe goes: without the line the holder exits.
        await new Promise<void>((resolve) => child.stdin!.end("\n", () => resolve()))
      } catch (e) {
        Procfs.signal(holder, "SIGKILL")
        throw e
      } finally {
        child.stdin!.destroy()
      }
    // Ready once it became `sleep`: the hostname is set by then.
    for (let i = 0; i < 1000 && holder !== undefined && Procfs.alive(holder); i++) {
      if (Procfs.cmdline(holder.pid)[0] === this.tools.sleep) return holder
      await sleep(i < 20 ? 1 : 5)
    }
    Procfs.signal(holder, "SIGKILL")
    throw unavailable("sandbox: the namespace holder did not start")
  }

  /** Write a new holder's uid and gid maps, once `unshare` made its user namespace (it differs from ours). */
  private async map(holder: Procfs.ProcessId, idMap: string): Promise<void> {
    const ours = readlinkOr("/proc/self/ns/user")
    for (let i = 0; i < 1000 && Procfs.alive(holder); i++) {
      const theirs = readlinkOr(`/proc/${holder.pid}/ns/user`)
      if (theirs !== undefined && theirs !== ours) {
        await writeFile(`/proc/${holder.pid}/uid_map`, idMap)
        await writeFile(`/proc/${holder.pid}/gid_map`, idMap)
        return
      }
      await sleep(i < 20 ? 1 : 5)
    }
    throw unavailable("sandbox: the namespace holder made no user namespace")
  }
}
